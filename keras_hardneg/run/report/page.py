"""The run report's page: ``report.html``, one self-contained file a user opens in a browser.

Everything is inline: CSS in the head, every figure a PNG data URI (matplotlib, Agg), no
script and no URL to fetch, so the file opens by double-click, offline, and can be mailed.
This module only draws and writes; :mod:`keras_hardneg.run.report.run_report` gathers what a run
(or a zoo entry) measured and calls it. The sections, in order:

* the run: data, framework, loss, epochs, time; the recipe as a table;
* the figures (kNN / linear probe / SVM / STS) beside the starting encoder's ("epoch 0");
* the curves per epoch (:func:`curves_section`): loss, kNN, positive / negative cosine,
  false-negative rate of the training batches (``history.json``) beside its expectation for
  uniform batches (:func:`uniform_false_negative_rate`), the clamp where the loss has one (a
  sentence when it never engaged), the learning-rate schedule (a sentence when constant); a
  one-epoch run gets a table;
* the negatives (:func:`negatives_section`, from the probe's records in ``probe.json``:
  :mod:`keras_hardneg.run.report.probe`): cosine histograms at the start and the end (over the
  data's range), the effective number of negatives per epoch (mean and quartiles) and per
  anchor, the weight each negative received against its similarity, the collapse check and,
  with labels, the share of same-class negatives among all, among the most-weighted and in
  the loss's weight; panels constant by construction (NT-Xent's weights) are said, not drawn;
  notes on where the probe's view differs from training's; with a graph sampler, batch
  hardness and false-negative rate against uniform batches (:func:`sampler_section`);
* the hardest negatives (:func:`hardest_negatives_section`): for a few probe anchors, the
  negatives the loss weighted most, drawn as the data is (images, graphs by
  :func:`draw_graph`, sentences), with weight, cosine and a same-class flag (the
  modality's :meth:`~keras_hardneg.modalities.DataFeed.probe_examples` gives the examples);
* the modality's own (:meth:`~keras_hardneg.modalities.Modality.report_sections`, drawn
  with :mod:`keras_hardneg.modalities.report`): images a nearest-neighbour grid and a 2-D
  map, graphs the 2-D map, sentences the nearest sentences of a few queries;
* the footer: versions, backend, hardware and git commit (:func:`environment`).

Example:
>>> page = render_page("demo", [("Hello", "<p>one section</p>")], footer="made by hand")
>>> "<h2 id=\\"hello\\">Hello</h2>" in page, "http" in page
(True, False)
"""

from __future__ import annotations

import html
import os
import re
from typing import Any, Sequence

import numpy as np

from keras_hardneg.modalities import report

__all__ = ["REPORT_FILE", "GENERATOR", "render_page", "write_page", "is_our_page",
           "recipe_table", "figures_section", "curves_section", "negatives_section",
           "sampler_section", "uniform_false_negative_rate", "hardest_negatives_section",
           "summary_sentence", "environment", "environment_line"]

#: The page's file name in a run directory.
REPORT_FILE = "report.html"
#: The ``generator`` meta tag of every page this package writes (an existing file without
#: it is the user's, and is not replaced).
GENERATOR = "keras-hardneg run report"
#: Rows of a per-epoch table, at most (evenly spread; the first and the last epoch kept).
TABLE_ROWS = 12

_SAME, _OTHER = "#1a9850", "#d73027"

# The drawing kit is shared with the modalities' own sections.
_pyplot, figure_uri, _img, _note, _table = (report.pyplot, report.figure_uri, report.img,
                                            report.note, report.table)


# --------------------------------------------------------------------- drawing
def _fmt(value: Any, digits: int = 4) -> str:
    if value is None:
        return "&ndash;"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if value and abs(value) < 10.0 ** -digits * 50:  # 2e-05 is not 0.0000
            return f"{value:.{digits - 1}g}"
        return f"{value:.{digits}f}"
    return html.escape(str(value))


# ---------------------------------------------------------------------- recipe
def _flatten(prefix: str, value: Any, out: list) -> None:
    if isinstance(value, dict) and value:
        for key in sorted(value):
            _flatten(f"{prefix}.{key}" if prefix else str(key), value[key], out)
    else:
        out.append((prefix, value))


def recipe_table(recipe: dict[str, Any]) -> str:
    """The recipe as a table: one row per section, its keys beside it."""
    rows = []
    for section in sorted(recipe):
        value = recipe[section]
        if isinstance(value, dict):
            items: list = []
            if value:
                _flatten("", value, items)
            text = "<br>".join(f"<code>{html.escape(k)}</code> = {_fmt(v)}" for k, v in items)
            rows.append((f"<b>{html.escape(section)}</b>", text or "&ndash;"))
        else:
            rows.append((f"<b>{html.escape(section)}</b>", _fmt(value)))
    return _table(("section", "keys"), rows, "recipe")


# --------------------------------------------------------------------- figures
def _lookup(results: dict[str, Any], key: str) -> Any:
    if "." in key:
        group, name = key.split(".", 1)
        return (results.get(group) or {}).get(name) if isinstance(results.get(group),
                                                                    dict) else None
    return results.get(key)


def figures_section(figures: Sequence[tuple[str, str, Any]], baseline: dict[str, Any] | None,
                    protocol: str = "", baseline_note: str = "",
                    results: dict[str, Any] | None = None) -> str:
    """The final figures (``[(key, label, value)]``: the modality's
    :meth:`~keras_hardneg.modalities.evaluation.Evaluation.report_figures`, dotted keys for
    a group's scores) beside the starting encoder's (``baseline``, same keys). A figure
    with a spread in ``results`` (``KEY_std``: the SVM's standard deviation over its 10
    folds) shows it beside the trained value and the change."""
    results = results or {}
    rows = []
    spread_shown = False
    for key, label, value in figures:
        start = _lookup(baseline or {}, key)
        std = _lookup(results, f"{key}_std")
        spread = (f" &plusmn; {float(std):.4f}" if isinstance(std, (int, float))
                  and isinstance(value, (int, float)) else "")
        spread_shown = spread_shown or bool(spread)
        change = (f"{value - start:+.4f}{spread}" if isinstance(value, (int, float))
                  and isinstance(start, (int, float)) else "&ndash;")
        rows.append((html.escape(label), _fmt(start), f"<b>{_fmt(value)}</b>{spread}", change))
    if not rows:
        return _note("No figures: this run has no evaluation (unlabeled data, or a text run "
                     "without <code>evaluation.benchmark_dir</code>).")
    out = _table(("figure", "starting encoder (epoch 0)", "trained", "change"), rows,
                 "figures")
    if protocol:
        out += _note(html.escape(protocol) + ".")
    if spread_shown:
        out += _note("&plusmn;: the standard deviation of the trained encoder's accuracy over "
                     "the cross-validation folds; a change smaller than it is within the "
                     "folds' spread.")
    if baseline_note:
        out += _note(baseline_note)
    return out


# ---------------------------------------------------------------------- curves
def _thin(records: Sequence[Any], limit: int = TABLE_ROWS) -> list:
    """At most ``limit`` of ``records``, evenly spread, the first and the last kept."""
    records = list(records)
    if len(records) <= limit:
        return records
    keep = sorted(set(np.linspace(0, len(records) - 1, limit).round().astype(int).tolist()))
    return [records[i] for i in keep]


def _thinned_note(shown: int, total: int) -> str:
    return ("" if shown == total else
            _note(f"{shown} of {total} epochs shown; every epoch is in "
                  "<code>probe.json</code>."))


def _panel(ax, title, ylabel, epochs=True):
    from matplotlib.ticker import MaxNLocator

    if epochs:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("epoch", fontsize=9)
    ax.set_ylabel(ylabel, fontsize=9)
    ax.grid(alpha=0.3)
    ax.tick_params(labelsize=8)


def uniform_false_negative_rate(labels: Any) -> float | None:
    """The false-negative rate a batch drawn uniformly at random has in expectation: the
    chance that another training example shares an example's label,
    ``sum_c n_c (n_c - 1) / (N (N - 1))`` over the classes' counts ``n_c`` (labels < 0:
    unknown, left out). None without labels.

    >>> uniform_false_negative_rate([0, 0, 1, 1])
    0.3333333333333333
    """
    if labels is None:
        return None
    y = np.asarray(labels).reshape(-1)
    y = y[y >= 0] if np.issubdtype(y.dtype, np.number) else y
    n = len(y)
    if n < 2:
        return None
    counts = np.unique(y, return_counts=True)[1].astype(np.float64)
    return float((counts * (counts - 1)).sum() / (n * (n - 1)))


def curves_section(history: dict[str, list], baseline: dict[str, Any] | None,
                   records: Sequence[dict[str, Any]] | None = None, *,
                   uniform_fn: float | None = None, has_clamp: bool = False,
                   learning_rate: dict[str, Any] | None = None, notes: str = "") -> str:
    """Per-epoch curves of ``history.json``: loss, kNN, the training batches' cosines and
    false-negative rate (beside ``uniform_fn``, :func:`uniform_false_negative_rate`), the
    share of anchors at the clamp (``has_clamp``: the loss has one), the learning rate
    (``learning_rate``: ``{"epochs": [...], "values": [...], "schedule": name}``, the
    schedule per step in epochs). ``records`` is unused (the probe's curves are in the
    negatives section). ``notes``: more HTML under the figure."""
    from keras_hardneg.run.report.progress import plot_knn_curve

    loss = history.get("loss") or []
    if not loss:
        return _note("No per-epoch history was kept for this encoder.")
    extra = []
    shares = {k: history.get(k) for k in ("false_negative_rate", "clamp_fraction")
              if any(v > 0 for v in history.get(k) or [])}  # 0 throughout: no labels / clamp
    if has_clamp and "clamp_fraction" not in shares and history.get("clamp_fraction"):
        extra.append("The loss's debiasing clamp never engaged: no anchor of any training "
                     "batch sat at it (<code>clamp_fraction</code> 0 in every epoch), so no "
                     "curve is drawn for it.")
    lr = learning_rate or {}
    lr_values = np.asarray(lr.get("values") or [], float)
    lr_curve = len(lr_values) > 1 and np.ptp(lr_values) > 1e-12 * max(abs(lr_values).max(),
                                                                         1e-30)
    if len(lr_values) and not lr_curve:
        extra.append(f"Learning rate: constant at {lr_values[0]:.4g} "
                     f"(schedule <code>{html.escape(str(lr.get('schedule', '?')))}</code>), "
                     "so no curve is drawn for it.")
    if len(loss) == 1:
        return _one_epoch_table(history, uniform_fn) + "".join(_note(t) for t in extra) + notes
    plt = _pyplot()
    epochs = np.arange(1, len(loss) + 1)
    panels = ["loss"]
    knn = history.get("knn_accuracy") or []
    if knn:
        panels.append("knn")
    if history.get("positive_cosine"):
        panels.append("cosine")
    if shares:
        panels.append("fn")
    if lr_curve:
        panels.append("lr")
    cols = min(3, len(panels))
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.0 * rows), squeeze=False)
    for ax in axes.ravel()[len(panels):]:
        ax.axis("off")
    for ax, name in zip(axes.ravel(), panels):
        if name == "loss":
            ax.plot(epochs, loss, marker="o", ms=3)
            _panel(ax, "training loss", "loss")
        elif name == "knn":
            plot_knn_curve(ax, len(loss), knn, baseline)
            _panel(ax, "kNN monitor (test split)", "kNN accuracy")
        elif name == "cosine":
            ax.plot(epochs, history["positive_cosine"], marker="o", ms=3, label="positive")
            ax.plot(epochs, history.get("negative_cosine") or [np.nan] * len(epochs),
                    marker="o", ms=3, label="negative")
            ax.legend(fontsize=8)
            _panel(ax, "mean cosine (training batches)", "cosine")
        elif name == "fn":
            _shares_panel(ax, epochs, shares, uniform_fn)
        elif name == "lr":
            ax.plot(lr["epochs"], lr_values, color="tab:brown")
            ax.set_ylim(bottom=0)
            _panel(ax, f"learning rate ({lr.get('schedule', '')})", "learning rate")
    fig.tight_layout()
    text = _curves_caption(uniform_fn if "false_negative_rate" in shares else None,
                           lr.get("schedule", "") if lr_curve else None)
    return (_img(figure_uri(fig), "per-epoch curves") + _note(text)
            + "".join(_note(t) for t in extra) + notes)


def _one_epoch_table(history: dict[str, list], uniform_fn: float | None) -> str:
    """A one-epoch run's means as numbers (a curve of one point says nothing)."""
    cells = [("training loss", _fmt(history["loss"][0]))]
    for key, label in (("knn_accuracy", "kNN accuracy"), ("positive_cosine", "positive cosine"),
                       ("negative_cosine", "negative cosine"),
                       ("false_negative_rate", "false-negative rate")):
        if history.get(key):
            cells.append((label, _fmt(history[key][0])))
    if uniform_fn is not None and history.get("false_negative_rate"):
        cells.append(("false-negative rate of uniform batches (expected)", _fmt(uniform_fn)))
    return _table(("one epoch", "value"), cells) + _note(
        "One epoch: a curve of one point says nothing, so the epoch's means are given "
        "as numbers (<code>history.json</code>).")


def _shares_panel(ax, epochs: np.ndarray, shares: dict[str, list],
                  uniform_fn: float | None) -> None:
    """The false-negative rate (beside uniform batches') and the clamp's share, with room
    above the data for the legend."""
    top = 0.0
    if "false_negative_rate" in shares:
        ax.plot(epochs, shares["false_negative_rate"], marker="o", ms=3, color="tab:red",
                label="false-negative rate")
        top = max(top, max(shares["false_negative_rate"]))
        if uniform_fn is not None:
            ax.axhline(uniform_fn, color="gray", ls=":", lw=1.2,
                       label=f"uniform batches ({uniform_fn:.3f})")
            top = max(top, uniform_fn)
    if "clamp_fraction" in shares:
        ax.plot(epochs, shares["clamp_fraction"], marker="s", ms=3, color="tab:purple",
                label="anchors at the clamp")
        top = max(top, max(shares["clamp_fraction"]))
    ax.set_ylim(0, min(1.0, 1.45 * top) if top > 0 else 1.0)
    ax.legend(fontsize=8, loc="upper right")
    _panel(ax, "training batches", "share")


def _curves_caption(uniform_fn: float | None, schedule: str | None) -> str:
    """What the curves show; ``uniform_fn`` when its line is drawn, ``schedule`` when the
    learning-rate curve is."""
    text = ("Loss, cosines and false-negative rate: means over each epoch's training batches "
            "(<code>history.json</code>). The false-negative rate is the share of an anchor's "
            "negatives that share its label (labels never enter the loss)")
    if uniform_fn is not None:
        text += (f"; the dotted line is its expectation for batches drawn uniformly at "
                 f"random, <code>&sum;_c n_c(n_c&minus;1) / (N(N&minus;1))</code> = "
                 f"{uniform_fn:.4f} over the training labels: above it, the batches hold more "
                 "same-class negatives than chance")
    text += "."
    if schedule is not None:
        text += (" Learning rate: the optimizer's schedule "
                 f"(<code>{html.escape(str(schedule))}</code>) at every step, in epochs.")
    return text


# ------------------------------------------------------------------- negatives
_WEIGHT_WORDS = {
    "NTXentLoss": "NT-Xent weighs every negative 1: all sit on the line w = 1.",
    "DebiasedContrastiveLoss": "The debiased loss weighs every negative 1 (its correction "
                               "subtracts a term tied to the positive, not to a negative), "
                               "then clamps: anchors at the clamp get no gradient.",
    "HardNegativeContrastiveLoss": "The hard-negative loss weighs negative j of anchor a by "
                                   "w = N softmax_j(beta s_aj) (importance weights "
                                   "e^(beta s) over their mean): the more similar, the heavier.",
    "RingContrastiveLoss": "Ring keeps the negatives whose similarity rank lies in its band "
                           "(w = 1) and drops the rest (w = 0): too similar (likely false "
                           "negatives) and too easy.",
    "UnReMixContrastiveLoss": "UnReMix weighs each negative by its mix of uncertainty, "
                              "similarity (as the hard-negative loss) and representativeness, "
                              "each normalised to mean 1.",
}


def _edges(record: dict) -> np.ndarray:
    lo, hi = record.get("cosine_range") or (-1.0, 1.0)  # older files: over [-1, 1]
    return np.linspace(float(lo), float(hi), len(record["cosine_histogram"]) + 1)


def _density(record: dict) -> tuple[np.ndarray, np.ndarray]:
    edges = _edges(record)
    counts = np.asarray(record["cosine_histogram"], float)
    return counts / max(counts.sum(), 1.0) / (edges[1] - edges[0]), edges


def _histograms(first: dict, last: dict):
    """The first and the last epoch's cosine histograms: overlaid, or side by side when
    one's peak is over 4 times the other's (a narrow start would flatten a spread end)."""
    plt = _pyplot()
    (d0, e0), (d1, e1) = _density(first), _density(last)
    peaks = sorted([max(d0.max(), 1e-12), max(d1.max(), 1e-12)])
    apart = peaks[1] / peaks[0] > 4.0
    fig, axes = plt.subplots(1, 2 if apart else 1, figsize=(7.8 if apart else 5.2, 3.2),
                             squeeze=False)
    for i, (record, (density, edges), color) in enumerate(
            ((first, (d0, e0), "gray"), (last, (d1, e1), "tab:blue"))):
        ax = axes[0][i if apart else 0]
        ax.stairs(density, edges, color=color, lw=1.8, label=f"epoch {record['epoch']}",
                  fill=record is last, alpha=0.35 if record is last else 1.0)
    for ax in axes[0]:
        ax.legend(fontsize=8)
        _panel(ax, "anchor-negative similarity (probe)" if apart else
               "anchor-negative similarity (probe batch)", "density", epochs=False)
        ax.set_xlabel("cosine similarity", fontsize=9)
    fig.tight_layout()
    return figure_uri(fig)


def _scatter(first: dict, last: dict, labelled: bool):
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9.6, 3.3), sharey=True, squeeze=False)
    for ax, record in zip(axes[0], (first, last)):
        sc = record.get("scatter") or {}
        cos = np.asarray(sc.get("cosine", []), float)
        w = np.asarray(sc.get("weight", []), float)
        if labelled and "same_class" in sc:
            same = np.asarray(sc["same_class"], bool)
            ax.scatter(cos[~same], w[~same], s=4, alpha=0.35, color="tab:blue",
                       label="other class", rasterized=True)
            ax.scatter(cos[same], w[same], s=5, alpha=0.5, color=_OTHER,
                       label="same class (false negative)", rasterized=True)
            ax.legend(fontsize=7, loc="upper left", markerscale=2)
        else:
            ax.scatter(cos, w, s=4, alpha=0.35, color="tab:blue", rasterized=True)
        ax.axhline(1.0, color="gray", ls=":", lw=1)
        _panel(ax, f"weight vs similarity, epoch {record['epoch']}", "weight w (mean 1)",
               epochs=False)
        ax.set_xlabel("cosine similarity to the anchor", fontsize=9)
    fig.tight_layout()
    return figure_uri(fig)


def _constant(values: Sequence[float], tol: float = 1e-6) -> bool:
    values = np.asarray(values, float)
    return len(values) > 0 and float(np.ptp(values)) <= tol * max(1.0, abs(values).max())


def _per_epoch(records: Sequence[dict], labelled: bool, effective_flat: bool):
    """The effective number per epoch (mean, quartile band) and the same-class shares."""
    plt = _pyplot()
    names = ([] if effective_flat else ["effective"]) + (["same"] if labelled else [])
    if not names:
        return None
    fig, axes = plt.subplots(1, len(names), figsize=(4.6 * len(names), 3.1), squeeze=False)
    ep = [r["epoch"] for r in records]
    for ax, name in zip(axes[0], names):
        if name == "effective":
            quart = [r.get("effective_negatives_quartiles") for r in records]
            if all(q for q in quart):
                ax.fill_between(ep, [q[0] for q in quart], [q[2] for q in quart],
                                color="tab:orange", alpha=0.2, label="anchors' 25-75 %")
                ax.plot(ep, [q[1] for q in quart], ls=":", color="tab:orange", lw=1,
                        label="median")
            ax.plot(ep, [r["effective_negatives"] for r in records], marker="o", ms=3,
                    color="tab:orange", label="mean")
            ax.plot(ep, [r["num_negatives"] for r in records], ls="--", color="gray",
                    label="N")
            ax.set_ylim(0, 1.08 * max(r["num_negatives"] for r in records))
            ax.legend(fontsize=7, loc="lower left")
            _panel(ax, "effective number of negatives", "negatives per anchor")
        else:
            fn = [r["false_negatives"] for r in records]
            top = fn[0].get("top_fraction", 0.05)
            series = [([f["all"] for f in fn], "o", "gray", "among all negatives"),
                      ([f["most_weighted"] for f in fn], "o", _OTHER,
                       f"among the most-weighted {top:.0%}"),
                      ([f["weight"] for f in fn], "s", "tab:purple",
                       "share of the loss's weight")]
            for values, marker, color, label in series:
                ax.plot(ep, values, marker=marker, ms=3, color=color, label=label)
            high = max(max(v) for v, *_ in series)
            ax.set_ylim(0, min(1.0, 1.45 * high) if high > 0 else 1.0)
            ax.legend(fontsize=7, loc="upper right")
            _panel(ax, "same-class (false) negatives", "share")
    fig.tight_layout()
    return figure_uri(fig)


def _anchor_distribution(first: dict, last: dict):
    """Histogram of every anchor's effective number, first and last epoch."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.2, 3.2))
    values = [np.asarray(r["anchor_effective"], float) for r in (first, last)]
    lo = min(v.min() for v in values)
    hi = max(v.max() for v in values)
    edges = np.linspace(lo, hi if hi > lo else lo + 1.0, 31)
    for record, v, color in ((first, values[0], "gray"), (last, values[1], "tab:orange")):
        ax.hist(v, bins=edges, histtype="step" if record is first else "stepfilled",
                color=color, lw=1.6, alpha=1.0 if record is first else 0.45,
                label=f"epoch {record['epoch']}")
    ax.axvline(last["num_negatives"], color="gray", ls="--", lw=1, label="N")
    ax.legend(fontsize=8)
    _panel(ax, "effective negatives of each anchor", "anchors", epochs=False)
    ax.set_xlabel("effective number of negatives", fontsize=9)
    return figure_uri(fig)


def _collapse(records: Sequence[dict]):
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9.2, 3.1), squeeze=False)
    ep = [r["epoch"] for r in records]
    d = records[-1]["collapse"]["dim"]
    ax = axes[0][0]
    ax.plot(ep, [r["collapse"]["std"] for r in records], marker="o", ms=3, color="tab:cyan",
            label="std per dimension (mean)")
    ax.axhline(1.0 / np.sqrt(d), color="gray", ls="--", lw=1, label=f"1/sqrt(d), d = {d}")
    ax.set_ylim(0, 1.3 / np.sqrt(d))
    ax.legend(fontsize=7, loc="lower right")
    _panel(ax, "spread of the normalised embeddings", "standard deviation")
    ax = axes[0][1]
    ax.plot(ep, [r["collapse"]["effective_rank"] for r in records], marker="o", ms=3,
            color="tab:cyan")
    ax.axhline(d, color="gray", ls="--", lw=1)
    ax.set_ylim(0, 1.08 * d)
    _panel(ax, f"effective rank (of {d})", "effective rank")
    fig.tight_layout()
    return figure_uri(fig)


def _collapse_panel(records: Sequence[dict[str, Any]], out: list, defs: list) -> None:
    """The collapse check's panel and definition (records from before it have none)."""
    checked = [r for r in records if "collapse" in r]
    if not checked:
        return
    c = checked[-1]["collapse"]
    out.append(_img(_collapse(checked), "collapse check"))
    defs.append(
        "<b>Collapse check</b>: each probe projection L2-normalised; left, the standard "
        "deviation of each dimension over the probe's rows, averaged over the "
        f"{c['dim']} dimensions: 1/sqrt(d) = {1 / np.sqrt(c['dim']):.4f} for directions "
        "spread evenly over the sphere, 0 for a collapse to one point "
        f"({c['std']:.4f} at epoch {checked[-1]['epoch']}); right, the effective rank "
        "<code>exp(H(p))</code>, p the normalised singular values (RankMe): d at most, "
        f"1 for a collapse to one direction ({c['effective_rank']:.1f} at epoch "
        f"{checked[-1]['epoch']}).")


def _probe_table(records: Sequence[dict[str, Any]], labelled: bool) -> str:
    """The probe's figures per epoch (thinned to :data:`TABLE_ROWS`)."""
    last = records[-1]
    header = ["epoch", "effective negatives", "N", "positive cos", "negative cos"]
    if labelled:
        top = last["false_negatives"].get("top_fraction", 0.05)
        header += ["same class: all", f"same class: top {top:.0%} by weight",
                   "same class: weight share"]
    rows = []
    shown = _thin(records)
    for r in shown:
        row = [str(r["epoch"]), f'<span class="eff">{r["effective_negatives"]:.3f}</span>',
               str(r["num_negatives"]), _fmt(r["positive_cosine"]), _fmt(r["negative_cosine"])]
        if labelled:
            f = r["false_negatives"]
            row += [_fmt(f["all"]), _fmt(f["most_weighted"]), _fmt(f["weight"])]
        rows.append(row)
    return _table(header, rows, "probe") + _thinned_note(len(shown), len(records))


def summary_sentence(probe: dict[str, Any] | None) -> str:
    """One sentence on what the figures show, from the probe's first and last records: the
    effective number of negatives out of ``N``, and (with labels) the share of the anchor's
    own class among the negatives the loss weighted most, against all negatives. ``""``
    without a record.

    Example:
    >>> rec = lambda e, eff, top, share: {"epoch": e, "effective_negatives": eff,
    ...     "num_negatives": 254, "false_negatives": {"all": 0.1, "most_weighted": top,
    ...                                               "top_fraction": 0.05, "weight": share}}
    >>> print(summary_sentence({"records": [rec(0, 230.0, 0.2, 0.1), rec(40, 102.7, 0.5, 0.3)]}))
    From epoch 0 to epoch 40 the loss spread its weight over 230.0 then 102.7 effective
    negatives of N = 254 per anchor; among the 5% of negatives it weighted most, the share of
    the anchor's own class (false negatives) went from 0.20 to 0.50, against 0.10 among all
    negatives.
    """
    records = (probe or {}).get("records") or []
    if not records:
        return ""
    first, last = records[0], records[-1]
    span = (f"From epoch {first['epoch']} to epoch {last['epoch']}" if len(records) > 1
            else f"At epoch {last['epoch']}")
    effective = (f"{first['effective_negatives']:.1f} then {last['effective_negatives']:.1f}"
                 if len(records) > 1 else f"{last['effective_negatives']:.1f}")
    text = (f"{span} the loss spread its weight over {effective} effective negatives of "
            f"N = {last['num_negatives']} per anchor")
    fn_first, fn_last = first.get("false_negatives"), last.get("false_negatives")
    if fn_last:
        top = fn_last.get("top_fraction", 0.05)
        moved = (f"went from {fn_first['most_weighted']:.2f} to {fn_last['most_weighted']:.2f}"
                 if fn_first and len(records) > 1 else f"was {fn_last['most_weighted']:.2f}")
        text += (f"; among the {top:.0%} of negatives it weighted most, the share of the "
                 f"anchor's own class (false negatives) {moved}, against "
                 f"{fn_last['all']:.2f} among all negatives")
    return text + "."


def negatives_section(probe: dict[str, Any] | None, loss_name: str,
                      notes: Sequence[str] = ()) -> str:
    """What the negatives did, from the probe's records (see the module docstring).
    ``notes``: HTML paragraphs on how the probe's view differs from training's, shown
    first."""
    records = (probe or {}).get("records") or []
    if not records:
        return _note("No probe record: the negatives were not measured for this encoder "
                     "(a framework without two projections, or a multi-worker run).")
    first, last = records[0], records[-1]
    labelled = "false_negatives" in last
    space = probe.get("space", "projection")
    out = [_note(
        f"A fixed probe batch of {probe.get('probe_size', '?')} training examples, two views "
        f"each drawn once, paired in-batch as SimCLR pairs them ({last['num_negatives']} "
        f"negatives per anchor), scored {'after every epoch' if len(records) > 2 else 'at the start and the end'} "
        f"in inference mode on the {html.escape(space)}; every number below is in "
        "<code>probe.json</code> beside this page. The weights are the loss's own "
        f"(<code>{html.escape(loss_name)}.negative_weights</code>): negative j enters anchor "
        "a's negative term as <code>R_a = &sum;_j w_aj e^(s_aj)</code>. "
        + html.escape(_WEIGHT_WORDS.get(loss_name, "")))]
    out += [f'<p class="note warn">{n}</p>' for n in notes]
    effective_flat = _constant([r["effective_negatives"] for r in records])
    per_epoch = _per_epoch(records, labelled, effective_flat)
    out.append('<div class="row">' + _img(_histograms(first, last), "similarity histograms")
               + (_img(per_epoch, "effective negatives per epoch") if per_epoch else "")
               + "</div>")
    lo, hi = last.get("cosine_range") or (-1.0, 1.0)
    defs = [f"<b>Similarity histogram</b>: the cosines of every (anchor, negative) pair of the "
            f"probe, as a density ({len(last['cosine_histogram'])} bins over the data's range, "
            f"[{lo:g}, {hi:g}] at epoch {last['epoch']})."]
    n = last["num_negatives"]
    eff_def = ("<b>Effective number of negatives</b> of anchor a: "
               "<code>1 / &sum;_j wn_aj&sup2;</code> with <code>wn_aj = w_aj / &sum;_j "
               f"w_aj</code>, its weights normalised to sum 1: N = {n} when all its negatives "
               "weigh the same, 1 when one negative takes all the weight; the curve is its mean "
               "over the probe's anchors, the band their quartiles.")
    if effective_flat:
        eff_def += (f" It is {last['effective_negatives']:.4g} at every epoch here: constant by "
                    f"construction ({html.escape(loss_name)} gives every anchor the same "
                    "weights pattern), so no curve is drawn.")
    defs.append(eff_def)
    scatter_flat = first.get("scatter") and last.get("scatter") and _constant(
        list(first["scatter"].get("weight", [])) + list(last["scatter"].get("weight", [])))
    if first.get("scatter") and last.get("scatter") and not scatter_flat:
        out.append(_img(_scatter(first, last, labelled), "weight against similarity"))
        defs.append(f"<b>Weight against similarity</b>: a fixed sample of "
                    f"{len(last['scatter']['cosine'])} (anchor, negative) pairs, the weight "
                    "the loss gave the negative against its cosine to the anchor, at the "
                    "first and the last epoch.")
    elif scatter_flat:
        defs.append("<b>Weight against similarity</b> is not drawn: every negative weighs "
                    f"{first['scatter']['weight'][0]:g} (constant by construction).")
    if first.get("anchor_effective") and last.get("anchor_effective") and not effective_flat:
        out.append('<div class="row">' + _img(_anchor_distribution(first, last),
                                              "per-anchor effective negatives") + "</div>")
        defs.append("<b>Effective negatives of each anchor</b>: the distribution over the "
                    f"{len(last['anchor_effective'])} anchors at the first and the last "
                    "epoch (its quartiles per epoch are the band above).")
    _collapse_panel(records, out, defs)
    if min(r["positive_cosine"] for r in records) > 0.9999:
        out.append(_note("Positive cosine 1: the two views differ only where training draws "
                         "at random inside the model (SimCSE's dropout), which inference "
                         "mode turns off; the negatives' similarities and weights do not "
                         "depend on it."))
    out.append(_probe_table(records, labelled))
    if labelled:
        defs.append(
            "<b>Same class</b>: the share of negatives with the anchor's label (false negatives: "
            "does the loss lean on them?), among all, among "
            "each anchor's most-weighted (ties by similarity), and as the share of the loss's "
            "weight <code>&sum;_same w / &sum; w</code>.")
    out.append("<dl class=\"defs\">" + "".join(f"<dd>{d}</dd>" for d in defs) + "</dl>")
    return "\n".join(out)


# ------------------------------------------------------------- hardest negatives


def _cell_title(weight: float, cos: float, same: Any) -> str:
    flag = "" if same is None else ("same class " if same else "other class ")
    return f"w {weight:.2f}  cos {cos:.2f}\n{flag}"


def hardest_negatives_section(probe: dict[str, Any] | None,
                              examples: tuple[str, dict] | None) -> str | None:
    """The hardest negatives of a few probe anchors at the last epoch (the record's
    ``"hardest"``: :func:`keras_hardneg.run.report.probe.hardest_negatives`): each anchor, then the
    negatives the loss weighted most, with weight, cosine and whether they share its class.
    ``examples``: ``(draw, {training index: item})`` from the modality
    (``probe_examples``): ``draw(ax, item, seed)`` draws an item on matplotlib axes
    (:func:`keras_hardneg.modalities.report.draw_image`, ``draw_graph``), or ``draw`` is None
    and the items are shown as text (sentences); None: a table of indices. None when the
    probe kept no gallery.

    >>> probe = {"indices": [10, 11], "records": [{"epoch": 1, "hardest": [
    ...     {"anchor": 0, "positive_cosine": 0.9, "negatives": [[3, 1.3, 0.4, 0]]}]}]}
    >>> "#11 v2" in hardest_negatives_section(probe, (None, {10: "a cat", 11: "a dog"}))
    True
    """
    records = (probe or {}).get("records") or []
    last = records[-1] if records else {}
    hardest = last.get("hardest")
    indices = (probe or {}).get("indices")
    if not hardest or indices is None:
        return None
    indices = np.asarray(indices).reshape(-1)
    p = len(indices)
    draw, items = examples if examples else (None, {})

    def example(row):
        return int(indices[row % p]), row // p + 1

    def item_of(index, view):  # an example's item, or its view's (report.Views)
        item = items.get(index)
        return item.of(view) if isinstance(item, report.Views) else item

    intro = _note(
        f"At epoch {last['epoch']}, for {len(hardest)} anchors of the probe batch (seeded), the "
        f"{len(hardest[0]['negatives'])} negatives the loss weighted most (ties by the larger "
        "cosine; <code>\"hardest\"</code> in <code>probe.json</code>): w is the weight of the "
        "negative in the anchor's term (mean 1 over its negatives), cos its cosine to the "
        "anchor, same / other whether it shares the anchor's class (a false negative, red). "
        "Each cell shows the training example, not its augmented view; #i is its index in the "
        "training set and v1 / v2 the view.")
    if draw is not None:
        plt = _pyplot()
        k = len(hardest[0]["negatives"])
        fig, axes = plt.subplots(len(hardest), k + 1, figsize=(1.75 * (k + 1),
                                                                2.0 * len(hardest)),
                                 squeeze=False)
        for row, h in enumerate(hardest):
            cells = [(h["anchor"], None, f"anchor\npositive cos {h['positive_cosine']:.2f}\n")]
            cells += [(j, same, _cell_title(w, c, same)) for j, w, c, same in h["negatives"]]
            for col, (r, same, title) in enumerate(cells):
                ax = axes[row][col]
                index, view = example(r)
                item = item_of(index, view)
                if item is not None:
                    draw(ax, item, index)
                ax.set_xticks([])
                ax.set_yticks([])
                color = "black" if same is None else (_OTHER if same else _SAME)
                for spine in ax.spines.values():
                    spine.set_edgecolor(color)
                    spine.set_linewidth(1.0 if col == 0 or same is None else 2.5)
                ax.set_title(f"{title}#{index} v{view}", fontsize=8,
                             color="black" if col == 0 else color, pad=2)
        fig.subplots_adjust(wspace=0.15, hspace=0.75)
        return intro + _img(figure_uri(fig), "hardest negatives")
    rows = []
    for h in hardest:
        index, view = example(h["anchor"])
        head = (f"<b>{html.escape(report.short(str(item_of(index, view))))}</b><br>"
                if index in items else "") + f"#{index} v{view}, pos cos {h['positive_cosine']:.3f}"
        lis = []
        for j, w, c, same in h["negatives"]:
            ni, nv = example(j)
            flag = "" if same is None else (' <b class="same">same class</b>' if same
                                            else " other class")
            text = (html.escape(report.short(str(item_of(ni, nv)))) + " " if ni in items
                    else "")
            lis.append(f'<li><span class="cos">w {w:.3f} cos {c:.3f}</span>{text}'
                       f"<small>#{ni} v{nv}{flag}</small></li>")
        rows.append((head, "<ol>" + "".join(lis) + "</ol>"))
    return intro + _table(("anchor", "most-weighted negatives"), rows, "sentences")


def sampler_section(records: Sequence[dict[str, Any]]) -> str | None:
    """Batch hardness and false-negative rate of the graph sampler against uniform batches
    (None when the probe has no such record)."""
    records = [r for r in records or [] if "batches" in r]
    if not records:
        return None
    plt = _pyplot()
    labelled = "false_negative_rate" in records[-1]["batches"]["sampler"]
    n_panels = 2 if labelled else 1
    fig, axes = plt.subplots(1, n_panels, figsize=(4.6 * n_panels, 3.1), squeeze=False)
    ep = [r["epoch"] for r in records]
    keys = [("hardness", "mean in-batch cosine")] + (
        [("false_negative_rate", "false-negative rate")] if labelled else [])
    for ax, (key, label) in zip(axes[0], keys):
        for who, color in (("sampler", "tab:red"), ("uniform", "gray")):
            ax.plot(ep, [r["batches"][who][key] for r in records], marker="o", ms=3,
                    color=color, label=f"{who} batches")
        ax.legend(fontsize=8)
        _panel(ax, label, label)
    fig.tight_layout()
    shown = _thin(records)
    rows = [[str(r["epoch"])] + [_fmt(r["batches"][who].get(key)) for key, _ in keys
                                 for who in ("sampler", "uniform")] for r in shown]
    header = ["epoch"] + [f"{label}: {who}" for _, label in keys for who in ("sampler",
                                                                               "uniform")]
    return (_img(figure_uri(fig), "sampler batches against uniform") + _table(header, rows)
            + _thinned_note(len(shown), len(records)) + _note("Batches drawn from a copy of the sampler (the run's walk is not "
                    "advanced) and as many uniform batches, on the embedding bank the "
                    "sampler's graph is built from (Yang et al. 2023, Sec. 5.3)."))


# ------------------------------------------------------------------ environment
def _git_commit(path: str) -> str | None:
    """The commit of the git checkout holding ``path`` (None when it is not in one, or git
    is missing)."""
    import subprocess

    folder = os.path.dirname(os.path.abspath(path))
    probe = folder
    while not os.path.exists(os.path.join(probe, ".git")):
        parent = os.path.dirname(probe)
        if parent == probe:
            return None
        probe = parent
    try:
        out = subprocess.run(["git", "-C", folder, "rev-parse", "--short=12", "HEAD"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def environment() -> dict[str, Any]:
    """What made the page: package versions, the Keras backend, the hardware and the git
    commit of the package's checkout (None when installed from a wheel).

    >>> sorted(environment())
    ['backend', 'commit', 'devices', 'machine', 'python', 'versions']
    """
    import platform

    import keras

    import keras_hardneg

    backend = keras.backend.backend()
    versions = {"keras-hardneg": keras_hardneg.__version__, "keras": keras.__version__,
                "numpy": np.__version__}
    devices: list[str] = []
    try:
        if backend == "tensorflow":
            import tensorflow as tf

            versions["tensorflow"] = tf.__version__
            devices = [d.device_type + ":" + d.name.rsplit(":", 1)[-1]
                       for d in tf.config.list_physical_devices()]
        elif backend == "jax":
            import jax

            versions["jax"] = jax.__version__
            devices = [f"{d.platform}:{d.id}" for d in jax.devices()]
        elif backend == "torch":
            import torch

            versions["torch"] = torch.__version__
    except Exception:  # noqa: BLE001 -- the footer never fails the page
        devices = []
    try:
        import matplotlib

        versions["matplotlib"] = matplotlib.__version__
    except ImportError:
        pass
    return {"versions": versions, "backend": backend,
            "python": platform.python_version(),
            "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs",
            "devices": devices, "commit": _git_commit(keras_hardneg.__file__)}


def environment_line(env: dict[str, Any] | None = None) -> str:
    """:func:`environment` as one HTML sentence for the page's footer.

    >>> "backend" in environment_line()
    True
    """
    env = environment() if env is None else env
    versions = ", ".join(f"{k} {v}" for k, v in env["versions"].items())
    devices = ", ".join(env["devices"]) or "not listed"
    commit = (f"git commit <code>{html.escape(env['commit'])}</code>" if env["commit"]
              else "no git checkout (installed package)")
    return html.escape(f"Versions: {versions}; Python {env['python']}; backend "
                       f"{env['backend']}; {env['machine']}; devices {devices}; ") + commit + "."


# ------------------------------------------------------------------------ page
_CSS = """
body{font-family:-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:0;color:#222;
background:#fafafa}
main{max-width:1180px;margin:0 auto;padding:18px 28px 40px;background:#fff}
h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.2em;border-bottom:1px solid #ddd;
padding-bottom:4px;margin-top:1.8em}
.lead{color:#444;margin:.2em 0 .8em}
.summary{margin:0 0 .8em;max-width:60em}
nav a{margin-right:12px;font-size:.9em;color:#245}
table{border-collapse:collapse;margin:8px 0;font-size:.88em}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f3f6}
table.recipe td:first-child{white-space:nowrap}
code{font-size:.92em;background:#f4f4f4;padding:0 2px}
.note{color:#555;font-size:.86em;max-width:1050px}
img{max-width:100%;margin:6px 8px 6px 0}
.row{display:flex;flex-wrap:wrap;align-items:flex-start}
.cos{color:#777;font-family:monospace;margin-right:6px}
.warn{color:#7a4b00;background:#fff7e6;padding:4px 8px;border-left:3px solid #e0a030}
.same{color:#d73027}
dl.defs dd{margin:0 0 4px 0;color:#555;font-size:.86em;max-width:1050px}
ol{margin:0;padding-left:20px}
footer{color:#666;font-size:.82em;margin-top:2em;border-top:1px solid #ddd;padding-top:8px}
"""


def _anchor(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def render_page(title: str, sections: Sequence[tuple[str, str]], lead: str = "",
                footer: str = "", summary: str = "") -> str:
    """The whole page: ``sections`` is ``[(heading, html)]`` (one ``<section>`` each);
    ``lead`` the line under the title, ``summary`` a paragraph under it (HTML)."""
    nav = "".join(f'<a href="#{_anchor(t)}">{html.escape(t)}</a>' for t, _ in sections)
    body = "\n".join(f'<section data-section="{_anchor(t)}"><h2 id="{_anchor(t)}">'
                     f"{html.escape(t)}</h2>\n{content}</section>" for t, content in sections)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta name="generator" content="{GENERATOR}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head>\n"
        f"<body><main><h1>{html.escape(title)}</h1>"
        + (f'<p class="lead">{lead}</p>' if lead else "")
        + (f'<p class="summary">{summary}</p>' if summary else "")
        + f"<nav>{nav}</nav>\n{body}\n"
        + (f"<footer>{footer}</footer>" if footer else "")
        + "</main></body></html>\n")


def is_our_page(path: str) -> bool:
    """Whether ``path`` is a page this module wrote (its ``generator`` meta tag)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            head = f.read(2048)
    except OSError:
        return False
    return f'content="{GENERATOR}"' in head


def write_page(path: str, page: str) -> str:
    """Writes ``page`` to ``path`` atomically. An existing file that this package did not
    write is refused (``FileExistsError`` naming it)."""
    if os.path.lexists(path) and not is_our_page(path):
        raise FileExistsError(f"{path!r} exists and is not a keras-hardneg report; it is left "
                              "as it is (give another output path).")
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(page)
    os.replace(tmp, path)
    return path
