"""The exact limiting cases between losses, on values and gradients."""

import numpy as np
import pytest

from keras_hardneg import losses as L
from tests.losses.backend_utils import value_and_grad

pytestmark = pytest.mark.backends


def _value_and_grad(loss, z1, z2, queue=None):
    if queue is None:
        value, (g1, g2) = value_and_grad(lambda a, b: loss(a, b), z1, z2)
    else:
        value, (g1, g2) = value_and_grad(lambda a, b: loss.call_with_negatives(a, b, queue),
                                         z1, z2)
    return value, g1, g2


def _assert_same(a, b, queue=None, seed=0, atol=1e-6):
    rng = np.random.default_rng(seed)
    z1, z2 = rng.normal(size=(2, 12, 16)).astype("float32")
    q = None if queue is None else rng.normal(size=(queue, 16)).astype("float32")
    for x, y in zip(_value_and_grad(a, z1, z2, q), _value_and_grad(b, z1, z2, q)):
        np.testing.assert_allclose(x, y, atol=atol, rtol=1e-6)


@pytest.mark.parametrize("queue", [None, 40])
@pytest.mark.parametrize("t", [0.07, 0.5])
def test_debiased_tau_zero_is_ntxent(queue, t):
    _assert_same(L.DebiasedContrastiveLoss(t, tau_plus=0.0), L.NTXentLoss(t), queue)


@pytest.mark.parametrize("queue", [None, 40])
@pytest.mark.parametrize("tau_plus", [0.0, 0.1])
def test_hard_beta_zero_is_debiased(queue, tau_plus):
    _assert_same(L.HardNegativeContrastiveLoss(0.5, tau_plus=tau_plus, beta=0.0),
                 L.DebiasedContrastiveLoss(0.5, tau_plus=tau_plus), queue)


@pytest.mark.parametrize("queue", [None, 40])
def test_hard_beta_zero_tau_zero_is_ntxent(queue):
    _assert_same(L.HardNegativeContrastiveLoss(0.2, tau_plus=0.0, beta=0.0), L.NTXentLoss(0.2), queue)


@pytest.mark.parametrize("queue", [None, 40])
def test_ring_full_band_is_ntxent(queue):
    _assert_same(L.RingContrastiveLoss(0.07, lower_percentile=0, upper_percentile=100),
                 L.NTXentLoss(0.07), queue, atol=1e-5)


@pytest.mark.parametrize("queue", [None, 40])
@pytest.mark.parametrize("beta,tau_plus", [(1.0, 0.1), (0.5, 0.0)])
def test_unremix_similarity_only_is_hard(queue, beta, tau_plus):
    _assert_same(L.UnReMixContrastiveLoss(0.5, tau_plus=tau_plus, beta=beta, weights=(0, 1, 0)),
                 L.HardNegativeContrastiveLoss(0.5, tau_plus=tau_plus, beta=beta), queue)


def test_hard_negative_gradient_flows_through_importance():
    """The authors' code keeps gradients through imp = e^{beta s}; compare with a direct
    (non-log-space) float64 NumPy transcription of Fig. 13, differentiated by central
    finite differences (truncation error ~1e-10 at h=1e-6)."""
    rng = np.random.default_rng(3)
    z1, z2 = rng.normal(size=(2, 6, 8))
    t, tau, beta = 0.5, 0.1, 1.0

    def direct(a, b):
        z = np.concatenate([a, b], 0)
        z = z / np.linalg.norm(z, axis=1, keepdims=True)
        n2 = len(z)
        sim = np.exp(z @ z.T / t)
        mask = ~np.eye(n2, dtype=bool) & ~np.roll(np.eye(n2, dtype=bool), n2 // 2, axis=1)
        neg = sim[mask].reshape(n2, -1)
        pos = np.exp(np.sum(z * np.roll(z, n2 // 2, axis=0), 1) / t)
        n = n2 - 2
        imp = np.exp(beta * np.log(neg))
        reweight = np.sum(imp * neg, 1) / np.mean(imp, 1)
        ng = np.maximum((-n * tau * pos + reweight) / (1 - tau), n * np.exp(-1 / t))
        return np.mean(-np.log(pos / (pos + ng)))

    def numeric_grad(which, h=1e-6):
        out = np.zeros((6, 8))
        for i in np.ndindex(6, 8):
            d = np.zeros((6, 8))
            d[i] = h
            args_p = (z1 + d, z2) if which == 0 else (z1, z2 + d)
            args_m = (z1 - d, z2) if which == 0 else (z1, z2 - d)
            out[i] = (direct(*args_p) - direct(*args_m)) / (2 * h)
        return out

    want = direct(z1, z2)
    wg = [numeric_grad(0), numeric_grad(1)]
    got, g1, g2 = _value_and_grad(L.HardNegativeContrastiveLoss(t, tau, beta),
                                  z1.astype("float32"), z2.astype("float32"))
    np.testing.assert_allclose(got, want, rtol=1e-5)
    np.testing.assert_allclose(g1, wg[0], atol=1e-5)
    np.testing.assert_allclose(g2, wg[1], atol=1e-5)
