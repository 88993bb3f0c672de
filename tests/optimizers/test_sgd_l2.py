"""SGDL2: torch.optim.SGD's update (coupled L2, momentum buffer of gradients) against the rule
written out by hand, under a changing learning rate; how it differs from Keras's SGD; config."""

import keras
import numpy as np
import pytest

from keras_hardneg.optimizers import SGDL2, WarmupCosineDecay


def torch_sgd_steps(w, grads, lrs, momentum, wd, nesterov=False):
    """torch.optim.SGD (dampening 0), written out: g += wd w; b = m b + g; w -= lr b."""
    w, b = w.astype(np.float64), np.zeros_like(w, np.float64)
    for g, lr in zip(grads, lrs):
        g = g + wd * w
        b = momentum * b + g
        w = w - lr * ((g + momentum * b) if nesterov else b)
    return w


@pytest.mark.backends
@pytest.mark.parametrize("nesterov", [False, True])
def test_steps_match_the_rule_written_out_under_a_schedule(nesterov):
    rng = np.random.default_rng(0)
    w0 = rng.normal(size=(4, 3)).astype("float32")
    grads = [rng.normal(size=(4, 3)).astype("float32") for _ in range(5)]
    schedule = WarmupCosineDecay(0.4, total_steps=5)
    lrs = [float(keras.ops.convert_to_numpy(schedule(t))) for t in range(5)]
    w = keras.Variable(w0)
    opt = SGDL2(learning_rate=schedule, momentum=0.9, weight_decay=5e-2, nesterov=nesterov)
    for g in grads:
        opt.apply([g], [w])
    expected = torch_sgd_steps(w0, grads, lrs, 0.9, 5e-2, nesterov)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(w), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.backends
def test_decay_passes_through_momentum_unlike_keras_sgd():
    """With zero gradients only the decay moves w: after n steps torch's rule has shrunk w by
    prod(1 - lr * sum_k m^k ...) while Keras's decoupled decay shrinks it by (1 - lr wd)^n."""
    w0 = np.ones((3,), "float32")
    zero = [np.zeros((3,), "float32")]
    ours, theirs = keras.Variable(w0), keras.Variable(w0)
    a = SGDL2(learning_rate=0.1, momentum=0.9, weight_decay=0.01)
    b = keras.optimizers.SGD(0.1, momentum=0.9, weight_decay=0.01)
    for _ in range(50):
        a.apply(zero, [ours])
        b.apply(zero, [theirs])
    expected = torch_sgd_steps(w0, [zero[0]] * 50, [0.1] * 50, 0.9, 0.01)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(ours), expected, rtol=1e-5)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(theirs), (1 - 0.1 * 0.01) ** 50,
                               rtol=1e-5)
    # the coupled decay is several times stronger once the buffer has filled
    assert 1 - expected[0] > 4 * (1 - (1 - 0.1 * 0.01) ** 50)


def test_zero_decay_and_zero_momentum_is_plain_sgd():
    w = keras.Variable(np.array([1.0, -2.0], "float32"))
    SGDL2(learning_rate=0.5, momentum=0.0).apply([np.array([1.0, 1.0], "float32")], [w])
    np.testing.assert_allclose(keras.ops.convert_to_numpy(w), [0.5, -2.5])


@pytest.mark.parametrize("kwargs, name", [
    ({"learning_rate": 0.0}, "learning_rate"), ({"learning_rate": True}, "learning_rate"),
    ({"momentum": 1.0}, "momentum"), ({"momentum": -0.1}, "momentum"),
    ({"weight_decay": -1e-4}, "weight_decay"), ({"weight_decay": float("nan")}, "weight_decay"),
])
def test_bad_arguments_name_the_parameter(kwargs, name):
    with pytest.raises(ValueError, match=f"`{name}`"):
        SGDL2(**kwargs)


def test_config_round_trip_and_registry():
    from keras_hardneg.registry import OPTIMIZERS

    opt = SGDL2(learning_rate=0.24, momentum=0.9, weight_decay=5e-4, nesterov=True)
    clone = SGDL2.from_config(opt.get_config())
    assert (clone.momentum, clone.l2, clone.nesterov) == (0.9, 5e-4, True)
    again = keras.optimizers.deserialize(keras.optimizers.serialize(opt))
    assert isinstance(again, SGDL2) and again.l2 == 5e-4
    built = OPTIMIZERS.get("sgd_l2").factory(learning_rate=0.24, momentum=0.9,
                                             weight_decay=5e-4)
    assert isinstance(built, SGDL2) and built.l2 == 5e-4
