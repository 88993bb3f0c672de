"""A zoo entry's figures over pre-training seeds, its untrained baseline and its NT-Xent twin.

The zoo index (:mod:`keras_hardneg.zoo_store`) carries, for an entry with weights, what
this module derives from the entry's ``results.json``; ``keras-hardneg zoo list``,
``zoo show``, ``zoo compare A B``, ``models/README.md`` and the docs' zoo page print it.

Index fields (added to the record of an entry with weights; a docs page reads them as they
are):

* ``metrics``: ``{metric: {"mean", "std", "n", "per_seed": {seed: value}}}`` -- each
  figure over the pre-training seeds the entry was trained at (``std``: the sample standard
  deviation, ``ddof=1``; ``None`` when ``n == 1``). Metrics and their units are those of
  ``results.json``: ``svm_accuracy``, ``knn_accuracy``, ``linear_probe_accuracy`` are
  fractions in ``[0, 1]``; ``sts_avg`` (Spearman x 100) and ``senteval_avg`` (accuracy in
  %) are on a 0-100 scale. :data:`METRICS` names each with its display scale.
* ``weights_seed``: the seed whose weights the entry holds (its ``per_seed`` value is the
  figure ``khn.zoo.load`` reproduces).
* ``baseline``: ``{"what", "metrics"}`` -- the same evaluation of the encoder before this
  training (graphs: the recipe's encoder at its random initialisation, per seed; MiniLM:
  the zero-shot checkpoint, deterministic), or ``None`` where not measured.
* ``twin``: ``{"name", "metric", "difference", "spread", "inside_spread"}`` -- the entry's
  NT-Xent twin (the same recipe with NT-Xent and uniform batches), compared on the
  headline metric: ``difference`` = this entry's mean minus the twin's (the metric's own
  units); ``spread`` = the larger of the two seed standard deviations; ``inside_spread``:
  ``abs(difference) <= spread``, i.e. the seeds of either entry vary by as much as the two
  entries differ (``None`` with a single seed on either side: no spread measured).
* ``twinned_by``: on an NT-Xent entry, the entries that name it as their twin.
* ``setting``: ``{"framework", "loss", "sampler"}`` -- what tells twins apart.

The twin is ``results["twin"]`` where the entry names it, else the entry of the same name
with the loss token (``hard``, ``debiased``, ``ring``, ``unremix``) replaced by ``ntxent``
and ``-batchsampler`` dropped (``graphcl-hard-batchsampler-nci1`` ->
``graphcl-ntxent-nci1``), when that entry has weights.

Example:

>>> s = summarize({"0": 0.88, "1": 0.86, "2": 0.87})
>>> round(s["mean"], 4), round(s["std"], 4), s["n"]
(0.87, 0.01, 3)
>>> compare_summaries(s, summarize({"0": 0.875, "1": 0.85, "2": 0.86}))["inside_spread"]
True
"""

from __future__ import annotations

import math
from typing import Any

from keras_hardneg.modalities import MODALITIES, get_modality

__all__ = ["METRICS", "all_metrics", "loss_tokens", "run_metrics", "summarize",
           "entry_metrics", "index_fields", "headline", "compare_summaries", "twin_candidate", "link_twins",
           "format_summary", "format_difference", "verdict", "compare_records", "twins_markdown"]


def all_metrics() -> dict[str, tuple[str, float]]:
    """metric -> (label, display scale): the figures an entry can carry, each modality's
    in its headline order (its :class:`~keras_hardneg.modalities.Figure` s: index key,
    index label, scale), over every registered modality."""
    out = {}
    for name in MODALITIES.names():
        for f in get_modality(name).figures:
            out.setdefault(f.index_key, (f.index_label or f.label, f.scale))
    return out


#: :func:`all_metrics` of the built-in modalities.
METRICS = all_metrics()


def loss_tokens() -> tuple[str, ...]:
    """Name tokens of the losses an NT-Xent twin replaces: every registered loss but the
    baseline (:func:`keras_hardneg.losses.baseline_names`)."""
    from keras_hardneg import losses  # the registrations (imports Keras: only when asked)

    baseline = set(losses.baseline_names())
    return tuple(n for n in losses.LOSSES.names() if n not in baseline)


def run_metrics(results: dict[str, Any]) -> dict[str, float]:
    """The :func:`all_metrics` of one run's figures (a ``results.json``-shaped dict): each
    modality's figures found there (``Evaluation.index_metrics``)."""
    out = {}
    for name in MODALITIES.names():
        out.update(get_modality(name).index_metrics(results))
    return out


def summarize(per_seed: dict[Any, float]) -> dict[str, Any]:
    """``{"mean", "std", "n", "per_seed"}`` of ``{seed: value}`` (sample std, ``None`` for
    one value)."""
    values = [float(v) for v in per_seed.values()]
    if not values:
        raise ValueError("`per_seed` must hold at least one value.")
    n = len(values)
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else None
    return {"mean": mean, "std": std, "n": n,
            "per_seed": {str(k): float(v) for k, v in per_seed.items()}}


def entry_metrics(results: dict[str, Any], seed: int = 0) -> dict[str, dict[str, Any]]:
    """``{metric: summary}`` of an entry: over ``results["seeds"]["per_seed"]`` where the
    entry was trained at several seeds, else its one run (at ``seed``)."""
    per_seed = (results.get("seeds") or {}).get("per_seed") or {}
    if not per_seed:
        return {k: summarize({str(seed): v}) for k, v in run_metrics(results).items()}
    keys = [k for k in all_metrics() if all(k in fig for fig in per_seed.values())]
    return {k: summarize({s: fig[k] for s, fig in per_seed.items()}) for k in keys}


def index_fields(results: dict[str, Any], recipe: dict[str, Any] | None) -> dict[str, Any]:
    """The fields this module adds to an index record with weights (see the module
    docstring; ``twin`` is filled by :func:`link_twins` from ``twin_name``)."""
    recipe = recipe or {}
    seed = int(recipe.get("seed") or 0)
    seeds = results.get("seeds") or {}
    base = results.get("baseline") or {}
    base_metrics = {}
    if base.get("per_seed"):
        keys = [k for k in all_metrics() if all(k in fig for fig in base["per_seed"].values())]
        base_metrics = {k: summarize({s: fig[k] for s, fig in base["per_seed"].items()})
                        for k in keys}
    loss = dict(recipe.get("loss") or {})
    return {
        "metrics": entry_metrics(results, seed),
        "weights_seed": int(seeds.get("weights_seed", seed)),
        "baseline": {"what": base.get("what"), "metrics": base_metrics} if base_metrics
        else None,
        "twin_name": results.get("twin"),
        "twin_what": results.get("twin_what"),
        "setting": {"framework": (recipe.get("framework") or {}).get("name"), "loss": loss,
                    "sampler": (recipe.get("sampler") or {}).get("name")},
    }


def headline(record: dict[str, Any]) -> str | None:
    """The first of :data:`METRICS` the record has (what twins are compared on)."""
    return next((k for k in all_metrics() if k in (record.get("metrics") or {})), None)


def compare_summaries(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """``{"difference", "spread", "inside_spread"}`` of summary ``a`` against ``b`` (see
    the module docstring)."""
    difference = a["mean"] - b["mean"]
    if a["std"] is None or b["std"] is None:
        return {"difference": difference, "spread": None, "inside_spread": None}
    spread = max(a["std"], b["std"])
    return {"difference": difference, "spread": spread,
            "inside_spread": bool(abs(difference) <= spread)}


def twin_candidate(name: str) -> str | None:
    """The NT-Xent twin's name by the zoo's naming (see the module docstring), or None."""
    tokens = name.split("-")
    replaced = loss_tokens()
    if "batchsampler" not in tokens and not any(t in replaced for t in tokens):
        return None
    tokens = ["ntxent" if t in replaced else t for t in tokens if t != "batchsampler"]
    candidate = "-".join(tokens)
    return candidate if candidate != name else None


#: What an entry's twin differs by, unless its ``results.json`` says (``twin_what``).
DEFAULT_TWIN = "NT-Xent"


def link_twins(records: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Fills ``twin`` and ``twinned_by`` of index ``records`` (``{name: record}``, changed in
    place and returned; ``twin["what"]``: what the twin differs by, ``twin_what`` or
    :data:`DEFAULT_TWIN`); drops the working keys ``twin_name`` and ``twin_what``."""
    for record in records.values():
        record.pop("twinned_by", None)
    for name, record in records.items():
        if record.get("status") != "weights":
            continue
        what = (record.pop("twin_what", None) or (record.get("twin") or {}).get("what")
                or DEFAULT_TWIN)
        twin = (record.pop("twin_name", None) or (record.get("twin") or {}).get("name")
                or twin_candidate(name))
        other = records.get(twin) if twin else None
        record["twin"] = None
        if other is None or other.get("status") != "weights" or twin == name:
            continue
        metric = headline(record)
        if metric is None or metric not in (other.get("metrics") or {}):
            continue
        record["twin"] = {"name": twin, "metric": metric, "what": what,
                          **compare_summaries(record["metrics"][metric],
                                              other["metrics"][metric])}
        other.setdefault("twinned_by", []).append(name)
    for record in records.values():
        record.pop("twin_name", None)
        record.pop("twin_what", None)
    return records


def twin_label(what: str | None) -> str:
    """How a card and ``zoo show`` name an entry's twin: ``"NT-Xent twin"`` (the default:
    the same recipe with NT-Xent and uniform batches), or ``results.json``'s ``twin_what``
    (e.g. ``"in-batch-only twin"`` for a retrieval entry whose twin mines no negatives)."""
    return f"{what or DEFAULT_TWIN} twin"


def format_summary(metric: str, summary: dict[str, Any] | None) -> str:
    """``"87.98 ± 1.93 (3)"``: mean ± std (n seeds) on the metric's display scale."""
    if not summary:
        return "-"
    scale = all_metrics()[metric][1]
    text = f"{summary['mean'] * scale:.2f}"
    if summary.get("std") is not None:
        text += f" ± {summary['std'] * scale:.2f}"
    return text + f" ({summary['n']})"


def format_difference(metric: str, difference: float) -> str:
    return f"{difference * all_metrics()[metric][1]:+.2f}"


def verdict(metric: str, twin: dict[str, Any]) -> str:
    """One plain line on a difference: ``"+0.32, inside the spread (± 1.93)"``."""
    diff = format_difference(metric, twin["difference"])
    if twin.get("inside_spread") is None:
        return f"{diff} (one seed: no spread measured)"
    where = "inside" if twin["inside_spread"] else "outside"
    return f"{diff}, {where} the spread (± {twin['spread'] * all_metrics()[metric][1]:.2f})"


def _loss_text(loss: dict[str, Any]) -> str:
    if not loss:
        return "-"
    params = ", ".join(f"{k} {v}" for k, v in loss.items() if k != "name")
    return f"{loss.get('name')} ({params})" if params else str(loss.get("name"))


def compare_records(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two index records side by side (each with ``name``): ``{"names", "setting": rows,
    "metrics": rows, "baseline": rows}``, each row ``(label, a text, b text, note)``."""
    names = (a["name"], b["name"])
    setting = []
    for key, label in (("framework", "framework"), ("loss", "loss"), ("sampler", "sampler")):
        va, vb = ((r.get("setting") or {}).get(key) for r in (a, b))
        if key == "loss":
            va, vb = _loss_text(va or {}), _loss_text(vb or {})
        setting.append((label, str(va or "-"), str(vb or "-"), "" if va == vb else "differs"))
    setting.append(("weights", f"seed {a.get('weights_seed', '-')}",
                    f"seed {b.get('weights_seed', '-')}", ""))
    metrics = []
    ma, mb = a.get("metrics") or {}, b.get("metrics") or {}
    for metric in all_metrics():
        if metric not in ma and metric not in mb:
            continue
        sa, sb = ma.get(metric), mb.get(metric)
        note = verdict(metric, compare_summaries(sa, sb)) if sa and sb else ""
        metrics.append((all_metrics()[metric][0], format_summary(metric, sa),
                        format_summary(metric, sb), note))
        seeds = sorted({*(sa or {}).get("per_seed", {}), *(sb or {}).get("per_seed", {})},
                       key=lambda s: (not s.isdigit(), int(s) if s.isdigit() else s))
        scale = all_metrics()[metric][1]
        for seed in seeds:
            va, vb = ((s or {}).get("per_seed", {}).get(seed) for s in (sa, sb))
            metrics.append((f"  seed {seed}", "-" if va is None else f"{va * scale:.2f}",
                            "-" if vb is None else f"{vb * scale:.2f}", ""))
    baseline = []
    ba, bb = a.get("baseline") or {}, b.get("baseline") or {}
    for metric in all_metrics():
        sa, sb = (ba.get("metrics") or {}).get(metric), (bb.get("metrics") or {}).get(metric)
        if sa or sb:
            baseline.append((f"before training: {all_metrics()[metric][0]}",
                             format_summary(metric, sa), format_summary(metric, sb),
                             ba.get("what") or bb.get("what") or ""))
    return {"names": names, "setting": setting, "metrics": metrics, "baseline": baseline}


def twins_markdown(records: dict[str, dict[str, Any]]) -> list[str]:
    """The twins table (markdown lines; ``[]`` without twins): every entry of index
    ``records`` with an NT-Xent twin beside it -- models/README.md and the docs' zoo page."""
    rows = []
    for name in sorted(records, key=lambda n: ((records[n].get("twin") or {}).get("name", ""),
                                                n)):
        t = records[name].get("twin")
        if not t:
            continue
        metric = t["metric"]
        twin = records[t["name"]]
        base = (records[name].get("baseline") or {}).get("metrics", {}).get(metric)
        inside = {True: "**inside**", False: "outside", None: "one seed: not measured"}[
            t["inside_spread"]]
        rows.append(f"| `{name}` | {format_summary(metric, records[name]['metrics'][metric])}"
                    f" | `{t['name']}` | {format_summary(metric, twin['metrics'][metric])} | "
                    f"{format_difference(metric, t['difference'])} | {inside} | "
                    f"{format_summary(metric, base)} |")
    if not rows:
        return []
    return [
        "", "## Twins: each entry beside its NT-Xent twin", "",
        "The entries trained with hard negatives (HCL), debiasing or BatchSampler batches beside",
        "their NT-Xent twin (the same recipe with NT-Xent and uniform batches), on the headline",
        "figure (graphs: 10-fold SVM accuracy, %; sentences: STS avg, Spearman x 100; images:",
        "kNN accuracy, %) as mean ± std over pre-training seeds (n); the weights are seed 0's.",
        "The difference is **inside the spread** when it is no larger than the seed-to-seed",
        "standard deviation of either entry: the seeds alone move the figure that much, so no",
        "difference is shown. Before training: graphs, the same GIN at its random",
        "initialisation (seeds 0-2); MiniLM, the zero-shot checkpoint. `keras-hardneg zoo",
        "compare A B` prints every figure and seed; the cells and their commands are in",
        "benchmarks/results/zoo_twins/ (`python benchmarks/zoo_twins.py report` prints them).", "",
        "| entry | figure | NT-Xent twin | twin's figure | difference | inside the spread? "
        "| before training |",
        "|---|---|---|---|---|---|---|",
    ] + rows
