"""What the run report costs training (issue 50): time per epoch with ``train(report=True)``
against ``train(report=False)``, and what the page costs at the end.

One process, the same recipe trained in turn with the report off and on (A B A B ..., the
order of each pair alternating), so that the machine's drift hits both alike. The time of an
epoch is the wall time between the starts of two successive epochs as the *last* callback
sees them (the last epoch: to the end of training): every callback's work is in it (the kNN
monitor, the backup, the probe). The first epoch of each run (which traces the compiled
functions) is left out. Reported: the median epoch time of each run, the ratio on/off of each
pair, the median of the ratios, and from the runs with the report: the probe's own seconds an
epoch (timed inside the callback; ``direct_fraction`` is that over the epoch time without the
report, a measure that the machine's noise moves less than the ratio of two noisy totals;
``direct_cpu_fraction`` the same in CPU seconds of the whole process, steadier still),
the first scoring's (which compiles the probe) and the page's bytes.

Usage::

    python3 benchmarks/report_overhead.py                          # digits, 10 epochs, 5 pairs
    python3 benchmarks/report_overhead.py --dataset ../shared/data/cifar10-jpg \\
        --limit-per-class 100 --image-size 32 --pairs 3 --epochs 6

Writes ``benchmarks/results/report_overhead[_NAME].json`` (``--output``).
"""

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)


def _epoch_times(recipe, report, root, index):
    import keras

    from keras_hardneg import run

    marks, cpu = [], []

    class Clock(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            marks.append(time.perf_counter())
            cpu.append(time.process_time())

        def on_train_end(self, logs=None):
            marks.append(time.perf_counter())
            cpu.append(time.process_time())

    out = os.path.join(root, f"run{index}-{'on' if report else 'off'}")
    result = run.train(recipe, out, resume=False, verbose=0, export=False, report=report,
                       extra_callbacks=[Clock()])
    epochs = [b - a for a, b in zip(marks[:-1], marks[1:])][1:]  # the first epoch left out
    epochs_cpu = [b - a for a, b in zip(cpu[:-1], cpu[1:])][1:]
    info = {"epoch_seconds": epochs, "median": statistics.median(epochs),
            "epoch_cpu_seconds": epochs_cpu, "median_cpu": statistics.median(epochs_cpu),
            "fit_seconds": result["seconds"]}
    if report:
        probe = json.load(open(os.path.join(out, "probe.json")))
        info["probe_seconds"] = probe["seconds"]
        info["probe_scorings"] = len(probe["records"])
        # each epoch's scoring (the first, at the start, compiles the probe)
        info["probe_epoch_seconds"] = [r["seconds"] for r in probe["records"][1:]]
        info["probe_compile_seconds"] = probe["records"][0]["seconds"]
        info["probe_epoch_cpu_seconds"] = [r["cpu_seconds"] for r in probe["records"][1:]]
        info["report_bytes"] = os.path.getsize(os.path.join(out, "report.html"))
        info["knn"] = result.get("knn_accuracy")
    shutil.rmtree(out, ignore_errors=True)
    return info


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--limit-per-class", type=int)
    parser.add_argument("--image-size", type=int)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--output")
    args = parser.parse_args(argv)

    from keras_hardneg import run
    from keras_hardneg.data import dataset_spec

    overrides = {"epochs": args.epochs}
    if args.dataset != "digits":
        overrides["data"] = dataset_spec(args.dataset, image_size=args.image_size,
                                         limit_per_class=args.limit_per_class)
    if args.batch_size:
        overrides["batch_size"] = args.batch_size
    recipe = run.load_recipe({}, overrides)
    root = tempfile.mkdtemp(prefix="khn-report-bench-")
    pairs = []
    try:
        _epoch_times(recipe, False, root, -1)  # warm-up: imports, data cache
        for i in range(args.pairs):
            order = (False, True) if i % 2 == 0 else (True, False)
            runs = {flag: _epoch_times(recipe, flag, root, i) for flag in order}
            ratio = runs[True]["median"] / runs[False]["median"]
            pairs.append({"off": runs[False], "on": runs[True], "ratio": ratio,
                          "order": ["on" if f else "off" for f in order]})
            probe_ms = 1000 * statistics.median(runs[True]["probe_epoch_seconds"])
            print(f"pair {i}: off {runs[False]['median'] * 1000:.1f} ms/epoch, on "
                  f"{runs[True]['median'] * 1000:.1f} ms/epoch, ratio {ratio:.4f}; probe "
                  f"{probe_ms:.1f} ms an epoch", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    ratios = [p["ratio"] for p in pairs]

    def balanced(key):
        """Geometric mean of the pairs' on/off ratios and its standard error (in log
        units): the orders alternate, so the first-run-of-a-pair effect cancels."""
        logs = [math.log(p["on"][key] / p["off"][key]) for p in pairs]
        err = statistics.stdev(logs) / math.sqrt(len(logs)) if len(logs) > 1 else None
        return math.exp(statistics.mean(logs)), err
    on = [p["on"] for p in pairs]
    summary = {
        "dataset": args.dataset, "limit_per_class": args.limit_per_class,
        "image_size": args.image_size, "epochs": args.epochs,
        "batch_size": recipe["batch_size"], "pairs": pairs,
        "geomean_ratio": balanced("median")[0], "geomean_ratio_log_se": balanced("median")[1],
        "geomean_cpu_ratio": balanced("median_cpu")[0],
        "geomean_cpu_ratio_log_se": balanced("median_cpu")[1],
        "median_ratio": statistics.median(ratios), "min_ratio": min(ratios),
        "max_ratio": max(ratios),
        "median_epoch_ms_off": 1000 * statistics.median(p["off"]["median"] for p in pairs),
        "median_epoch_ms_on": 1000 * statistics.median(p["on"]["median"] for p in pairs),
        "probe_ms_per_epoch": 1000 * statistics.median(
            statistics.median(r["probe_epoch_seconds"]) for r in on),
        "probe_compile_s": statistics.median(r["probe_compile_seconds"] for r in on),
        # the probe's own time an epoch over the epoch's time without it, run by run
        "direct_fraction": statistics.median(
            statistics.median(p["on"]["probe_epoch_seconds"]) / p["off"]["median"]
            for p in pairs),
        # the same in CPU seconds (every thread of the process): what the probe takes from
        # the machine over what an epoch takes, steadier than wall time on a busy machine
        "probe_cpu_ms_per_epoch": 1000 * statistics.median(
            statistics.median(r["probe_epoch_cpu_seconds"]) for r in on),
        "median_epoch_cpu_ms_off": 1000 * statistics.median(p["off"]["median_cpu"]
                                                            for p in pairs),
        "median_cpu_ratio": statistics.median(p["on"]["median_cpu"] / p["off"]["median_cpu"]
                                              for p in pairs),
        "direct_cpu_fraction": statistics.median(
            statistics.median(p["on"]["probe_epoch_cpu_seconds"]) / p["off"]["median_cpu"]
            for p in pairs),
        "report_kb": statistics.median(r["report_bytes"] for r in on) / 1024,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "keras_backend": __import__("keras").backend.backend(),
        "command": " ".join([os.path.basename(sys.argv[0])] + list(argv or sys.argv[1:])),
    }
    print(json.dumps({k: v for k, v in summary.items() if k != "pairs"}, indent=1))
    name = "" if args.dataset == "digits" else "_" + os.path.basename(
        os.path.normpath(args.dataset)).replace(":", "_")
    path = args.output or os.path.join(HERE, "results", f"report_overhead{name}.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(summary, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
