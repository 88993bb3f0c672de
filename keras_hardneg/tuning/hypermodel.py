"""A Keras Tuner ``HyperModel`` for contrastive pre-training.

:class:`ContrastiveHyperModel` turns a base recipe (see :func:`keras_hardneg.run.load_recipe`)
and labelled training arrays into something any Keras Tuner tuner can search:
``build(hp)`` makes the recipe's SimCLR or MoCo model with the loss (and sampler)
knobs drawn from ``hp``; ``fit(hp, model)`` pre-trains it and returns the
representation quality on a held-out *validation* split carved from the training
arrays, as ``{"knn_accuracy": ...}`` (or ``{"linear_probe_accuracy": ...}``).
The test split is never given to the hypermodel, so it cannot leak into the search.

Seeds: trial ``seed = (base_seed + crc32(hyper-parameter values)) mod 2**31`` by
default (``trial_seeds="config"``): the same configuration always gets the same
seed (a re-run or resumed trial reproduces itself, up to CPU thread
non-determinism), and the seed does not depend on the order the tuner visits
configurations. ``trial_seeds="shared"`` gives every trial ``base_seed`` (common
random numbers: same initial weights, data order and augmentations for every
configuration, so differences between trials are due to the hyper-parameters
alone -- useful with a small budget). The validation split always uses
``base_seed``, so every trial is scored on the same images.

Example:
>>> import keras_tuner, keras_hardneg as khn
>>> from keras_hardneg import data
>>> (x, y), _ = data.load_digits(seed=0)
>>> hm = ContrastiveHyperModel({"encoder": {"name": "small_convnet", "width": 8},
...                             "batch_size": 64}, (x, y), epochs=1)
>>> tuner = keras_tuner.RandomSearch(hm, objective=hm.objective, max_trials=2,
...                                  directory="/tmp/khn-hm-doc", overwrite=True)
>>> tuner.search()  # doctest: +SKIP
"""

from __future__ import annotations

import json
import math
import time
import zlib
from typing import Any

import keras
import keras_tuner
import numpy as np

from keras_hardneg import evaluation, run
from keras_hardneg.callbacks import NonFiniteError
from keras_hardneg.run import load_recipe
from keras_hardneg.tuning import space as space_lib

__all__ = ["ContrastiveHyperModel", "OBJECTIVES", "trial_seed"]

#: objective argument -> metric name the tuner maximises
OBJECTIVES = {"knn": "knn_accuracy", "linear_probe": "linear_probe_accuracy"}


def trial_seed(base_seed, values):
    """The seed of a trial with hyper-parameter ``values`` (``tuner/*`` keys ignored)."""
    own = {k: v for k, v in values.items() if not str(k).startswith("tuner/")}
    text = json.dumps(own, sort_keys=True, default=str)
    return int((int(base_seed) + zlib.crc32(text.encode())) % (2 ** 31))


def _split_validation(x, y, fraction, seed):
    if not 0 < fraction < 1:
        raise ValueError(f"`validation_fraction` must be in (0, 1); got {fraction!r}.")
    n = len(x)
    n_val = int(round(n * fraction))
    if n_val < 1 or n - n_val < 2:
        raise ValueError(f"`validation_fraction` = {fraction} leaves an empty split of "
                         f"{n} training examples.")
    order = np.random.default_rng(seed).permutation(n)
    fit_idx, val_idx = np.sort(order[n_val:]), np.sort(order[:n_val])
    return (x[fit_idx], y[fit_idx]), (x[val_idx], y[val_idx])


class ContrastiveHyperModel(keras_tuner.HyperModel):
    """Contrastive pre-training (SimCLR / MoCo) with the loss knobs as hyper-parameters.

    Args:
        recipe: base recipe (dict or JSON path); the knobs of ``search_space``
            override its keys. Its ``epochs`` is replaced by ``epochs``.
        train: labelled training arrays ``(x, y)`` (images ``[n, H, W, 3]`` in
            ``[0, 1]``, int labels). A validation split is carved from them.
        search_space: knobs and ranges (see :mod:`keras_hardneg.tuning.space`);
            ``None`` searches the loss's defaults (``beta`` in ``[0, 2]`` and
            ``tau_plus`` in ``[0, 0.2]`` for the hard-negative loss).
        objective: ``"knn"`` (weighted kNN accuracy, ``k``/``t`` from the recipe's
            ``evaluation``, default 200 / 0.1) or ``"linear_probe"`` (logistic
            regression on frozen features). Both are computed on the validation
            split, with the rest of the training arrays as the labelled bank.
        epochs: pre-training epochs per trial (Hyperband overrides it per trial).
        validation_fraction: share of ``train`` held out for the objective.
        seed: base seed (default: the recipe's ``seed``).
        trial_seeds: ``"config"`` or ``"shared"`` (see the module docstring).
        verbose: Keras ``fit`` verbosity inside a trial.
        validation_seed: seed of the validation split (default: ``seed``); fix it to
            re-run a configuration with other training seeds on the same split.

    Attributes:
        objective: the ``keras_tuner.Objective`` to pass to a tuner (direction "max").
        search_space: the canonical search space.
        build_count: how many models ``build`` made (tests use it).
        last_trial_info: facts about the last ``fit`` (seed, seconds, metrics, error).
    """

    def __init__(self, recipe: dict | str, train: tuple[Any, Any],
                 search_space: dict | list | None = None, objective: str = "knn",
                 epochs: int = 1, validation_fraction: float = 0.2, seed: int | None = None,
                 trial_seeds: str = "config", verbose: int = 0,
                 validation_seed: int | None = None, name: str | None = None,
                 tunable: bool = True):
        super().__init__(name=name, tunable=tunable)
        self.recipe = load_recipe(recipe)
        if objective not in OBJECTIVES:
            raise ValueError(f"`objective` must be one of {', '.join(OBJECTIVES)}; "
                             f"got {objective!r}.")
        if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
            raise ValueError(f"`epochs` must be an integer >= 1; got {epochs!r}.")
        if trial_seeds not in ("config", "shared"):
            raise ValueError(f"`trial_seeds` must be 'config' or 'shared'; got {trial_seeds!r}.")
        self.objective_key = objective
        self.objective_name = OBJECTIVES[objective]
        self.objective = keras_tuner.Objective(self.objective_name, direction="max")
        self.search_space = space_lib.normalize_search_space(search_space,
                                                             self.recipe["loss"]["name"])
        self.epochs = epochs
        self.base_seed = self.recipe["seed"] if seed is None else int(seed)
        self.trial_seeds = trial_seeds
        self.verbose = verbose
        x, y = train
        x = np.asarray(x, dtype="float32")
        y = np.asarray(y).reshape(-1)
        if len(x) != len(y):
            raise ValueError(f"`train` images and labels differ in length: {len(x)} vs {len(y)}.")
        self.fit_data, self.validation_data = _split_validation(
            x, y, validation_fraction,
            self.base_seed if validation_seed is None else int(validation_seed))
        if self.recipe["batch_size"] > len(self.fit_data[0]):
            raise ValueError(f"`batch_size` = {self.recipe['batch_size']} is larger than the "
                             f"{len(self.fit_data[0])} training examples left after the "
                             "validation split.")
        self.build_count = 0
        self.last_trial_info = None

    # ------------------------------------------------------------------ recipe
    def trial_recipe(self, hp):
        """The full recipe of the trial whose hyper-parameters are ``hp``."""
        values = space_lib.define_hyperparameters(hp, self.search_space)
        return self.recipe_for_values(values, epochs=hp.values.get("tuner/epochs"))

    def recipe_for_values(self, values, epochs=None):
        """The full recipe of the trial with knob ``values`` (a dict)."""
        values = {k: v for k, v in values.items() if k in self.search_space}
        recipe = space_lib.apply_to_recipe(self.recipe, values)
        recipe["epochs"] = int(epochs or self.epochs)
        recipe["seed"] = (self.base_seed if self.trial_seeds == "shared"
                          else trial_seed(self.base_seed, values))
        return load_recipe(recipe)

    # -------------------------------------------------------------- HyperModel
    def declare_hyperparameters(self, hp):
        """Registers the search space's knobs on ``hp`` (no model is built)."""
        space_lib.define_hyperparameters(hp, self.search_space)

    def build(self, hp):
        """A compiled SimCLR / MoCo model for the trial (via :func:`keras_hardneg.run.build_model`)."""
        recipe = self.trial_recipe(hp)
        keras.backend.clear_session()
        self.build_count += 1
        return run.build_model(recipe, self.fit_data[0].shape[1:],
                               num_examples=len(self.fit_data[0]))

    def fit(self, hp, model, *args, **kwargs):
        """Pre-trains ``model`` and returns ``{objective_name: value, ...}`` (higher is better).

        Keyword arguments from ``tuner.search`` / Keras Tuner: ``epochs``,
        ``initial_epoch`` (Hyperband), ``callbacks`` (the tuner's own), ``verbose``.

        Raises:
            keras_tuner.errors.FailedTrialError: on a non-finite loss or a
                non-finite objective (the trial is recorded as FAILED, never ranked).
        """
        recipe = self.trial_recipe(hp)
        epochs = int(kwargs.get("epochs", recipe["epochs"]))
        initial_epoch = int(kwargs.get("initial_epoch", 0))
        verbose = self.verbose  # kwargs["verbose"] is the tuner's own display setting
        info = {"seed": recipe["seed"], "epochs": epochs, "status": "RUNNING"}
        self.last_trial_info = info
        keras.utils.set_random_seed(recipe["seed"])
        x_fit, y_fit = self.fit_data
        dataset, steps, sampler_callbacks, _ = run.make_train_feed(recipe, x_fit, y_fit)
        # The model's fit puts its NonFiniteGuard first.
        callbacks = list(sampler_callbacks) + list(kwargs.get("callbacks") or [])
        start = time.perf_counter()
        try:
            history = model.fit(dataset, epochs=epochs, initial_epoch=initial_epoch,
                                steps_per_epoch=steps, callbacks=callbacks, verbose=verbose,
                                shuffle=False)
        except NonFiniteError as e:
            info.update(status="FAILED", seconds=time.perf_counter() - start,
                        error=f"non-finite training loss: {e}")
            raise keras_tuner.errors.FailedTrialError(info["error"]) from None
        info["seconds"] = time.perf_counter() - start
        losses = history.history.get("loss", [])
        info["final_loss"] = float(losses[-1]) if losses else None
        metrics = self.evaluate(model.encoder, recipe)
        info.update(metrics)
        value = metrics[self.objective_name]
        if not math.isfinite(value):
            info.update(status="FAILED", error=f"non-finite objective {self.objective_name}="
                        f"{value}")
            raise keras_tuner.errors.FailedTrialError(info["error"])
        info["status"] = "COMPLETED"
        return dict(metrics)

    def evaluate(self, encoder, recipe=None):
        """``{"knn_accuracy": ..., ["linear_probe_accuracy": ...]}`` on the validation split."""
        recipe = recipe or self.recipe
        ev = recipe["evaluation"]
        f_bank = evaluation.extract_features(encoder, self.fit_data[0])
        f_val = evaluation.extract_features(encoder, self.validation_data[0])
        if not (np.all(np.isfinite(f_bank)) and np.all(np.isfinite(f_val))):
            return {self.objective_name: float("nan")}
        y_bank, y_val = self.fit_data[1], self.validation_data[1]
        out = {"knn_accuracy": float(evaluation.weighted_knn_accuracy(
            f_bank, y_bank, f_val, y_val, k=min(ev["knn_k"], len(f_bank)),
            temperature=ev["knn_temperature"]))}
        if self.objective_key == "linear_probe":
            out["linear_probe_accuracy"] = float(evaluation.linear_probe_accuracy(
                f_bank, y_bank, f_val, y_val))
        return out
