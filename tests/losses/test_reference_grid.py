"""Every loss, in-batch and queue, against the NumPy transcriptions over a grid.

The full grids run under TensorFlow; under JAX a covering subset (every batch size,
dimension, temperature and hyper-parameter setting at least once), each case compiled
once with ``jax.jit`` (see ``backend_utils.grid`` and ``evaluate``)."""

import numpy as np
import pytest

from keras_hardneg import losses as L
from tests.losses import numpy_reference as ref
from tests.losses.backend_utils import evaluate, grid

pytestmark = pytest.mark.backends

B, D, T = [2, 5, 16], [3, 32], [0.07, 0.5, 1.0]


def _data(b, d, seed, k=None):
    rng = np.random.default_rng(seed)
    out = rng.normal(size=(2, b, d)).astype("float32")
    queue = rng.normal(size=(k or 3 * b, d)).astype("float32")
    return out[0], out[1], queue


def _check(loss, fn, b, d, t, seed, **kw):
    z1, z2, queue = _data(b, d, seed)
    got = float(evaluate(loss, z1, z2))
    want = ref.in_batch_loss(fn, z1, z2, t, **kw)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    got_q = float(evaluate(loss.call_with_negatives, z1, z2, queue))
    want_q = ref.queue_loss(fn, z1, z2, queue, t, **kw)
    np.testing.assert_allclose(got_q, want_q, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("b,d,t", grid(B, D, T))
def test_ntxent(b, d, t):
    _check(L.NTXentLoss(temperature=t), ref.ntxent, b, d, t, seed=b * d)


@pytest.mark.parametrize("b,d,t,tau_plus", grid(B, D, T, [0.0, 0.05, 0.1, 0.5]))
def test_debiased(b, d, t, tau_plus):
    _check(L.DebiasedContrastiveLoss(temperature=t, tau_plus=tau_plus), ref.debiased,
           b, d, t, seed=b + d, tau_plus=tau_plus)


@pytest.mark.parametrize("b,d,t,tau_plus,beta",
                         grid(B, D, T, [(0.0, 0.5), (0.1, 1.0), (0.05, 2.0), (0.1, 0.0)]))
def test_hard_negative(b, d, t, tau_plus, beta):
    _check(L.HardNegativeContrastiveLoss(temperature=t, tau_plus=tau_plus, beta=beta), ref.hard,
           b, d, t, seed=3 * b + d, tau_plus=tau_plus, beta=beta)


@pytest.mark.parametrize("b,d,t,lower,upper", grid(
    B, D, T, [(0, 100), (5, 50), (1, 10), (10, 90), (0, 30), (50, 100)]))
def test_ring(b, d, t, lower, upper):
    _check(L.RingContrastiveLoss(temperature=t, lower_percentile=lower, upper_percentile=upper),
           ref.ring, b, d, t, seed=b * 7 + d, lower=lower, upper=upper)


@pytest.mark.parametrize("b,d,t,tau_plus,beta,weights,with_features", grid(
    [(2, 3), (4, 6)],
    [(0.5, 0.0, 1.0, (1, 1, 1)),
     (0.2, 0.1, 0.5, (1, 2, 0.5)),
     (1.0, 0.0, 0.0, (1, 0, 0)),
     (0.5, 0.05, 1.0, (0, 0, 1))],
    [False, True]))
def test_unremix(b, d, t, tau_plus, beta, weights, with_features):
    rng = np.random.default_rng(b * 11 + d)
    z1, z2 = rng.normal(size=(2, b, d))
    f1, f2 = rng.normal(size=(2, b, 5)) if with_features else (None, None)
    queue = rng.normal(size=(7, d))
    fqueue = rng.normal(size=(7, 5)) if with_features else None
    loss = L.UnReMixContrastiveLoss(temperature=t, tau_plus=tau_plus, beta=beta, weights=weights)

    def wrap(z, f):
        return z if f is None else {"embeddings": z, "features": f}

    got = float(evaluate(loss, wrap(z1, f1), wrap(z2, f2)))
    want = ref.unremix_in_batch(z1, z2, t, tau_plus, beta, weights, f1, f2)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    got_q = float(evaluate(loss.call_with_negatives, wrap(z1, f1), z2, wrap(queue, fqueue)))
    want_q = ref.unremix_queue(z1, z2, queue, t, tau_plus, beta, weights, f1, fqueue)
    np.testing.assert_allclose(got_q, want_q, rtol=1e-4, atol=1e-4)
