"""Plots and tables from ``benchmarks/results/quality/*.json`` (called by ``run_all.py``).

Writes ``<quality_dir>/summary.md`` (the table docs/benchmarks.md quotes) and PNGs
into ``docs/img/`` (quick mode: ``benchmarks/results/quick/img/``).
"""

import glob
import json
import os
import re

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def load(quality_dir):
    runs = []
    for path in sorted(glob.glob(os.path.join(quality_dir, "*.json"))):
        with open(path) as f:
            runs.append(json.load(f))
    return runs


def config_of(run_id):
    return re.sub(r"-s\d+$", "", run_id)


def _order(cfg):
    keys = ["random_init", "simclr-nt_xent", "simclr-debiased", "simclr-hard_b0.5",
            "simclr-hard_b1", "simclr-ring", "simclr-unremix", "moco_v2-nt_xent", "moco_v2-ring"]
    for i, k in enumerate(keys):
        if cfg.startswith(k):
            return (i, "batchsampler" in cfg, cfg)
    return (len(keys), False, cfg)


def _fmt(values, pct=True, digits=1):
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    scale = 100.0 if pct else 1.0
    mean = np.mean(values) * scale
    if len(values) == 1:
        return f"{mean:.{digits}f}"
    half = (max(values) - min(values)) * scale / 2
    return f"{mean:.{digits}f} ± {half:.{digits}f}"


def summary_table(runs):
    groups = {}
    for r in runs:
        groups.setdefault(config_of(r["run_id"]), []).append(r)
    lines = [
        "| configuration | seeds | kNN acc. % (final) | linear probe % | best-epoch kNN % "
        "| clamp rate (last epoch) | false-neg. rate per batch | pos. / neg. cosine (last epoch, train) "
        "| test cos. gap same−diff (encoder) | s / epoch | s / step |",
        "|---|---|---|---|---|---|---|---|---|---|---|"]
    for cfg in sorted(groups, key=_order):
        rs = groups[cfg]
        seeds = ",".join(str(r["recipe"]["seed"]) for r in rs)
        h = [r.get("history", {}) for r in rs]
        best = [max(x["knn_accuracy"]) for x in h if x.get("knn_accuracy")]
        clamp = [x["clamp_fraction"][-1] for x in h if x.get("clamp_fraction")]
        fn = [r.get("mean_false_negative_rate") for r in rs]
        pos = [x["positive_cosine"][-1] for x in h if x.get("positive_cosine")]
        neg = [x["negative_cosine"][-1] for x in h if x.get("negative_cosine")]
        gap = [r["cosine_histograms"]["encoder"]["gap"] for r in rs if "cosine_histograms" in r]
        cos = "-" if not pos else f"{np.mean(pos):.3f} / {np.mean(neg):.3f}"
        lines.append(
            f"| {cfg} | {seeds} | {_fmt([r['knn_accuracy'] for r in rs])} | "
            f"{_fmt([r.get('linear_probe_accuracy') for r in rs])} | {_fmt(best)} | "
            f"{_fmt(clamp, digits=2) if clamp else '-'} | {_fmt(fn)} | {cos} | "
            f"{_fmt(gap, pct=False, digits=3)} | "
            f"{_fmt([r.get('median_epoch_seconds') for r in rs], pct=False)} | "
            f"{_fmt([r.get('median_step_seconds') for r in rs], pct=False, digits=2)} |")
    return "\n".join(lines)


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_curves(runs, path):
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 5))
    trained = sorted([r for r in runs if "history" in r], key=lambda r: _order(r["run_id"]))
    cmap = plt.get_cmap("tab10")
    base = {r["recipe"]["seed"]: r["knn_accuracy"] * 100 for r in runs
            if r["run_id"].startswith("random_init")}
    for i, r in enumerate(trained):
        acc = np.array(r["history"].get("knn_accuracy", [])) * 100
        x0 = 1
        if r["recipe"]["seed"] in base:  # epoch 0 = the same seed's untrained encoder
            acc, x0 = np.concatenate([[base[r["recipe"]["seed"]]], acc]), 0
        style = "--" if r["run_id"].startswith("moco") else "-"
        style = ":" if "batchsampler" in r["run_id"] else style
        ax.plot(np.arange(x0, x0 + len(acc)), acc, style, marker="o", ms=3, color=cmap(i % 10),
                label=r["run_id"])
    for r in runs:
        if r["run_id"].startswith("random_init"):
            ax.axhline(r["knn_accuracy"] * 100, color="grey", lw=1, ls="-.")
            ax.text(0, r["knn_accuracy"] * 100 + 0.2, f"random init ({r['run_id'][-2:]})",
                    color="grey", fontsize=8)
    ax.set_xlabel("epoch (0 = random init)")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_ylabel("kNN accuracy, 2000 test images (%)")
    ax.set_title("kNN accuracy per epoch (k=200, t=0.1)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_diagnostics(runs, path):
    plt = _plt()
    trained = sorted([r for r in runs if "history" in r], key=lambda r: _order(r["run_id"]))
    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    cmap = plt.get_cmap("tab10")
    panels = [("clamp_fraction", "clamp rate (share of anchors clamped)"),
              ("false_negative_rate", "false-negative rate per batch"),
              ("positive_cosine", "positive-pair cosine (train, projections)"),
              ("negative_cosine", "negative-pair cosine (train, projections)")]
    for ax, (key, title) in zip(axes.flat, panels):
        for i, r in enumerate(trained):
            v = r["history"].get(key)
            if v:
                ax.plot(np.arange(1, len(v) + 1), v, marker="o", ms=2, color=cmap(i % 10),
                        label=r["run_id"], ls="--" if r["run_id"].startswith("moco") else "-")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
    axes.flat[2].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_histograms(runs, path, space="encoder"):
    plt = _plt()
    rs = sorted([r for r in runs if "cosine_histograms" in r], key=lambda r: _order(r["run_id"]))
    if not rs:
        return
    cols = 4
    rows = -(-len(rs) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.6 * rows), squeeze=False)
    lo = 1.0
    for r in rs:  # x range: where any histogram has mass (ReLU features have cosines >= 0)
        h = r["cosine_histograms"][space]
        tot = np.array(h["same_label"]) + np.array(h["different_label"])
        lo = min(lo, h["edges"][int(np.argmax(tot > tot.sum() * 1e-4))])
    for ax, r in zip(axes.flat, rs):
        h = r["cosine_histograms"][space]
        edges = np.array(h["edges"])
        centers = (edges[:-1] + edges[1:]) / 2
        width = edges[1] - edges[0]
        for key, color, label in (("different_label", "tab:red", "different label"),
                                  ("same_label", "tab:blue", "same label")):
            counts = np.array(h[key], dtype=float)
            ax.fill_between(centers, counts / (counts.sum() * width), step="mid", alpha=0.45,
                            color=color, label=label)
        ax.set_xlim(max(lo - 0.05, -1.0), 1.0)
        ax.set_title(f"{r['run_id']}\nmean same {h['same_label_mean']:.2f}, diff "
                     f"{h['different_label_mean']:.2f}, gap {h['gap']:+.3f}", fontsize=7.5)
        ax.tick_params(labelsize=7)
        ax.set_xlabel("cosine similarity", fontsize=7)
    for ax in list(axes.flat)[len(rs):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.suptitle(f"Test-set pair cosines ({space} {'features' if space == 'encoder' else 'outputs'}):"
                 " same-label vs different-label pairs", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_loss_overhead(result_path, path):
    if not os.path.exists(result_path):
        return
    plt = _plt()
    with open(result_path) as f:
        res = json.load(f)
    names = list(res["step"])
    settings = [("step", "full training step")] + [
        (s, f"loss alone, {s.replace('_', ' ')}") for s in res["loss"]]
    fig, ax = plt.subplots(figsize=(9, 4.2))
    width = 0.8 / len(settings)
    for j, (key, label) in enumerate(settings):
        block = res["step"] if key == "step" else res["loss"][key]
        vals = [block[n].get("ratio_to_nt_xent", 1.0) for n in names]
        xs = np.arange(len(names)) + (j - (len(settings) - 1) / 2) * width
        ax.bar(xs, vals, width, label=label)
    ax.axhline(1.05, color="k", ls="--", lw=1)
    ax.axhline(1.15, color="k", ls=":", lw=1)
    ax.set_yscale("log")
    ax.set_xticks(np.arange(len(names)), names)
    ax.set_ylabel("median time / NT-Xent's (log)")
    ax.set_title("Loss overhead vs NT-Xent (dashed: 1.05 goal, dotted: 1.15 UnReMix goal)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(quality_dir, quick=False, prefix="quality"):
    """Table into ``quality_dir/summary.md``; plots named ``<prefix>_*.png``."""
    runs = load(quality_dir)
    img = os.path.join(HERE, "results", "quick", "img") if quick else os.path.join(REPO, "docs", "img")
    os.makedirs(img, exist_ok=True)
    table = summary_table(runs) if runs else "(no runs yet)"
    with open(os.path.join(quality_dir if runs else img, "summary.md"), "w") as f:
        f.write(table + "\n")
    if runs:
        plot_curves(runs, os.path.join(img, f"{prefix}_knn_curves.png"))
        plot_diagnostics(runs, os.path.join(img, f"{prefix}_diagnostics.png"))
        plot_histograms(runs, os.path.join(img, f"{prefix}_cosine_hist.png"), "encoder")
        plot_histograms(runs, os.path.join(img, f"{prefix}_cosine_hist_projection.png"), "projection")
    root = os.path.dirname(quality_dir)
    plot_loss_overhead(os.path.join(root, "loss_overhead.json"), os.path.join(img, "loss_overhead.png"))
    print(table)
    print(f"[report] plots in {img}")
