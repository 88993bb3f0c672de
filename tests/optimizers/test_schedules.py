"""WarmupCosineDecay: values at warm-up / peak / end, serialization."""

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
])
def test_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        WarmupCosineDecay(**kwargs)
