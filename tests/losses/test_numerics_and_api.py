"""Precision, XLA, serialization, diagnostics and argument validation for every loss."""

import numpy as np
import pytest
import keras

from keras_hardneg import losses as L
from tests.losses import numpy_reference as ref
from tests.losses.backend_utils import compiled, grid, tensor, to_numpy, value_and_grad

pytestmark = pytest.mark.backends

ALL = [
    lambda: L.NTXentLoss(temperature=0.1),
    lambda: L.DebiasedContrastiveLoss(temperature=0.1, tau_plus=0.1),
    lambda: L.HardNegativeContrastiveLoss(temperature=0.1, tau_plus=0.1, beta=1.0),
    lambda: L.RingContrastiveLoss(temperature=0.1, lower_percentile=5, upper_percentile=50),
    lambda: L.UnReMixContrastiveLoss(temperature=0.1, tau_plus=0.05, beta=1.0),
]
IDS = ["ntxent", "debiased", "hard", "ring", "unremix"]
BY_NAME = dict(zip(IDS, ALL))


def _views(dtype="float32", b=16, d=32, seed=0):
    rng = np.random.default_rng(seed)
    z1, z2 = rng.normal(size=(2, b, d))
    return tensor(z1, dtype), tensor(z2, dtype)


@pytest.mark.parametrize("name,dtype,queue", grid(IDS, ["float16", "bfloat16"], [False, True]))
def test_low_precision_inputs_give_finite_loss_and_gradients(name, dtype, queue):
    """Every loss, precision and convention on TensorFlow; on JAX every loss once, both
    precisions and conventions among them, each case one ``jax.jit`` of the gradient
    (the losses cast to float32 first, so eager and jit do the same casts)."""
    z1, z2 = _views(dtype)
    negatives = tensor(np.random.default_rng(1).normal(size=(64, 32)), dtype)
    loss = BY_NAME[name]()

    def f(a, b):
        return loss.call_with_negatives(a, b, negatives) if queue else loss(a, b)

    value, grads = value_and_grad(f, z1, z2, jit=True)
    assert value.dtype == np.float32 and np.isfinite(float(value))
    for g in grads:
        assert np.all(np.isfinite(g))


@pytest.mark.parametrize("make", ALL, ids=IDS)
def test_eager_equals_jit_compile(make):
    z1, z2 = _views()
    negatives = tensor(np.random.default_rng(2).normal(size=(48, 32)), "float32")
    loss = make()

    def f(a, b, n):
        return loss(a, b), loss.call_with_negatives(a, b, n)

    eager = f(z1, z2, negatives)
    jit = compiled(f)(z1, z2, negatives)  # tf.function(jit_compile=True) or jax.jit
    for e, j in zip(eager, jit):
        np.testing.assert_allclose(float(e), float(j), rtol=1e-5, atol=1e-6)


def test_no_overflow_at_extreme_beta_and_temperature():
    """beta=10, t=0.05: (beta+1)/t = 220 overflows a direct float32 exp (e^88 is the limit)."""
    rng = np.random.default_rng(4)
    z1 = rng.normal(size=(8, 16))
    z2 = z1 + 0.7 * rng.normal(size=(8, 16))
    loss = L.HardNegativeContrastiveLoss(temperature=0.05, tau_plus=0.1, beta=10.0)
    got = float(loss(z1.astype("float32"), z2.astype("float32")))
    want = ref.in_batch_loss(ref.hard, z1, z2, 0.05, tau_plus=0.1, beta=10.0)
    assert np.isfinite(got) and got > 0.1
    np.testing.assert_allclose(got, want, rtol=1e-4)
    with np.errstate(over="ignore"):
        assert not np.isfinite(np.exp(np.float32(220.0)))  # what the direct form would hit


@pytest.mark.parametrize("make", ALL, ids=IDS)
def test_usable_in_compile(make):
    """Drop-in for model.compile(loss=...): y_true is z1, the model outputs z2."""
    z1, z2 = _views(b=8, d=4)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(4)])
    model.compile(optimizer="sgd", loss=make())
    history = model.fit(to_numpy(z1), to_numpy(z2), batch_size=8, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


def test_diagnostics_match_numpy():
    z1, z2 = _views(b=6, d=5, seed=7)
    t, tau = 0.2, 0.3
    loss = L.DebiasedContrastiveLoss(temperature=t, tau_plus=tau)
    diag = loss.diagnostics(z1, z2)
    z, triples = ref.in_batch_triples(to_numpy(z1), to_numpy(z2))
    clamped, pos, neg = [], [], []
    for a, p, negs in triples:
        sp, sn = z[a] @ z[p], z[negs] @ z[a]
        n = len(negs)
        raw = (np.exp(sn / t).sum() - tau * n * np.exp(sp / t)) / (1 - tau)
        clamped.append(raw <= n * np.exp(-1 / t))
        pos.append(sp)
        neg.append(sn.mean())
    np.testing.assert_allclose(float(diag["clamp_fraction"]), np.mean(clamped))
    np.testing.assert_allclose(float(diag["positive_cosine"]), np.mean(pos), atol=1e-6)
    np.testing.assert_allclose(float(diag["negative_cosine"]), np.mean(neg), atol=1e-6)
    assert "clamp_fraction" not in L.NTXentLoss().diagnostics(z1, z2)


@pytest.mark.parametrize("factory,kwargs,match", [
    (L.NTXentLoss, {"temperature": 0.0}, "temperature"),
    (L.NTXentLoss, {"temperature": -1.0}, "temperature"),
    (L.NTXentLoss, {"temperature": float("nan")}, "temperature"),
    (L.DebiasedContrastiveLoss, {"tau_plus": 1.0}, r"tau_plus.*\[0, 1\)"),
    (L.DebiasedContrastiveLoss, {"tau_plus": -0.1}, "tau_plus"),
    (L.HardNegativeContrastiveLoss, {"beta": -0.5}, "beta"),
    (L.HardNegativeContrastiveLoss, {"beta": "big"}, "beta"),
    (L.RingContrastiveLoss, {"lower_percentile": 50, "upper_percentile": 40}, "lower_percentile"),
    (L.RingContrastiveLoss, {"lower_percentile": -1}, "lower_percentile"),
    (L.RingContrastiveLoss, {"upper_percentile": 101}, "upper_percentile"),
    (L.UnReMixContrastiveLoss, {"tau_plus": 1.5}, "tau_plus"),
])
def test_bad_hyperparameters(factory, kwargs, match):
    with pytest.raises(ValueError, match=match):
        factory(**kwargs)


def test_beta_can_be_changed_and_is_validated():
    loss = L.HardNegativeContrastiveLoss(beta=1.0)
    loss.beta = 0.25
    assert loss.get_config()["beta"] == 0.25
    with pytest.raises(ValueError, match="beta"):
        loss.beta = -1


def test_ring_empty_band_gives_zero_loss():
    z1, z2 = _views(b=2, d=4)  # N = 2: floor(0.1*2) = floor(0.4*2) = 0
    loss = L.RingContrastiveLoss(lower_percentile=10, upper_percentile=40)
    assert float(loss(z1, z2)) == 0.0


@pytest.mark.parametrize("make", ALL, ids=IDS)
def test_bad_shapes_raise_not_nan(make):
    loss = make()
    with pytest.raises(ValueError, match="same shape"):
        loss(np.ones((4, 3), "float32"), np.ones((5, 3), "float32"))
    with pytest.raises(ValueError, match="at least 1"):
        loss(np.ones((0, 3), "float32"), np.ones((0, 3), "float32"))
    with pytest.raises(ValueError, match="rank 2"):
        loss(np.ones((4,), "float32"), np.ones((4,), "float32"))


def test_get_by_name():
    assert isinstance(L.get("hard", beta=0.5), L.HardNegativeContrastiveLoss)
    with pytest.raises(ValueError, match="unknown loss .*; allowed: debiased, hard, nt_xent"):
        L.get("triplet")


# ------------------------------------------------------------------ khn.losses.get
@pytest.mark.parametrize("name", IDS)
def test_get_accepts_what_keras_losses_get_accepts(name):
    """``khn.losses.get`` takes what ``keras.losses.get`` takes -- None, a serialized config
    (dict), a class name, a class, an instance -- plus the registry's names (and a
    recipe-style ``{"name": ...}`` section), and gives the loss of that config."""
    loss = BY_NAME[name]()
    cls = type(loss)
    assert L.get(None) is None and L.get(loss) is loss
    for config in (keras.saving.serialize_keras_object(loss), keras.losses.serialize(loss)):
        got = L.get(config)
        assert type(got) is cls and got.get_config() == loss.get_config()
        assert type(keras.losses.get(config)) is cls  # Keras's own get agrees
    assert type(L.get(cls.__name__)) is cls and type(L.get(cls)) is cls
    registered = {"ntxent": "nt_xent"}.get(name, name)
    section = {"name": registered, **{k: v for k, v in loss.get_config().items()
                                      if k not in ("name", "reduction", "dtype")}}
    from_section = L.get(section)
    assert from_section.get_config() == {**loss.get_config(), "name": from_section.name}
    assert L.get(registered, reduction="sum").reduction == "sum"


@pytest.mark.parametrize("name,bad", [
    ("nt_xent", {"temperature": 0.0}), ("debiased", {"tau_plus": 1.0}),
    ("hard", {"beta": -1.0}), ("ring", {"lower_percentile": 50, "upper_percentile": 10}),
    ("unremix", {"weights": [1.0, 1.0]}), ("hard", {"temperature": "warm"}),
    ("nt_xent", {"reduction": "average"}),
])
def test_get_and_the_constructor_raise_the_same_error_for_a_bad_value(name, bad):
    cls = type(L.get(name))
    with pytest.raises(Exception) as from_class:
        cls(**bad)
    with pytest.raises(Exception) as from_get:
        L.get(name, **bad)
    with pytest.raises(Exception) as from_config:
        L.get({"name": name, **bad})
    assert type(from_get.value) is type(from_class.value) is ValueError
    assert type(from_config.value) is ValueError
    assert str(from_get.value) == str(from_class.value) == str(from_config.value)


def test_get_refuses_what_it_cannot_interpret_in_one_line():
    for bad in ("mse", {"class_name": "MeanSquaredError", "config": {}}, 3):
        with pytest.raises(ValueError) as e:
            L.get(bad)
        assert "\n" not in str(e.value) and "nt_xent" in str(e.value), str(e.value)
    with pytest.raises(ValueError, match=r"unknown loss key 'beta' for loss 'nt_xent'; "
                                         r"allowed: dtype, name, reduction, temperature"):
        L.get("nt_xent", beta=1.0)
