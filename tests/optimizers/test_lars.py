"""LARS (You et al. 2017): one step vs a NumPy transcription, exclusions, convergence, config."""

import keras
import numpy as np
import pytest

from keras_hardneg.optimizers import LARS, WarmupCosineDecay


def numpy_lars_step(w, g, v, lr, momentum, wd, eta, decay, adapt, nesterov=False):
    """The LARS rule of You et al. (2017), coupled weight decay, classic momentum."""
    if decay:
        g = g + wd * w
    trust = 1.0
    if adapt:
        wn, gn = np.linalg.norm(w), np.linalg.norm(g)
        trust = eta * wn / gn if (wn > 0 and gn > 0) else 1.0
    v = momentum * v + lr * trust * g
    step = momentum * v + lr * trust * g if nesterov else v
    return w - step, v


def _make_vars(rng):
    kernel = keras.Variable(rng.normal(size=(4, 3)).astype("float32"), name="kernel")
    bias = keras.Variable(rng.normal(size=(3,)).astype("float32"), name="bias")
    return kernel, bias


@pytest.mark.parametrize("nesterov", [False, True])
def test_two_steps_match_numpy(nesterov):
    rng = np.random.default_rng(0)
    kernel, bias = _make_vars(rng)
    w0 = [kernel.numpy().copy(), bias.numpy().copy()]
    grads = [[rng.normal(size=(4, 3)).astype("float32"), rng.normal(size=(3,)).astype("float32")]
             for _ in range(2)]
    opt = LARS(learning_rate=0.5, momentum=0.9, weight_decay=0.1, eta=0.01, nesterov=nesterov)
    ws, vs = list(w0), [np.zeros_like(w) for w in w0]
    for g in grads:
        opt.apply(g, [kernel, bias])
        # kernel: weight decay + adaptation; bias (1-D): neither.
        ws[0], vs[0] = numpy_lars_step(ws[0], g[0], vs[0], 0.5, 0.9, 0.1, 0.01, True, True,
                                       nesterov)
        ws[1], vs[1] = numpy_lars_step(ws[1], g[1], vs[1], 0.5, 0.9, 0.1, 0.01, False, False,
                                       nesterov)
    np.testing.assert_allclose(kernel.numpy(), ws[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bias.numpy(), ws[1], rtol=1e-5, atol=1e-6)


def test_no_exclusions_applies_everything():
    rng = np.random.default_rng(1)
    kernel, bias = _make_vars(rng)
    w0 = [kernel.numpy().copy(), bias.numpy().copy()]
    g = [rng.normal(size=(4, 3)).astype("float32"), rng.normal(size=(3,)).astype("float32")]
    opt = LARS(learning_rate=0.2, weight_decay=0.05, eta=0.002,
               exclude_from_weight_decay=(), exclude_1d=False)
    opt.apply(g, [kernel, bias])
    for var, w, gg in zip([kernel, bias], w0, g):
        expect, _ = numpy_lars_step(w, gg, np.zeros_like(w), 0.2, 0.9, 0.05, 0.002, True, True)
        np.testing.assert_allclose(var.numpy(), expect, rtol=1e-5, atol=1e-6)


def test_exclude_from_adaptation_only():
    rng = np.random.default_rng(2)
    kernel, _ = _make_vars(rng)
    w0 = kernel.numpy().copy()
    g = rng.normal(size=(4, 3)).astype("float32")
    opt = LARS(learning_rate=0.2, weight_decay=0.05, exclude_from_weight_decay=(),
               exclude_from_adaptation=("kernel",))
    assert opt.uses_weight_decay(kernel) and not opt.uses_adaptation(kernel)
    opt.apply([g], [kernel])
    expect, _ = numpy_lars_step(w0, g, np.zeros_like(w0), 0.2, 0.9, 0.05, 0.001, True, False)
    np.testing.assert_allclose(kernel.numpy(), expect, rtol=1e-5, atol=1e-6)


def test_default_exclusions_on_model_paths():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, name="fc"),
                              keras.layers.BatchNormalization(name="norm")], name="net")
    opt = LARS(weight_decay=1e-6)
    flags = {v.path: (opt.uses_weight_decay(v), opt.uses_adaptation(v))
             for v in model.trainable_variables}
    assert flags == {"net/fc/kernel": (True, True), "net/fc/bias": (False, False),
                     "net/norm/gamma": (False, False), "net/norm/beta": (False, False)}
    # name-based exclusion alone (exclude_1d=False): "gamma"/"beta"/"bias" match the defaults
    opt = LARS(weight_decay=1e-6, exclude_1d=False)
    assert [opt.uses_weight_decay(v) for v in model.trainable_variables] == [
        True, False, False, False]


def test_minimises_quadratic():
    rng = np.random.default_rng(3)
    a = rng.normal(size=(8, 8)).astype("float32")
    h = a @ a.T / 8 + np.eye(8, dtype="float32")
    target = rng.normal(size=(8, 2)).astype("float32")
    w = keras.Variable(np.ones((8, 2), "float32"), name="kernel")

    def loss_and_grad():
        d = w.numpy() - target
        return 0.5 * float(np.sum(d * (h @ d))), (h @ d).astype("float32")

    opt = LARS(learning_rate=WarmupCosineDecay(30.0, total_steps=300, warmup_steps=10),
               eta=0.01)
    first, _ = loss_and_grad()
    for _ in range(300):
        _, g = loss_and_grad()
        opt.apply([g], [w])
    last, _ = loss_and_grad()
    assert last < 1e-3 * first


def test_in_model_fit_and_serialization(tmp_path):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"),
                              keras.layers.BatchNormalization(), keras.layers.Dense(1)])
    opt = LARS(learning_rate=WarmupCosineDecay(1.0, 20, 2), weight_decay=1e-4,
               exclude_from_adaptation=("dense_1",))
    model.compile(optimizer=opt, loss="mse")
    x = np.random.default_rng(0).normal(size=(32, 4)).astype("float32")
    model.fit(x, x[:, :1], epochs=2, batch_size=16, verbose=0)
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded.optimizer, LARS)
    cfg = loaded.optimizer.get_config()
    assert cfg["weight_decay"] == pytest.approx(1e-4)
    assert cfg["exclude_from_adaptation"] == ["dense_1"]
    assert isinstance(loaded.optimizer.learning_rate_schedule if hasattr(
        loaded.optimizer, "learning_rate_schedule") else loaded.optimizer._learning_rate,
        WarmupCosineDecay)
    np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0),
                               rtol=1e-5, atol=1e-5)
    again = LARS.from_config(opt.get_config())
    assert again.get_config()["eta"] == opt.get_config()["eta"]


@pytest.mark.parametrize("kwargs, name", [({"momentum": 1.5}, "momentum"),
                                          ({"eta": 0.0}, "eta"),
                                          ({"weight_decay": -1.0}, "weight_decay"),
                                          ({"exclude_from_adaptation": [3]},
                                           "exclude_from_adaptation")])
def test_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        LARS(**kwargs)
