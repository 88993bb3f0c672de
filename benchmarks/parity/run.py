"""Recipe parity with lightly, side by side on one CPU (issue 32): the driver.

``grid`` runs cells -- one training run each, one thread pinned to one core, ``--jobs`` at
once -- and keeps each finished cell as ``benchmarks/results/parity/CELL.json`` (a cell that
has its file is not run again). ``report`` prints the table and, with ``--write``, writes it
and the curves into docs/benchmarks/parity.md (between the parity markers) and
``docs/img/parity_knn.png``.

A cell is ``lightly:VIEWS:sSEED`` (``benchmarks/parity/lightly_side.py`` in the peers'
virtualenv, VIEWS ``separate`` or ``joint``) or ``keras:BACKEND:VARIANT:sSEED``
(``benchmarks/parity/keras_side.py``; VARIANT from its ``VARIANTS``). Both sides train on
the arrays of ``benchmarks/parity/data.py`` and are scored by the same function
(:func:`keras_hardneg.evaluation.weighted_knn_accuracy`, k 200, t 0.1, bank = the 10k
training images, queries = the 2k test images).

    python benchmarks/parity/data.py --out benchmarks/results/tmp/parity/cifar10_10k_2k.npz
    python benchmarks/parity/run.py grid --peer-python PEER/bin/python \\
        lightly:separate:s0 keras:tensorflow:recipe:s0 ...
    python benchmarks/parity/run.py report --write

A Keras cell resumes from its backup (``benchmarks/results/tmp/parity/backups/CELL``), but a
session starts on a fresh checkout where that ignored folder is gone; to carry a running cell
into the next session, ``python benchmarks/parity/run.py park CELL ...`` stages its last
committed epoch (~7 MB for a width-16 ResNet-18) for a commit, and the same ``grid`` command
resumes it there (commit the deletion when the cell finishes).
"""

import argparse
import glob
import json
import os
import platform
import queue
import shutil
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RESULTS = os.path.join(ROOT, "benchmarks", "results", "parity")
TMP = os.path.join(ROOT, "benchmarks", "results", "tmp", "parity")
DATA = os.path.join(TMP, "cifar10_10k_2k.npz")
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1",
              "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1",
              "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"}


def parse_cell(cell: str) -> dict:
    parts = cell.split(":")
    if parts[0] == "lightly" and len(parts) == 3 and parts[1] in ("separate", "joint"):
        return {"side": "lightly", "views": parts[1], "seed": int(parts[2].lstrip("s"))}
    if parts[0] == "keras" and len(parts) == 4 and parts[1] in ("tensorflow", "jax"):
        return {"side": "keras", "backend": parts[1], "variant": parts[2],
                "seed": int(parts[3].lstrip("s"))}
    raise SystemExit(f"cell {cell!r}: expected lightly:separate|joint:sSEED or "
                     "keras:tensorflow|jax:VARIANT:sSEED")


def cell_path(cell: str, results: str = RESULTS) -> str:
    return os.path.join(results, cell.replace(":", "-") + ".json")


def _score_lightly(out_dir: str, data: str) -> dict:
    """kNN of the lightly side's saved features, by the function the Keras side uses."""
    import numpy as np

    sys.path.insert(0, ROOT)
    from keras_hardneg.evaluation import weighted_knn_accuracy

    with np.load(data) as f:
        y_train, y_test = f["y_train"], f["y_test"]
    with open(os.path.join(out_dir, "log.json")) as f:
        log = json.load(f)
    log.setdefault("knn", {})
    for epoch in log["eval_epochs"]:
        if str(epoch) in log["knn"]:
            continue
        path = os.path.join(out_dir, f"features_e{epoch}.npz")
        with np.load(path) as f:
            log["knn"][str(epoch)] = float(weighted_knn_accuracy(
                f["train"], y_train, f["test"], y_test, k=200, temperature=0.1))
        os.remove(path)
    return log


def _finish(cell: str, result: dict, results: str) -> str:
    os.makedirs(results, exist_ok=True)
    path = cell_path(cell, results)
    with open(path + ".part", "w") as f:
        json.dump(result, f, indent=1)
    os.replace(path + ".part", path)
    last = max(result["knn"], key=int)
    return f"{cell}: kNN {result['knn'][last]:.4f} at epoch {last}"


def score(args) -> None:
    """Score a lightly cell whose training finished outside the driver (its run folder)."""
    for cell in args.cells:
        if parse_cell(cell)["side"] != "lightly":
            raise SystemExit(f"{cell}: only lightly cells are scored from a run folder")
        out_dir = os.path.join(TMP, "runs", cell.replace(":", "-"))
        result = _score_lightly(out_dir, args.data)
        result.update(cell=cell, machine=platform.platform(), command=args.command_line)
        print(_finish(cell, result, args.results), flush=True)


def salvage(args) -> None:
    """A Keras cell stopped before its last epoch (killed to free its core): its curve so far,
    read from the per-epoch lines of its log, kept as a result marked ``partial``."""
    import re

    line = re.compile(r"^epoch (\d+): loss ([\d.]+), ([\d.]+) s(?: \(cpu ([\d.]+) s\))?"
                      r"(?:, kNN ([\d.]+))?$")
    for cell, log_path in zip(args.cells[::2], args.cells[1::2]):
        if parse_cell(cell)["side"] != "keras":
            raise SystemExit(f"{cell}: only Keras cells are salvaged from a log")
        result = {**parse_cell(cell), "side": "keras-hardneg", "partial": True, "loss": [],
                  "epoch_seconds": [], "epoch_cpu_seconds": [], "knn": {},
                  "log": os.path.relpath(log_path, ROOT)}
        with open(log_path) as f:
            for m in filter(None, map(line.match, f.read().splitlines())):
                result["loss"].append(float(m.group(2)))
                result["epoch_seconds"].append(float(m.group(3)))
                if m.group(4):
                    result["epoch_cpu_seconds"].append(float(m.group(4)))
                if m.group(5):
                    result["knn"][m.group(1)] = float(m.group(5))
        result["stopped_at_epoch"] = len(result["loss"])
        result.update(cell=cell, machine=platform.platform(), command=args.command_line)
        print(_finish(cell, result, args.results), flush=True)


def park(args) -> None:
    """Keep running Keras cells' resume state across sessions. A session starts on a fresh
    checkout, where the ignored ``benchmarks/results/tmp`` is gone: this force-adds to git each
    cell's last committed epoch (``training_metadata.json`` and the weights and state it
    names), its curve (``CELL.log.json``) and its log. Commit them; the next session's
    ``grid`` resumes from them, and a finished cell deletes them (commit the deletion)."""
    for cell in args.cells:
        if parse_cell(cell)["side"] != "keras":
            raise SystemExit(f"{cell}: only Keras cells have a backup to park")
        name = cell.replace(":", "-")
        backup = os.path.join(TMP, "backups", name)
        meta_path = os.path.join(backup, "training_metadata.json")
        for _ in range(3):  # an epoch committed while adding: add again
            try:
                with open(meta_path) as f:
                    meta = json.load(f)
            except FileNotFoundError:
                raise SystemExit(f"{cell}: no committed epoch in {backup}") from None
            files = [meta_path] + [os.path.join(backup, meta[k]) for k in ("weights", "state")
                                   if meta.get(k)]
            files += [p for p in (backup + ".log.json", os.path.join(TMP, "logs", name + ".log"))
                      if os.path.isfile(p)]
            subprocess.check_call(["git", "add", "-f", "--", *files], cwd=ROOT)
            staged = json.loads(subprocess.check_output(
                ["git", "show", ":" + os.path.relpath(meta_path, ROOT)], cwd=ROOT))
            if staged == meta:
                break
        else:
            raise SystemExit(f"{cell}: its backup kept changing; park it again")
        print(f"{cell}: parked at epoch {meta['epoch']} ({len(files)} files staged)", flush=True)


def run_cell(cell: str, core: int, args) -> str:
    spec = parse_cell(cell)
    log_path = os.path.join(TMP, "logs", cell.replace(":", "-") + ".log")
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    env = {**os.environ, **ONE_THREAD}
    common = ["--data", args.data, "--seed", str(spec["seed"]), "--epochs", str(args.epochs)]
    if spec["side"] == "lightly":
        out_dir = os.path.join(TMP, "runs", cell.replace(":", "-"))
        cmd = [args.peer_python, os.path.join(HERE, "lightly_side.py"), *common,
               "--out", out_dir, "--views", spec["views"], "--resume"]
    else:
        env["KERAS_BACKEND"] = spec["backend"]
        backup = os.path.join(TMP, "backups", cell.replace(":", "-"))
        cmd = [sys.executable, os.path.join(HERE, "keras_side.py"), *common,
               "--variant", spec["variant"], "--out", cell_path(cell, args.results) + ".run",
               "--backup", backup]
    t0 = time.time()
    with open(log_path, "a") as log:  # a resumed cell's log goes on where it stopped
        rc = subprocess.call(["taskset", "-c", str(core), *cmd], stdout=log,
                             stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    if rc:
        return f"{cell}: FAILED rc {rc} (log {log_path})"
    if spec["side"] == "lightly":
        result = _score_lightly(out_dir, args.data)
    else:
        with open(cell_path(cell, args.results) + ".run") as f:
            result = json.load(f)
        os.remove(cell_path(cell, args.results) + ".run")
        shutil.rmtree(backup, ignore_errors=True)
        shutil.rmtree(backup + ".views", ignore_errors=True)  # lightly_views_fed's feed
        if os.path.exists(backup + ".log.json"):
            os.remove(backup + ".log.json")
    result.update(cell=cell, wall_seconds=time.time() - t0, core=core,
                  machine=platform.platform(), command=" ".join(cmd))
    return _finish(cell, result, args.results)


def _complete(cell: str, results: str) -> bool:
    """A cell with a full result; a salvaged ``partial`` one is run again (and replaced)."""
    try:
        with open(cell_path(cell, results)) as f:
            return not json.load(f).get("partial")
    except FileNotFoundError:
        return False


def grid(args) -> None:
    todo = queue.Queue()
    for cell in args.cells:
        parse_cell(cell)
        if _complete(cell, args.results):
            print(f"{cell}: done already", flush=True)
        else:
            todo.put(cell)

    def worker(core: int) -> None:
        while True:
            try:
                cell = todo.get_nowait()
            except queue.Empty:
                return
            print(f"{time.strftime('%H:%M:%S')} {cell}: start on core {core}", flush=True)
            done = run_cell(cell, core, args)
            print(f"{time.strftime('%H:%M:%S')} {done}", flush=True)

    threads = [threading.Thread(target=worker, args=(core,)) for core in args.cores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def load_results() -> dict:
    out = {}
    for path in sorted(glob.glob(os.path.join(RESULTS, "*.json"))):
        with open(path) as f:
            r = json.load(f)
        out[r["cell"]] = r
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("grid", help="run cells")
    g.add_argument("cells", nargs="+")
    g.add_argument("--peer-python", default=os.path.join(ROOT, "..", "peer-venv", "bin",
                                                         "python"))
    g.add_argument("--data", default=DATA)
    g.add_argument("--results", default=RESULTS, help="folder of the cells' JSON files")
    g.add_argument("--epochs", type=int, default=30)
    g.add_argument("--cores", type=lambda s: [int(c) for c in s.split(",")], default=[0, 1])
    s = sub.add_parser("score", help="score lightly cells trained outside the driver")
    s.add_argument("cells", nargs="+")
    s.add_argument("--data", default=DATA)
    s.add_argument("--results", default=RESULTS)
    s.add_argument("--command-line", default="", help="the training command, for the record")
    k = sub.add_parser("park", help="stage running Keras cells' resume state for a commit")
    k.add_argument("cells", nargs="+")
    v = sub.add_parser("salvage", help="keep the curve of a stopped Keras cell from its log")
    v.add_argument("cells", nargs="+", help="CELL LOG [CELL LOG ...]")
    v.add_argument("--results", default=RESULTS)
    v.add_argument("--command-line", default="")
    r = sub.add_parser("report", help="table (and docs with --write)")
    r.add_argument("--write", action="store_true")
    args = p.parse_args()
    if args.command == "grid":
        grid(args)
    elif args.command == "score":
        score(args)
    elif args.command == "park":
        park(args)
    elif args.command == "salvage":
        salvage(args)
    else:
        from report import report  # benchmarks/parity/report.py

        report(load_results(), write=args.write)


if __name__ == "__main__":
    main()
