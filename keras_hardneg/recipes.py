"""Recipes: one JSON file describing a whole pre-training run.

A recipe names the framework, encoder, loss, sampler, optimizer, schedule,
data, epochs and evaluation of a run; :func:`keras_hardneg.training.run`
executes it. Every key is checked: an unknown key or a value out of range
raises :class:`RecipeError` naming the key, the value and what is allowed.

Example:
>>> r = load_recipe({"data": {"name": "digits"}, "epochs": 2})
>>> r["framework"], r["loss"]["name"], r["batch_size"]
('simclr', 'hard', 128)
"""

import copy
import json
import os

from keras_hardneg._io import atomic_write_json
from keras_hardneg._validation import describe_interval, outside_interval

__all__ = ["RecipeError", "DEFAULTS", "load_recipe", "save_recipe"]


class RecipeError(ValueError):
    """A recipe key or value is not allowed (the message names it)."""


DEFAULTS = {
    "name": "run",
    "framework": "simclr",  # simclr | moco_v2 | moco_v3
    "encoder": {"name": "small_convnet", "width": 32},
    "projection_dims": [128, 64],
    "loss": {"name": "hard", "temperature": 0.5, "tau_plus": 0.1, "beta": 1.0},
    "sampler": {"name": "uniform"},
    "optimizer": {"name": "adam", "learning_rate": 1e-3, "weight_decay": 1e-6},
    "schedule": {"name": "warmup_cosine", "warmup_epochs": 0},
    "augmentation": {"version": "v1", "strength": 0.5, "crop_scale": [0.2, 1.0]},
    "data": {"name": "digits"},
    "batch_size": 128,
    "epochs": 10,
    "seed": 0,
    "precision": "float32",
    "moco": {"queue_size": 4096, "momentum": 0.99},
    "annealing": {},
    "evaluation": {"knn_k": 200, "knn_temperature": 0.1, "monitor_every": 1,
                   "linear_probe": True},
}

_ENUMS = {
    "framework": ("simclr", "moco_v2", "moco_v3"),
    "encoder.name": ("small_convnet", "resnet18_cifar", "resnet50"),
    "loss.name": ("nt_xent", "debiased", "hard", "ring", "unremix"),
    "sampler.name": ("uniform", "batchsampler", "knn"),
    "optimizer.name": ("adam", "adamw", "sgd", "lars", "lamb"),
    "schedule.name": ("constant", "warmup_cosine"),
    "augmentation.version": ("v1", "v2", "v3"),
    "data.name": ("digits", "image_folder", "tfds"),
    "data.on_error": ("skip", "raise"),
    "precision": ("float32", "mixed_bfloat16", "mixed_float16"),
}

_SECTION_KEYS = {
    "encoder": {"name", "width", "image_size"},
    "loss": {"name", "temperature", "tau_plus", "beta", "lower_percentile", "upper_percentile",
             "weights"},
    "sampler": {"name", "num_candidates", "num_neighbors", "restart_prob", "refresh_every",
                "backend"},
    "optimizer": {"name", "learning_rate", "weight_decay", "momentum"},
    "schedule": {"name", "warmup_epochs"},
    "augmentation": {"version", "strength", "crop_scale"},
    "data": {"name", "train", "test", "image_size", "limit_per_class", "test_limit_per_class",
             "dataset", "data_dir", "train_split", "test_split", "test_fraction", "on_error"},
    "moco": {"queue_size", "momentum"},
    "annealing": {"beta_changes", "ring_start", "ring_end"},
    "evaluation": {"knn_k", "knn_temperature", "monitor_every", "linear_probe"},
}

# (key, low, high, low_inclusive, high_inclusive, kind)
_RANGES = [
    ("batch_size", 2, None, True, True, int),
    ("epochs", 1, None, True, True, int),
    ("seed", 0, None, True, True, int),
    ("encoder.width", 1, None, True, True, int),
    ("loss.temperature", 0, None, False, True, float),
    ("loss.tau_plus", 0, 1, True, False, float),
    ("loss.beta", 0, None, True, True, float),
    ("loss.lower_percentile", 0, 100, True, False, float),
    ("loss.upper_percentile", 0, 100, False, True, float),
    ("sampler.num_candidates", 2, None, True, True, int),
    ("sampler.num_neighbors", 1, None, True, True, int),
    ("sampler.refresh_every", 1, None, True, True, int),
    ("optimizer.learning_rate", 0, None, False, True, float),
    ("optimizer.weight_decay", 0, None, True, True, float),
    ("optimizer.momentum", 0, 1, True, True, float),
    ("schedule.warmup_epochs", 0, None, True, True, int),
    ("augmentation.strength", 0, None, True, True, float),
    ("moco.queue_size", 1, None, True, True, int),
    ("moco.momentum", 0, 1, True, True, float),
    ("annealing.beta_changes", 1, None, True, True, int),
    ("annealing.ring_start", 0, 100, False, True, float),
    ("annealing.ring_end", 0, 100, False, True, float),
    ("evaluation.knn_k", 1, None, True, True, int),
    ("evaluation.knn_temperature", 0, None, False, True, float),
    ("evaluation.monitor_every", 0, None, True, True, int),
    ("data.image_size", 8, None, True, True, int),
    ("data.limit_per_class", 1, None, True, True, int),
    ("data.test_limit_per_class", 1, None, True, True, int),
    ("data.test_fraction", 0, 1, False, False, float),
]


def _get(recipe, dotted):
    node = recipe
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _check_range(recipe, key, low, high, low_inc, high_inc, kind):
    value = _get(recipe, key)
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            kind is int and not float(value).is_integer()):
        raise RecipeError(f"recipe key '{key}' must be {'an integer' if kind is int else 'a number'};"
                          f" got {value!r}.")
    if outside_interval(value, low, high, low_inc, high_inc):
        raise RecipeError(f"recipe key '{key}' = {value!r} is out of range; allowed: "
                          f"{describe_interval(low, high, low_inc, high_inc)}.")


def _merge(defaults, given, path=""):
    out = copy.deepcopy(defaults)
    for key, value in given.items():
        full = f"{path}{key}"
        if path == "" and key not in DEFAULTS:
            raise RecipeError(
                f"unknown recipe key '{full}'; allowed keys: {', '.join(sorted(DEFAULTS))}.")
        if path == "" and key in _SECTION_KEYS:
            if not isinstance(value, dict):
                raise RecipeError(f"recipe key '{full}' must be a mapping; got {value!r}.")
            unknown = set(value) - _SECTION_KEYS[key]
            if unknown:
                raise RecipeError(
                    f"unknown recipe key '{full}.{sorted(unknown)[0]}'; allowed in '{full}': "
                    f"{', '.join(sorted(_SECTION_KEYS[key]))}.")
            # A section that changes its "name" starts from a blank section.
            if "name" in value and value["name"] != defaults.get(key, {}).get("name"):
                out[key] = copy.deepcopy(value)
            else:
                out[key] = {**out.get(key, {}), **copy.deepcopy(value)}
        else:
            out[key] = copy.deepcopy(value)
    return out


def load_recipe(source):
    """Reads and validates a recipe.

    Args:
        source: a path to a JSON file, or a dict. Missing keys take :data:`DEFAULTS`.

    Returns:
        The complete recipe (a new dict).

    Raises:
        RecipeError: naming the first unknown key or out-of-range value.
        FileNotFoundError: if the path does not exist.
    """
    base_dir = None
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"recipe file not found: {path}")
        try:
            with open(path) as f:
                given = json.load(f)
        except json.JSONDecodeError as e:
            raise RecipeError(f"recipe {path} is not valid JSON: {e}") from None
        base_dir = os.path.dirname(os.path.abspath(path))
    elif isinstance(source, dict):
        given = source
    else:
        raise RecipeError(f"a recipe must be a JSON file path or a dict; got {type(source).__name__}.")
    if not isinstance(given, dict):
        raise RecipeError("a recipe must be a JSON object of keys.")
    recipe = _merge(DEFAULTS, given)
    for key, allowed in _ENUMS.items():
        value = _get(recipe, key)
        if value is not None and value not in allowed:
            raise RecipeError(
                f"recipe key '{key}' = {value!r} is not allowed; choose one of {', '.join(allowed)}.")
    for spec in _RANGES:
        _check_range(recipe, *spec)
    loss = recipe["loss"]
    if loss.get("lower_percentile", 0) >= loss.get("upper_percentile", 100):
        raise RecipeError("recipe keys 'loss.lower_percentile' < 'loss.upper_percentile' required "
                          f"(0 <= lower < upper <= 100); got {loss}.")
    sampler = recipe["sampler"]
    if sampler["name"] != "uniform" and sampler.get("num_neighbors", 100) >= sampler.get(
            "num_candidates", 1000):
        raise RecipeError("recipe key 'sampler.num_neighbors' must be < 'sampler.num_candidates'; "
                          f"got {sampler}.")
    data = recipe["data"]
    if data["name"] == "image_folder" and not data.get("train"):
        raise RecipeError("recipe key 'data.train' (an image folder) is required for image_folder.")
    if data["name"] == "tfds" and not data.get("dataset"):
        raise RecipeError("recipe key 'data.dataset' (a tfds name) is required for tfds.")
    if base_dir is not None:  # folders are relative to the recipe file
        for key in ("train", "test", "data_dir"):
            if data.get(key) and not os.path.isabs(data[key]):
                data[key] = os.path.normpath(os.path.join(base_dir, data[key]))
    return recipe


def save_recipe(recipe, path):
    """Writes a recipe as JSON (atomically)."""
    atomic_write_json(path, recipe, indent=2, sort_keys=True)
