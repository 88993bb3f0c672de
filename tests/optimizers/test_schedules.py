"""WarmupCosineDecay: values at warm-up / peak / end, held per epoch, serialization."""

import math

import keras
import pytest

from keras_hardneg.optimizers import WarmupCosineDecay


def test_values():
    s = WarmupCosineDecay(2.0, total_steps=110, warmup_steps=10, end_learning_rate=0.2)
    assert float(s(0)) == pytest.approx(0.0)
    assert float(s(5)) == pytest.approx(1.0)
    assert float(s(10)) == pytest.approx(2.0)          # peak
    mid = 0.2 + 1.8 * 0.5 * (1 + math.cos(math.pi * 0.5))
    assert float(s(60)) == pytest.approx(mid, rel=1e-5)
    assert float(s(110)) == pytest.approx(0.2)         # end
    assert float(s(500)) == pytest.approx(0.2)         # stays at end


def test_no_warmup():
    s = WarmupCosineDecay(1.0, total_steps=10)
    assert float(s(0)) == pytest.approx(1.0)
    assert float(s(10)) == pytest.approx(0.0, abs=1e-7)


def test_serialization_round_trip():
    s = WarmupCosineDecay(0.3, total_steps=100, warmup_steps=5, end_learning_rate=0.01)
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(s))
    assert isinstance(restored, WarmupCosineDecay)
    assert restored.get_config() == s.get_config()
    for t in (0, 3, 5, 50, 100):
        assert float(restored(t)) == pytest.approx(float(s(t)))
    opt = keras.optimizers.SGD(learning_rate=s)
    restored_opt = keras.optimizers.deserialize(keras.optimizers.serialize(opt))
    assert float(restored_opt.learning_rate) == pytest.approx(0.0)


@pytest.mark.parametrize("kwargs, name", [
    (dict(base_learning_rate=1.0, total_steps=0), "total_steps"),
    (dict(base_learning_rate=1.0, total_steps=10, warmup_steps=10), "warmup_steps"),
    (dict(base_learning_rate=-1.0, total_steps=10), "base_learning_rate"),
    (dict(base_learning_rate=1.0, total_steps=10, end_learning_rate=-0.1), "end_learning_rate"),
    (dict(base_learning_rate=1.0, total_steps=10, hold_steps=0), "hold_steps"),
    (dict(base_learning_rate=1.0, total_steps=10, hold_steps=3), "hold_steps"),
])
def test_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        WarmupCosineDecay(**kwargs)


def test_hold_steps_is_cosine_annealing_stepped_once_per_epoch():
    # PyTorch's CosineAnnealingLR(T_max=epochs) stepped after each epoch (lightly's
    # benchmarks): epoch e trains at base * (1 + cos(pi * e / epochs)) / 2 for all its steps.
    base, epochs, steps = 0.12, 6, 4
    s = WarmupCosineDecay(base, total_steps=epochs * steps, hold_steps=steps)
    for e in range(epochs):
        want = base * 0.5 * (1 + math.cos(math.pi * e / epochs))
        for t in range(e * steps, (e + 1) * steps):
            assert float(s(t)) == pytest.approx(want, rel=1e-6), (e, t)
    assert float(s(epochs * steps)) == pytest.approx(0.0, abs=1e-7)
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(s))
    assert restored.get_config() == s.get_config() and restored.hold_steps == steps


def test_recipe_per_epoch_holds_the_rate_and_refuses_a_warmup():
    from keras_hardneg.registry import ConfigError
    from keras_hardneg.run.recipe import load_recipe
    from keras_hardneg.optimizers.schedules import warmup_cosine

    recipe = load_recipe({"schedule": {"name": "warmup_cosine", "per_epoch": True}})
    assert recipe["schedule"]["per_epoch"] is True
    s = warmup_cosine(1.0, steps_per_epoch=5, epochs=4, per_epoch=True)
    assert [round(float(s(t)), 6) for t in (0, 4, 5, 9, 10)] == [1.0, 1.0, 0.853553, 0.853553,
                                                               0.5]
    assert load_recipe({})["schedule"].get("per_epoch") is False  # the default: every step
    with pytest.raises(ConfigError, match="'schedule.per_epoch' needs 'schedule.warmup_epochs'"):
        load_recipe({"schedule": {"name": "warmup_cosine", "per_epoch": True,
                                  "warmup_epochs": 2}})


@pytest.mark.parametrize("name", ["warmup_cosine", "constant"])
@pytest.mark.parametrize("steps_per_epoch, epochs, bad", [
    (0, 10, "steps_per_epoch"), (5, 0, "epochs"), (-1, 10, "steps_per_epoch"),
    (2.5, 10, "steps_per_epoch"), (True, 10, "steps_per_epoch")])
def test_a_schedule_builder_refuses_a_run_without_steps(name, steps_per_epoch, epochs, bad):
    # Issue 56, bug 5: 0 steps used to give a WarmupCosineDecay of 1 step, silently.
    from keras_hardneg.registry import SCHEDULES

    with pytest.raises(ValueError, match=f"^`{bad}` must be an int >= 1.*got ") as info:
        SCHEDULES.build(name, 0.1, steps_per_epoch, epochs)
    assert "\n" not in str(info.value)


def test_build_optimizer_refuses_zero_steps_per_epoch():
    from keras_hardneg.run.build import build_optimizer

    with pytest.raises(ValueError, match="^`steps_per_epoch` must be an int >= 1"):
        build_optimizer({}, 0)
    assert build_optimizer({}, 3)._learning_rate.total_steps == 3 * build_optimizer(
        {}, 1)._learning_rate.total_steps
