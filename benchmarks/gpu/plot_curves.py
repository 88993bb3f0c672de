"""Per-epoch kNN monitor and loss of GPU zoo runs (``zoo_train.py``'s ``epochs.jsonl``) as one
figure, for docs/benchmarks/zoo_training.md::

    python benchmarks/gpu/plot_curves.py benchmarks/results/gpu/h200-2026-11-26/*.epochs.jsonl \\
        --out docs/img/gpu_knn_curves.png
"""

import argparse
import json
import os
import sys


def read(path):
    rows = []
    with open(path) as f:
        for line in f:
            if line.strip():
                rows.append(json.loads(line))
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("logs", nargs="+", help="ENTRY.epochs.jsonl files")
    p.add_argument("--out", required=True, help="PNG to write")
    a = p.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_knn, ax_loss) = plt.subplots(1, 2, figsize=(10, 3.8))
    for path in a.logs:
        name = os.path.basename(path).split(".")[0]
        rows = read(path)
        knn = [(r["epoch"], r["knn_monitor"]) for r in rows if r.get("knn_monitor") is not None]
        ax_knn.plot(*zip(*knn), marker="o", label=name)
        ax_loss.plot([r["epoch"] for r in rows], [r["loss"] for r in rows], label=name)
    ax_knn.set(xlabel="epoch", ylabel="kNN monitor accuracy",
               title="kNN (k 200, t 0.1; 10k train bank, 2,000 test)")
    ax_loss.set(xlabel="epoch", ylabel="training loss", title="loss (each its own loss)")
    for ax in (ax_knn, ax_loss):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
