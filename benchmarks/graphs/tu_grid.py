"""The graph benchmark grid of issue 16: GraphCL and InfoGraph on the seven TU datasets of
``../shared/data/tudataset`` with the loss family and BatchSampler, evaluated as the papers
do (frozen graph embeddings, SVM, 10-fold cross-validation accuracy).

Grids (``--grid``):

* ``main``: all seven datasets x {NT-Xent, debiased, hard (beta 1)} x {uniform,
  BatchSampler} x seeds 0-4, GraphCL.
* ``sweep``: MUTAG, PROTEINS, IMDB-BINARY x {hard beta 2, hard beta 10, Ring, UnReMix} x
  seeds 0-2, GraphCL, uniform batches (beta 0 = the debiased runs and beta 1 = the hard
  runs of ``main``, HCL's Fig. 3 sweep).
* ``infograph``: the same three datasets x {NT-Xent, debiased, hard} x seeds 0-2,
  InfoGraph (HCL's and UnReMix's graph framework).

Every run goes through ``keras_hardneg.run.train`` (the same path as ``keras-hardneg
train --dataset TU_FOLDER``) and writes ``benchmarks/results/graphs/<run-id>.json`` when it
finishes; a finished run is skipped, so the grid resumes after a kill. Several workers may
share a grid (a run is claimed with a lock file under ``benchmarks/work/graphs/``).

Usage::

    python benchmarks/graphs/tu_grid.py --grid main            # ~N min on 2 cores
    python benchmarks/graphs/tu_grid.py --grid main --datasets MUTAG --seeds 0
    python benchmarks/graphs/tu_grid.py --list
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.normpath(os.path.join(REPO, "..", "shared", "data", "tudataset"))
RESULTS = os.path.join(REPO, "benchmarks", "results", "graphs")
WORK = os.path.join(REPO, "benchmarks", "work", "graphs")
sys.path.insert(0, os.path.join(REPO, "benchmarks"))
from grid import list_grid, run_grid  # noqa: E402  (the grids' shared resumable loop)

DATASETS = ("MUTAG", "PTC_MR", "PROTEINS", "ENZYMES", "NCI1", "IMDB-BINARY", "IMDB-MULTI")
SWEEP_DATASETS = ("MUTAG", "PROTEINS", "IMDB-BINARY")

# GraphCL's temperature (0.2) throughout; tau_plus = 0.1 as HCL's default class prior.
LOSSES = {
    "nt_xent": {"name": "nt_xent", "temperature": 0.2},
    "debiased": {"name": "debiased", "temperature": 0.2, "tau_plus": 0.1},
    "hard": {"name": "hard", "temperature": 0.2, "tau_plus": 0.1, "beta": 1.0},
    "hard_b2": {"name": "hard", "temperature": 0.2, "tau_plus": 0.1, "beta": 2.0},
    "hard_b10": {"name": "hard", "temperature": 0.2, "tau_plus": 0.1, "beta": 10.0},
    "ring": {"name": "ring", "temperature": 0.2},
    "unremix": {"name": "unremix", "temperature": 0.2, "tau_plus": 0.1},
}


def sampler_spec(name: str, num_graphs: int, batch_size: int) -> dict:
    if name == "uniform":
        return {"name": "uniform"}
    # BatchSampler's graph setting: M candidates, K neighbours, graph rebuilt once an epoch
    # (M and K are capped by the dataset size in the run layer).
    return {"name": "batchsampler", "num_candidates": 1000, "num_neighbors": 100,
            "refresh_every": max(num_graphs // batch_size, 1)}


NUM_GRAPHS = {"MUTAG": 188, "PTC_MR": 344, "PROTEINS": 1113, "ENZYMES": 600, "NCI1": 4110,
              "IMDB-BINARY": 1000, "IMDB-MULTI": 1500}


def grid(name: str, datasets=None, seeds=None) -> list[tuple[str, dict]]:
    runs = []
    if name == "main":
        plan = [(d, "graphcl", loss, sampler, s) for d in DATASETS
                for loss in ("nt_xent", "debiased", "hard")
                for sampler in ("uniform", "batchsampler") for s in range(5)]
    elif name == "sweep":
        plan = [(d, "graphcl", loss, "uniform", s) for d in SWEEP_DATASETS
                for loss in ("hard_b2", "hard_b10", "ring", "unremix") for s in range(3)]
    elif name == "infograph":
        plan = [(d, "infograph", loss, "uniform", s) for d in SWEEP_DATASETS
                for loss in ("nt_xent", "debiased", "hard") for s in range(3)]
    else:
        raise SystemExit(f"unknown grid {name!r}")
    # Seed-major: every setting gets seed 0 first, then seed 1, ... (a grid cut short
    # still covers every cell).
    plan.sort(key=lambda run: run[4])
    for d, framework, loss, sampler, seed in plan:
        if datasets and d not in datasets or seeds is not None and seed not in seeds:
            continue
        rid = f"{d}__{framework}__{loss}__{sampler}__s{seed}"
        recipe = {
            "name": rid,
            "data": {"name": "tu", "folder": os.path.join(DATA, d)},
            "framework": {"name": framework},
            "loss": dict(LOSSES[loss]),
            "sampler": sampler_spec(sampler, NUM_GRAPHS[d], 128),
            "seed": seed,
        }
        if framework == "infograph":
            # InfoGraph's (and HCL's graph) learning rate, and its three-layer projection
            # networks.
            recipe.update(optimizer={"name": "adam", "learning_rate": 0.001},
                          projection_dims=[96, 96, 96])
        runs.append((rid, recipe))
    return runs


def run_one(rid: str, recipe: dict) -> dict:
    from keras_hardneg import run

    start = time.perf_counter()
    out = run.train(recipe, os.path.join(WORK, rid), verbose=0, export=False)
    return {
        "id": rid, "recipe": run.load_recipe(recipe),
        "svm_accuracy": out["svm_accuracy"], "svm_accuracy_std": out["svm_accuracy_std"],
        "final_loss": out["history"]["loss"][-1], "epochs_run": out["epochs_run"],
        "train_seconds": out["seconds"], "total_seconds": time.perf_counter() - start,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--grid", default="main", choices=("main", "sweep", "infograph"))
    p.add_argument("--datasets", nargs="*")
    p.add_argument("--seeds", nargs="*", type=int)
    p.add_argument("--reverse", action="store_true", help="walk the grid backwards")
    p.add_argument("--list", action="store_true")
    args = p.parse_args(argv)
    if not os.path.isdir(DATA):
        print(f"no TU data at {DATA}", file=sys.stderr)
        return 2
    os.makedirs(RESULTS, exist_ok=True)
    os.makedirs(WORK, exist_ok=True)
    runs = grid(args.grid, args.datasets, set(args.seeds) if args.seeds else None)
    if args.reverse:
        runs = runs[::-1]
    if args.list:
        list_grid(runs, RESULTS)
        return 0
    return run_grid(runs, RESULTS, WORK, run_one, lambda r: (
        f"{r['id']}: svm {r['svm_accuracy']:.4f} +- {r['svm_accuracy_std']:.4f} "
        f"({r['total_seconds']:.0f} s)"))


if __name__ == "__main__":
    sys.exit(main())
