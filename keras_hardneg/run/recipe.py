"""Recipes: one JSON file describing a whole pre-training run, checked against the registries.

A recipe has one section per kind of component, each ``{"name": ..., <keys>}`` checked by
that component's registry (:data:`SECTIONS`): unknown names and keys are refused, missing
keys take the component's defaults, so a loaded recipe is complete and explicit. The
scalar keys (:data:`RUN_PARAMS`), ``annealing`` and ``evaluation`` are checked here.
:data:`DEFAULT_RECIPE` is the embedded default run (SimCLR + hard negatives on digits).

A section that names a different component than the base recipe starts from that
component's defaults; one that names the same component (or no name) is merged into
the base section. A recipe with a ``moco`` section and no ``"recipe_version"`` is a wave-1
recipe (every wave-1 run saved one): it is upgraded on load to mean exactly what it meant
then (:func:`upgrade_v1`).

Example:
>>> r = load_recipe({"data": {"name": "digits"}, "epochs": 2})
>>> r["framework"]["name"], r["loss"]["name"], r["batch_size"], r["loss"]["beta"]
('simclr', 'hard', 128, 1.0)
"""

from __future__ import annotations

import copy
import json
import os
from typing import Any

from keras_hardneg import augment, data, encoders, evaluation, losses, models, optimizers, sampling
from keras_hardneg._io import atomic_write_json
from keras_hardneg.modalities import get_modality
from keras_hardneg.modalities.graph import GRAPH_RECIPE
from keras_hardneg.modalities.image import IMAGE_RECIPE
from keras_hardneg.modalities.text import TEXT_RECIPE
from keras_hardneg.registry import (DATASETS, DEFAULT_MODALITY, ENCODERS, EVALUATIONS,
                                    FRAMEWORKS, LOSSES, OPTIMIZERS, SAMPLERS, SCHEDULES,
                                    VIEW_MAKERS, ConfigError, Param, Registry)

# The component packages register themselves on import; referenced so the imports are kept.
_REGISTERING = (augment, data.sources, encoders, evaluation, losses, models, optimizers, sampling)

__all__ = ["RecipeError", "SECTIONS", "RUN_PARAMS", "ANNEALING_PARAMS", "ANNEALED_LOSS_KEYS",
           "EVALUATION_PARAMS",
           "DEFAULT_RECIPE", "GRAPH_RECIPE", "TEXT_RECIPE", "default_recipe_for",
           "RECIPE_VERSION", "load_recipe", "save_recipe", "upgrade_v1",
           "section_choices"]

#: Raised for a bad recipe (a :class:`~keras_hardneg.registry.ConfigError`).
RecipeError = ConfigError
RECIPE_VERSION = 2

#: section -> the registry that checks it.
SECTIONS: dict[str, Registry] = {
    "framework": FRAMEWORKS,
    "encoder": ENCODERS,
    "loss": LOSSES,
    "sampler": SAMPLERS,
    "optimizer": OPTIMIZERS,
    "schedule": SCHEDULES,
    "augmentation": VIEW_MAKERS,
    "data": DATASETS,
}

#: The scalar keys of a recipe, with their defaults (their one home).
RUN_PARAMS: dict[str, Param] = {
    "recipe_version": Param(int, default=RECIPE_VERSION, low=RECIPE_VERSION, high=RECIPE_VERSION,
                            help="recipe format version"),
    "name": Param(str, default="run", help="run name (default 'run')"),
    "projection_dims": Param("int_list", default=[128, 64], low=1,
                             help="widths of the projection head: hidden..., output"),
    "batch_size": Param(int, default=128, low=2, help="batch size (>= 2)"),
    "epochs": Param(int, default=10, low=1, help="training epochs"),
    "seed": Param(int, default=0, low=0, help="random seed (default 0)"),
    "precision": Param(str, default="float32",
                       choices=("float32", "mixed_bfloat16", "mixed_float16"),
                       help="Keras dtype policy of the run"),
}

#: ``annealing``: hyper-parameter schedules, each on when its key is given (the losses'
#: :data:`keras_hardneg.losses.ANNEALING_PARAMS`).
ANNEALING_PARAMS: dict[str, Param] = dict(losses.ANNEALING_PARAMS)

#: ``annealing`` key -> the loss key its schedule changes, as the loss classes state it
#: (:func:`keras_hardneg.losses.annealing_keys`): a schedule is allowed only with a loss that
#: has it (checked by :func:`load_recipe`, before any data is read).
ANNEALED_LOSS_KEYS: dict[str, str] = losses.annealing_keys()

_KNN = EVALUATIONS.get("knn").params
#: ``evaluation``: the monitor and the final evaluation.
EVALUATION_PARAMS: dict[str, Param] = {
    "knn_k": _KNN["k"],
    "knn_temperature": _KNN["temperature"],
    "monitor_every": Param(int, default=1, low=0,
                           help="kNN monitor every N epochs (0: off)"),
    "linear_probe": Param(bool, default=True, help="also fit a linear probe at the end"),
    "benchmark_dir": Param("path", default=None,
                           help="text: folder of STS/SentEval sets (SentEval's layout: STS/, "
                                "SICK/, ...) to evaluate on at the end"),
    "senteval": Param(bool, default=None,
                      help="text: also run the SentEval classification tasks (default off)"),
}

_PLAIN_SECTIONS = {"annealing": ANNEALING_PARAMS, "evaluation": EVALUATION_PARAMS}

#: The embedded default run (the default modality's recipe, beside it in
#: :mod:`keras_hardneg.modalities.image`); the graph and text runs start from
#: :data:`GRAPH_RECIPE` and :data:`TEXT_RECIPE` (:mod:`keras_hardneg.modalities`).
DEFAULT_RECIPE: dict[str, Any] = IMAGE_RECIPE


def _data_name(*sources: dict[str, Any] | None) -> str:
    name = DEFAULT_RECIPE["data"]["name"]
    for source in sources:
        data = (source or {}).get("data")
        if isinstance(data, str):
            name = data
        elif isinstance(data, dict) and data.get("name") is not None:
            name = data["name"]
    return name


def default_recipe_for(given: dict[str, Any] | None = None,
                       overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The default recipe of the modality of the data that ``given`` (then ``overrides``)
    names (``Modality.default_recipe``): :data:`DEFAULT_RECIPE` for images,
    :data:`GRAPH_RECIPE`, :data:`TEXT_RECIPE`."""
    name = _data_name(given, overrides)
    modality = (DATASETS.get(name).tags.get("modality", DEFAULT_MODALITY)
                if name in DATASETS else DEFAULT_MODALITY)
    return get_modality(modality).default_recipe or DEFAULT_RECIPE


def section_choices(section: str) -> list[str]:
    """The names a recipe section (e.g. ``"loss"``) may take."""
    return SECTIONS[section].names()


def upgrade_v1(given: dict[str, Any]) -> dict[str, Any]:
    """A wave-1 recipe (no ``recipe_version``) in today's format, meaning what it meant.

    Wave 1 kept MoCo's keys in a ``moco`` section, named the framework by a string, let
    every optimizer carry ``weight_decay``/``momentum`` (ignored where they did not
    apply), and filled missing sampler and optimizer keys with fallbacks of its own
    (500 candidates, 100 neighbours, learning rate 1e-3, momentum 0.9, decay 0).
    """
    out = copy.deepcopy(given)
    fw = out.get("framework")
    moco = out.pop("moco", None)
    if isinstance(fw, str):
        fw = {"name": fw}
    if isinstance(fw, dict) and isinstance(moco, dict):
        if fw.get("name") == "moco_v2":
            fw = {**{k: moco[k] for k in ("queue_size", "momentum") if k in moco}, **fw}
        elif fw.get("name") == "moco_v3":
            fw = {**({"momentum": moco["momentum"]} if "momentum" in moco else {}), **fw}
    if fw is not None:
        out["framework"] = fw
    opt = out.get("optimizer")
    if isinstance(opt, dict):
        name = opt.get("name", "adam")
        uses = {"adam": (), "adamw": ("weight_decay",), "sgd": ("momentum",), "lamb": (),
                "lars": ("momentum", "weight_decay")}.get(name)
        if uses is not None:
            fallback = {"learning_rate": 1e-3, "momentum": 0.9, "weight_decay": 0.0}
            opt = {k: v for k, v in opt.items() if k not in ("weight_decay", "momentum") or k in uses}
            for key in ("learning_rate",) + uses:
                opt.setdefault(key, fallback[key])
            out["optimizer"] = opt
    sampler = out.get("sampler")
    if isinstance(sampler, dict) and sampler.get("name") in ("batchsampler", "knn"):
        sampler = dict(sampler)
        if sampler["name"] == "batchsampler":
            sampler.setdefault("num_candidates", 500)
        else:
            sampler.pop("num_candidates", None)
        sampler.setdefault("num_neighbors", 100)
        out["sampler"] = sampler
    aug = out.get("augmentation")
    if isinstance(aug, dict) and "name" not in aug:
        out["augmentation"] = {"name": "simclr", **aug}
    out["recipe_version"] = RECIPE_VERSION
    return out


def _merge_section(base: dict[str, Any] | None, value: Any, section: str) -> dict[str, Any]:
    if isinstance(value, str) and section in SECTIONS:
        value = {"name": value}
    if not isinstance(value, dict):
        raise RecipeError(f"recipe key '{section}' must be a mapping; got {value!r}.")
    base = base or {}
    if "name" in value and section in SECTIONS and base.get("name") is not None and \
            SECTIONS[section].canonical(value["name"]) != SECTIONS[section].canonical(base["name"]):
        return copy.deepcopy(value)
    return {**copy.deepcopy(base), **copy.deepcopy(value)}


def _merge(base: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    allowed = set(SECTIONS) | set(_PLAIN_SECTIONS) | set(RUN_PARAMS)
    out = copy.deepcopy(base)
    for key, value in given.items():
        if key not in allowed:
            raise RecipeError(f"unknown recipe key '{key}'; allowed keys: "
                              f"{', '.join(sorted(allowed))}.")
        if key in SECTIONS or key in _PLAIN_SECTIONS:
            out[key] = _merge_section(out.get(key), value, key)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _check_plain(section: str, params: dict[str, Param], values: dict[str, Any]) -> dict:
    unknown = sorted(set(values) - set(params))
    if unknown:
        raise RecipeError(f"unknown recipe key '{section}.{unknown[0]}'; allowed in "
                          f"'{section}': {', '.join(sorted(params))}.")
    out = {}
    for key, param in params.items():
        if values.get(key) is not None:
            out[key] = param.validate(values[key], f"recipe key '{section}.{key}'")
        elif param.default is not None:
            out[key] = param.default
    return out


def _resolve_paths(recipe: dict[str, Any], base_dir: str) -> None:
    sections = {section: registry.get(recipe[section]["name"]).params
                for section, registry in SECTIONS.items()}
    sections.update(_PLAIN_SECTIONS)
    for section, params in sections.items():
        for key, param in params.items():
            value = recipe[section].get(key)
            if param.kind == "path" and isinstance(value, str) and not os.path.isabs(value):
                recipe[section][key] = os.path.normpath(os.path.join(base_dir, value))


def _read(source: Any) -> tuple[dict[str, Any], str | None]:
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"recipe file not found: {path}")
        try:
            with open(path) as f:
                given = json.load(f)
        except json.JSONDecodeError as e:
            raise RecipeError(f"recipe {path} is not valid JSON: {e}") from None
        if not isinstance(given, dict):
            raise RecipeError(f"recipe {path} must be a JSON object of keys.")
        return given, os.path.dirname(os.path.abspath(path))
    if isinstance(source, dict):
        return source, None
    raise RecipeError(f"a recipe must be a JSON file path or a dict; got {type(source).__name__}.")


def load_recipe(source: Any = None, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Reads, upgrades and validates a recipe.

    Args:
        source: a JSON file path, a dict, or None (the default recipe). Missing keys take
            the default recipe of the data's modality (``Modality.default_recipe``: images
            :data:`DEFAULT_RECIPE`, graphs :data:`GRAPH_RECIPE`, sentences
            :data:`TEXT_RECIPE`) and then the components' defaults. Relative paths in
            a recipe file are resolved against its folder.
        overrides: keys applied on top (the CLI's flags), with the same section rules.

    Returns:
        The complete recipe (a new dict).

    Raises:
        RecipeError: naming the first unknown name or key, or out-of-range value, and what
            is allowed.
        FileNotFoundError: if the path does not exist.

    Example:

    >>> from keras_hardneg.run import load_recipe
    >>> recipe = load_recipe({"loss": {"name": "hard", "beta": 0.5}, "epochs": 3})
    >>> recipe["loss"], recipe["framework"]["name"], recipe["epochs"]
    ({'name': 'hard', 'temperature': 0.5, 'tau_plus': 0.1, 'beta': 0.5}, 'simclr', 3)
    >>> load_recipe(overrides={"loss": {"name": "ring"}})["loss"]     # the CLI's --loss ring
    {'name': 'ring', 'temperature': 0.5, 'lower_percentile': 5.0, 'upper_percentile': 50.0}
    >>> load_recipe({"loss": {"name": "hard", "beta": -1}})
    Traceback (most recent call last):
    ...
    keras_hardneg.registry.ConfigError: recipe key 'loss.beta' = -1 is out of range; allowed: >= 0.
    """
    given, base_dir = _read({} if source is None else source)
    if "recipe_version" not in given and "moco" in given:
        given = upgrade_v1(given)
    recipe = _merge(default_recipe_for(given, overrides), given)
    if overrides:
        recipe = _merge(recipe, overrides)
        for section in SECTIONS:
            # Keys a recipe gives for a section it does not name (e.g. `loss: {tau_plus: 0}`)
            # are for whichever component the overrides name there (`--loss hard`); the
            # overrides' own keys win. They are not dropped with the default's name.
            keys, named = given.get(section), overrides.get(section)
            if isinstance(keys, dict) and "name" not in keys and isinstance(named, dict) \
                    and "name" in named:
                recipe[section] = {**copy.deepcopy(keys), **recipe[section]}
    for key, param in RUN_PARAMS.items():
        recipe[key] = param.validate(recipe.get(key, param.default), f"recipe key '{key}'")
    for section, registry in SECTIONS.items():
        spec = recipe[section]
        if "name" not in spec:
            raise RecipeError(f"recipe key '{section}.name' is required; choose one of "
                              f"{', '.join(registry.names())}.")
        name = registry.canonical(spec["name"])
        recipe[section] = {"name": name, **registry.check(name, spec, where="recipe key",
                                                          prefix=f"{section}.")}
    for section, params in _PLAIN_SECTIONS.items():
        recipe[section] = _check_plain(section, params, recipe[section])
    _check_annealing(recipe)
    _check_modalities(recipe)
    if base_dir is not None:
        _resolve_paths(recipe, base_dir)
    return recipe


def _check_annealing(recipe: dict[str, Any]) -> None:
    """Each ``annealing`` schedule fits the recipe's loss: the loss class has the key (its
    ``annealing``), and the value it sets is one the loss accepts (its own checks)."""
    loss = recipe["loss"]
    for key, value in recipe["annealing"].items():
        target = ANNEALED_LOSS_KEYS[key]
        if key not in getattr(LOSSES.get(loss["name"]).factory, "annealing", {}):
            fits = ", ".join(n for n in LOSSES.names()
                             if key in getattr(LOSSES.get(n).factory, "annealing", {}))
            raise RecipeError(
                f"recipe key 'annealing.{key}' anneals the loss's '{target}', which loss "
                f"'{loss['name']}' does not have; choose a loss of: {fits} (or drop the key).")
        try:
            LOSSES.check(loss["name"], {**loss, target: value}, where="recipe key",
                         prefix="loss.")
        except ConfigError as e:
            raise RecipeError(f"recipe key 'annealing.{key}' = {value:g} cannot be loss "
                              f"'{loss['name']}''s '{target}': {e}") from None


def _check_modalities(recipe: dict[str, Any]) -> None:
    """Each framework, encoder and view maker is for the data's modality, or for one whose
    components the data's modality shares (``Modality.shares_components_with``)."""
    data_modality = DATASETS.get(recipe["data"]["name"]).tags.get("modality")
    fits = ((data_modality, *get_modality(data_modality).shares_components_with)
            if data_modality is not None else ())
    for section in ("framework", "encoder", "augmentation"):
        modality = SECTIONS[section].get(recipe[section]["name"]).tags.get("modality")
        if modality is not None and data_modality is not None and modality not in fits:
            allowed = [n for m in fits for n in SECTIONS[section].names(modality=m)]
            raise RecipeError(
                f"recipe key '{section}.name' = {recipe[section]['name']!r} is for {modality} "
                f"data, but '{recipe['data']['name']}' is {data_modality} data; choose one of "
                f"{', '.join(allowed)}.")


def save_recipe(recipe: dict[str, Any], path: str) -> None:
    """Writes a recipe as JSON (atomically)."""
    atomic_write_json(path, recipe, indent=2, sort_keys=True)
