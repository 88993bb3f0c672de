"""Every loss of the package keeps the same contract (tests/losses/harness.py: reductions,
sample weights, Keras masks, dtype policies, serialization, the NumPy reference, the
batch-of-one rule). One test per loss; run under TensorFlow and JAX (``backends``)."""

import numpy as np
import pytest

from keras_hardneg import losses as L
from tests.losses import numpy_reference as ref
from tests.losses.harness import run_loss_test

pytestmark = pytest.mark.backends

T = 0.5


def per_anchor(fn, **kw):
    """``[2B]`` NumPy per-anchor losses of ``fn`` (a :mod:`numpy_reference` formula)."""
    def reference(z1, z2):
        z, triples = ref.in_batch_triples(z1, z2)
        return np.array([fn(z[a] @ z[p] / T, z[n] @ z[a] / T, T, **kw) for a, p, n in triples])
    return reference


def test_nt_xent():
    run_loss_test(L.NTXentLoss, {"temperature": T}, per_anchor(ref.ntxent))


def test_debiased():
    run_loss_test(L.DebiasedContrastiveLoss, {"temperature": T, "tau_plus": 0.1},
                  per_anchor(ref.debiased, tau_plus=0.1))


def test_hard_negative():
    run_loss_test(L.HardNegativeContrastiveLoss, {"temperature": T, "tau_plus": 0.1, "beta": 1.0},
                  per_anchor(ref.hard, tau_plus=0.1, beta=1.0))


def test_hard_negative_without_debiasing():
    """``tau_plus = 0`` (the guide's advice for small temperatures): the setting whose batch of
    one gave NaN (``-inf - -inf`` in the hard log-sum)."""
    run_loss_test(L.HardNegativeContrastiveLoss, {"temperature": T, "tau_plus": 0.0, "beta": 1.0},
                  per_anchor(ref.hard, tau_plus=0.0, beta=1.0))


def test_ring():
    run_loss_test(L.RingContrastiveLoss,
                  {"temperature": T, "lower_percentile": 5.0, "upper_percentile": 60.0},
                  per_anchor(ref.ring, lower=5.0, upper=60.0))


def test_unremix():
    kw = {"tau_plus": 0.0, "beta": 1.0, "weights": (1.0, 1.0, 1.0)}

    def reference(z1, z2):
        _, weights = ref.unremix_in_batch(z1, z2, T, return_weights=True, **kw)
        z, triples = ref.in_batch_triples(z1, z2)
        return np.array([ref.weighted(z[a] @ z[p] / T, z[n] @ z[a] / T, T, kw["tau_plus"], w)
                         for (a, p, n), w in zip(triples, weights)])

    run_loss_test(L.UnReMixContrastiveLoss, {"temperature": T, **kw}, reference, rtol=1e-3)
