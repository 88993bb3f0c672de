"""Trial records: their fields, ranking and the ranked table.

``search`` writes them to ``results.json`` with :func:`keras_hardneg._io.atomic_write_json`.

A record is a plain dict per trial::

    {"trial_id": "0", "status": "COMPLETED", "objective": 0.93,
     "objective_name": "knn_accuracy", "beta": 1.2, "tau_plus": 0.05,
     "hyperparameters": {"beta": 1.2, "tau_plus": 0.05}, "seed": 123, "epochs": 1,
     "seconds": 12.3, "fit_seconds": 9.8, "knn_accuracy": 0.93, "finished_at": "2026-...",
     "error": None}

``seconds`` is the whole trial (building, pre-training, evaluation), the time Keras Tuner
prints as "Trial N Complete [...]"; ``fit_seconds`` the pre-training alone.

``beta`` / ``tau_plus`` are the values the trial's loss actually used (searched or
fixed by the recipe; ``0.0`` for losses equivalent to ``beta = 0`` / ``tau_plus = 0``,
``None`` for Ring).

Example:
>>> recs = [{"trial_id": "1", "status": "COMPLETED", "objective": 0.5, "beta": 1.0,
...          "tau_plus": 0.1, "hyperparameters": {}},
...         {"trial_id": "0", "status": "COMPLETED", "objective": 0.7, "beta": 0.0,
...          "tau_plus": 0.0, "hyperparameters": {}}]
>>> [r["trial_id"] for r in rank(recs)]
['0', '1']
"""

import math

__all__ = ["rank", "format_table", "INFO_FILE"]

#: per-trial facts written next to Keras Tuner's trial.json
INFO_FILE = "khn_trial.json"


def _ok(record):
    v = record.get("objective")
    return record.get("status") == "COMPLETED" and v is not None and math.isfinite(v)


def rank(records):
    """Completed trials best first (higher objective), then the others by trial id."""
    done = sorted((r for r in records if _ok(r)), key=lambda r: -r["objective"])
    rest = sorted((r for r in records if not _ok(r)), key=lambda r: str(r["trial_id"]))
    return done + rest


def trial_number(trial_id):
    """The trial's number as Keras Tuner prints it ("Running Trial #1" is trial id "00"):
    ``int(trial_id) + 1`` for a numeric id, else the id."""
    text = str(trial_id)
    return str(int(text) + 1) if text.isdigit() else text


def best(records):
    """The completed trial with the highest objective, or ``None``."""
    ranked = rank(records)
    return ranked[0] if ranked and _ok(ranked[0]) else None


def train_command(record, settings):
    """``(values, command)`` of a trial: its knob values as ``"beta 0.93, tau_plus 0.05"``
    and the ``keras-hardneg train`` command that trains with them on the search's data,
    framework, loss and batch size (``settings``: the search's ``search.json``). Knobs
    without a flag (the sampler's) make the command ``None``: use the trial's recipe."""
    import shlex

    from keras_hardneg.tuning.space import KNOBS

    values = {k: v for k, v in record.get("hyperparameters", {}).items() if k in KNOBS}
    text = ", ".join(f"{k} {_fmt(v)}" for k, v in values.items())
    if any(KNOBS[k]["section"] != "loss" for k in values):
        return text, None
    recipe = settings.get("recipe") or {}
    argv = ["keras-hardneg", "train", "--dataset", str(settings.get("dataset", "digits"))]
    limit = (recipe.get("data") or {}).get("limit_per_class")
    if limit:
        argv += ["--limit-per-class", str(limit)]
    for section in ("framework", "loss"):
        if (recipe.get(section) or {}).get("name"):
            argv += [f"--{section}", recipe[section]["name"]]
    if recipe.get("batch_size"):
        argv += ["--batch-size", str(recipe["batch_size"])]
    for knob, value in values.items():
        argv += ["--" + KNOBS[knob]["key"].replace("_", "-"), f"{value:.6g}"]
    return text, " ".join(shlex.quote(a) for a in argv)


def _fmt(v):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def format_table(records, objective_name="objective"):
    """A ranked, fixed-width text table of the trials."""
    knobs = []
    for r in records:
        for k in r.get("hyperparameters", {}):
            if k not in ("beta", "tau_plus") and k not in knobs:
                knobs.append(k)
    cols = ["rank", "trial", "status", objective_name, "beta", "tau_plus"] + knobs + ["seconds"]
    rows = []
    for i, r in enumerate(rank(records)):
        rows.append([str(i + 1) if _ok(r) else "-", trial_number(r["trial_id"]), r.get("status", "?"),
                     _fmt(r.get("objective")), _fmt(r.get("beta")), _fmt(r.get("tau_plus"))]
                    + [_fmt(r.get("hyperparameters", {}).get(k)) for k in knobs]
                    + [_fmt(r.get("seconds"))])
    widths = [max(len(c), *(len(row[j]) for row in rows)) if rows else len(c)
              for j, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in rows]
    failed = [r for r in records if r.get("status") == "FAILED" and r.get("error")]
    for r in failed:
        lines.append(f"trial {trial_number(r['trial_id'])} FAILED: {r['error']}")
    return "\n".join(lines)
