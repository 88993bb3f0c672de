"""Search spaces: which knobs of a recipe a search varies, and over which ranges.

A search space is a dict ``{knob: spec}``. Knobs (see :data:`KNOBS`):

============== ============================ ================ ==========================
knob           recipe key                   default range    applies to
============== ============================ ================ ==========================
beta           loss.beta                    [0, 2]           hard, unremix
tau_plus       loss.tau_plus                [0, 0.2]         debiased, hard, unremix
temperature    loss.temperature             [0.1, 1] (log)   every loss
ring_lower     loss.lower_percentile        [0, 40]          ring
ring_upper     loss.upper_percentile        [60, 100]        ring
num_candidates sampler.num_candidates       [128, 1024] (log) BatchSampler
restart_prob   sampler.restart_prob         [0.05, 0.5]      BatchSampler
============== ============================ ================ ==========================

Why these defaults: Robinson et al. (ICLR 2021) report ``beta`` in 0.5-2 "tends to
work well" and that large ``beta`` hurts with augmentation positives; ``[0, 2]``
brackets that and includes ``beta = 0`` (the debiased loss) as the baseline.
``tau_plus`` is the probability that a negative shares the anchor's class: about
``1 / num_classes`` (0.1 for CIFAR-10 and digits, 0.01 for CIFAR-100); the papers
use 0.01-0.1, and ``[0, 0.2]`` covers "no debiasing" up to twice the CIFAR-10 prior.
Larger values make the debiased negative term hit its clamp ``N e^{-1/t}`` often.

A spec is one of:

* ``None``: the knob's default range;
* ``(low, high)`` (a 2-tuple or 2-list of numbers): a uniform range;
* ``{"min": low, "max": high, "sampling": "linear"|"log", "step": s}``;
* ``{"values": [v1, v2, ...]}``: a choice among values;
* a single number: fixed at that value (not searched).

Using the BatchSampler knobs switches a recipe with the uniform sampler to
``batchsampler``.

Example:
>>> space = normalize_search_space({"beta": (0.0, 1.0), "tau_plus": None}, loss="hard")
>>> space["beta"]["max"], space["tau_plus"]["max"]
(1.0, 0.2)
>>> default_search_space("debiased")
['tau_plus']
"""

from __future__ import annotations

import copy
import math
import numbers

from keras_hardneg._validation import describe_interval, outside_interval
from keras_hardneg.run import SECTIONS

__all__ = ["KNOBS", "default_search_space", "normalize_search_space", "define_hyperparameters",
           "apply_to_recipe"]

# knob -> (recipe section, recipe key, default search range). The range is the tuner's
# choice; the type, the allowed bounds and the components that take the key are read
# from the registries.
_KNOB_KEYS = {
    "beta": ("loss", "beta", {"min": 0.0, "max": 2.0, "sampling": "linear"}),
    "tau_plus": ("loss", "tau_plus", {"min": 0.0, "max": 0.2, "sampling": "linear"}),
    "temperature": ("loss", "temperature", {"min": 0.1, "max": 1.0, "sampling": "log"}),
    "ring_lower": ("loss", "lower_percentile", {"min": 0.0, "max": 40.0, "sampling": "linear"}),
    "ring_upper": ("loss", "upper_percentile", {"min": 60.0, "max": 100.0, "sampling": "linear"}),
    "num_candidates": ("sampler", "num_candidates", {"min": 128, "max": 1024, "sampling": "log"}),
    "restart_prob": ("sampler", "restart_prob", {"min": 0.05, "max": 0.5, "sampling": "linear"}),
}


def _knob(section, key, default):
    registry = SECTIONS[section]
    users = tuple(n for n in registry.names()
                  if key in registry.get(n).params and registry.get(n).params[key].tunable)
    param = registry.get(users[0]).params[key]
    return dict(section=section, key=key, kind=int if param.kind is int else float,
                default=default, losses=users if section == "loss" else None,
                bounds=(param.low, param.high, param.low_inclusive, param.high_inclusive))


#: knob -> section, key, kind, default range, bounds and (for loss knobs) the losses.
KNOBS = {knob: _knob(*spec) for knob, spec in _KNOB_KEYS.items()}


def default_search_space(loss="hard"):
    """The knobs searched by default for ``loss``: its tunable hyper-parameters other
    than the temperature (the temperature alone for NT-Xent)."""
    if loss not in SECTIONS["loss"]:
        raise ValueError(f"`loss` must be one of {', '.join(SECTIONS['loss'].names())}; "
                         f"got {loss!r}.")
    loss = SECTIONS["loss"].canonical(loss)
    knobs = [k for k, info in KNOBS.items() if info["losses"] and loss in info["losses"]]
    return [k for k in knobs if k != "temperature"] or knobs


def _is_number(v):
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _check_value(name, knob, value, what="value"):
    info = KNOBS[knob]
    where = f"search_space[{knob!r}]"
    if not _is_number(value) or not math.isfinite(value):
        raise ValueError(f"`{where}` {what} must be a finite number; got {value!r}.")
    if info["kind"] is int and not float(value).is_integer():
        raise ValueError(f"`{where}` {what} must be an integer; got {value!r}.")
    low, high, low_inc, high_inc = info["bounds"]
    if outside_interval(value, low, high, low_inc, high_inc):
        raise ValueError(f"`{where}` {what} {value!r} is outside the allowed range: it must be "
                         f"{describe_interval(low, high, low_inc, high_inc)}.")


def _normalize_one(knob, spec):
    info = KNOBS[knob]
    where = f"search_space[{knob!r}]"
    if spec is None:
        spec = dict(info["default"])
    elif _is_number(spec):
        _check_value(where, knob, spec)
        return {"fixed": info["kind"](spec)}
    elif isinstance(spec, (tuple, list)):
        if len(spec) != 2 or not all(_is_number(v) for v in spec):
            raise ValueError(f"`{where}` must be a (low, high) pair of numbers, a dict or a "
                             f"number; got {spec!r} (use {{'values': [...]}} for a choice).")
        spec = {"min": spec[0], "max": spec[1], "sampling": info["default"]["sampling"]}
    elif isinstance(spec, dict):
        spec = dict(spec)
        unknown = set(spec) - {"min", "max", "sampling", "step", "values"}
        if unknown:
            raise ValueError(f"`{where}` has unknown field {sorted(unknown)[0]!r}; allowed: "
                             "min, max, sampling, step, values.")
        if "values" in spec:
            values = spec["values"]
            if set(spec) != {"values"}:
                raise ValueError(f"`{where}`: 'values' cannot be combined with min/max/step.")
            if not isinstance(values, (list, tuple)) or not values:
                raise ValueError(f"`{where}` 'values' must be a non-empty list; got {values!r}.")
            for v in values:
                _check_value(where, knob, v, "choice")
            return {"values": [info["kind"](v) for v in values]}
        if "min" not in spec or "max" not in spec:
            raise ValueError(f"`{where}` needs both 'min' and 'max'; got {spec!r}.")
        spec.setdefault("sampling", info["default"]["sampling"])
    else:
        raise ValueError(f"`{where}` must be None, a (low, high) pair, a dict or a number; "
                         f"got {spec!r}.")
    low, high = spec["min"], spec["max"]
    _check_value(where, knob, low, "min")
    _check_value(where, knob, high, "max")
    if not low < high:
        raise ValueError(f"`{where}` needs min < max; got min={low!r}, max={high!r}.")
    if spec["sampling"] not in ("linear", "log"):
        raise ValueError(f"`{where}` 'sampling' must be 'linear' or 'log'; "
                         f"got {spec['sampling']!r}.")
    if spec["sampling"] == "log" and low <= 0:
        raise ValueError(f"`{where}` log sampling needs min > 0; got min={low!r}.")
    if spec.get("step") is not None:
        step = spec["step"]
        if not _is_number(step) or step <= 0 or step > high - low:
            raise ValueError(f"`{where}` 'step' must be in (0, max - min]; got {step!r}.")
        if info["kind"] is int and not float(step).is_integer():
            raise ValueError(f"`{where}` 'step' must be an integer; got {step!r}.")
    out = {"min": info["kind"](low), "max": info["kind"](high), "sampling": spec["sampling"]}
    if spec.get("step") is not None:
        out["step"] = info["kind"](spec["step"])
    return out


def normalize_search_space(search_space: dict | list | None = None,
                           loss: str = "hard") -> dict[str, dict]:
    """Checks a search space and returns it in canonical form ``{knob: spec dict}``.

    Args:
        search_space: ``None`` (the defaults for ``loss``), a list of knob names
            (each over its default range) or a dict ``{knob: spec}`` (see the
            module docstring).
        loss: the recipe's loss name; knobs that do not apply to it are refused.

    Raises:
        ValueError: naming ``search_space[...]`` for an unknown knob, a knob that
            does not apply to ``loss``, or a bad range.
    """
    if search_space is None:
        search_space = default_search_space(loss)
    if isinstance(search_space, (list, tuple)):
        search_space = {k: None for k in search_space}
    if not isinstance(search_space, dict):
        raise ValueError("`search_space` must be None, a list of knob names or a dict "
                         f"{{knob: range}}; got {type(search_space).__name__}.")
    if not search_space:
        raise ValueError("`search_space` is empty; name at least one knob "
                         f"({', '.join(KNOBS)}).")
    out = {}
    for knob, spec in search_space.items():
        if knob not in KNOBS:
            raise ValueError(f"`search_space` has unknown knob {knob!r}; allowed: "
                             f"{', '.join(KNOBS)}.")
        losses = KNOBS[knob]["losses"]
        if losses is not None and loss not in losses:
            raise ValueError(f"`search_space` knob {knob!r} does not apply to loss {loss!r} "
                             f"(it applies to {', '.join(losses)}).")
        out[knob] = _normalize_one(knob, spec)
    if "ring_lower" in out and "ring_upper" in out:
        lo = out["ring_lower"]
        hi = out["ring_upper"]
        lo_max = lo.get("fixed", max(lo.get("values", [lo.get("max")])))
        hi_min = hi.get("fixed", min(hi.get("values", [hi.get("min")])))
        if not lo_max < hi_min:
            raise ValueError("`search_space['ring_lower']` must stay below "
                             "`search_space['ring_upper']` (largest lower < smallest upper); "
                             f"got {lo} and {hi}.")
    return out


def define_hyperparameters(hp, space):
    """Registers the knobs of a canonical ``space`` on ``hp``; returns ``{knob: value}``."""
    values = {}
    for knob, spec in space.items():
        kind = KNOBS[knob]["kind"]
        if "fixed" in spec:
            values[knob] = hp.Fixed(knob, spec["fixed"])
        elif "values" in spec:
            values[knob] = hp.Choice(knob, spec["values"])
        elif kind is int:
            values[knob] = hp.Int(knob, spec["min"], spec["max"], step=spec.get("step"),
                                  sampling=spec["sampling"])
        else:
            values[knob] = hp.Float(knob, spec["min"], spec["max"], step=spec.get("step"),
                                    sampling=spec["sampling"])
    return values


def apply_to_recipe(recipe, values):
    """A copy of ``recipe`` with the knob ``values`` written into their recipe keys."""
    recipe = copy.deepcopy(recipe)
    for knob, value in values.items():
        info = KNOBS[knob]
        value = info["kind"](value)
        if info["section"] == "sampler" and recipe["sampler"]["name"] == "uniform":
            recipe["sampler"] = {"name": "batchsampler"}
        recipe[info["section"]][info["key"]] = value
    name = recipe["sampler"]["name"]
    sampler = recipe["sampler"] = {**SECTIONS["sampler"].defaults(name), **recipe["sampler"]}
    if "num_candidates" in sampler and sampler.get("num_neighbors") is not None \
            and sampler["num_neighbors"] >= sampler["num_candidates"]:
        sampler["num_neighbors"] = max(1, sampler["num_candidates"] // 2)
    return recipe
