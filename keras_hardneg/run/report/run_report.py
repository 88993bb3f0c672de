"""The run report: what a run measured (or what a zoo entry holds), gathered into
``report.html`` (:mod:`keras_hardneg.run.report.page` draws it).

* :func:`write_run_report` -- from what a run holds in memory: :func:`~keras_hardneg.run.train`
  calls it after writing ``results.json`` (``train(..., report=False)`` skips it);
* :func:`report_target` -- ``keras-hardneg report RUN | ZOO_ENTRY``: a run directory (its
  ``recipe.json``, ``history.json``, ``results.json``, ``baseline.json``, ``probe.json`` and
  encoder: ``preset/``, else the last checkpoint), or a zoo entry (a folder with ``preset/``
  and ``recipe.json``, or an entry's name) with the data given (``overrides``: the CLI's
  ``--dataset``); anything else is refused in one line (:class:`RunDirectoryError`).

The figures are set beside the *starting encoder*'s: the recipe's encoder as built with the
recipe's seed before any step (for a pretrained backbone, the pretrained weights), measured by
the same protocol (images: the kNN of ``baseline.json`` when the run measured it; the linear
probe of the starting encoder is not measured, its cost being a training of its own). Where
no probe was recorded (a zoo entry, a run trained before the report existed) the negatives are
scored once for the starting and once for the trained encoder, on the encoder's features (a
zoo entry keeps no projection head), and the page says so.
"""

from __future__ import annotations

import datetime
import html
import json
import os
import time
from typing import Any

import keras
import numpy as np

from keras_hardneg.export.preset import PRESET_DIR
from keras_hardneg.registry import SAMPLERS, SCHEDULES
from keras_hardneg.run.report import probe as probe_lib
from keras_hardneg.run.report import page
from keras_hardneg.run.artifacts import RunDirectoryError, is_run_directory, restore_run
from keras_hardneg.run.build import build_loss, build_model, build_view_maker, load_data
from keras_hardneg.modalities import modality_of
from keras_hardneg.run.recipe import load_recipe

__all__ = ["write_run_report", "report_target", "starting_figures", "make_probe_callback",
           "REPORT_FILE"]

REPORT_FILE = page.REPORT_FILE


def _read_json(path: str) -> Any:
    """The JSON file at ``path``; None when there is none. A file that is there but does
    not parse (a truncated ``history.json``) raises :class:`RunDirectoryError` naming it:
    the page never says "no history" of a history it could not read."""
    if not os.path.isfile(path):
        return None
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise RunDirectoryError(
            f"{path} is damaged ({' '.join(str(e).split())}); the report is not rewritten. "
            "Restore the file, or remove it to report without it.") from None


def _probe_view_maker(recipe: dict[str, Any], modality: Any, x: Any) -> Any:
    """A fresh view maker of the recipe's, seeded apart from the model's."""
    seeded = {**recipe, "seed": int(recipe["seed"]) + probe_lib.PROBE_SEED_OFFSET}
    return build_view_maker(seeded, modality.input_shape(x), **modality.view_context(x))


def make_probe_callback(recipe: dict[str, Any], modality: Any, x_train: Any, y_train: Any,
                        feed: Any, output_dir: str | None,
                        start_epoch: int = 0) -> probe_lib.NegativesProbe:
    """The :class:`~keras_hardneg.run.report.probe.NegativesProbe` of a run (its probe batch drawn
    now; with a graph sampler, its batch statistics too)."""
    batch = probe_lib.make_probe_batch(recipe, modality, x_train, y_train,
                                       _probe_view_maker(recipe, modality, x_train))
    sampler = labels = None
    if SAMPLERS.get(recipe["sampler"]["name"]).tags.get("graph") and feed.sampler is not None:
        sampler = feed.sampler
        n = modality.num_examples(x_train)
        labels = modality.labels_of(x_train, y_train, np.arange(n))
    path = None if output_dir is None else os.path.join(output_dir, probe_lib.PROBE_FILE)
    return probe_lib.NegativesProbe(batch, path, start_epoch=start_epoch, sampler=sampler,
                                    sampler_labels=labels, seed=recipe["seed"])


# --------------------------------------------------------------- starting point
def _starting_encoder(recipe: dict[str, Any], x_train: Any) -> Any:
    """The recipe's encoder as the run started it (built with the recipe's seed)."""
    policy = keras.config.dtype_policy()
    keras.config.set_dtype_policy(recipe["precision"])
    try:
        return build_model(recipe, x_train=x_train).encoder
    finally:
        keras.config.set_dtype_policy(policy)


def starting_figures(recipe: dict[str, Any], modality: Any, encoder: Any, train: tuple,
                     test: Any, baseline: dict[str, Any] | None) -> dict[str, Any]:
    """The starting encoder's figures: ``baseline`` (``baseline.json``) where it has them,
    else measured now on ``train`` / ``test`` by the modality's protocol (images: kNN only).
    ``encoder``: the starting encoder, or a function returning it (called only if needed)."""
    baseline = dict(baseline or {})
    if any(baseline.get(k) is not None for k in modality.result_keys) or \
            modality.knn_evaluation and (test is None or test[0] is None):
        return baseline
    quick = {**recipe, "evaluation": {**recipe["evaluation"], "linear_probe": False}}
    if callable(encoder) and not isinstance(encoder, keras.layers.Layer):
        encoder = encoder()
    figures = modality.evaluate(encoder, quick, train, test)
    figures = {k: v for k, v in figures.items() if k in modality.result_keys}
    return {**figures, **baseline}


def _encoder_probe(recipe: dict[str, Any], modality: Any, x: Any, y: Any, encoders: list,
                   epochs: list) -> dict[str, Any]:
    """Probe records on the encoders' features (where no probe was kept)."""
    batch = probe_lib.make_probe_batch(recipe, modality, x, y,
                                       _probe_view_maker(recipe, modality, x))
    loss = build_loss(recipe)
    records = []
    for encoder, epoch in zip(encoders, epochs):
        z1 = encoder(batch.view1, training=False)
        z2 = encoder(batch.view2, training=False)
        record = probe_lib.score_pairs(z1, z2, loss, batch.labels, scatter_seed=recipe["seed"])
        record["epoch"] = int(epoch)
        records.append(record)
    return {"probe_size": len(batch.indices), "indices": batch.indices.tolist(),
            "records": records,
            "space": "encoder's features (no per-epoch probe was kept for this encoder: "
                     "scored at the start and the end only)"}


# ----------------------------------------------------------- what the page adds
def learning_rate_curve(recipe: dict[str, Any], steps_per_epoch: int | None,
                        points: int = 200) -> dict[str, Any] | None:
    """The recipe's learning-rate schedule at up to ``points`` steps of the run:
    ``{"schedule": name, "epochs": [step / steps_per_epoch], "values": [rate]}`` (None
    without ``steps_per_epoch``).

    >>> from keras_hardneg.run.recipe import load_recipe
    >>> recipe = load_recipe({"epochs": 2})
    >>> curve = learning_rate_curve(recipe, steps_per_epoch=10)
    >>> rate = recipe["optimizer"]["learning_rate"]
    >>> curve["schedule"], round(curve["values"][0] / rate, 6), curve["epochs"][-1]
    ('warmup_cosine', 1.0, 1.9)
    """
    if not steps_per_epoch:
        return None
    spec = dict(recipe["schedule"])
    name = spec.pop("name")
    rate = recipe["optimizer"]["learning_rate"]
    schedule = SCHEDULES.make(name, spec, rate, int(steps_per_epoch), int(recipe["epochs"]))
    total = int(steps_per_epoch) * int(recipe["epochs"])
    steps = np.unique(np.linspace(0, max(total - 1, 0), min(points, max(total, 1))).round()
                      .astype(int))
    if callable(schedule):
        values = [float(keras.ops.convert_to_numpy(schedule(int(t)))) for t in steps]
    else:
        values = [float(schedule)] * len(steps)
    return {"schedule": name, "epochs": (steps / float(steps_per_epoch)).tolist(),
            "values": values}


def _has_batch_norm(encoder: Any) -> bool:
    return any(v.name in ("moving_mean", "moving_variance")
               for v in getattr(encoder, "non_trainable_variables", []))


def probe_view_notes(recipe: dict[str, Any], encoder: Any, history: dict[str, list],
                     records: list, space: str = "projection") -> list[str]:
    """Where the probe's view of the negatives differs from training's (HTML sentences):
    inference-mode batch norm, GraphCL's cross-view pairing, a queue or a memory bank; with
    the training batches' and the probe's cosines side by side.

    >>> recipe = {"framework": {"name": "moco_v2", "queue_size": 4096}, "batch_size": 256}
    >>> probe_view_notes(recipe, None, {}, [])[0][:6]
    'Queue:'
    """
    notes = []
    framework = recipe["framework"]
    name = str(framework["name"])
    b = int(recipe["batch_size"])
    if name == "graphcl" and framework.get("pairing", "cross_view") == "cross_view":
        notes.append(f"Pairing: training pairs GraphCL's way (cross-view: each graph's view 1 "
                     f"against the view 2 of the other B &minus; 1 = {b - 1} graphs), the "
                     "probe SimCLR's way (in-batch: 2P &minus; 2 negatives per anchor, both "
                     "views); the probe's negatives include same-view pairs that training "
                     "never contrasts.")
    if name == "dual_encoder":
        notes.append(f"Pairing: training contrasts each query with the batch's documents (its "
                     f"positive against the other B &minus; 1 = {b - 1} positives and the "
                     "mined negatives); the probe pairs SimCLR's way (view 1 the query, view 2 "
                     "its positive document; in-batch: 2P &minus; 2 negatives per anchor, "
                     "queries among them), so query-to-query pairs count as negatives here "
                     "that training never contrasts.")
    queue = framework.get("queue_size") or 0
    if queue:
        notes.append(f"Queue: training's negatives are a queue of {int(queue)} keys from the "
                     "momentum encoder; the probe contrasts the query projections in-batch "
                     "(no queue), so its negatives are other than training's.")
    bank = framework.get("memory_bank_size") or 0
    if bank:
        notes.append(f"Memory bank: training adds {int(bank)} stored embeddings as negatives; "
                     "the probe does not.")
    if _has_batch_norm(encoder):
        notes.append("Batch norm: the probe runs the encoder in inference mode, normalising "
                     "with the moving statistics where training normalises each batch by its "
                     "own; the probe's cosines can differ from the training batches'.")
    pos, neg = history.get("positive_cosine") or [], history.get("negative_cosine") or []
    if notes and pos and neg and records:
        last = records[-1]
        notes.append(f"Cosines at the last epoch: training batches {neg[-1]:.2f} (negative) / "
                     f"{pos[-1]:.2f} (positive); the probe {last['negative_cosine']:.2f} / "
                     f"{last['positive_cosine']:.2f} on the {html.escape(space)}.")
    return notes


def _gallery_examples(modality: Any, probe: dict[str, Any], x: Any, y: Any):
    """``(kind, {training index: item})`` of the examples the gallery shows, from the
    modality's ``probe_examples(x, y, indices)`` hook (None when it has none)."""
    records = probe.get("records") or []
    hardest = records[-1].get("hardest") if records else None
    hook = getattr(modality, "probe_examples", None)
    if not hardest or hook is None or probe.get("indices") is None:
        return None
    indices = np.asarray(probe["indices"]).reshape(-1)
    p = len(indices)
    rows = {h["anchor"] for h in hardest} | {n[0] for h in hardest for n in h["negatives"]}
    needed = np.array(sorted({int(indices[r % p]) for r in rows}))
    got = hook(x, y, needed)
    if got is None:
        return None
    kind, items = got
    return kind, {int(i): item for i, item in zip(needed, items)}


# ------------------------------------------------------------------------ page
def _data_name(data: dict[str, Any]) -> str:
    """The data's short name: a registered dataset's or corpus's, else its folder's or
    file's."""
    for key in ("dataset", "corpus"):
        if isinstance(data.get(key), str) and data[key]:
            return data[key]
    for key in ("folder", "path", "directory", "train"):
        if isinstance(data.get(key), str) and data[key]:
            path = os.path.normpath(data[key])
            if os.path.basename(path) in ("train", "training"):  # FOLDER/train
                path = os.path.dirname(path)
            return os.path.basename(path)
    return str(data["name"])


def write_run_report(path: str, *, recipe: dict[str, Any], encoder: Any, train: tuple,
                     test: Any, history: dict[str, list] | None, results: dict[str, Any],
                     baseline: dict[str, Any] | None, probe: dict[str, Any] | None,
                     where: str, what: str = "run", starting_encoder: Any = None,
                     notes: str = "", probe_path: str | None = None) -> dict[str, Any]:
    """Writes the report of a trained ``encoder`` to ``path`` and returns ``{"path",
    "seconds", "bytes", "probe_seconds"}``.

    Args:
        recipe: the run's recipe.
        encoder: the trained encoder.
        train, test: the evaluation splits (``(x, y)``; ``test`` may be None).
        history: ``history.json``'s contents (or None).
        results: the final figures (``results.json``).
        baseline: ``baseline.json`` (or None).
        probe: the probe's ``{"records": [...], ...}``; None: scored now on the encoder's
            features (start and end).
        where: the run directory or entry, as the page names it.
        what: ``"run"`` or ``"zoo entry"``.
        starting_encoder: the encoder before training (built from the recipe when None).
        notes: more HTML for the figures section.
        probe_path: the run's ``probe.json``: starting figures measured here are kept in it
            (``"starting_figures"``), so that the page is redone without measuring them.
    """
    start = time.perf_counter()
    modality = modality_of(recipe)
    history = history or {}
    x, y = train
    labelled = y is not None or hasattr(x, "labels_of")  # a source carries its labels
    built = {} if starting_encoder is None else {"encoder": starting_encoder}

    def start_encoder():
        if "encoder" not in built:
            built["encoder"] = _starting_encoder(recipe, x)
        return built["encoder"]

    figures = modality.report_figures(results, recipe)
    start_figures = _start_figures(recipe, modality, start_encoder, train, test, baseline,
                                   probe, probe_path) if figures else {}
    if probe is None or not probe.get("records"):
        probe = _encoder_probe(recipe, modality, x, y if labelled else None,
                               [start_encoder(), encoder],
                               [0, len(history.get("loss") or []) or recipe["epochs"]])
    probe = _with_probe_indices(probe, probe_path)
    loss = build_loss(recipe)
    loss_name = type(loss).__name__
    records = probe.get("records") or []
    probe_note = _not_rerun_note(modality, results, start_figures)
    space = probe.get("space", "projection")
    view_notes = probe_view_notes(recipe, encoder, history, records, space)
    labels = modality.labels_of(x, y, np.arange(modality.num_examples(x))) if labelled else None
    curve_notes = (page._note("The training batches' cosines above and the probe's below are "
                              "not measured alike (see Negatives). " + view_notes[-1])
                   if view_notes and view_notes[-1].startswith("Cosines") else "")
    sections = [
        ("Figures", page.figures_section(
            figures, start_figures, modality.describe_evaluation(recipe),
            "Starting encoder: the recipe's encoder built with its seed, before any step "
            f"(measured by the same protocol{probe_note})." + notes, results=results)),
        ("Curves per epoch", page.curves_section(
            history, start_figures, records,
            uniform_fn=page.uniform_false_negative_rate(labels),
            has_clamp=bool(getattr(loss, "has_clamp", False)),
            learning_rate=learning_rate_curve(recipe, results.get("steps_per_epoch")),
            notes=curve_notes)),
        ("Negatives", page.negatives_section(probe, loss_name, view_notes)),
    ]
    gallery = page.hardest_negatives_section(probe, _gallery_examples(modality, probe, x, y))
    if gallery is not None:
        sections.append(("Hardest negatives", gallery))
    batches = page.sampler_section(records)
    if batches is not None:
        sections.append(("Sampler batches against uniform", batches))
    sections += modality.report_sections(encoder, recipe, train, test)
    sections += _projector_section(path, what)
    sections.append(("Recipe", page.recipe_table(recipe)))
    title = (f"{modality.method_name(recipe)} + {recipe['loss']['name']} on "
             f"{_data_name(recipe['data'])}: what the negatives did")
    lead = _lead_line(recipe, results, history, modality, what, where)
    return _write_page(path, title, sections, lead, records, start,
                       summary=html.escape(page.summary_sentence(probe)))


def _not_rerun_note(modality: Any, results: dict[str, Any], start: dict[str, Any]) -> str:
    """Which of the trained encoder's figures the starting encoder was not measured by."""
    not_rerun = [f.label for f in modality.figures if f.key in results and f.key not in start]
    return f"; not rerun for it: {', '.join(not_rerun)}" if not_rerun else ""


def _start_figures(recipe: dict[str, Any], modality: Any, start_encoder: Any, train: tuple,
                   test: Any, baseline: dict[str, Any] | None, probe: dict[str, Any] | None,
                   probe_path: str | None) -> dict[str, Any]:
    """The starting encoder's figures: those ``probe.json`` kept, else measured now (and
    kept there for the next page)."""
    stored = (probe or {}).get("starting_figures")
    if stored:
        return {**stored, **(baseline or {})}
    found = starting_figures(recipe, modality, start_encoder, train, test, baseline)
    if probe_path and set(found) - set(baseline or {}):
        probe_lib.store(probe_path, starting_figures=found)
    return found


def _with_probe_indices(probe: dict[str, Any], probe_path: str | None) -> dict[str, Any]:
    """``probe`` with its examples' indices (train's in-memory records lack them: read from
    ``probe.json``)."""
    if probe.get("indices") is None and probe_path:
        stored = probe_lib.read_probe(probe_path) or {}
        if stored.get("indices") is not None:
            return {**probe, "indices": stored["indices"]}
    return probe


def _projector_section(path: str, what: str) -> list:
    """The section naming the TensorBoard projector files a run wrote beside its page."""
    projector = os.path.join(os.path.dirname(os.path.abspath(path)), probe_lib.PROJECTOR_DIR)
    if what != "run" or not os.path.isfile(os.path.join(projector, "projector_config.pbtxt")):
        return []
    return [("Embeddings for TensorBoard", page._note(
        f"<code>{html.escape(projector)}</code> holds the probe's projections at the last "
        "epoch (both views, <code>tensors.tsv</code>), their training index, view and label "
        "(<code>metadata.tsv</code>) and <code>projector_config.pbtxt</code>: "
        f"<code>tensorboard --logdir {html.escape(projector)}</code>, tab Projector, "
        "shows them in 3-D (PCA, t-SNE, UMAP) by label."))]


def _lead_line(recipe: dict[str, Any], results: dict[str, Any], history: dict[str, list],
               modality: Any, what: str, where: str) -> str:
    """The line under the page's title: what, where, which data, how long."""
    epochs = len(history.get("loss") or [])
    return (f"{what.capitalize()} <code>{html.escape(where)}</code> &middot; "
            f"{html.escape(str(results.get('data') or recipe['data']['name']))} &middot; "
            f"{modality.name} &middot; {epochs or recipe['epochs']} epochs"
            + (f" &middot; {results['seconds']:.0f} s of training"
               if isinstance(results.get("seconds"), (int, float)) else ""))


def _write_page(path: str, title: str, sections: list, lead: str, records: list,
                start: float, summary: str = "") -> dict[str, Any]:
    """Renders and writes the page, its footer giving what it cost and where it was made."""
    from keras_hardneg import __version__

    timed = [r["seconds"] for r in records if isinstance(r.get("seconds"), (int, float))]
    if len(timed) > 1:
        cost = (f"the probe took {timed[0]:.2f} s at the start (compiling it) and then "
                f"{1000 * float(np.median(timed[1:])):.0f} ms an epoch (median of "
                f"{len(timed) - 1}) during training")
    else:
        cost = "the probe was scored now (no per-epoch record)"
    env = page.environment_line()

    def footer(seconds: float, size: str) -> str:
        return (f"Written by keras-hardneg {__version__} on "
                f"{datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}. Cost: {cost}; this "
                f"page {seconds:.1f} s to make (figures, neighbours, t-SNE); {size}. One "
                "self-contained file: no script, nothing fetched. " + env)

    html_page = page.render_page(title, sections, lead, footer(0.0, "SIZE"), summary)
    seconds = time.perf_counter() - start
    size = f"{len(html_page.encode('utf-8')) / 1024:.0f} KB"
    html_page = html_page.replace(footer(0.0, "SIZE"), footer(seconds, size))
    page.write_page(path, html_page)
    return {"path": path, "seconds": seconds, "bytes": os.path.getsize(path),
            "probe_seconds": float(sum(timed))}


# --------------------------------------------------------------- from a folder
def _zoo_folder(target: str, zoo: str | None) -> str | None:
    """The folder of zoo entry ``target`` (a name), or None when it is not one."""
    if os.path.sep in target or os.path.exists(target):
        return None
    from keras_hardneg import zoo as zoo_lib

    try:
        if target not in zoo_lib.entries(zoo):
            return None
        return zoo_lib.show(target, zoo)["path"]
    except zoo_lib.ZooError as e:
        raise RunDirectoryError(str(e)) from None


def report_target(target: str, *, overrides: dict[str, Any] | None = None,
                  output: str | None = None, zoo: str | None = None) -> dict[str, Any]:
    """Writes the report of a run directory or of a zoo entry (see the module docstring);
    returns :func:`write_run_report`'s dict plus ``"kind"``.

    Args:
        target: a run directory, a zoo entry's folder, or a zoo entry's name.
        overrides: recipe keys to apply (the data: ``{"data": {...}}``).
        output: the page to write (default ``RUN/report.html`` for a run,
            ``./ENTRY-report.html`` for a zoo entry).
        zoo: a zoo folder or URL (default: :func:`keras_hardneg.zoo.zoo_source`).

    Raises:
        RunDirectoryError: ``target`` is neither a run directory nor a zoo entry, or the
            run has no trained encoder yet.
    """
    folder = os.path.abspath(target) if os.path.isdir(target) else _zoo_folder(target, zoo)
    if folder is None:
        raise RunDirectoryError(
            f"{target!r} is neither a run directory (recipe.json + backup/, written by "
            "`keras-hardneg train`) nor a zoo entry (a folder with preset/ and recipe.json, "
            "or an entry name of `keras-hardneg zoo list`).")
    preset = os.path.join(folder, PRESET_DIR)
    has_preset = os.path.isfile(os.path.join(preset, "config.json"))
    run = is_run_directory(folder)
    if not run and not (has_preset and os.path.isfile(os.path.join(folder, "recipe.json"))):
        raise RunDirectoryError(
            f"{target!r} is neither a run directory (recipe.json + backup/, written by "
            "`keras-hardneg train`) nor a zoo entry (a folder with preset/ and recipe.json).")
    recipe_path = next(p for p in (os.path.join(folder, "trained_recipe.json"),
                                   os.path.join(folder, "recipe.json")) if os.path.isfile(p))
    recipe = load_recipe(recipe_path, overrides or None)
    modality = modality_of(recipe)
    for kept in (folder, os.path.join(preset, "assets")):  # a run's files, else the preset's
        if modality.restore_run_files(recipe, kept):
            break
    if run and not has_preset:
        encoder = restore_run(folder)[0].encoder  # an unfinished run: its last checkpoint
    elif has_preset:
        from keras_hardneg.export.preset import load_preset

        encoder = load_preset(preset, trainable=False)
    train, test, description = load_data(recipe)
    results = _read_json(os.path.join(folder, "results.json")) or {}
    history = _read_json(os.path.join(folder, "history.json")) or {}
    baseline = _read_json(os.path.join(folder, "baseline.json")) if run else None
    probe = probe_lib.read_probe(os.path.join(folder, probe_lib.PROBE_FILE)) if run else None
    notes = ""
    if not run or overrides:
        # Measured now, on the data given: the trained and the starting encoder alike.
        recorded = {k: v for k, v in results.items() if k in modality.result_keys}
        quick = {**recipe, "evaluation": {**recipe["evaluation"], "linear_probe": False}}
        unlabelled_images = modality.knn_evaluation and (test is None or test[0] is None)
        results = ({} if unlabelled_images else
                   modality.evaluate(encoder, quick, train, test))
        results["data"] = description
        if recorded:
            notes = (" Measured now on the data given. Recorded with the entry: "
                     + html.escape(", ".join(f"{k} {v:.4f}" for k, v in recorded.items()
                                             if isinstance(v, (int, float)))) + ".")
        baseline = None
    if output is None:
        output = (os.path.join(folder, REPORT_FILE) if run
                  else os.path.abspath(f"{os.path.basename(folder.rstrip(os.sep))}-report.html"))
    probe_path = os.path.join(folder, probe_lib.PROBE_FILE)
    out = write_run_report(output, recipe=recipe, encoder=encoder, train=train, test=test,
                           history=history, results=results, baseline=baseline, probe=probe,
                           where=folder, what="run" if run else "zoo entry", notes=notes,
                           probe_path=probe_path if run and not overrides and probe else None)
    out["kind"] = "run" if run else "zoo entry"
    return out
