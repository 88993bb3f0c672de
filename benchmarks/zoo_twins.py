"""The zoo's hard-negative twins (issue 51): every graph recipe of ``models/``, the MiniLM
entries and the from-scratch SimCSE recipes trained at seeds 0-2, each cell a JSON with its exact command, and each entry
installed with seed 0's weights and its figures over the seeds, beside the untrained
(graphs, from-scratch SimCSE) or zero-shot (MiniLM) baseline.

    nice -n 19 python benchmarks/zoo_twins.py graph [--entries E ...] [--seeds 0 1 2]
    nice -n 19 python benchmarks/zoo_twins.py baseline   # the untrained GIN, per TU set x seed
    nice -n 19 python benchmarks/zoo_twins.py text [--entries E ...]
    nice -n 19 python benchmarks/zoo_twins.py scratch    # simcse-{ntxent,hard}-wiki x seed
    nice -n 19 python benchmarks/zoo_twins.py scratch-baseline   # their untrained encoder
    python benchmarks/zoo_twins.py install [E ...]       # models/E from its cells
    python benchmarks/zoo_twins.py status                # what is done, per entry
    python benchmarks/zoo_twins.py report                # the notes' tables (markdown)
    python models/make_index.py                          # then: the index, README, cards

Every command is resumable: a cell whose JSON exists is skipped; a killed training run
resumes from its own checkpoint (``keras-hardneg train`` into the same ``--output``).
Cells run one at a time, seed-major (every entry gets seed 0, its weights, first).

Graphs: ``keras-hardneg train --recipe models/E/recipe.json --dataset
../shared/data/tudataset/D --seed S --output RUN --no-export`` (the recipe's training keys
as they are; the data given explicitly), scored as the run scores (10-fold SVM, folds
shuffled by the seed). The untrained baseline: the same recipe's encoder at its random
initialisation (``keras_hardneg.run.build_model`` at seed S), the same SVM.

Text: the commands of ``benchmarks/text_minilm.py`` (the 6,400-sentence subset, one epoch,
``--preset`` MiniLM), each seed stored as a float16 Keras preset and scored *as stored* on
STS (whole sentences) and SentEval; seed 0 of ``simcse-minilm-ntxent-wiki`` is that entry's
own record (``benchmarks/results/text/minilm/zoo_entry.json``), not retrained.

Results: ``benchmarks/results/zoo_twins/{graph,baseline,text}/<name>__s<seed>.json``.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shlex
import shutil
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(ROOT, "models")
OUT = os.path.join(ROOT, "benchmarks", "results", "zoo_twins")
WORK = "/tmp/zoo_twins"  # run folders (checkpoints): outside the repository
TU = "../shared/data/tudataset"  # as given on the command line, from the repository root
SEEDS = (0, 1, 2)
WEIGHTS_SEED = 0
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
sys.path.insert(0, MODELS)

#: entry -> (CLI loss, recipe keys file or None) of the MiniLM cells; the twin is the first.
TEXT_ENTRIES = {
    "simcse-minilm-ntxent-wiki": ("nt_xent", None),
    # HCL's reweighting (beta 1) without its debiasing: what `--preset` gives `--loss hard`
    # (tau_plus 0; README, issue 33).
    "simcse-minilm-hard-wiki": ("hard", None),
    # BatchSampler (Yang et al. 2023): restart 0.7, M 1000, K 100, graph rebuilt every 50
    # steps, its first graph from the pretrained encoder's features (the paper's; the
    # grid's better BatchSampler row, docs/benchmarks.md).
    "simcse-minilm-ntxent-batchsampler-wiki": (
        "nt_xent", "benchmarks/results/text/minilm/batchsampler_encoder_graph_recipe.json"),
}
TEXT_TWIN = "simcse-minilm-ntxent-wiki"
#: The from-scratch SimCSE recipes (2-layer transformer, BPE trained on the file): trained
#: from their committed recipes on the first 11,914 lines of wiki1m, as
#: ``keras-hardneg train``; the twin is the first.
SCRATCH_ENTRIES = ("simcse-ntxent-wiki", "simcse-hard-wiki")
SCRATCH_CORPUS = "../shared/data/text/corpus/wiki1m_prefix.txt"
SCRATCH_BASELINE = "wiki1m_prefix"  # the baseline cells' name
BENCHMARK = "../shared/data/text"
#: The twin's seed 0 is its zoo record (same command, scored as stored, code f311090).
TEXT_SEED0_RECORD = "benchmarks/results/text/minilm/zoo_entry.json"
ZERO_SHOT = "benchmarks/results/text/minilm/zeroshot_senteval.json"
#: Where float16 storage is checked against the float32 weights it rounds (one cell).
FLOAT16_CHECK = ("simcse-minilm-hard-wiki", 0)


# ------------------------------------------------------------------------------ helpers
def _code() -> str:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                          capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "keras_hardneg"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    return f"{head}{' + uncommitted keras_hardneg/ changes' if dirty else ''}"


def _write(path: str, record: dict) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def _read(path: str):
    with open(path) as f:
        return json.load(f)


def _cell_path(kind: str, name: str, seed: int) -> str:
    return os.path.join(OUT, kind, f"{name}__s{seed}.json")


def _run(cmd: list[str]) -> tuple[str, float]:
    """Runs a command from the repository root with this tree's package first on the path;
    returns (stdout, seconds). The driver runs under ``nice -n 19``; children inherit it."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    start = time.time()
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    if out.returncode:
        raise RuntimeError(f"{shlex.join(cmd)} failed:\n{out.stdout[-1500:]}\n"
                           f"{out.stderr[-3000:]}")
    return out.stdout, time.time() - start


def _last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def _portable_text(text: str) -> str:
    """No machine folders in what is committed: the run folder as RUN, the repository's
    parent as ``..``."""
    return text.replace(WORK, "RUN_ROOT").replace(os.path.dirname(ROOT) + "/shared",
                                                    "../shared")


def _portable(obj):
    return json.loads(_portable_text(json.dumps(obj)))


# -------------------------------------------------------------------------------- graphs
def graph_entries() -> list[str]:
    """Every graph entry of models/ (a recipe whose data is a TU set), sorted."""
    out = []
    for path in sorted(glob.glob(os.path.join(MODELS, "*", "recipe.json"))):
        if _read(path).get("data", {}).get("name") == "tu":
            out.append(os.path.basename(os.path.dirname(path)))
    return out


def tu_folder(entry: str) -> str:
    """The TU set of a graph entry, from its name (``graphcl-...-<set>``)."""
    from make_recipes import TU_SETS

    short = entry.rsplit("-", 1)[1]
    names = {v: k for k, v in TU_SETS.items()}
    if short not in names:
        raise SystemExit(f"{entry}: no TU set named {short!r} ({', '.join(names)})")
    return names[short]


def _ships_savedmodel(entry: str) -> bool:
    """The first graph entries (trained before presets) also ship ``encoder/``, a TF2
    SavedModel; the preset rebuilds it (``zoo export``), so new entries store only the
    preset."""
    return os.path.isfile(os.path.join(MODELS, entry, "encoder", "saved_model.pb"))


def graph_command(entry: str, seed: int) -> list[str]:
    export = seed == WEIGHTS_SEED and _ships_savedmodel(entry)
    return ["keras-hardneg", "train", "--recipe", f"models/{entry}/recipe.json",
            "--dataset", f"{TU}/{tu_folder(entry)}", "--seed", str(seed),
            "--output", f"{WORK}/graph/{entry}__s{seed}", "--verbose", "2"] + (
                [] if export else ["--no-export"])


def _train_cell(cmd: list[str]) -> tuple[str, dict, dict, dict, float]:
    """Runs one training command of a cell; returns its run folder, ``results.json``,
    ``history.json`` and ``recipe.json`` as read back, and the command's wall seconds."""
    run_dir = cmd[cmd.index("--output") + 1]
    _, wall = _run(cmd)
    res, hist, recipe = (_read(os.path.join(run_dir, f"{name}.json"))
                         for name in ("results", "history", "recipe"))
    return run_dir, res, hist, recipe, wall


def _keep_weights_seed(seed: int, run_dir: str, install) -> None:
    """Installs the weights seed's run into models/ (``install``); drops any other seed's
    run folder, whose figures its cell JSON already holds."""
    if seed == WEIGHTS_SEED:
        install()
    else:
        shutil.rmtree(run_dir)


def graph_cell(entry: str, seed: int) -> bool:
    """Trains and scores one graph cell; ``False`` when its JSON already exists."""
    path = _cell_path("graph", entry, seed)
    if os.path.isfile(path):
        return False
    cmd = graph_command(entry, seed)
    run_dir, res, hist, recipe, wall = _train_cell(cmd)
    _write(path, {
        "entry": entry, "seed": seed, "command": _portable_text(shlex.join(cmd)),
        "svm_accuracy": res["svm_accuracy"], "svm_accuracy_std": res["svm_accuracy_std"],
        "epochs_run": res["epochs_run"], "steps_per_epoch": res["steps_per_epoch"],
        "train_seconds": round(res["seconds"], 1), "command_seconds": round(wall, 1),
        "final_loss": hist["loss"][-1], "data": res["data"], "code": _code(),
        "machine": "2 shared CPU cores, nice 19, TensorFlow backend",
        "recipe": _portable(recipe)})
    print(f"{entry} s{seed}: SVM {res['svm_accuracy']:.4f} ({wall:.0f} s)", flush=True)
    _keep_weights_seed(seed, run_dir, lambda: install_graph(entry))
    return True


def scratch_command(entry: str, seed: int) -> list[str]:
    return ["keras-hardneg", "train", "--recipe", f"models/{entry}/recipe.json",
            "--dataset", SCRATCH_CORPUS, "--benchmark-dir", BENCHMARK, "--seed", str(seed),
            "--output", f"{WORK}/scratch/{entry}__s{seed}", "--verbose", "2", "--no-export"]


def scratch_cell(entry: str, seed: int) -> bool:
    """Trains one from-scratch SimCSE cell from its committed recipe; scored as the run
    scores (STS and SentEval at the end of training); stored under ``text/``."""
    path = _cell_path("text", entry, seed)
    if os.path.isfile(path):
        return False
    cmd = scratch_command(entry, seed)
    run_dir, res, hist, recipe, wall = _train_cell(cmd)
    _write(path, _portable({
        "entry": entry, "seed": seed, "command": shlex.join(cmd),
        "sts": res["sts"], "senteval": res["senteval"], "epochs_run": res["epochs_run"],
        "steps_per_epoch": res["steps_per_epoch"], "train_seconds": round(res["seconds"], 1),
        "command_seconds": round(wall, 1), "final_loss": hist["loss"][-1],
        "data": res["data"], "code": _code(),
        "machine": "2 shared CPU cores, nice 19, TensorFlow backend", "recipe": recipe}))
    print(f"{entry} s{seed}: STS avg {res['sts']['avg']:.2f}, SentEval avg "
          f"{res['senteval']['avg']:.2f} ({wall:.0f} s)", flush=True)
    _keep_weights_seed(seed, run_dir, lambda: install_scratch(entry))
    return True


def scratch_baseline_cell(name: str, seed: int) -> bool:
    """The from-scratch SimCSE recipe's transformer at its random initialisation (seed
    ``seed``; the BPE trained on the file as the runs train it), frozen, the same STS and
    SentEval."""
    path = _cell_path("baseline", name, seed)
    if os.path.isfile(path):
        return False
    import keras

    from keras_hardneg import run
    from keras_hardneg.modalities import modality_of

    start = time.time()
    entry = SCRATCH_ENTRIES[0]
    given = {"data": {"name": "text_file",
                      "path": os.path.normpath(os.path.join(ROOT, SCRATCH_CORPUS))},
             "evaluation": {"benchmark_dir": os.path.normpath(os.path.join(ROOT, BENCHMARK))},
             "seed": seed}
    recipe = run.load_recipe(os.path.join(MODELS, entry, "recipe.json"), given)
    train, test, description = run.load_data(recipe)
    model = run.build_model(recipe, x_train=train[0])
    figures = modality_of(recipe).evaluate(model.encoder, recipe, train, test)
    _write(path, _portable({
        "dataset": name, "seed": seed, "entry_recipe": entry,
        "what": "the untrained encoder: the recipe's transformer at its random "
                "initialisation (keras_hardneg.run.build_model at this seed, the BPE trained "
                "on the file), frozen, the same STS and SentEval",
        "command": f"python benchmarks/zoo_twins.py scratch-baseline --seeds {seed}",
        **figures, "seconds": round(time.time() - start, 1), "data": description,
        "code": _code(), "keras_backend": keras.backend.backend()}))
    print(f"baseline {name} s{seed}: STS avg {figures['sts']['avg']:.2f}, SentEval avg "
          f"{figures['senteval']['avg']:.2f}", flush=True)
    return True


def baseline_cell(folder: str, seed: int) -> bool:
    """The untrained encoder of the TU set's NT-Xent recipe at seed ``seed`` (the encoder is
    built before, and independently of, the loss and sampler), the run's SVM."""
    path = _cell_path("baseline", folder, seed)
    if os.path.isfile(path):
        return False
    import keras

    from keras_hardneg import run
    from keras_hardneg.modalities import modality_of

    from make_recipes import TU_SETS

    start = time.time()
    entry = f"graphcl-ntxent-{TU_SETS[folder]}"
    data = {"data": {"name": "tu", "folder": os.path.join(ROOT, TU, folder)}, "seed": seed}
    recipe = run.load_recipe(os.path.join(MODELS, entry, "recipe.json"), data)
    train, test, description = run.load_data(recipe)
    model = run.build_model(recipe, x_train=train[0])
    figures = modality_of(recipe).evaluate(model.encoder, recipe, train, test)
    _write(path, {
        "dataset": folder, "seed": seed, "entry_recipe": entry,
        "what": "the untrained encoder: the recipe's GIN at its random initialisation "
                "(keras_hardneg.run.build_model at this seed), frozen, the same 10-fold SVM",
        "command": f"python benchmarks/zoo_twins.py baseline --datasets {folder} --seeds {seed}",
        **figures, "seconds": round(time.time() - start, 1), "data": description,
        "code": _code(), "keras_backend": keras.backend.backend()})
    print(f"baseline {folder} s{seed}: SVM {figures['svm_accuracy']:.4f}", flush=True)
    return True


def _seeds_block(kind: str, entry: str, keys: tuple[str, ...]) -> dict:
    return seeds_block({seed: _cell_path(kind, entry, seed) for seed in SEEDS}, keys,
                       f"benchmarks/results/zoo_twins/{kind}/{entry}__s<seed>.json")


def seeds_block(paths: dict, keys: tuple[str, ...], cells: str, metric=None,
                command=None) -> dict:
    """results.json's ``seeds``: each existing cell JSON of ``paths`` (``{seed: path}``)
    read for ``keys`` (``metric(cell, key)``, default :func:`_metric`) and its command
    (``command(cell, seed)``, default the cell's own); ``cells`` names them for a reader."""
    metric = metric or _metric
    per_seed, commands = {}, {}
    for seed, path in paths.items():
        if os.path.isfile(path):
            cell = _read(path)
            per_seed[str(seed)] = {k: metric(cell, k) for k in keys}
            commands[str(seed)] = (command(cell, seed) if command else
                                   cell.get("command") or cell.get("train_command"))
    return {"weights_seed": WEIGHTS_SEED, "per_seed": per_seed, "commands": commands,
            "cells": cells}


def _metric(cell: dict, key: str) -> float:
    if key == "sts_avg":
        return cell["sts"]["avg"]
    if key == "senteval_avg":
        return cell["senteval"]["avg"]
    return cell[key]


def _relative_to_entry(recipe: dict) -> dict:
    """The trained recipe with its (absolute) data folder or file relative to
    ``models/<entry>/`` (how recipe files name paths: ``load_recipe`` resolves them from the
    file's folder)."""
    recipe = json.loads(json.dumps(recipe))
    for key in ("folder", "path"):
        given = recipe.get("data", {}).get(key)
        if given and os.path.isabs(given):
            recipe["data"][key] = os.path.relpath(given, os.path.join(MODELS, "entry"))
    return recipe


def _install_run(run_dir: str, target: str, entry: str, trained: dict) -> str:
    """models/<entry> takes the run's weights (``preset/``, and ``encoder/`` where the run
    exported one) and ``history.json``, its cards with no machine folders, and
    ``trained_recipe.json``: ``trained`` (the run's recipe) with its data relative to the
    entry and named after it. Returns that recipe file's path."""
    for folder in ("preset", "encoder"):
        if os.path.isdir(os.path.join(run_dir, folder)):
            shutil.rmtree(os.path.join(target, folder), ignore_errors=True)
            shutil.copytree(os.path.join(run_dir, folder), os.path.join(target, folder))
    shutil.copyfile(os.path.join(run_dir, "history.json"), os.path.join(target, "history.json"))
    _strip_machine_paths(target)
    trained = _relative_to_entry(trained)
    trained["name"] = entry
    path = os.path.join(target, "trained_recipe.json")
    with open(path, "w") as f:
        json.dump(trained, f, indent=1, sort_keys=True)
        f.write("\n")
    return path


def _same_arrays(a: str, b: str, cast: bool = False) -> bool:
    """Whether presets ``a`` and ``b`` hold the same weights, array for array (with
    ``cast``: ``b``'s arrays rounded to ``a``'s dtype first, e.g. a float16 copy ``a`` of
    float32 weights ``b``)."""
    import h5py

    def arrays(folder):
        out = {}
        with h5py.File(os.path.join(folder, "model.weights.h5"), "r") as f:
            f.visititems(lambda k, v: out.__setitem__(k, v[()]) if hasattr(v, "shape")
                         else None)
        return out

    if not all(os.path.isfile(os.path.join(p, "model.weights.h5")) for p in (a, b)):
        return False
    x, y = arrays(a), arrays(b)
    return x.keys() == y.keys() and all(np.array_equal(
        x[k], y[k].astype(x[k].dtype) if cast else y[k]) for k in x)


def _strip_machine_paths(folder: str) -> None:
    """The cards of a copied run name its data as given (``../shared/...``), not this
    machine's folders."""
    for path in glob.glob(os.path.join(folder, "**", "model_card.*"), recursive=True):
        with open(path) as f:
            text = f.read()
        if _portable_text(text) != text:
            with open(path, "w") as f:
                f.write(_portable_text(text))


def _fill_provenance(preset: str) -> None:
    """The preset card's provenance from the preset's own metadata (``save_preset`` leaves
    the card's versions and date empty; ``metadata.json`` records them), and the
    TensorFlow that trained it (every cell here ran under the TensorFlow backend)."""
    import tensorflow as tf

    path = os.path.join(preset, "model_card.json")
    card, meta = _read(path), _read(os.path.join(preset, "metadata.json"))
    filled = {"library_version": meta.get("keras_hardneg_version"),
              "keras_version": meta.get("keras_version"), "created": meta.get("date"),
              "tensorflow_version": tf.__version__ if meta.get("backend") == "tensorflow"
              else None}
    changed = {k: v for k, v in filled.items() if card.get(k) is None and v is not None}
    if changed:
        card.update(changed)
        with open(path, "w") as f:
            json.dump(card, f, indent=1)
            f.write("\n")


def install_graph(entry: str) -> None:
    """models/<entry>: seed 0's preset, history and trained recipe (from its run folder, if
    still there), and results.json: seed 0's figures, the seeds' and the baseline's."""
    from keras_hardneg import run

    target = os.path.join(MODELS, entry)
    run_dir = f"{WORK}/graph/{entry}__s{WEIGHTS_SEED}"
    seed0 = _cell_path("graph", entry, WEIGHTS_SEED)
    if not os.path.isfile(seed0):
        return
    cell = _read(seed0)
    if os.path.isdir(os.path.join(run_dir, "preset")) and _same_arrays(
            os.path.join(run_dir, "preset"), os.path.join(target, "preset")):
        # Retrained to the same weights (an entry trained before): its files stay as they
        # are (no new bytes in the repository's history for the same model).
        shutil.rmtree(run_dir)
    if os.path.isdir(os.path.join(run_dir, "preset")):
        trained = _install_run(run_dir, target, entry,
                               _read(os.path.join(run_dir, "recipe.json")))
        # The weights as stored score the cell's figure (the preset, as a user loads it).
        figures, _ = run.evaluate_directory(target, recipe=trained)
        if abs(figures["svm_accuracy"] - cell["svm_accuracy"]) > 1e-9:
            raise SystemExit(f"{entry}: the installed preset scores {figures['svm_accuracy']}"
                             f", the run {cell['svm_accuracy']}")
        shutil.rmtree(run_dir)
    if not os.path.isdir(os.path.join(target, "preset")):
        return
    _fill_provenance(os.path.join(target, "preset"))
    folder = tu_folder(entry)
    results = {
        "svm_accuracy": cell["svm_accuracy"], "svm_accuracy_std": cell["svm_accuracy_std"],
        "epochs_run": cell["epochs_run"], "steps_per_epoch": cell["steps_per_epoch"],
        "seconds": cell["train_seconds"], "data": cell["data"], "modality": "graph",
        "hardware": "CPU (2 shared cores)",
        "train_command": cell["command"],
        "evaluate_commands": [f"keras-hardneg evaluate models/{entry} --dataset "
                              f"{TU}/{folder} --json"],
        "reproduce_command": f"nice -n 19 python benchmarks/zoo_twins.py graph --entries "
                             f"{entry} && python benchmarks/zoo_twins.py install {entry}",
        "seeds": _seeds_block("graph", entry, ("svm_accuracy",)),
        "baseline": _baseline_block(folder),
        "twin": f"graphcl-ntxent-{entry.rsplit('-', 1)[1]}",
    }
    if results["twin"] == entry:
        del results["twin"]
    with open(os.path.join(target, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
        f.write("\n")


def _baseline_block(folder: str) -> dict:
    per_seed = {}
    what = command = None
    for seed in SEEDS:
        path = _cell_path("baseline", folder, seed)
        if os.path.isfile(path):
            cell = _read(path)
            per_seed[str(seed)] = {"svm_accuracy": cell["svm_accuracy"]}
            what = cell["what"]
    if per_seed:
        command = f"python benchmarks/zoo_twins.py baseline --datasets {folder}"
    return {"what": what or "untrained encoder (not measured yet)", "per_seed": per_seed,
            "command": command}


def install_scratch(entry: str) -> None:
    """models/<entry> (a from-scratch SimCSE recipe): seed 0's preset, history and trained
    recipe, and results.json with the seeds' STS / SentEval and the untrained baseline."""
    target = os.path.join(MODELS, entry)
    seed0 = _cell_path("text", entry, WEIGHTS_SEED)
    if not os.path.isfile(seed0):
        return
    cell = _read(seed0)
    run_dir = f"{WORK}/scratch/{entry}__s{WEIGHTS_SEED}"
    if os.path.isdir(os.path.join(run_dir, "preset")):
        from keras_hardneg import run

        trained = _read(os.path.join(run_dir, "recipe.json"))
        trained["evaluation"]["benchmark_dir"] = None  # a folder the user gives
        _install_run(run_dir, target, entry, trained)
        # The weights as stored score the cell's figure (the preset, as a user loads it).
        figures, _ = run.evaluate_directory(target, benchmark_dir=os.path.join(ROOT, BENCHMARK),
                                            senteval=False)
        if abs(figures["sts"]["avg"] - cell["sts"]["avg"]) > 1e-6:
            raise SystemExit(f"{entry}: the installed preset scores STS avg "
                             f"{figures['sts']['avg']}, the run {cell['sts']['avg']}")
        shutil.rmtree(run_dir)
    if not os.path.isdir(os.path.join(target, "preset")):
        return
    _fill_provenance(os.path.join(target, "preset"))
    per_seed = {}
    for seed in SEEDS:
        path = _cell_path("baseline", SCRATCH_BASELINE, seed)
        if os.path.isfile(path):
            base = _read(path)
            per_seed[str(seed)] = {"sts_avg": base["sts"]["avg"],
                                   "senteval_avg": base["senteval"]["avg"]}
    results = {
        "sts": cell["sts"], "senteval": cell["senteval"], "epochs_run": cell["epochs_run"],
        "steps_per_epoch": cell["steps_per_epoch"], "seconds": cell["train_seconds"],
        "data": cell["data"], "modality": "text", "hardware": "CPU (2 shared cores)",
        "train_command": cell["command"],
        "evaluate_commands": [f"keras-hardneg evaluate models/{entry} --benchmark-dir "
                              f"{BENCHMARK} --json --senteval"],
        "reproduce_command": f"nice -n 19 python benchmarks/zoo_twins.py scratch --entries "
                             f"{entry} --seeds 0",
        "seeds": _seeds_block("text", entry, ("sts_avg", "senteval_avg")),
        "baseline": {
            "what": "the untrained encoder (the recipe's transformer at its random "
                    "initialisation), the same evaluation", "per_seed": per_seed,
            "command": "python benchmarks/zoo_twins.py scratch-baseline"},
    }
    if entry != SCRATCH_ENTRIES[0]:
        results["twin"] = SCRATCH_ENTRIES[0]
    with open(os.path.join(target, "results.json"), "w") as f:
        json.dump(_portable(results), f, indent=1)
        f.write("\n")


# ---------------------------------------------------------------------------------- text
def text_cell(entry: str, seed: int) -> bool:
    """Fine-tunes MiniLM for one cell, stores it as a float16 preset and scores that preset
    on STS (whole sentences) and SentEval; seed 0 installs the entry's weights."""
    path = _cell_path("text", entry, seed)
    if os.path.isfile(path):
        return False
    import text_minilm as tm

    if entry == TEXT_TWIN and seed == 0:
        return _import_twin_seed0(path)
    loss, keys = TEXT_ENTRIES[entry]
    tm.make_subset()
    run_dir = f"{WORK}/text/{entry}__s{seed}"
    train = ["keras-hardneg", "train", "--dataset", tm.SUBSET, "--preset", tm.minilm_folder(),
             "--loss", loss, "--epochs", "1", "--seed", str(seed), "--output", run_dir,
             "--no-export", "--verbose", "2"] + (["--recipe", keys] if keys else [])
    if not os.path.isfile(os.path.join(run_dir, "results.json")):
        _, train_s = _run(train)
    else:
        train_s = None  # trained by an earlier call of this cell
    stored = os.path.join(run_dir, "preset16")
    if not os.path.isfile(os.path.join(stored, "metadata.json")):
        _store_float16(run_dir, stored)
    evaluate = ["keras-hardneg", "evaluate", stored, "--benchmark-dir", tm.SHARED, "--json",
                "--senteval"]
    stdout, eval_s = _run(evaluate)
    figures = _last_json(stdout)
    hist = _read(os.path.join(run_dir, "history.json"))
    results = _read(os.path.join(run_dir, "results.json"))
    record = {
        "entry": entry, "seed": seed, "train_command": tm._portable(shlex.join(train)),
        "evaluate_command": tm._portable(shlex.join(evaluate)).replace(stored, "PRESET16"),
        "sts": figures["sts"], "senteval": figures["senteval"],
        "train_seconds": round(sum(hist.get("epoch_seconds", [0])), 1),
        "train_command_seconds": None if train_s is None else round(train_s, 1),
        "evaluate_seconds": round(eval_s, 1), "steps": int(results["steps_per_epoch"]),
        "final_loss": hist.get("loss", [None])[-1],
        "clamp_fraction": hist.get("clamp_fraction", [None])[-1],
        "weights": "float16 Keras preset (PRESET16 = RUN/preset16), scored as stored",
        "subset": f"{tm.SUBSET_SIZE} sentences, `python benchmarks/text_minilm.py subset`",
        "code": _code(), "machine": "2 shared CPU cores, nice 19, TensorFlow backend",
        "recipe": tm._portable(_read(os.path.join(run_dir, "recipe.json")))}
    if (entry, seed) == FLOAT16_CHECK:
        cmd = ["keras-hardneg", "evaluate", run_dir, "--benchmark-dir", tm.SHARED, "--json"]
        stdout, _ = _run(cmd)
        full = _last_json(stdout)["sts"]
        record["float32_check"] = {
            "command": tm._portable(shlex.join(cmd)).replace(run_dir, "RUN"),
            "what": "the same run's float32 weights (the checkpoint), STS whole sentences",
            "sts": full, "sts_avg_float16_minus_float32": figures["sts"]["avg"] - full["avg"]}
    _write(path, _portable(record))
    print(f"{entry} s{seed}: STS avg {figures['sts']['avg']:.2f}, SentEval avg "
          f"{figures['senteval']['avg']:.2f}", flush=True)
    _keep_weights_seed(seed, run_dir, lambda: install_text(entry))
    return True


def _store_float16(run_dir: str, stored: str) -> None:
    from keras_hardneg.run import restore_run
    from keras_hardneg.run.artifacts import write_preset

    model, recipe, results, description, x = restore_run(run_dir, with_data=True)
    write_preset(model, recipe, results, description, stored, x_train=x[0], run_dir=run_dir,
                 weights_dtype="float16")


def _import_twin_seed0(path: str) -> bool:
    """Seed 0 of the NT-Xent entry: its zoo record (trained and scored the same way)."""
    old = _read(os.path.join(ROOT, TEXT_SEED0_RECORD))
    _write(path, {
        "entry": TEXT_TWIN, "seed": 0, "train_command": _portable_text(old["train_command"]),
        "evaluate_command": _portable_text(old["evaluate_commands"][0]), "sts": old["sts"],
        "senteval": old["senteval"], "train_seconds": old["train_seconds"],
        "steps": old["steps"], "final_loss": old["final_loss"], "weights": old["weights"],
        "subset": old["subset"], "code": old["code"],
        "source": f"{TEXT_SEED0_RECORD} (`python benchmarks/text_minilm.py zoo`): the "
                  "entry's own weights, not retrained here"})
    print(f"{TEXT_TWIN} s0: from {TEXT_SEED0_RECORD}", flush=True)
    return True


def install_text(entry: str) -> None:
    """models/<entry>: seed 0's float16 preset (written again with the entry's portable
    recipe and results, the weights checked identical) and results.json with the seeds'
    figures and the zero-shot baseline."""
    import text_minilm as tm

    target = os.path.join(MODELS, entry)
    seed0 = _cell_path("text", entry, WEIGHTS_SEED)
    if not os.path.isfile(seed0):
        return
    cell = _read(seed0)
    zero = _read(os.path.join(ROOT, ZERO_SHOT))
    if entry == TEXT_TWIN:
        results = _read(os.path.join(target, "results.json"))
    else:
        results = {
            "sts": cell["sts"], "senteval": cell["senteval"], "epochs_run": 1,
            "steps": cell["steps"], "train_command": cell["train_command"],
            "evaluate_commands": [cell["evaluate_command"].replace("PRESET16", "PRESET")],
            "reproduce_command": f"nice -n 19 python benchmarks/zoo_twins.py text --entries "
                                 f"{entry} --seeds 0",
            "train_seconds": cell["train_seconds"], "subset": cell["subset"],
            "weights": "float16 Keras preset, scored as stored",
            "hardware": "CPU (2 shared cores)",
            "base_model": _read(os.path.join(MODELS, TEXT_TWIN, "results.json"))["base_model"],
            "zero_shot_sts": zero["sts"], "twin": TEXT_TWIN}
    results["seeds"] = _seeds_block("text", entry, ("sts_avg", "senteval_avg"))
    results["baseline"] = {
        "what": "zero-shot all-MiniLM-L6-v2 (the start, no fine-tuning), the same "
                "evaluation", "per_seed": {"0": {"sts_avg": zero["sts"]["avg"],
                                                 "senteval_avg": zero["senteval"]["avg"]}},
        "command": zero["command"], "deterministic": True}
    run_dir = f"{WORK}/text/{entry}__s{WEIGHTS_SEED}"
    if entry != TEXT_TWIN and os.path.isdir(os.path.join(run_dir, "preset16")):
        from keras_hardneg.run import restore_run
        from keras_hardneg.run.artifacts import write_preset

        model, recipe, _, description, x = restore_run(run_dir, with_data=True)
        recipe["data"]["tokenizer"] = recipe["encoder"]["preset"]
        recipe["name"] = entry
        description = description.replace(f"tokenizer {run_dir}/tokenizer.json",
                                          "the checkpoint's WordPiece tokenizer")
        portable = lambda obj: json.loads(tm._portable(json.dumps(obj)).replace(  # noqa: E731
            run_dir, "RUN"))
        final = os.path.join(target, "preset")
        write_preset(model, portable(recipe), portable(results), portable(description),
                     final, x_train=x[0], run_dir=run_dir, weights_dtype="float16")
        tm._same_weights(os.path.join(run_dir, "preset16"), final)
        _fill_provenance(final)
        with open(os.path.join(target, "recipe.json"), "w") as f:
            json.dump(portable(recipe), f, indent=1, sort_keys=True)
        shutil.copyfile(os.path.join(run_dir, "history.json"),
                        os.path.join(target, "history.json"))
        shutil.rmtree(run_dir)
    if not os.path.isdir(os.path.join(target, "preset")):
        return
    with open(os.path.join(target, "results.json"), "w") as f:
        json.dump(_portable(results), f, indent=1)
        f.write("\n")


# ------------------------------------------------------------------------------ commands
def run_cells(kind: str, names: list[str], seeds: tuple[int, ...]) -> None:
    """The cells without a JSON, seed-major (every entry's weights, seed 0, first). Two
    drivers may share the list (e.g. one on the small TU sets): a cell is claimed with a
    lock file holding the process id (benchmarks/grid.py; a dead owner's lock is taken
    over, its run resuming from its checkpoint)."""
    from grid import claim

    cells = {"graph": graph_cell, "text": text_cell, "baseline": baseline_cell,
             "scratch": scratch_cell, "scratch-baseline": scratch_baseline_cell}
    cell = cells[kind]
    kind = {"scratch": "text", "scratch-baseline": "baseline"}.get(kind, kind)
    locks = os.path.join(WORK, "locks")
    os.makedirs(locks, exist_ok=True)
    for seed in seeds:
        for name in names:
            if os.path.isfile(_cell_path(kind, name, seed)):
                continue
            lock = os.path.join(locks, f"{kind}__{name}__s{seed}.lock")
            if not claim(lock):
                print(f"{name} s{seed}: another driver has it", flush=True)
                continue
            try:
                cell(name, seed)
            except RuntimeError as e:
                print(f"{name} s{seed} FAILED: {e}", flush=True)
            finally:
                os.remove(lock)


def install(names: list[str]) -> None:
    for name in names:
        if name in TEXT_ENTRIES:
            install_text(name)
        elif name in SCRATCH_ENTRIES:
            install_scratch(name)
        else:
            install_graph(name)
        print(f"installed {name}", flush=True)


def status() -> None:
    def done(kind, name):
        return [s for s in SEEDS if os.path.isfile(_cell_path(kind, name, s))]

    from make_recipes import TU_SETS

    for name in graph_entries():
        print(f"graph    {name:42s} seeds {done('graph', name)}")
    for folder in TU_SETS:
        print(f"baseline {folder:42s} seeds {done('baseline', folder)}")
    for name in list(TEXT_ENTRIES) + list(SCRATCH_ENTRIES):
        print(f"text     {name:42s} seeds {done('text', name)}")
    print(f"baseline {SCRATCH_BASELINE:42s} seeds {done('baseline', SCRATCH_BASELINE)}")


def report() -> None:
    """Markdown tables of every cell (docs/notes/zoo_twins.md): each entry's figure per seed
    and over the seeds, its NT-Xent twin's, the difference and whether it is inside the
    spread, the baseline, and the times."""
    from keras_hardneg import zoo_figures as zf

    def cells(kind, name):
        return {str(s): _read(_cell_path(kind, name, s)) for s in SEEDS
                if os.path.isfile(_cell_path(kind, name, s))}

    def block(kind, names, metric, twin_of, base_of):
        scale = zf.METRICS[metric][1]
        print(f"| entry | seed 0 | seed 1 | seed 2 | mean ± std (n) | NT-Xent twin | difference "
              f"| before training |")
        print("|---|---|---|---|---|---|---|---|")
        for name in names:
            got = cells(kind, name)
            if not got:
                continue
            per = {s: _metric(c, metric) for s, c in got.items()}
            summary = zf.summarize(per)
            twin = twin_of(name)
            twin_cells = cells(kind, twin) if twin else {}
            note = "-"
            if twin_cells:
                other = zf.summarize({s: _metric(c, metric) for s, c in twin_cells.items()})
                note = zf.verdict(metric, zf.compare_summaries(summary, other))
            base = base_of(name)
            print(f"| `{name}` | " + " | ".join(
                f"{per[str(s)] * scale:.2f}" if str(s) in per else "-" for s in SEEDS)
                + f" | {zf.format_summary(metric, summary)} | {twin or '-'} | {note} | "
                f"{zf.format_summary(metric, base) if base else '-'} |")

    def graph_base(name):
        folder = tu_folder(name)
        got = {str(s): _read(_cell_path("baseline", folder, s))["svm_accuracy"] for s in SEEDS
               if os.path.isfile(_cell_path("baseline", folder, s))}
        return zf.summarize(got) if got else None

    graphs = sorted(graph_entries(), key=lambda n: (tu_folder(n), "ntxent-" not in n, n))
    print("### Graphs: 10-fold SVM accuracy (%)\n")
    block("graph", graphs, "svm_accuracy",
          lambda n: None if n == f"graphcl-ntxent-{n.rsplit('-', 1)[1]}"
          else f"graphcl-ntxent-{n.rsplit('-', 1)[1]}", graph_base)
    zero = _read(os.path.join(ROOT, ZERO_SHOT))
    for metric in ("sts_avg", "senteval_avg"):
        print(f"\n### MiniLM: {zf.METRICS[metric][0]}\n")
        block("text", list(TEXT_ENTRIES), metric,
              lambda n: None if n == TEXT_TWIN else TEXT_TWIN,
              lambda n: zf.summarize({"0": _metric(zero, metric)}))

    def scratch_base(name):
        got = {str(s): _metric(_read(_cell_path("baseline", SCRATCH_BASELINE, s)), metric)
               for s in SEEDS if os.path.isfile(_cell_path("baseline", SCRATCH_BASELINE, s))}
        return zf.summarize(got) if got else None

    for metric in ("sts_avg", "senteval_avg"):
        print(f"\n### From-scratch SimCSE (2-layer transformer): {zf.METRICS[metric][0]}\n")
        block("text", list(SCRATCH_ENTRIES), metric,
              lambda n: None if n == SCRATCH_ENTRIES[0] else SCRATCH_ENTRIES[0], scratch_base)
    print("\n### Times (seconds, on the shared 2-core machine at nice 19)\n")
    print("| kind | cells | train: min-max | whole cell: min-max |")
    print("|---|---|---|---|")
    for kind, key, whole in (("graph", "train_seconds", "command_seconds"),
                             ("text", "train_seconds", "evaluate_seconds")):
        found = [_read(p) for p in glob.glob(os.path.join(OUT, kind, "*.json"))]
        found = [c for c in found if c.get(key) is not None and "source" not in c]
        if found:
            t = [c[key] for c in found]
            w = [c[whole] + (c[key] if kind == "text" else 0) for c in found if c.get(whole)]
            print(f"| {kind} | {len(found)} | {min(t):.0f}-{max(t):.0f} | "
                  f"{min(w):.0f}-{max(w):.0f} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=["graph", "baseline", "text", "scratch",
                                     "scratch-baseline", "install", "status", "report"])
    p.add_argument("names", nargs="*", help="install: entries (default: all with cells)")
    p.add_argument("--entries", nargs="+", help="graph/text: these entries only")
    p.add_argument("--datasets", nargs="+", help="baseline: these TU folders only")
    p.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    a = p.parse_args()
    seeds = tuple(a.seeds)
    if a.what == "graph":
        run_cells("graph", a.entries or graph_entries(), seeds)
    elif a.what == "baseline":
        from make_recipes import TU_SETS

        run_cells("baseline", a.datasets or list(TU_SETS), seeds)
    elif a.what == "text":
        run_cells("text", a.entries or list(TEXT_ENTRIES), seeds)
    elif a.what == "scratch":
        run_cells("scratch", a.entries or list(SCRATCH_ENTRIES), seeds)
    elif a.what == "scratch-baseline":
        run_cells("scratch-baseline", [SCRATCH_BASELINE], seeds)
    elif a.what == "install":
        text = list(TEXT_ENTRIES) + list(SCRATCH_ENTRIES)
        install(a.names or [n for n in graph_entries() + text if os.path.isfile(_cell_path(
            "text" if n in text else "graph", n, WEIGHTS_SEED))])
    elif a.what == "report":
        report()
    else:
        status()


if __name__ == "__main__":
    main()
