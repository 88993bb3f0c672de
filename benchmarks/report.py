"""Plots and tables from ``benchmarks/results/quality/*.json`` (called by ``run_all.py``).

Writes ``<quality_dir>/summary.md`` (the table docs/benchmarks/quality.md quotes) and PNGs
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


_LOSS_COLORS = {"nt_xent": "tab:blue", "debiased": "tab:orange", "hard_b0.5": "tab:green",
                "hard_b1": "tab:red", "ring": "tab:purple", "unremix": "tab:brown"}


def _style(cfg):
    """Colour by loss, line style by framework / sampler (uniform solid, BatchSampler dotted,
    MoCo dashed), so a configuration looks the same in every plot."""
    parts = cfg.split("-")
    color = _LOSS_COLORS.get(parts[1] if len(parts) > 1 else "", "tab:gray")
    if cfg.startswith("moco"):
        return color, "--", "s"
    return color, (":" if "batchsampler" in cfg else "-"), "o"


def _grouped(runs, key):
    """{config: [A, E] array of history[key] over its seeds} (runs trimmed to the shortest)."""
    groups = {}
    for r in runs:
        v = r.get("history", {}).get(key)
        if v:
            groups.setdefault(config_of(r["run_id"]), []).append(np.asarray(v, dtype=float))
    out = {}
    for cfg, vs in groups.items():
        e = min(len(v) for v in vs)
        out[cfg] = np.stack([v[:e] for v in vs])
    return dict(sorted(out.items(), key=lambda kv: _order(kv[0])))


def _band(ax, x, arr, cfg, scale=1.0):
    """Mean over seeds as a line, min-max over seeds as a shaded band."""
    color, ls, marker = _style(cfg)
    mean = arr.mean(axis=0) * scale
    n = arr.shape[0]
    ax.plot(x, mean, ls=ls, marker=marker, ms=3, color=color, label=f"{cfg} (n={n})")
    if n > 1:
        ax.fill_between(x, arr.min(axis=0) * scale, arr.max(axis=0) * scale, color=color,
                        alpha=0.15, lw=0)


def plot_curves(runs, path):
    """kNN accuracy per epoch: mean over seeds, band = min-max over seeds.

    Left: the losses with uniform batches (and MoCo v2); right: each SimCLR loss with uniform
    (solid) and BatchSampler (dotted) batches.  Epoch 0 is the same seed's untrained encoder.
    """
    plt = _plt()
    grouped = _grouped(runs, "knn_accuracy")
    base = [r["knn_accuracy"] for r in runs if r["run_id"].startswith("random_init")]
    fig, axes = plt.subplots(1, 2, figsize=(14, 5.5), sharey=True)
    panels = [(axes[0], lambda c: "batchsampler" not in c, "losses (uniform batches)"),
              (axes[1], lambda c: c.startswith("simclr"), "SimCLR: uniform (solid) vs BatchSampler (dotted)")]
    for ax, keep, title in panels:
        for cfg, arr in grouped.items():
            if not keep(cfg):
                continue
            if base:
                arr = np.concatenate([np.full((arr.shape[0], 1), np.mean(base)), arr], axis=1)
            _band(ax, np.arange(0 if base else 1, (0 if base else 1) + arr.shape[1]), arr, cfg, 100)
        if base:
            ax.axhline(100 * np.mean(base), color="grey", lw=1, ls="-.")
            ax.text(0, 100 * np.mean(base) + 0.2, "random init", color="grey", fontsize=8)
        ax.set_xlabel("epoch (0 = random init)")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    axes[0].set_ylabel("kNN accuracy, 2000 test images (%)")
    fig.suptitle("kNN accuracy per epoch (k=200, t=0.1); line = mean over seeds, band = min-max",
                 fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def paired_differences(runs, reference="simclr-nt_xent-uniform"):
    """Final kNN accuracy minus the same seed's reference run, in points.

    Returns ``{config: {seed: difference}}`` for every configuration that shares a seed with
    ``reference``, and ``{loss-sampler: {seed: BatchSampler minus uniform}}`` under the key
    ``"batchsampler_vs_uniform"``, and MoCo v2 Ring minus MoCo v2 NT-Xent under
    ``"moco_ring_vs_nt_xent"``.  Pairing by seed removes the seed's share of the spread (same
    initial weights, same test split).
    """
    acc = {}
    for r in runs:
        if "history" in r:
            acc.setdefault(config_of(r["run_id"]), {})[r["recipe"]["seed"]] = 100 * r["knn_accuracy"]
    ref = acc.get(reference, {})
    vs_ref = {cfg: {s: v - ref[s] for s, v in seeds.items() if s in ref}
              for cfg, seeds in acc.items() if cfg != reference}
    vs_uniform = {}
    for cfg, seeds in acc.items():
        if cfg.endswith("-batchsampler"):
            u = acc.get(cfg.replace("-batchsampler", "-uniform"), {})
            vs_uniform[cfg.replace("-batchsampler", "")] = {s: v - u[s] for s, v in seeds.items()
                                                            if s in u}
    ring, ntx = acc.get("moco_v2-ring-uniform", {}), acc.get("moco_v2-nt_xent-uniform", {})
    return {"vs_reference": {k: v for k, v in vs_ref.items() if v},
            "batchsampler_vs_uniform": {k: v for k, v in vs_uniform.items() if v},
            "moco_ring_vs_nt_xent": {s: v - ntx[s] for s, v in ring.items() if s in ntx}}


def _paired_bars(d):
    """The two panels of :func:`plot_paired` as ``[(label, {seed: diff}, colour)]`` lists, in
    table order; colours follow the loss as in every other plot."""
    left = [(cfg.replace("simclr-", ""), seeds, _style(cfg)[0])
            for cfg, seeds in sorted(d["vs_reference"].items(), key=lambda kv: _order(kv[0]))]
    right = [(f"{name.replace('simclr-', '')} BS-unif", seeds, _style(name + "-uniform")[0])
             for name, seeds in sorted(d["batchsampler_vs_uniform"].items(),
                                       key=lambda kv: _order(kv[0] + "-batchsampler"))]
    if d["moco_ring_vs_nt_xent"]:
        right.append(("moco_v2 ring-nt_xent", d["moco_ring_vs_nt_xent"],
                      _style("moco_v2-ring-uniform")[0]))
    return left, right


def plot_paired(runs, path, reference="simclr-nt_xent-uniform"):
    """Dot plot of the seed-paired differences (one dot per seed, bar = mean)."""
    d = paired_differences(runs, reference)
    if not d["vs_reference"]:
        return
    plt = _plt()
    left, right = _paired_bars(d)
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8),
                             gridspec_kw={"width_ratios": [len(left), max(len(right), 1)]})
    for ax, bars, title in ((axes[0], left, f"minus {reference}"),
                            (axes[1], right, "BatchSampler minus uniform; MoCo Ring minus NT-Xent")):
        for i, (_, seeds, color) in enumerate(bars):
            vals = list(seeds.values())
            ax.bar(i, np.mean(vals), color=color, alpha=0.35)
            ax.scatter([i] * len(vals), vals, color=color, zorder=3, s=18)
        ax.axhline(0, color="k", lw=1)
        ax.set_xticks(np.arange(len(bars)), [label for label, _, _ in bars],
                      rotation=35, ha="right", fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3, axis="y")
    axes[0].set_ylabel("kNN accuracy points")
    fig.suptitle("Seed-paired differences: dots = seeds, bars = mean", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_diagnostics(runs, path):
    """Clamp rate, false-negative rate and train cosines per epoch (mean over seeds, band =
    min-max)."""
    plt = _plt()
    fig, axes = plt.subplots(2, 2, figsize=(12, 7.5))
    panels = [("clamp_fraction", "clamp rate (share of anchors clamped)"),
              ("false_negative_rate", "false-negative rate per batch"),
              ("positive_cosine", "positive-pair cosine (train, projections)"),
              ("negative_cosine", "negative-pair cosine (train, projections)")]
    for ax, (key, title) in zip(axes.flat, panels):
        for cfg, arr in _grouped(runs, key).items():
            _band(ax, np.arange(1, arr.shape[1] + 1), arr, cfg)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("epoch")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(alpha=0.3)
    axes.flat[0].legend(fontsize=6.5, ncol=2, loc="center")  # clamp rates sit near 0
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _merged_histograms(runs, space):
    """Per configuration, the seeds' test-pair cosine histograms summed (counts) and their
    means averaged; ``[(config, seeds, histogram)]`` in table order."""
    groups = {}
    for r in runs:
        if "cosine_histograms" in r:
            groups.setdefault(config_of(r["run_id"]), []).append(r["cosine_histograms"][space])
    out = []
    for cfg in sorted(groups, key=_order):
        hs = groups[cfg]
        merged = {"edges": hs[0]["edges"]}
        for key in ("same_label", "different_label"):
            merged[key] = np.sum([np.asarray(h[key], dtype=float) for h in hs], axis=0)
        for key in ("same_label_mean", "different_label_mean", "gap"):
            merged[key] = float(np.mean([h[key] for h in hs]))
        out.append((cfg, len(hs), merged))
    return out


def plot_histograms(runs, path, space="encoder"):
    """Same-label vs different-label test-pair cosines (the papers' Fig. 5 style), one panel
    per configuration, seeds pooled."""
    plt = _plt()
    hs = _merged_histograms(runs, space)
    if not hs:
        return
    cols = 4
    rows = -(-len(hs) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.6 * rows), squeeze=False)
    lo = 1.0
    for _, _, h in hs:  # x range: where any histogram has mass (ReLU features have cosines >= 0)
        tot = h["same_label"] + h["different_label"]
        lo = min(lo, h["edges"][int(np.argmax(tot > tot.sum() * 1e-4))])
    for ax, (cfg, n, h) in zip(axes.flat, hs):
        edges = np.array(h["edges"])
        centers = (edges[:-1] + edges[1:]) / 2
        width = edges[1] - edges[0]
        for key, color, label in (("different_label", "tab:red", "different label"),
                                  ("same_label", "tab:blue", "same label")):
            counts = h[key]
            ax.fill_between(centers, counts / (counts.sum() * width), step="mid", alpha=0.45,
                            color=color, label=label)
        ax.set_xlim(max(lo - 0.05, -1.0), 1.0)
        ax.set_title(f"{cfg} (n={n})\nmean same {h['same_label_mean']:.2f}, diff "
                     f"{h['different_label_mean']:.2f}, gap {h['gap']:+.3f}", fontsize=7.5)
        ax.tick_params(labelsize=7)
        ax.set_xlabel("cosine similarity", fontsize=7)
    for ax in list(axes.flat)[len(hs):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.suptitle(f"Test-set pair cosines ({space} {'features' if space == 'encoder' else 'outputs'}):"
                 " same-label vs different-label pairs, seeds pooled", fontsize=10)
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
        plot_paired(runs, os.path.join(img, f"{prefix}_paired.png"))
        plot_diagnostics(runs, os.path.join(img, f"{prefix}_diagnostics.png"))
        plot_histograms(runs, os.path.join(img, f"{prefix}_cosine_hist.png"), "encoder")
        plot_histograms(runs, os.path.join(img, f"{prefix}_cosine_hist_projection.png"), "projection")
    root = os.path.dirname(quality_dir)
    plot_loss_overhead(os.path.join(root, "loss_overhead.json"), os.path.join(img, "loss_overhead.png"))
    print(table)
    print(f"[report] plots in {img}")
