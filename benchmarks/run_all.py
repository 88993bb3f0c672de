"""Reruns every benchmark of keras-hardneg with one command (issue 7).

Suites:

* ``loss_overhead``: ``benchmarks/loss_overhead.py`` (step and loss cost vs NT-Xent).
* ``quality``: the representation-quality grid on CIFAR-10 JPEG
  (``../shared/data/cifar10-jpg``): SimCLR with NT-Xent, debiased, hard (beta 0.5
  and 1), Ring and UnReMix, each with uniform and BatchSampler batches; MoCo v2
  with NT-Xent and Ring; a random-init encoder baseline; seeds 0 and 1.

Resumable: every run writes ``benchmarks/results/<suite>/<run-id>.json`` when it
finishes and is skipped when that file exists; a run killed mid-way restarts from
its last finished epoch (Keras BackupAndRestore under ``benchmarks/work/``).
Seeds are fixed (data subset, init, augmentation, shuffling).

Usage::

    python3 benchmarks/run_all.py --quick           # smoke run, digits, 1 epoch, a few minutes
    python3 benchmarks/run_all.py                   # everything (~5 h on 2 CPU cores)
    python3 benchmarks/run_all.py --budget small    # session 1's budget (~2 min per run)
    python3 benchmarks/run_all.py --suites quality --grid reduced   # what was run first
    python3 benchmarks/run_all.py --report          # only redraw plots/tables from results
    python3 benchmarks/run_all.py --list            # list run ids and whether they are done

Several workers may share a grid (each claims a run with a lock file under
``benchmarks/work/``), e.g. a second one started with ``--reverse``.
"""

import argparse
import json
import os
import subprocess
import sys
import time
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
DATA_DIR = os.path.normpath(os.path.join(REPO, "..", "shared", "data", "cifar10-jpg"))

# ----------------------------------------------------------------- the grid
# The same six loss settings as the loss-overhead benchmark.
from loss_overhead import LOSSES as SIMCLR_LOSSES  # noqa: E402

MOCO_LOSSES = {k: SIMCLR_LOSSES[k] for k in ("nt_xent", "ring")}
SAMPLERS = {"uniform": {"name": "uniform"},
            "batchsampler": {"name": "batchsampler", "num_candidates": 500,
                             "num_neighbors": 100, "refresh_every": 19}}
SEEDS = (0, 1)

# Budget "small" (session 1, results/quality/): small conv encoder, 500 train / 200 test
# images per class, batch 256 (19 steps per epoch), 5 epochs: 1.5-3 min per run quiet.
CIFAR_SMALL = {
    "encoder": {"name": "small_convnet", "width": 32},
    "projection_dims": [512, 128],
    "batch_size": 256,
    "epochs": 5,
    "optimizer": {"name": "adam", "learning_rate": 1e-3},
    "schedule": {"name": "warmup_cosine", "warmup_epochs": 0},
    "augmentation": {"version": "v1", "strength": 0.5, "crop_scale": [0.2, 1.0]},
    "data": {"name": "image_folder", "train": os.path.join(DATA_DIR, "train"),
             "test": os.path.join(DATA_DIR, "test"), "image_size": 32,
             "limit_per_class": 500, "test_limit_per_class": 200},
    "moco": {"queue_size": 4096, "momentum": 0.99},
    "evaluation": {"knn_k": 200, "knn_temperature": 0.1, "monitor_every": 1,
                   "linear_probe": True},
}
# Budget "r18" (the issue's ~10 min per run, results/quality_r18/): ResNet-18 (CIFAR stem)
# width 16 with the fused batch norm, mixed_bfloat16, 1000 train / 200 test images per class
# (39 steps per epoch), 15 epochs.
CIFAR_R18 = dict(
    CIFAR_SMALL,
    encoder={"name": "resnet18_cifar", "width": 16},
    precision="mixed_bfloat16",
    epochs=15,
    data=dict(CIFAR_SMALL["data"], limit_per_class=1000),
)
BUDGETS = {"r18": CIFAR_R18, "small": CIFAR_SMALL}
RESULT_DIRS = {"r18": "quality_r18", "small": "quality"}
CIFAR = CIFAR_R18
QUICK = dict(CIFAR_SMALL, encoder={"name": "small_convnet", "width": 8}, batch_size=128, epochs=1,
             data={"name": "digits", "test_fraction": 0.2},
             moco={"queue_size": 512, "momentum": 0.99})
QUICK_SAMPLERS = {"uniform": SAMPLERS["uniform"],
                  "batchsampler": dict(SAMPLERS["batchsampler"], num_candidates=200,
                                       num_neighbors=50, refresh_every=5)}


def grid(quick=False, which="full", seeds=SEEDS, budget="r18"):
    """``[(run_id, recipe or None for the random-init baseline)]`` in run order."""
    base = QUICK if quick else BUDGETS[budget]
    samplers = QUICK_SAMPLERS if quick else SAMPLERS
    runs = []
    for seed in seeds:
        runs.append((f"random_init-s{seed}", dict(base, seed=seed, name=f"random_init-s{seed}")))
        for sampler in ("uniform", "batchsampler"):
            if which == "reduced" and sampler != "uniform":
                continue
            for key, loss in SIMCLR_LOSSES.items():
                if quick and sampler != "uniform" and key not in ("nt_xent", "hard_b1"):
                    continue  # the smoke run exercises the sampler path twice only
                rid = f"simclr-{key}-{sampler}-s{seed}"
                runs.append((rid, dict(base, name=rid, framework="simclr", loss=loss,
                                       sampler=samplers[sampler], seed=seed)))
        for key, loss in MOCO_LOSSES.items():
            if which == "reduced" and key != "nt_xent":
                continue
            rid = f"moco_v2-{key}-uniform-s{seed}"
            runs.append((rid, dict(base, name=rid, framework="moco_v2", loss=loss,
                                   sampler=samplers["uniform"], seed=seed)))
    return runs


# --------------------------------------------------------------- one run
def cosine_histograms(features, labels, bins=80, limit=2000, seed=0):
    """Fig.-5-style histograms: cosine of every test pair, same label vs different label."""
    if len(features) > limit:
        idx = np.random.default_rng(seed).permutation(len(features))[:limit]
        features, labels = features[idx], labels[idx]
    f = features / np.maximum(np.linalg.norm(features, axis=1, keepdims=True), 1e-12)
    cos = f @ f.T
    iu = np.triu_indices(len(f), k=1)
    c = cos[iu]
    same = (labels[:, None] == labels[None, :])[iu]
    edges = np.linspace(-1.0, 1.0, bins + 1)
    return {"edges": edges.tolist(),
            "same_label": np.histogram(c[same], edges)[0].tolist(),
            "different_label": np.histogram(c[~same], edges)[0].tolist(),
            "same_label_mean": float(c[same].mean()),
            "different_label_mean": float(c[~same].mean()),
            "gap": float(c[same].mean() - c[~same].mean()),
            "pairs": int(len(c))}


def _features(model, x, projection):
    from keras_hardneg import evaluation

    h = evaluation.extract_features(model.encoder, x)
    if not projection:
        return h
    import tensorflow as tf

    out = []
    for i in range(0, len(h), 512):
        z = model.projector(tf.constant(h[i:i + 512]), training=False)
        out.append(np.asarray(z))
    return np.concatenate(out)


def _histograms(model, test, seed):
    return {"encoder": cosine_histograms(_features(model, test[0], False), test[1], seed=seed),
            "projection": cosine_histograms(_features(model, test[0], True), test[1], seed=seed)}


def run_one(run_id, recipe, data, work_dir, verbose):
    import keras

    from keras_hardneg import run as runlib

    keras.backend.clear_session()
    recipe = runlib.load_recipe(recipe)
    train, test, desc = data
    start = time.perf_counter()
    out = {"run_id": run_id, "recipe": recipe, "data": desc}
    if run_id.startswith("random_init"):
        keras.utils.set_random_seed(recipe["seed"])
        model = runlib.build_model(recipe, train[0].shape[1:], num_examples=len(train[0]))
        ev = recipe["evaluation"]
        out.update(runlib.evaluate_encoder(model.encoder, train, test, k=ev["knn_k"],
                                             temperature=ev["knn_temperature"]))
        out["cosine_histograms"] = _histograms(model, test, recipe["seed"])
        out["seconds"] = time.perf_counter() - start
        return out

    holder = {}

    class Hist(keras.callbacks.Callback):
        def on_train_end(self, logs=None):
            holder["model"] = self.model

    res = runlib.train(recipe, os.path.join(work_dir, run_id), resume=True, verbose=verbose,
                       export=False, extra_callbacks=[Hist()], data=data)
    hist = res["history"]
    steps = res.get("steps_per_epoch")
    epoch_s = hist.get("epoch_seconds", [])
    out.update(
        knn_accuracy=res["knn_accuracy"],
        linear_probe_accuracy=res.get("linear_probe_accuracy"),
        history=hist,
        train_seconds=res["seconds"],
        epochs_run=res["epochs_run"],
        # A resumed run restores its first epochs: train_seconds covers only the rest.
        epochs_trained_now=res.get("epochs_trained_now"),
        steps_per_epoch=steps,
        median_epoch_seconds=float(np.median(epoch_s)) if epoch_s else None,
        median_step_seconds=(float(np.median(epoch_s)) / steps) if epoch_s and steps else None,
        images_per_second=res.get("images_per_second"),
        final_clamp_fraction=hist["clamp_fraction"][-1] if "clamp_fraction" in hist else None,
        mean_false_negative_rate=(float(np.mean(hist["false_negative_rate"]))
                                  if "false_negative_rate" in hist else None),
    )
    if "model" in holder:
        out["cosine_histograms"] = _histograms(holder["model"], test, recipe["seed"])
    out["seconds"] = time.perf_counter() - start
    return out


def _write_json(path, obj):
    from keras_hardneg._io import atomic_write_json

    os.makedirs(os.path.dirname(path), exist_ok=True)
    atomic_write_json(path, obj, indent=1, default=float)


_DATA_CACHE = {}


def load_data_for(recipe):
    from keras_hardneg import run as runlib

    key = json.dumps(recipe["data"], sort_keys=True) + str(
        recipe["seed"] if recipe["data"]["name"] == "digits" else "")
    if key not in _DATA_CACHE:
        t = time.perf_counter()
        _DATA_CACHE[key] = runlib.load_data(runlib.load_recipe(recipe))
        print(f"[data] {_DATA_CACHE[key][2]}: {len(_DATA_CACHE[key][0][0])} train / "
              f"{len(_DATA_CACHE[key][1][0])} test in {time.perf_counter() - t:.0f}s", flush=True)
    return _DATA_CACHE[key]


def _lock(work_dir, rid):
    """Claims a run for this process (several workers may share a grid)."""
    os.makedirs(work_dir, exist_ok=True)
    path = os.path.join(work_dir, f"{rid}.lock")
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        try:
            with open(path) as f:
                pid = int(f.read().strip() or 0)
            os.kill(pid, 0)
            return False  # its owner is alive
        except (ValueError, ProcessLookupError, PermissionError, OSError):
            os.replace(path, path + ".stale")  # owner gone: take it over
            return _lock(work_dir, rid)
    with os.fdopen(fd, "w") as f:
        f.write(str(os.getpid()))
    return True


def _unlock(work_dir, rid):
    try:
        os.remove(os.path.join(work_dir, f"{rid}.lock"))
    except OSError:
        pass


def run_quality(args, results_dir, work_dir):
    runs = grid(args.quick, args.grid, tuple(int(s) for s in args.seeds.split(",")),
                args.budget)
    if args.only:
        wanted = set(args.only.split(","))
        runs = [r for r in runs if r[0] in wanted]
    if args.reverse:
        runs = runs[::-1]
    failures = []
    for i, (rid, recipe) in enumerate(runs, 1):
        path = os.path.join(results_dir, f"{rid}.json")
        if os.path.exists(path):
            print(f"[{i}/{len(runs)}] {rid}: done, skipped", flush=True)
            continue
        if not _lock(work_dir, rid):
            print(f"[{i}/{len(runs)}] {rid}: another worker is running it, skipped", flush=True)
            continue
        print(f"[{i}/{len(runs)}] {rid}: running", flush=True)
        t = time.perf_counter()
        try:
            out = run_one(rid, recipe, load_data_for(recipe), work_dir, args.verbose)
        except Exception as e:  # record and go on with the grid
            traceback.print_exc()
            failures.append((rid, repr(e)))
            _write_json(os.path.join(results_dir, "failed", f"{rid}.json"),
                        {"run_id": rid, "error": repr(e), "traceback": traceback.format_exc()})
            continue
        out["command"] = args.command
        _write_json(path, out)
        _unlock(work_dir, rid)
        print(f"[{i}/{len(runs)}] {rid}: kNN {out['knn_accuracy']:.4f} linear "
              f"{out.get('linear_probe_accuracy') or float('nan'):.4f} "
              f"in {time.perf_counter() - t:.0f}s", flush=True)
    return failures


def run_loss_overhead(args, results_root):
    path = os.path.join(results_root, "loss_overhead.json")
    if os.path.exists(path) and not args.force:
        print(f"[loss_overhead] {path} exists, skipped (--force to redo)", flush=True)
        return []
    cmd = [sys.executable, os.path.join(HERE, "loss_overhead.py"), "--output", path]
    if args.quick:
        cmd += ["--quick", "--queue-sizes", "4096", "--batch", "64"]
    print("[loss_overhead] " + " ".join(cmd), flush=True)
    rc = subprocess.call(cmd, cwd=REPO)
    return [] if rc == 0 else [("loss_overhead", f"exit code {rc}")]


def main(argv=None):
    p = argparse.ArgumentParser(description="Rerun all keras-hardneg benchmarks (resumable).")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: digits, tiny encoder, 1 epoch; results under results/quick/")
    p.add_argument("--suites", default="loss_overhead,quality")
    p.add_argument("--grid", default="full", choices=["full", "reduced"],
                   help="reduced = SimCLR uniform losses + MoCo v2 NT-Xent (+ random init)")
    p.add_argument("--budget", default="r18", choices=sorted(BUDGETS),
                   help="r18: ResNet-18 w16, ~10 min per run (default); small: session 1's "
                        "small convnet, ~2 min per run")
    p.add_argument("--seeds", default=None,
                   help=f"comma-separated (default {','.join(map(str, SEEDS))}; --quick: 0)")
    p.add_argument("--only", default="", help="comma-separated run ids")
    p.add_argument("--reverse", action="store_true",
                   help="walk the grid backwards (start a second worker with it)")
    p.add_argument("--force", action="store_true", help="redo loss_overhead even if present")
    p.add_argument("--report", action="store_true", help="only write plots and tables")
    p.add_argument("--list", action="store_true", help="list run ids and their status")
    p.add_argument("--verbose", type=int, default=2)
    args = p.parse_args(argv)
    if args.seeds is None:
        args.seeds = "0" if args.quick else ",".join(map(str, SEEDS))
    args.command = "python3 benchmarks/run_all.py " + " ".join(
        sys.argv[1:] if argv is None else argv)
    results_root = os.path.join(HERE, "results", "quick") if args.quick else \
        os.path.join(HERE, "results")
    quality_dir = os.path.join(results_root,
                               "quality" if args.quick else RESULT_DIRS[args.budget])
    prefix = "quality" if args.quick or args.budget == "small" else RESULT_DIRS[args.budget]
    work_dir = os.path.join(HERE, "work", "quick" if args.quick else
                            "full" if args.budget == "small" else args.budget)
    if args.list:
        for rid, _ in grid(args.quick, args.grid, tuple(int(s) for s in args.seeds.split(",")),
                           args.budget):
            done = os.path.exists(os.path.join(quality_dir, f"{rid}.json"))
            print(f"{'done   ' if done else 'pending'} {rid}")
        return 0
    import report

    if args.report:
        report.write(quality_dir, args.quick, prefix)
        return 0
    suites = args.suites.split(",")
    failures = []
    start = time.perf_counter()
    if "loss_overhead" in suites:
        failures += run_loss_overhead(args, results_root)
    if "quality" in suites:
        failures += run_quality(args, quality_dir, work_dir)
        report.write(quality_dir, args.quick, prefix)
    print(f"all done in {time.perf_counter() - start:.0f}s; failures: {failures or 'none'}",
          flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
