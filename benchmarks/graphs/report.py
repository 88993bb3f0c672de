"""Tables and plots of the graph grid (``benchmarks/graphs/tu_grid.py``) from
``benchmarks/results/graphs/*.json``: markdown on stdout, plots into ``docs/img/``.

Usage::

    python benchmarks/graphs/report.py > /tmp/graphs.md
"""

from __future__ import annotations

import glob
import json
import os
from collections import defaultdict

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
RESULTS = os.path.join(REPO, "benchmarks", "results", "graphs")
IMG = os.path.join(REPO, "docs", "img")

DATASETS = ("MUTAG", "PTC_MR", "PROTEINS", "ENZYMES", "NCI1", "IMDB-BINARY", "IMDB-MULTI")
SHORT = {"IMDB-BINARY": "IMDB-B", "IMDB-MULTI": "IMDB-M", "PTC_MR": "PTC"}

# BatchSampler (Yang et al. 2023), Table 3: GraphCL with InfoNCE / DCL / HCL, uniform
# batches and with BatchSampler, 10-fold SVM accuracy (x100).
PAPER = {
    ("nt_xent", "uniform"): {"IMDB-BINARY": 70.90, "IMDB-MULTI": 48.48, "PROTEINS": 74.39,
                             "MUTAG": 86.80, "NCI1": 77.87},
    ("nt_xent", "batchsampler"): {"IMDB-BINARY": 71.90, "IMDB-MULTI": 48.93, "PROTEINS": 75.04,
                                  "MUTAG": 87.78, "NCI1": 78.93},
    ("debiased", "uniform"): {"IMDB-BINARY": 71.07, "IMDB-MULTI": 48.93, "PROTEINS": 74.64,
                              "MUTAG": 88.09, "NCI1": 78.49},
    ("debiased", "batchsampler"): {"IMDB-BINARY": 71.32, "IMDB-MULTI": 48.96, "PROTEINS": 75.02,
                                   "MUTAG": 89.47, "NCI1": 79.03},
    ("hard", "uniform"): {"IMDB-BINARY": 71.24, "IMDB-MULTI": 48.54, "PROTEINS": 74.69,
                          "MUTAG": 87.79, "NCI1": 78.83},
    ("hard", "batchsampler"): {"IMDB-BINARY": 71.20, "IMDB-MULTI": 48.76, "PROTEINS": 75.11,
                               "MUTAG": 88.31, "NCI1": 79.17},
}


def load(results: str = RESULTS) -> dict:
    """(dataset, framework, loss, sampler) -> list of (seed, accuracy, seconds)."""
    out = defaultdict(list)
    for path in sorted(glob.glob(os.path.join(results, "*.json"))):
        with open(path) as f:
            r = json.load(f)
        d, framework, loss, sampler, seed = r["id"].split("__")
        out[(d, framework, loss, sampler)].append(
            (int(seed[1:]), 100 * r["svm_accuracy"], r["total_seconds"]))
    return out


def cell(runs) -> str:
    if not runs:
        return "-"
    acc = np.array([a for _, a, _ in runs])
    spread = f" ± {acc.std(ddof=1):.2f}" if len(acc) > 1 else ""
    return f"{acc.mean():.2f}{spread} ({len(acc)})"


def main_table(data) -> str:
    head = "| loss | batches | " + " | ".join(SHORT.get(d, d) for d in DATASETS) + " |"
    rows = [head, "|" + "---|" * (len(DATASETS) + 2)]
    for loss in ("nt_xent", "debiased", "hard"):
        for sampler in ("uniform", "batchsampler"):
            ours = [cell(data.get((d, "graphcl", loss, sampler), [])) for d in DATASETS]
            rows.append(f"| {loss} | {sampler} | " + " | ".join(ours) + " |")
            paper = PAPER[(loss, sampler)]
            rows.append(f"| *paper* | *{sampler}* | "
                        + " | ".join(f"*{paper[d]:.2f}*" if d in paper else "" for d in DATASETS)
                        + " |")
    return "\n".join(rows)


def sweep_table(data) -> str:
    sets = ("MUTAG", "PROTEINS", "IMDB-BINARY")
    rows = ["| framework | loss | " + " | ".join(SHORT.get(d, d) for d in sets) + " |",
            "|" + "---|" * (len(sets) + 2)]
    plan = [("graphcl", "debiased", "debiased (beta 0)"), ("graphcl", "hard", "hard beta 1"),
            ("graphcl", "hard_b2", "hard beta 2"), ("graphcl", "hard_b10", "hard beta 10"),
            ("graphcl", "ring", "Ring"), ("graphcl", "unremix", "UnReMix"),
            ("infograph", "nt_xent", "NT-Xent"), ("infograph", "debiased", "debiased"),
            ("infograph", "hard", "hard beta 1")]
    for framework, loss, label in plan:
        cells = [cell([r for r in data.get((d, framework, loss, "uniform"), []) if r[0] < 3])
                 for d in sets]
        rows.append(f"| {framework} | {label} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


STEPS_DATASETS = ("MUTAG", "PTC_MR", "ENZYMES", "PROTEINS", "IMDB-BINARY", "IMDB-MULTI")


def steps_table(data, floor) -> str:
    """Uniform batches at N // B steps an epoch (the runs in ``floor_steps/``, before the
    fix) next to the reruns at ceil(N / B) and BatchSampler (ceil(N / B) throughout)."""
    rows = ["| loss | batches | steps / epoch | "
            + " | ".join(SHORT.get(d, d) for d in STEPS_DATASETS) + " |",
            "|" + "---|" * (len(STEPS_DATASETS) + 3)]
    for loss in ("nt_xent", "debiased", "hard"):
        for label, source, sampler, steps in (
                ("uniform", floor, "uniform", "N // B (before)"),
                ("uniform", data, "uniform", "ceil(N / B)"),
                ("batchsampler", data, "batchsampler", "ceil(N / B)")):
            cells = [cell(source.get((d, "graphcl", loss, sampler), []))
                     for d in STEPS_DATASETS]
            rows.append(f"| {loss} | {label} | {steps} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def time_table(data) -> str:
    rows = ["| dataset | runs | mean seconds per run (train + SVM) |", "|---|---|---|"]
    for d in DATASETS:
        secs = [s for key, runs in data.items() if key[0] == d for _, _, s in runs]
        if secs:
            rows.append(f"| {SHORT.get(d, d)} | {len(secs)} | {np.mean(secs):.0f} |")
    return "\n".join(rows)


def plot(data) -> str:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(IMG, exist_ok=True)
    fig, axes = plt.subplots(1, len(DATASETS), figsize=(3.0 * len(DATASETS), 3.2))
    settings = [(loss, sampler) for loss in ("nt_xent", "debiased", "hard")
                for sampler in ("uniform", "batchsampler")]
    for ax, d in zip(axes, DATASETS):
        for i, (loss, sampler) in enumerate(settings):
            runs = data.get((d, "graphcl", loss, sampler), [])
            if runs:
                acc = np.array([a for _, a, _ in runs])
                ax.errorbar(i, acc.mean(), yerr=acc.std() if len(acc) > 1 else 0, fmt="o",
                            color="C0" if sampler == "uniform" else "C1")
            paper = PAPER[(loss, sampler)].get(d)
            if paper is not None:
                ax.plot(i, paper, "x", color="k")
        ax.set_xticks(range(len(settings)))
        ax.set_xticklabels([f"{loss[:4]}\n{'BS' if s == 'batchsampler' else 'U'}"
                            for loss, s in settings], fontsize=7)
        ax.set_title(SHORT.get(d, d), fontsize=9)
    axes[0].set_ylabel("10-fold SVM accuracy (%)")
    fig.suptitle("GraphCL on TU: ours (o: blue uniform, orange BatchSampler; bars = std over "
                 "seeds) vs BatchSampler paper (x)", fontsize=9)
    fig.tight_layout()
    path = os.path.join(IMG, "graphs_graphcl.png")
    fig.savefig(path, dpi=110)
    return os.path.relpath(path, os.path.join(REPO, "docs"))


def main() -> None:
    data = load()
    print("### GraphCL: losses x batches (mean ± std over seeds (n), x100)\n")
    print(main_table(data))
    print("\n### Hard-negative sweep, Ring, UnReMix and InfoGraph (seeds 0-2, uniform)\n")
    print(sweep_table(data))
    print("\n### Time per run\n")
    print(time_table(data))
    print(f"\n![GraphCL on TU]({plot(data)})")
    floor = load(os.path.join(RESULTS, "floor_steps"))
    if floor:
        print("\n### Uniform batches before and after the step-count fix\n")
        print(steps_table(data, floor))


if __name__ == "__main__":
    main()
