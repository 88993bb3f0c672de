"""Registries: one per kind of component, mapping a name to its factory and config keys.

Every configurable component (framework, loss, encoder, projection head, optimizer,
schedule, sampler, dataset, view maker, evaluation) is registered once, next to its
code, with the keys it takes. A key's default is read from the factory's signature,
so it exists in one place; the registration adds only what the signature cannot say
(type, allowed range or values, help). Recipes, CLI choices, tuner knobs and model
cards are derived from these registries, and every lookup refuses an unknown name or
key with an error naming it and what is allowed.

Example:
>>> reg = Registry("widget")
>>> @reg.register("box", params={"size": Param(int, low=1, help="side length")})
... def box(size=3):
...     return ("box", size)
>>> reg.build("box")
('box', 3)
>>> reg.check("box", {"size": 0})
Traceback (most recent call last):
...
keras_hardneg.registry.ConfigError: widget key 'size' = 0 is out of range; allowed: >= 1.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import numbers
from typing import Any, Callable, Iterable

from keras_hardneg._validation import describe_interval, outside_interval

__all__ = [
    "ConfigError", "Param", "Component", "Registry", "REQUIRED", "factory_parameters",
    "FRAMEWORKS", "LOSSES", "ENCODERS", "HEADS", "OPTIMIZERS", "SCHEDULES", "SAMPLERS",
    "DATASETS", "VIEW_MAKERS", "EVALUATIONS", "MODALITIES", "DISTRIBUTIONS",
    "DEFAULT_MODALITY", "get_modality",
]


class ConfigError(ValueError):
    """A component name or config key/value is not allowed (the message names it)."""


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


#: Marks a key with no default: it must be given.
REQUIRED: Any = _Required()
_FROM_SIGNATURE: Any = object()


@dataclasses.dataclass(frozen=True)
class Param:
    """One config key of a component.

    Args:
        kind: ``int``, ``float``, ``str``, ``bool``, ``list`` (a list/tuple of numbers),
            ``"int_list"``, ``"number_or_list"``, ``"path"`` (a string; a recipe file's
            relative paths are resolved against its folder) or ``"any"``.
        default: the value when the key is not given; by default read from the
            factory's signature (the one place it is defined).
        low, high, low_inclusive, high_inclusive: an allowed interval for numbers
            (each element of a list).
        choices: allowed values.
        help: one line, shown by the CLI and in docs.
        tunable: the tuner may search this key (numbers only).
    """

    kind: Any = float
    default: Any = _FROM_SIGNATURE
    low: float | None = None
    high: float | None = None
    low_inclusive: bool = True
    high_inclusive: bool = True
    choices: tuple | None = None
    help: str = ""
    tunable: bool = False

    def validate(self, value: Any, where: str) -> Any:
        """``value`` checked (and ints/floats normalised); raises :class:`ConfigError`."""
        if value is None and self.default is None:
            return None
        if self.choices is not None:
            if value not in self.choices:
                raise ConfigError(f"{where} = {value!r} is not allowed; choose one of "
                                  f"{', '.join(map(str, self.choices))}.")
            return value
        kind = self.kind
        if kind == "any":
            return value
        if kind is bool:
            if not isinstance(value, bool):
                raise ConfigError(f"{where} must be true or false; got {value!r}.")
            return value
        if kind is str or kind == "path":
            if not isinstance(value, str) or not value:
                raise ConfigError(f"{where} must be a non-empty string; got {value!r}.")
            return value
        if kind in (list, "int_list") or (
                kind == "number_or_list" and isinstance(value, (list, tuple))):
            if not isinstance(value, (list, tuple)) or not value:
                raise ConfigError(f"{where} must be a non-empty list of numbers; got {value!r}.")
            item = int if kind == "int_list" else float
            return [self._number(v, f"{where}[{i}]", item) for i, v in enumerate(value)]
        return self._number(value, where, int if kind is int else float)

    def _number(self, value: Any, where: str, kind: type) -> Any:
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or \
                not math.isfinite(float(value)):
            raise ConfigError(f"{where} must be {'an integer' if kind is int else 'a number'}; "
                              f"got {value!r}.")
        if kind is int and not float(value).is_integer():
            raise ConfigError(f"{where} must be an integer; got {value!r}.")
        if outside_interval(value, self.low, self.high, self.low_inclusive, self.high_inclusive):
            raise ConfigError(f"{where} = {value!r} is out of range; allowed: "
                              f"{describe_interval(self.low, self.high, self.low_inclusive, self.high_inclusive)}.")
        return int(value) if kind is int else float(value)


@dataclasses.dataclass(frozen=True)
class Component:
    """A registered component: its name, factory, config keys and tags."""

    name: str
    factory: Callable[..., Any]
    params: dict[str, Param]
    help: str = ""
    tags: dict[str, Any] = dataclasses.field(default_factory=dict)
    check: Callable[[dict[str, Any]], str | None] | None = None

    def defaults(self) -> dict[str, Any]:
        """``{key: default}`` for every key that has one."""
        return {k: p.default for k, p in self.params.items() if p.default is not REQUIRED}

    def accepts(self, argument: str) -> bool:
        """Whether the factory takes ``argument`` (e.g. a ``seed`` the caller supplies)."""
        return argument in factory_parameters(self.factory)


def factory_parameters(factory: Callable[..., Any]) -> dict[str, Any]:
    """``{argument: default or REQUIRED}`` of the keyword arguments ``factory`` takes.

    For a class, its ``__init__``'s, and, while an ``__init__`` passes ``**kwargs`` on,
    those of its bases' (``super().__init__(**kwargs)``), so that a loss's ``name`` or a
    base class's key counts as taken. A factory whose signature cannot be read gives ``{}``.
    """
    targets = ([c.__init__ for c in factory.__mro__ if "__init__" in vars(c)]
               if inspect.isclass(factory) else [factory])
    out: dict[str, Any] = {}
    for target in targets:
        try:
            sig = inspect.signature(target)
        except (TypeError, ValueError):
            break
        for name, p in sig.parameters.items():
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and name != "self":
                out.setdefault(name, REQUIRED if p.default is inspect.Parameter.empty
                               else p.default)
        if not any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values()):
            break
    return out


def _plain(value: Any) -> Any:
    # Tuples in signatures become lists, as they would in a JSON recipe.
    return [_plain(v) for v in value] if isinstance(value, tuple) else value


class Registry:
    """Name -> :class:`Component` for one kind of component.

    Args:
        kind: what is registered, e.g. ``"loss"`` (used in error messages).
    """

    def __init__(self, kind: str):
        self.kind = kind
        self._components: dict[str, Component] = {}
        self._aliases: dict[str, str] = {}

    def register(self, name: str, factory: Callable[..., Any] | None = None, *,
                 params: dict[str, Param] | None = None, aliases: Iterable[str] = (),
                 help: str = "", check: Callable[[dict[str, Any]], str | None] | None = None,
                 **tags: Any):
        """Registers ``factory`` under ``name`` (usable as a decorator).

        ``params`` are the config keys a recipe or the CLI may set; a key whose
        :class:`Param` has no ``default`` takes the factory's signature default, and every
        default must pass its own :class:`Param`'s check (``None``: unset, allowed).
        ``check`` validates keys together (it gets the completed config and returns
        a message, or None when the config is fine). ``tags`` are free metadata
        (e.g. ``modality="image"``).
        """
        def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
            if name in self._components or name in self._aliases:
                raise ValueError(f"{self.kind} {name!r} is already registered.")
            if "name" in (params or {}):
                raise ValueError(f"{self.kind} {name!r}: the config key 'name' is reserved (a "
                                 "recipe section's 'name' names the component); call it "
                                 "something else, e.g. 'prefix'.")
            sig = factory_parameters(fn)
            resolved = {}
            for key, param in (params or {}).items():
                # Every key is passed to the factory by build(): it must take it.
                if key not in sig:
                    raise ValueError(f"{self.kind} {name!r}: key {key!r} is not a parameter "
                                     f"of {fn.__name__}, which build() would call with it.")
                own = sig[key] if sig[key] is REQUIRED else _plain(sig[key])
                if param.default is _FROM_SIGNATURE:
                    param = dataclasses.replace(param, default=own)
                elif own is not REQUIRED and param.default is not REQUIRED \
                        and param.default != own:
                    raise ValueError(f"{self.kind} {name!r}: key {key!r} states default "
                                     f"{param.default!r}, but {fn.__name__}'s own default is "
                                     f"{own!r}; state it in one place (the signature).")
                if param.default is not REQUIRED:  # the default obeys its own range
                    try:
                        param.validate(param.default, f"{key} default")
                    except ConfigError as err:
                        raise ValueError(f"{self.kind} {name!r}: the default of key {key!r} is "
                                         f"not allowed by its own Param: {err}") from None
                resolved[key] = param
            doc = help or (inspect.getdoc(fn) or "").split("\n")[0]
            self._components[name] = Component(name, fn, resolved, doc, dict(tags), check)
            for alias in aliases:
                self._aliases[alias] = name
            return fn

        return decorate if factory is None else decorate(factory)

    # ----------------------------------------------------------------- lookups
    def names(self, **tags: Any) -> list[str]:
        """Registered names (in registration order), optionally only those whose tags match."""
        return [n for n, c in self._components.items()
                if all(c.tags.get(k) == v for k, v in tags.items())]

    def canonical(self, name: Any) -> str:
        """The registered name for ``name`` or one of its aliases; raises :class:`ConfigError`."""
        key = name.lower().replace("-", "_") if isinstance(name, str) else name
        if key in self._components:
            return key
        if key in self._aliases:
            return self._aliases[key]
        raise ConfigError(f"unknown {self.kind} {name!r}; allowed: {', '.join(self.names())}.")

    def __contains__(self, name: Any) -> bool:
        try:
            self.canonical(name)
            return True
        except ConfigError:
            return False

    def get(self, name: str) -> Component:
        """The :class:`Component` registered as ``name``."""
        return self._components[self.canonical(name)]

    def defaults(self, name: str) -> dict[str, Any]:
        """``{key: default}`` of ``name``'s config keys."""
        return self.get(name).defaults()

    def check(self, name: str, config: dict[str, Any] | None = None, *,
              where: str | None = None, prefix: str = "") -> dict[str, Any]:
        """``config`` validated and completed with defaults (a new dict, without ``name``).

        Keys are named ``"{where} '{prefix}{key}'"`` in errors (default ``"loss key 'beta'"``;
        a recipe uses ``where="recipe key", prefix="loss."``).

        Raises:
            ConfigError: naming the unknown key or out-of-range value and what is allowed.
        """
        comp = self.get(name)
        where = where or f"{self.kind} key"
        config = dict(config or {})
        config.pop("name", None)
        unknown = sorted(set(config) - set(comp.params))
        if unknown:
            allowed = ", ".join(sorted(comp.params)) or "none"
            raise ConfigError(f"unknown {where} '{prefix}{unknown[0]}' for {self.kind} "
                              f"'{comp.name}'; allowed: {allowed}.")
        out = {}
        for key, param in comp.params.items():
            if key in config:
                out[key] = param.validate(config[key], f"{where} '{prefix}{key}'")
            elif param.default is REQUIRED:
                raise ConfigError(f"{where} '{prefix}{key}' is required for {self.kind} "
                                  f"'{comp.name}'.")
            else:
                out[key] = param.default
        problem = comp.check(out) if comp.check is not None else None
        if problem:
            for key in comp.params:  # name the keys as the caller does (e.g. 'sampler.x')
                problem = problem.replace(f"'{key}'", f"'{prefix}{key}'")
            raise ConfigError(f"{where}s of {self.kind} '{comp.name}': {problem}.")
        return out

    def build(self, name: str, *args: Any, **config: Any) -> Any:
        """Calls ``name``'s factory with ``*args`` and the checked ``config``."""
        return self.make(name, config, *args)

    def make(self, name: str, config: dict[str, Any] | None, *args: Any, **context: Any) -> Any:
        """Calls ``name``'s factory with ``*args``, the checked ``config`` and ``context``
        (arguments the caller supplies, e.g. an encoder's ``input_shape``). A ``context``
        argument that is also a config key replaces the checked value (e.g. a learning-rate
        schedule made from the checked ``learning_rate``)."""
        return self.get(name).factory(*args, **{**self.check(name, config), **context})

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self.names())})"


#: Training frameworks (``simclr``, ``moco_v2``, ``moco_v3``, ``graphcl``, ``infograph``):
#: the recipe's ``framework`` section.
FRAMEWORKS = Registry("framework")
#: Contrastive losses (``nt_xent``, ``debiased``, ``hard``, ``ring``, ``unremix``): ``loss``.
LOSSES = Registry("loss")
#: Encoders (ResNets, the small ConvNet, GIN, Transformers, pretrained BERT): ``encoder``.
ENCODERS = Registry("encoder")
#: Projection heads: ``head``.
HEADS = Registry("projection head")
#: Optimizers (Keras's, ``lars``, ``sgd_l2``): ``optimizer``.
OPTIMIZERS = Registry("optimizer")
#: Learning-rate schedules: ``schedule``.
SCHEDULES = Registry("schedule")
#: Batch samplers (``uniform``, ``batchsampler``, ``knn``): ``sampler``.
SAMPLERS = Registry("sampler")
#: Datasets a recipe names (digits, image folders, TFDS, TU graphs, text files, synthetic):
#: ``data``.
DATASETS = Registry("dataset")
#: View makers (image augmentations, dropout and adjacent sentence views, graph views):
#: ``augmentation``.
VIEW_MAKERS = Registry("view maker")
#: Evaluations of a trained encoder (kNN, linear probe, SVM, STS, SentEval): ``evaluation``.
EVALUATIONS = Registry("evaluation")
#: Modalities (image, graph, text): how the run layer feeds, evaluates and exports each kind
#: of data (``keras_hardneg/modalities/``).
MODALITIES = Registry("modality")
#: Ways a run spreads over devices and processes (one process, TensorFlow multi-worker, JAX
#: multi-process): ``keras_hardneg/run/distribution/base.py``.
DISTRIBUTIONS = Registry("distribution")

#: The modality of an artifact that names none (an ``export_encoder`` call without
#: ``input_signature``, a model card of format ``/1``, a preset's metadata before modalities).
DEFAULT_MODALITY = "image"


def get_modality(name: str) -> Any:
    """The modality object registered in :data:`MODALITIES` as exactly ``name`` (what the
    export and run layers ask instead of testing the name). Importing
    ``keras_hardneg.modalities`` registers the built-in ones (``export``, ``run`` and the
    zoo import it, and ask it for them); another registers when its module is imported.

    Raises:
        ConfigError: ``name`` is not registered (the message lists those that are).
    """
    if name not in MODALITIES.names():
        raise ConfigError(f"unknown modality {name!r}; allowed: {', '.join(MODALITIES.names())}.")
    return MODALITIES.get(name).factory()
