"""The run report's page: ``report.html``, one self-contained file a user opens in a browser.

Everything is inline: CSS in the head, every figure a PNG data URI (matplotlib, Agg), no
script and no URL to fetch, so the file opens by double-click, offline, and can be mailed.
This module only draws and writes; :mod:`keras_hardneg.run.run_report` gathers what a run
(or a zoo entry) measured and calls it. The sections, in order:

* the run: data, framework, loss, epochs, time; the recipe as a table;
* the figures (kNN / linear probe / SVM / STS) beside the starting encoder's ("epoch 0");
* the curves per epoch (:func:`curves_section`): loss, kNN, positive / negative cosine,
  false-negative rate of the training batches (``history.json``), the clamp where the loss
  has one, the probe's effective number of negatives;
* the negatives (:func:`negatives_section`, from the probe's records:
  :mod:`keras_hardneg.run.probe`): cosine histograms at the start and the end, the weight each
  negative received against its similarity, the effective number of negatives per epoch and,
  with labels, the share of same-class negatives among all, among the most-weighted and in
  the loss's weight; with a graph sampler, batch hardness and false-negative rate against
  uniform batches (:func:`sampler_section`);
* the modality's own (:meth:`~keras_hardneg.modalities.Modality.report_sections`, drawn
  with :mod:`keras_hardneg.modalities.report`): images a nearest-neighbour grid and a 2-D
  map, graphs the 2-D map, sentences the nearest sentences of a few queries.

Example:
>>> page = render_page("demo", [("Hello", "<p>one section</p>")], footer="made by hand")
>>> "<h2 id=\\"hello\\">Hello</h2>" in page, "http" in page
(True, False)
"""

from __future__ import annotations

import html
import os
import re
from typing import Any, Callable, Sequence

import numpy as np

from keras_hardneg.modalities import report

__all__ = ["REPORT_FILE", "GENERATOR", "render_page", "write_page", "is_our_page",
           "recipe_table", "figures_section", "curves_section", "negatives_section",
           "sampler_section"]

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
        return f"{float(value):.{digits}f}"
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
                    protocol: str = "", baseline_note: str = "") -> str:
    """The final figures (``[(key, label, value)]``: the modality's
    :meth:`~keras_hardneg.modalities.evaluation.Evaluation.report_figures`, dotted keys for
    a group's scores) beside the starting encoder's (``baseline``, same keys)."""
    rows = []
    for key, label, value in figures:
        start = _lookup(baseline or {}, key)
        change = (f"{value - start:+.4f}" if isinstance(value, (int, float))
                  and isinstance(start, (int, float)) else "&ndash;")
        rows.append((html.escape(label), _fmt(start), f"<b>{_fmt(value)}</b>", change))
    if not rows:
        return _note("No figures: this run has no evaluation (unlabeled data, or a text run "
                     "without <code>evaluation.benchmark_dir</code>).")
    out = _table(("figure", "starting encoder (epoch 0)", "trained", "change"), rows,
                 "figures")
    if protocol:
        out += _note(html.escape(protocol) + ".")
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


def curves_section(history: dict[str, list], baseline: dict[str, Any] | None,
                   records: Sequence[dict[str, Any]] | None) -> str:
    """Per-epoch curves of ``history.json`` and of the probe's records."""
    from keras_hardneg.run.report.progress import plot_knn_curve

    loss = history.get("loss") or []
    if not loss:
        return _note("No per-epoch history was kept for this encoder.")
    plt = _pyplot()
    epochs = np.arange(1, len(loss) + 1)
    panels = ["loss"]
    knn = history.get("knn_accuracy") or []
    if knn:
        panels.append("knn")
    if history.get("positive_cosine"):
        panels.append("cosine")
    shares = {k: history.get(k) for k in ("false_negative_rate", "clamp_fraction")
              if any(v > 0 for v in history.get(k) or [])}  # 0 throughout: no labels / clamp
    if shares:
        panels.append("fn")
    if records and len(records) > 1:
        panels.append("effective")
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
            if "false_negative_rate" in shares:
                ax.plot(epochs, shares["false_negative_rate"], marker="o", ms=3,
                        color="tab:red", label="false-negative rate")
            if "clamp_fraction" in shares:
                ax.plot(epochs, shares["clamp_fraction"], marker="s", ms=3,
                        color="tab:purple", label="anchors at the clamp")
            ax.set_ylim(bottom=0)
            ax.legend(fontsize=8)
            _panel(ax, "training batches", "share")
        elif name == "effective":
            ep = [r["epoch"] for r in records]
            ax.plot(ep, [r["effective_negatives"] for r in records], marker="o", ms=3,
                    color="tab:orange", label="effective")
            ax.plot(ep, [r["num_negatives"] for r in records], ls="--", color="gray",
                    label="N")
            ax.legend(fontsize=8, loc="best")
            ax.set_ylim(0, 1.08 * max(r["num_negatives"] for r in records))
            _panel(ax, "negatives per anchor (probe)", "number")
    fig.tight_layout()
    return _img(figure_uri(fig), "per-epoch curves") + _note(
        "Loss, cosines and false-negative rate: means over each epoch's training batches "
        "(<code>history.json</code>). The false-negative rate is the share of an anchor's "
        "negatives that share its label (labels never enter the loss). Effective negatives: "
        "the probe batch, scored after each epoch (see below).")


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


def _histograms(first: dict, last: dict):
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.2, 3.2))
    bins = len(first["cosine_histogram"])
    edges = np.linspace(-1.0, 1.0, bins + 1)
    for record, color, label in ((first, "gray", f"epoch {first['epoch']}"),
                                 (last, "tab:blue", f"epoch {last['epoch']}")):
        counts = np.asarray(record["cosine_histogram"], float)
        density = counts / max(counts.sum(), 1.0) / (edges[1] - edges[0])
        ax.stairs(density, edges, color=color, lw=1.8, label=label,
                  fill=record is last, alpha=0.35 if record is last else 1.0)
    ax.legend(fontsize=8)
    _panel(ax, "anchor-negative similarity (probe batch)", "density", epochs=False)
    ax.set_xlabel("cosine similarity", fontsize=9)
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


def _per_epoch(records: Sequence[dict], labelled: bool):
    plt = _pyplot()
    n_panels = 2 if labelled else 1
    fig, axes = plt.subplots(1, n_panels, figsize=(4.6 * n_panels, 3.1), squeeze=False)
    ep = [r["epoch"] for r in records]
    ax = axes[0][0]
    ax.plot(ep, [r["effective_negatives"] for r in records], marker="o", ms=3,
            color="tab:orange", label="effective 1/sum(wn^2)")
    ax.plot(ep, [r["num_negatives"] for r in records], ls="--", color="gray", label="N")
    ax.set_ylim(0, 1.08 * max(r["num_negatives"] for r in records))
    ax.legend(fontsize=8, loc="best")
    _panel(ax, "effective number of negatives", "negatives per anchor")
    if labelled:
        ax = axes[0][1]
        fn = [r["false_negatives"] for r in records]
        top = fn[0].get("top_fraction", 0.05)
        ax.plot(ep, [f["all"] for f in fn], marker="o", ms=3, color="gray",
                label="among all negatives")
        ax.plot(ep, [f["most_weighted"] for f in fn], marker="o", ms=3, color=_OTHER,
                label=f"among the most-weighted {top:.0%}")
        ax.plot(ep, [f["weight"] for f in fn], marker="s", ms=3, color="tab:purple",
                label="share of the loss's weight")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
        _panel(ax, "same-class (false) negatives", "share")
    fig.tight_layout()
    return figure_uri(fig)


def negatives_section(probe: dict[str, Any] | None, loss_name: str) -> str:
    """What the negatives did, from the probe's records (see the module docstring)."""
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
        f"in inference mode on the {html.escape(space)}. The weights are the loss's own "
        f"(<code>{html.escape(loss_name)}.negative_weights</code>): negative j enters anchor "
        "a's negative term as <code>R_a = &sum;_j w_aj e^(s_aj)</code>. "
        + html.escape(_WEIGHT_WORDS.get(loss_name, "")))]
    out.append('<div class="row">' + _img(_histograms(first, last), "similarity histograms")
               + _img(_per_epoch(records, labelled), "effective negatives per epoch") + "</div>")
    if first.get("scatter") and last.get("scatter"):
        out.append(_img(_scatter(first, last, labelled), "weight against similarity"))
    if min(r["positive_cosine"] for r in records) > 0.9999:
        out.append(_note("Positive cosine 1: the two views differ only where training draws "
                         "at random inside the model (SimCSE's dropout), which inference "
                         "mode turns off; the negatives' similarities and weights do not "
                         "depend on it."))
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
    out.append(_table(header, rows, "probe") + _thinned_note(len(shown), len(records)))
    if labelled:
        out.append(_note(
            "Same class: the share of negatives with the anchor's label (false negatives, the "
            "question the seeds ask: do hard negatives pick them up?), among all, among each "
            "anchor's most-weighted (ties by similarity), and as the share of the loss's "
            "weight <code>&sum;_same w / &sum; w</code>."))
    return "\n".join(out)


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


# ------------------------------------------------------------------------ page
_CSS = """
body{font-family:-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:0;color:#222;
background:#fafafa}
main{max-width:1180px;margin:0 auto;padding:18px 28px 40px;background:#fff}
h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.2em;border-bottom:1px solid #ddd;
padding-bottom:4px;margin-top:1.8em}
.lead{color:#444;margin:.2em 0 .8em}
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
ol{margin:0;padding-left:20px}
footer{color:#666;font-size:.82em;margin-top:2em;border-top:1px solid #ddd;padding-top:8px}
"""


def _anchor(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def render_page(title: str, sections: Sequence[tuple[str, str]], lead: str = "",
                footer: str = "") -> str:
    """The whole page: ``sections`` is ``[(heading, html)]`` (one ``<section>`` each)."""
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
