"""``run_search``: a resumable hyper-parameter search over a contrastive loss's knobs.

What ``keras-hardneg tune`` runs. It loads the data once, wraps a base recipe in a
:class:`~keras_hardneg.tuning.ContrastiveHyperModel`, and lets a Keras Tuner tuner
(random search, Bayesian optimisation or Hyperband) maximise the validation
objective. ``output/`` receives:

* ``results.json``: a list of trials (``trial_id``, ``beta``, ``tau_plus``, the other
  hyper-parameters, ``objective``, ``status``, ...), rewritten atomically after
  every trial, so an interrupted search keeps its finished trials;
* ``objective_beta_tau.png``: the objective over the ``beta`` - ``tau_plus`` plane;
* ``search.json``: the search's settings (a resumed search must match them);
* ``keras_tuner/``: Keras Tuner's project (oracle state, one folder per trial).

Running the same call again resumes: finished trials are reloaded, not redone;
a trial that was interrupted mid-way is run again from its start. An example is in
:func:`run_search`'s docstring.
"""

from __future__ import annotations

import datetime
import json
import os
import time
from typing import Any

import keras
import keras_tuner

from keras_hardneg import run
from keras_hardneg._io import atomic_write_json
from keras_hardneg.data import dataset_spec
from keras_hardneg.tuning import records as records_lib
from keras_hardneg.tuning.hypermodel import OBJECTIVES, ContrastiveHyperModel
from keras_hardneg.tuning.plot import plot_objective
from keras_hardneg.tuning.space import normalize_search_space

__all__ = ["run_search", "TUNERS", "collect_records", "PROJECT_NAME"]

#: The Keras Tuner searches ``run_search(tuner=...)`` runs: ``keras_tuner.RandomSearch``,
#: ``BayesianOptimization`` and ``Hyperband``.
TUNERS = ("random", "bayesian", "hyperband")
PROJECT_NAME = "keras_tuner"


def _recording(tuner_cls):
    """``tuner_cls`` that stores each trial's facts and calls ``on_record`` after it."""

    class Recording(tuner_cls):
        def __init__(self, *args, on_record=None, **kwargs):
            self._on_record = on_record
            super().__init__(*args, **kwargs)

        def _populate_initial_space(self):
            # Keras Tuner builds a (throw-away) model here to discover the space;
            # ours has no conditional knobs, so declaring them is enough.
            hp = self.oracle.get_space()
            self.hypermodel.declare_hyperparameters(hp)
            self.oracle.update_space(hp)

        def on_trial_begin(self, trial):
            self._trial_started = time.perf_counter()
            super().on_trial_begin(trial)

        def on_trial_end(self, trial):
            info = dict(self.hypermodel.last_trial_info or {})
            self.hypermodel.last_trial_info = None
            started = getattr(self, "_trial_started", None)
            if started is not None:  # the whole trial (build, fit, evaluation), as Keras
                info["fit_seconds"] = info.get("seconds")  # Tuner's "Trial N Complete [..]"
                info["seconds"] = time.perf_counter() - started
                self._trial_started = None
            info["finished_at"] = datetime.datetime.now().isoformat(timespec="seconds")
            atomic_write_json(
                os.path.join(self.get_trial_dir(trial.trial_id), records_lib.INFO_FILE), info,
                indent=1, default=str)
            super().on_trial_end(trial)  # the oracle scores and saves the trial
            if self._on_record is not None:
                self._on_record(self)

    Recording.__name__ = f"Recording{tuner_cls.__name__}"
    return Recording


def collect_records(tuner, hypermodel):
    """One record dict per trial the tuner's oracle knows (finished or failed)."""
    out = []
    for trial_id, trial in sorted(tuner.oracle.trials.items()):
        status = trial.status
        if status in ("RUNNING", "IDLE"):
            continue  # being run (or interrupted): not a result yet
        values = {k: v for k, v in trial.hyperparameters.values.items()
                  if not str(k).startswith("tuner/")}
        info_path = os.path.join(tuner.project_dir, f"trial_{trial_id}", records_lib.INFO_FILE)
        info = {}
        if os.path.isfile(info_path):
            with open(info_path) as f:
                info = json.load(f)
        recipe = hypermodel.recipe_for_values(values)
        family = run.build_loss(recipe).hcl_parameters() or {}  # None outside HCL's family
        rec = {
            "trial_id": trial_id,
            "status": status,
            "objective": None,
            "objective_name": hypermodel.objective_name,
            "beta": family.get("beta"),
            "tau_plus": family.get("tau_plus"),
            "hyperparameters": values,
        }
        for k, v in values.items():
            rec.setdefault(k, v)
        if "tuner/trial_id" in trial.hyperparameters.values:  # Hyperband continuation
            rec["continued_from"] = trial.hyperparameters.values["tuner/trial_id"]
        if status == "COMPLETED" and trial.score is not None:
            rec["objective"] = float(trial.score)
        for name in ("knn_accuracy", "linear_probe_accuracy"):
            if trial.metrics.exists(name):
                rec[name] = float(trial.metrics.get_last_value(name))
        for key in ("seed", "epochs", "seconds", "fit_seconds", "final_loss", "finished_at"):
            rec[key] = info.get(key)
        error = info.get("error")
        if status != "COMPLETED" and not error and trial.message:
            error = trial.message.strip().splitlines()[-1]
        rec["error"] = error
        out.append(rec)
    return out


def run_search(dataset: str | os.PathLike = "digits", trials: int = 2, epochs: int = 1,
               tuner: str = "random", output: str | os.PathLike = "tune-out",
               loss: str | None = None, framework: str | None = None,
               search_space: dict | list | None = None, objective: str = "knn", seed: int = 0,
               batch_size: int | None = None, resume: bool = True, verbose: int = 1,
               recipe: dict | str | None = None, *, validation_fraction: float = 0.2,
               trial_seeds: str = "config", **dataset_options: Any) -> list[dict]:
    """Searches a contrastive loss's hyper-parameters; resumable; returns the trials.

    Args:
        dataset: ``"digits"``, a path to an image folder (one subfolder per
            class) or ``"tfds:NAME"``.
        trials: how many trials (``max_trials``; for Hyperband, the number of
            Hyperband iterations).
        epochs: pre-training epochs per trial (Hyperband's ``max_epochs``).
        tuner: ``"random"``, ``"bayesian"`` or ``"hyperband"``.
        output: output folder (see the module docstring).
        loss: ``"hard"``, ``"debiased"``, ``"ring"``, ``"unremix"`` or ``"nt_xent"``;
            ``None`` keeps the recipe's loss (``"hard"`` by default).
        framework: ``"simclr"``, ``"moco_v2"`` (or ``"moco"``), ``"moco_v3"``;
            ``None`` keeps the recipe's (``"simclr"`` by default).
        search_space: knobs and ranges (see :mod:`keras_hardneg.tuning.space`);
            ``None``: ``beta`` in ``[0, 2]`` and ``tau_plus`` in ``[0, 0.2]`` for
            the hard loss.
        objective: ``"knn"`` (weighted kNN, k=200, t=0.1) or ``"linear_probe"``,
            on a validation split carved from the training data (never the test split).
        seed: base seed (data split, oracle, trial seeds).
        batch_size: overrides the recipe's batch size.
        resume: continue the search in ``output`` (``False`` starts afresh).
        verbose: 0 silent, 1 Keras Tuner's progress and the table, 2 also a line
            per training epoch.
        recipe: base recipe (dict or JSON path) for everything not searched
            (encoder, optimizer, augmentation, ...).
        validation_fraction: share of the training data held out for the objective.
        trial_seeds: ``"config"`` (seed from the hyper-parameters) or ``"shared"``.
        **dataset_options: recipe ``data`` keys, e.g. ``limit_per_class=200``,
            ``image_size=32``, ``data_dir=...``.

    Returns:
        The list of trial records written to ``output/results.json``.

    Raises:
        ValueError: naming the bad argument.

    Example:

    The smallest search: one trial of one epoch on the digits with a width-4 encoder
    (5-6 CPU-seconds, most of it building and tracing the training step). The search
    writes ``tune-out/`` and resumes from it when called again with the same settings:

    >>> import os
    >>> from keras_hardneg.tuning import run_search
    >>> trials = run_search("digits", trials=1, epochs=1, output="tune-out",
    ...                     recipe={"encoder": {"name": "small_convnet", "width": 4},
    ...                             "projection_dims": [16, 8], "batch_size": 64},
    ...                     verbose=0)
    >>> [t["status"] for t in trials]
    ['COMPLETED']
    >>> 0 <= trials[0]["beta"] <= 2 and 0 <= trials[0]["tau_plus"] <= 0.2
    True
    >>> trials[0]["objective_name"]
    'knn_accuracy'
    >>> sorted(trials[0])
    ['beta', 'epochs', 'error', 'final_loss', 'finished_at', 'fit_seconds', 'hyperparameters', 'knn_accuracy', 'objective', 'objective_name', 'seconds', 'seed', 'status', 'tau_plus', 'trial_id']
    >>> sorted(os.listdir("tune-out"))
    ['keras_tuner', 'objective_beta_tau.png', 'results.json', 'search.json']
    """
    _check_arguments(trials=trials, epochs=epochs, tuner=tuner, objective=objective,
                     loss=loss, framework=framework, seed=seed, batch_size=batch_size,
                     validation_fraction=validation_fraction, trial_seeds=trial_seeds,
                     output=output)
    base = _base_recipe(dataset, dataset_options, recipe, epochs=epochs, seed=seed, loss=loss,
                        framework=framework, batch_size=batch_size)
    space = normalize_search_space(search_space, base["loss"]["name"])
    output = os.fspath(output)
    _write_settings(output, resume, trials, {
        "dataset": dataset if not isinstance(dataset, os.PathLike) else os.fspath(dataset),
        "tuner": tuner, "objective": objective, "epochs": epochs, "seed": seed,
        "search_space": space, "validation_fraction": validation_fraction,
        "trial_seeds": trial_seeds, "recipe": base})

    keras.config.set_dtype_policy(base["precision"])
    try:
        train, _test, description = run.load_data(base)  # the test split is not used
        hypermodel = ContrastiveHyperModel(
            base, train, search_space=space, objective=objective, epochs=epochs,
            validation_fraction=validation_fraction, seed=seed, trial_seeds=trial_seeds,
            verbose=2 if verbose >= 2 else 0)
        if verbose:
            print(f"keras-hardneg tune: {description}; {len(hypermodel.fit_data[0])} training / "
                  f"{len(hypermodel.validation_data[0])} validation images; knobs: "
                  f"{', '.join(space)}; objective {hypermodel.objective_name} (max)")
        return _search(hypermodel, base, dataset=dataset, tuner=tuner, trials=trials,
                       epochs=epochs, output=output, resume=resume, seed=seed, verbose=verbose)
    finally:
        keras.config.set_dtype_policy("float32")


def _check_arguments(*, trials, epochs, tuner, objective, loss, framework, seed, batch_size,
                     validation_fraction, trial_seeds, output):
    """Refuses a bad argument of :func:`run_search` in one line naming it."""
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise ValueError(f"`trials` must be an integer >= 1; got {trials!r}.")
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"`epochs` must be an integer >= 1; got {epochs!r}.")
    if tuner not in TUNERS:
        raise ValueError(f"`tuner` must be one of {', '.join(TUNERS)}; got {tuner!r}.")
    if objective not in OBJECTIVES:
        raise ValueError(f"`objective` must be one of {', '.join(OBJECTIVES)}; got {objective!r}.")
    for what, value in (("loss", loss), ("framework", framework)):
        if value is not None and value not in run.SECTIONS[what]:
            raise ValueError(f"`{what}` must be one of {', '.join(run.section_choices(what))}; "
                             f"got {value!r}.")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"`seed` must be an integer >= 0; got {seed!r}.")
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                                   or batch_size < 2):
        raise ValueError(f"`batch_size` must be an integer >= 2; got {batch_size!r}.")
    if isinstance(validation_fraction, bool) or not isinstance(validation_fraction, (int, float)) \
            or not 0 < validation_fraction < 1:
        raise ValueError(f"`validation_fraction` must be in (0, 1); got {validation_fraction!r}.")
    if trial_seeds not in ("config", "shared"):
        raise ValueError(f"`trial_seeds` must be 'config' or 'shared'; got {trial_seeds!r}.")
    if not isinstance(output, (str, os.PathLike)) or not os.fspath(output):
        raise ValueError(f"`output` must be a folder path; got {output!r}.")


def _base_recipe(dataset, dataset_options, recipe, *, epochs, seed, loss, framework,
                 batch_size):
    """The search's base recipe: ``recipe`` with the arguments given to :func:`run_search`."""
    try:
        data = dataset_spec(dataset, **dataset_options)
    except ValueError as e:
        raise ValueError(f"`dataset`: {e}") from None
    given = {"epochs": epochs, "seed": seed, "data": data}
    if loss is not None:
        given["loss"] = {"name": loss}
    if framework is not None:
        given["framework"] = {"name": framework}
    if batch_size is not None:
        given["batch_size"] = batch_size
    return run.load_recipe(recipe, overrides=given)


def _write_settings(output, resume, trials, settings):
    """Writes ``output/search.json``; a resumed search must keep the old settings."""
    os.makedirs(output, exist_ok=True)
    settings_path = os.path.join(output, "search.json")
    project_dir = os.path.join(output, PROJECT_NAME)
    if resume and os.path.isfile(settings_path) and os.path.isdir(project_dir):
        with open(settings_path) as f:
            old = json.load(f)
        old.pop("trials", None)
        changed = [k for k in settings if json.dumps(old.get(k), sort_keys=True, default=str)
                   != json.dumps(settings[k], sort_keys=True, default=str)]
        if changed:
            raise ValueError(f"`output` {output!r} holds a search with different settings "
                             f"({', '.join(changed)}); pass resume=False to start afresh or "
                             "choose another output folder.")
    atomic_write_json(settings_path, {**settings, "trials": trials}, indent=1, default=str)


def _search(hypermodel, base, *, dataset, tuner, trials, epochs, output, resume, seed, verbose):
    """Runs the tuner, writes ``results.json`` and the plot; returns the trial records."""
    results_path = os.path.join(output, "results.json")
    plot_path = os.path.join(output, "objective_beta_tau.png")

    def record(t):
        recs = collect_records(t, hypermodel)
        atomic_write_json(results_path, recs, indent=1, default=str)
        return recs

    common = dict(hypermodel=hypermodel, objective=hypermodel.objective,
                  directory=output, project_name=PROJECT_NAME, overwrite=not resume,
                  seed=seed + 1,  # Keras Tuner treats seed 0 as "no seed"
                  on_record=record)
    if tuner == "random":
        t = _recording(keras_tuner.RandomSearch)(max_trials=trials, **common)
    elif tuner == "bayesian":
        t = _recording(keras_tuner.BayesianOptimization)(max_trials=trials, **common)
    else:
        t = _recording(keras_tuner.Hyperband)(max_epochs=epochs, hyperband_iterations=trials,
                                              **common)
    failure = None
    try:
        t.search(epochs=epochs, verbose=min(int(verbose), 1))
    except RuntimeError as e:  # e.g. too many consecutive failed trials
        failure = e
    recs = record(t)
    plot_objective(recs, plot_path, objective_name=hypermodel.objective_name,
                   title=f"{hypermodel.objective_name}: {base['framework']['name']}, "
                         f"{base['loss']['name']} loss, {dataset}")
    if verbose:
        print(records_lib.format_table(recs, hypermodel.objective_name))
        print(f"results: {results_path}\nplot: {plot_path}")
    if failure is not None:
        raise RuntimeError(f"the search stopped: {failure}; the finished trials are in "
                           f"{results_path}.") from failure
    return recs
