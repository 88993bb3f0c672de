"""One registry per kind of component: every registered name is accepted by the recipe check,
the CLI and the tuner; an unknown one is refused by each, naming the key and the allowed
names; every default is defined once (recipe, CLI, tuner and Python API agree)."""

import inspect

import pytest

from keras_hardneg import cli, tuning
from keras_hardneg.registry import ConfigError, Param, Registry
from keras_hardneg.run import SECTIONS, load_recipe
from keras_hardneg.run.recipe import DEFAULT_RECIPE, default_recipe_for

CLI_SECTIONS = ("framework", "encoder", "loss", "sampler", "optimizer")
ALL = [(section, name) for section in SECTIONS for name in SECTIONS[section].names()]


# A dataset of each modality with the keys it requires (paths are not opened by the check).
_DATA_OF = {"image": {"name": "digits"}, "graph": {"name": "tu", "folder": "/tmp/x"},
            "text": {"name": "text_file", "path": "/tmp/x.txt"},
            "retrieval": {"name": "beir", "path": "/tmp/x"}}
# The retrieval recipe's encoder is a pretrained BERT, whose checkpoint must be given.
_ENCODER_OF = {"retrieval": {"name": "pretrained_bert", "preset": "/tmp/checkpoint"}}


def _minimal(section, name):
    """A recipe selecting ``name`` for ``section`` (with the keys it requires), on data of
    the component's modality."""
    spec = {"name": name}
    if section == "data":
        spec.update({"image_folder": {"train": "/tmp/x"}, "tfds": {"dataset": "x"},
                     "tu": {"folder": "/tmp/x"}, "text_file": {"path": "/tmp/x.txt"},
                     "beir": {"path": "/tmp/x"}}.get(name, {}))
        modality = SECTIONS[section].get(name).tags.get("modality")
        return {section: spec, **({"encoder": dict(_ENCODER_OF[modality])}
                                  if modality in _ENCODER_OF else {})}
    if section == "encoder":
        spec.update({"pretrained_bert": {"preset": "/tmp/checkpoint"}}.get(name, {}))
    modality = SECTIONS[section].get(name).tags.get("modality")
    recipe = {section: spec}
    if modality not in (None, "image"):
        recipe["data"] = dict(_DATA_OF[modality])
    if modality in _ENCODER_OF and section != "encoder":
        recipe["encoder"] = dict(_ENCODER_OF[modality])
    return recipe


def _signature_defaults(factory, keys):
    target = factory.__init__ if inspect.isclass(factory) else factory
    params = inspect.signature(target).parameters
    return {k: list(params[k].default) if isinstance(params[k].default, tuple)
            else params[k].default for k in keys}


@pytest.mark.parametrize("section,name", ALL, ids=[f"{s}:{n}" for s, n in ALL])
def test_every_name_is_accepted_with_the_factory_defaults(section, name):
    registry = SECTIONS[section]
    comp = registry.get(name)
    given = _minimal(section, name)[section]
    # the modality's default recipe's own choices apply when it names the same component
    base = default_recipe_for(_minimal(section, name))
    preset = base[section] if base[section]["name"] == name else {}
    got = load_recipe(_minimal(section, name))[section]
    assert got == {"name": name, **registry.defaults(name), **preset, **given}
    # Defaults not restated in the registration come from the factory's signature.
    factory = comp.factory.__init__ if inspect.isclass(comp.factory) else comp.factory
    keys = [k for k in comp.params if k in inspect.signature(factory).parameters
            and k not in given and k not in preset]
    assert {k: got[k] for k in keys} == _signature_defaults(comp.factory, keys)


@pytest.mark.parametrize("section", list(SECTIONS))
def test_an_unknown_name_is_refused_by_the_recipe_naming_the_allowed(section):
    with pytest.raises(ConfigError) as e:
        load_recipe({section: {"name": "no_such_thing"}})
    message = str(e.value)
    assert "no_such_thing" in message and SECTIONS[section].kind in message
    assert all(n in message for n in SECTIONS[section].names())


@pytest.mark.parametrize("section", CLI_SECTIONS)
def test_cli_choices_are_the_registered_names(section, capsys):
    parser = cli.build_parser()
    for name in SECTIONS[section].names():
        args = parser.parse_args(["train", f"--{section}", name])
        assert cli._overrides(args)[section] == {"name": name}
    with pytest.raises(SystemExit) as e:
        parser.parse_args(["train", f"--{section}", "no_such_thing"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"--{section}" in err and all(n in err for n in SECTIONS[section].names())


@pytest.mark.parametrize("section", CLI_SECTIONS)
def test_cli_and_recipe_agree_on_defaults(section):
    """A CLI flag selecting a component gives exactly the recipe the Python API gives (on
    data of the component's modality)."""
    parser = cli.build_parser()
    for name in SECTIONS[section].names():
        if name == "pretrained_bert":  # needs a checkpoint: its flag is --preset
            continue                   # (tests/test_cli_pretrained.py)
        given = _minimal(section, name)
        data = {k: v for k, v in given.items() if k != section} or None
        via_cli = load_recipe(data, cli._overrides(parser.parse_args(["train", f"--{section}",
                                                                       name])))
        assert via_cli == load_recipe(given)


def test_tuner_accepts_every_loss_and_refuses_unknown_ones(tmp_path):
    for name in SECTIONS["loss"].names():
        space = tuning.normalize_search_space(None, loss=name)
        assert space and all(k in tuning.KNOBS for k in space)
    with pytest.raises(ValueError, match=r"`loss` must be one of .*hard"):
        tuning.default_search_space("no_such_loss")
    for what in ("loss", "framework"):
        with pytest.raises(ValueError) as e:
            tuning.run_search(output=str(tmp_path), **{what: "no_such_thing"})
        assert f"`{what}`" in str(e.value)
        assert all(n in str(e.value) for n in SECTIONS[what].names())


def test_tuner_knobs_take_types_bounds_and_losses_from_the_registry():
    for knob, info in tuning.KNOBS.items():
        registry = SECTIONS[info["section"]]
        users = [n for n in registry.names() if info["key"] in registry.get(n).params]
        assert users, knob
        param = registry.get(users[0]).params[info["key"]]
        assert info["bounds"] == (param.low, param.high, param.low_inclusive,
                                  param.high_inclusive)
        if info["section"] == "loss":
            assert set(info["losses"]) == set(users)


def test_tuner_fills_a_switched_sampler_with_the_registry_defaults():
    r = tuning.space.apply_to_recipe(load_recipe({}), {"restart_prob": 0.3})
    defaults = SECTIONS["sampler"].defaults("batchsampler")
    assert r["sampler"] == {"name": "batchsampler", **defaults, "restart_prob": 0.3}


def test_the_default_recipe_states_only_what_differs_from_the_components():
    for section, spec in DEFAULT_RECIPE.items():
        if section not in SECTIONS:
            continue
        defaults = SECTIONS[section].defaults(spec["name"])
        for key, value in spec.items():
            if key != "name":
                assert defaults[key] != value, (section, key)


def test_python_factories_refuse_unknown_names_and_keys():
    import keras_hardneg as khn
    from keras_hardneg import run

    with pytest.raises(ConfigError, match=r"unknown loss 'mse'; allowed: .*hard"):
        khn.losses.get("mse")
    with pytest.raises(ConfigError, match=r"unknown loss key 'beta' for loss 'nt_xent'"):
        khn.losses.get("nt_xent", beta=1.0)
    with pytest.raises(ConfigError, match=r"unknown encoder 'vit'; allowed: "):
        run.build_encoder({"encoder": {"name": "vit"}}, (8, 8, 3))
    with pytest.raises(ConfigError, match=r"unknown optimizer 'adagrad'"):
        run.build_optimizer({"optimizer": {"name": "adagrad"}}, steps_per_epoch=1)


def test_registry_basics():
    reg = Registry("widget")

    @reg.register("box", aliases=("crate",), params={"size": Param(int, low=1)},
                  check=lambda c: "size must be odd" if c["size"] % 2 == 0 else None)
    def box(size=3):
        return size

    assert reg.build("crate") == 3 and reg.canonical("Crate") == "box"
    with pytest.raises(ConfigError, match="size must be odd"):
        reg.build("box", size=4)
    with pytest.raises(ConfigError, match="widget key 'size' must be an integer"):
        reg.check("box", {"size": 1.5})
    with pytest.raises(ValueError, match="already registered"):
        reg.register("box", box)
    with pytest.raises(ValueError, match="not a parameter"):
        reg.register("bag", lambda: None, params={"size": Param(int)})


# ----------------------------------------------- every key is a parameter of its factory
def _registries():
    from keras_hardneg import registry

    return [getattr(registry, n) for n in registry.__all__
            if isinstance(getattr(registry, n), Registry)]


_COMPONENTS = [(reg, name) for reg in _registries() for name in reg.names()]


@pytest.mark.parametrize("registry,name", _COMPONENTS,
                         ids=[f"{r.kind}:{n}" for r, n in _COMPONENTS])
def test_every_registered_key_is_a_parameter_of_its_factory(registry, name):
    """Walks every registration: each config key is an argument its factory takes (so
    ``Registry.build`` can pass it), and a default stated in the registration is the
    factory's own (one home for every default)."""
    from keras_hardneg.registry import REQUIRED, factory_parameters

    comp = registry.get(name)
    accepted = factory_parameters(comp.factory)
    for key, param in comp.params.items():
        assert key in accepted, (registry.kind, name, key)
        own = accepted[key]
        if own is not REQUIRED and param.default is not REQUIRED:
            own = list(own) if isinstance(own, tuple) else own
            assert param.default == own, (registry.kind, name, key, param.default, own)


def test_a_key_its_factory_does_not_take_is_refused_at_registration():
    reg = Registry("widget")
    with pytest.raises(ValueError, match=r"widget 'box': key 'colour' .*not a parameter of box"):
        @reg.register("box", params={"colour": Param(str, default="red")})
        def box(size=3):
            return size
    with pytest.raises(ValueError, match=r"widget 'bag': key 'size' states default 4, but "
                                         r"bag's own default is 3"):
        @reg.register("bag", params={"size": Param(int, default=4)})
        def bag(size=3):
            return size

    class Base:
        def __init__(self, size=3):
            self.size = size

    class Child(Base):
        def __init__(self, colour="red", **kwargs):
            super().__init__(**kwargs)

    # A key that a class passes on to its base through **kwargs is accepted.
    reg.register("child", Child, params={"size": Param(int), "colour": Param(str)})
    assert reg.build("child", size=5).size == 5


def test_a_default_outside_its_own_param_range_is_refused_at_registration():
    # Issue 56, bug 7: a default was never checked against the range its Param states.
    reg = Registry("widget")
    with pytest.raises(ValueError, match=r"^widget 'box': the default of key 'size' is not "
                                         r"allowed by its own Param: .* = 0 is out of range; "
                                         r"allowed: >= 1\.$"):
        @reg.register("box", params={"size": Param(int, low=1)})
        def box(size=0):
            return size
    with pytest.raises(ValueError, match=r"widget 'bag'.*'colour'.*choose one of red, blue"):
        reg.register("bag", lambda colour="green": colour,
                     params={"colour": Param(str, choices=("red", "blue"))})
    with pytest.raises(ValueError, match=r"widget 'cup'.*'rate'.*must be a number"):
        reg.register("cup", lambda rate="fast": rate, params={"rate": Param(float, low=0.0)})
    assert "box" not in reg and "bag" not in reg and "cup" not in reg
    # REQUIRED keys and a None default ("unset") have nothing to check.
    reg.register("ok", lambda size, scale=None: size,
                 params={"size": Param(int, low=1), "scale": Param(float, low=0.0)})
    assert reg.build("ok", size=2) == 2


@pytest.mark.parametrize("registry,name", _COMPONENTS,
                         ids=[f"{r.kind}:{n}" for r, n in _COMPONENTS])
def test_every_registered_default_is_inside_its_own_range(registry, name):
    from keras_hardneg.registry import REQUIRED

    for key, param in registry.get(name).params.items():
        if param.default is not REQUIRED:
            param.validate(param.default, f"{registry.kind} {name!r} key {key!r}")


def test_graph_samplers_build_from_their_registration():
    """``SAMPLERS.build`` takes every key of the sampler's recipe section, the graph refresh
    keys included (they were popped off by the run layer before the factory was called)."""
    import numpy as np

    from keras_hardneg.registry import SAMPLERS

    embeddings = np.random.default_rng(0).normal(size=(200, 8)).astype("float32")
    sampler = SAMPLERS.build("batchsampler", embeddings, 64)
    assert sampler.refresh_every == 100 and sampler.initial_graph == "inputs"
    assert next(iter(sampler)).shape == (64,)
    knn = SAMPLERS.build("knn", embeddings, 16, refresh_every=7)
    assert knn.refresh_every == 7
