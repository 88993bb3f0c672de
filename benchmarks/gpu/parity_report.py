"""Table and figure of a full-scale parity call (``benchmarks/gpu/parity_call.sh``): the kNN of
KNNMonitor's seeded subset (10k bank / 2k test queries) every 10 epochs for each run, and each
run's final kNN with the 50k bank on the 10k test, for docs/benchmarks/parity.md::

    python benchmarks/gpu/parity_report.py benchmarks/results/gpu/h200-2026-11-27-parity \\
        --out docs/img/gpu_parity_knn.png

Reads ``CALL/out_{recipe,all_lightly}/simclr-ntxent-cifar10.{epochs.jsonl,run.json}`` and
``CALL/lightly.log.json`` under each ``call*`` folder.
"""

import argparse
import glob
import json
import os


def _ours(folder):
    runs = {}
    for name in ("recipe", "all_lightly"):
        base = os.path.join(folder, f"out_{name}", "simclr-ntxent-cifar10")
        if not os.path.isfile(base + ".run.json"):
            continue
        run = json.load(open(base + ".run.json"))
        rows = [json.loads(line) for line in open(base + ".epochs.jsonl") if line.strip()]
        runs[f"ours {name}"] = {
            "seed": run["recipe"]["seed"], "epochs": run["recipe"]["epochs"],
            "epochs_run": run["epochs_run"],
            "monitor": {r["epoch"]: r["knn_monitor"] for r in rows
                        if r.get("knn_monitor") is not None},
            "final": run["gpu_knn_accuracy_full_bank_test_pack"],
            "epoch_seconds": sorted(r["epoch_seconds"] for r in rows)[len(rows) // 2]}
    return runs


def _lightly(folder):
    path = os.path.join(folder, "lightly.log.json")
    if not os.path.isfile(path):
        return {}
    log = json.load(open(path))
    last = max(int(e) for e in log["knn"])
    return {"lightly": {
        "seed": log["seed"], "epochs": log["epochs"], "epochs_run": len(log["loss"]),
        "monitor": {int(e): v for e, v in log["knn_monitor"].items()},
        "final": log["knn"][str(last)] if last == log["epochs"] else None,
        "full_bank": {int(e): v for e, v in log["knn"].items()},
        "epoch_seconds": sorted(log["epoch_seconds"])[len(log["epoch_seconds"]) // 2]}}


def collect(root):
    """``[(call, {run: summary})]`` for each ``call*`` folder under ``root``."""
    return [(os.path.basename(c), {**_ours(c), **_lightly(c)})
            for c in sorted(glob.glob(os.path.join(root, "call*")))]


def table(calls) -> str:
    checkpoints = sorted({e for _, runs in calls for r in runs.values() for e in r["monitor"]
                          if e % 10 == 0})
    head = ("| call | run | seed | schedule (epochs) | run to | "
            + " | ".join(f"kNN@{e}" for e in checkpoints)
            + " | final kNN, 50k bank / 10k test | median epoch s |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for call, runs in calls:
        for name, r in runs.items():
            cells = [f"{r['monitor'][e]:.4f}" if e in r["monitor"] else "" for e in checkpoints]
            final = "" if r["final"] is None else f"{r['final']:.4f}"
            if r["epochs_run"] < r["epochs"] and r["final"] is not None:
                final += f" (at {r['epochs_run']})"
            lines.append(f"| {call} | {name} | {r['seed']} | {r['epochs']} | {r['epochs_run']} | "
                         + " | ".join(cells) + f" | {final} | {r['epoch_seconds']:.1f} |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("root", help="results folder holding call*/ folders")
    p.add_argument("--out", help="PNG to write")
    a = p.parse_args(argv)
    calls = collect(a.root)
    print(table(calls))
    if a.out:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4.2))
        styles = {"ours recipe": "C0", "ours all_lightly": "C1", "lightly": "C2"}
        for call, runs in calls:
            for name, r in runs.items():
                xs = sorted(r["monitor"])
                ax.plot(xs, [r["monitor"][x] for x in xs], marker="o", color=styles[name],
                        linestyle="-" if r["seed"] == 0 else "--",
                        label=f"{name}, seed {r['seed']}, {r['epochs']}-epoch schedule")
        ax.set_xlabel("epoch")
        ax.set_ylabel("kNN accuracy (10k bank, 2k test subset)")
        ax.set_title("SimCLR ResNet-18 on 50k CIFAR-10 JPEGs, batch 512, one H200")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(a.out, dpi=110)
        print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
