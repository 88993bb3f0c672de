"""Search-space validation: bad knobs and ranges raise ValueError naming them."""

import keras_tuner
import pytest

from keras_hardneg.tuning import space


def test_defaults_by_loss():
    s = space.normalize_search_space(None, "hard")
    assert s == {"beta": {"min": 0.0, "max": 2.0, "sampling": "linear"},
                 "tau_plus": {"min": 0.0, "max": 0.2, "sampling": "linear"}}
    assert list(space.normalize_search_space(None, "debiased")) == ["tau_plus"]
    assert list(space.normalize_search_space(None, "ring")) == ["ring_lower", "ring_upper"]


def test_spec_forms():
    s = space.normalize_search_space(
        {"beta": (0.5, 1.5), "tau_plus": {"values": [0.0, 0.1]}, "temperature": 0.2,
         "num_candidates": {"min": 64, "max": 256, "step": 64, "sampling": "linear"}}, "hard")
    assert s["beta"] == {"min": 0.5, "max": 1.5, "sampling": "linear"}
    assert s["tau_plus"] == {"values": [0.0, 0.1]}
    assert s["temperature"] == {"fixed": 0.2}
    hp = keras_tuner.HyperParameters()
    values = space.define_hyperparameters(hp, s)
    assert set(values) == {"beta", "tau_plus", "temperature", "num_candidates"}
    assert 0.5 <= values["beta"] <= 1.5 and values["temperature"] == 0.2


def test_apply_to_recipe_switches_sampler():
    from keras_hardneg.run import load_recipe

    r = space.apply_to_recipe(load_recipe({}), {"beta": 1.5, "num_candidates": 64,
                                                "restart_prob": 0.3})
    assert r["loss"]["beta"] == 1.5
    assert r["sampler"]["name"] == "batchsampler"
    # num_neighbors left unset: the sampler takes min(100, M - 1) = 63 < M itself.
    assert r["sampler"]["num_candidates"] == 64 and r["sampler"]["num_neighbors"] is None
    load_recipe(r)  # still a valid recipe


@pytest.mark.parametrize("search_space, loss, match", [
    ({"gamma": None}, "hard", r"search_space.*unknown knob 'gamma'"),
    ({"beta": None}, "debiased", r"search_space.*'beta' does not apply"),
    ({"beta": (2.0, 1.0)}, "hard", r"search_space\['beta'\].*min < max"),
    ({"beta": (-1.0, 1.0)}, "hard", r"search_space\['beta'\].*outside"),
    ({"tau_plus": (0.0, 1.0)}, "hard", r"search_space\['tau_plus'\].*outside"),
    ({"temperature": {"min": 0.0, "max": 1.0}}, "hard", r"search_space\['temperature'\]"),
    ({"beta": (0, 1, 2)}, "hard", r"search_space\['beta'\]"),
    ({"beta": {"min": 0, "max": 1, "sampling": "cubic"}}, "hard", r"search_space\['beta'\]"),
    ({"beta": {"values": []}}, "hard", r"search_space\['beta'\]"),
    ({"beta": float("nan")}, "hard", r"search_space\['beta'\]"),
    ({"ring_lower": (0, 70), "ring_upper": (60, 100)}, "ring", r"search_space\['ring_lower'\]"),
    ({}, "hard", r"search_space"),
    ("beta", "hard", r"search_space"),
])
def test_bad_search_space(search_space, loss, match):
    with pytest.raises(ValueError, match=match):
        space.normalize_search_space(search_space, loss)
