"""The weight each negative receives (``ContrastiveLoss.negative_weights``) and the effective
number of negatives, against the NumPy transcriptions of the papers and against the loss's own
negative term ``R_a = sum_j w_aj e^{s_aj}``."""

import numpy as np
import pytest

from keras_hardneg import losses as L
from keras_hardneg.losses import core
from tests.losses import numpy_reference as ref
from tests.losses.backend_utils import tensor, to_numpy

pytestmark = pytest.mark.backends

T = 0.5


def _views(b=6, d=5, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(2, b, d)).astype("float32")


def _per_anchor(z1, z2):
    """``[(anchor, negatives, logits)]`` of the NumPy reference's in-batch convention."""
    z, triples = ref.in_batch_triples(z1, z2)
    return [(a, negs, z[negs] @ z[a] / T) for a, _, negs in triples]


def _weights_at(w, anchor, negs):
    return np.asarray(w)[anchor, negs]


@pytest.mark.parametrize("beta", [0.0, 1.0, 3.0])
def test_hard_negative_weights_and_effective_number_match_numpy(beta):
    z1, z2 = _views()
    loss = L.HardNegativeContrastiveLoss(temperature=T, tau_plus=0.1, beta=beta)
    pairs = core.in_batch_pairs(tensor(z1), tensor(z2))
    w = to_numpy(loss.negative_weights(pairs))
    eff = to_numpy(L.effective_negatives(w))
    for a, negs, neg in _per_anchor(z1, z2):
        expected = ref.hard_weights(neg, beta)
        np.testing.assert_allclose(_weights_at(w, a, negs), expected, rtol=2e-5, atol=1e-6)
        np.testing.assert_allclose(eff[a], ref.effective_number(expected), rtol=2e-5)
        others = np.setdiff1d(np.arange(w.shape[1]), negs)
        assert np.all(w[a, others] == 0.0)  # the anchor itself and its positive


def test_uniform_weights_for_nt_xent_and_debiased():
    z1, z2 = _views()
    pairs = core.in_batch_pairs(tensor(z1), tensor(z2))
    n = pairs.num_negatives
    for loss in (L.NTXentLoss(temperature=T), L.DebiasedContrastiveLoss(temperature=T)):
        w = to_numpy(loss.negative_weights(pairs))
        np.testing.assert_array_equal(w, to_numpy(pairs.negative_mask).astype("float32"))
        np.testing.assert_allclose(to_numpy(L.effective_negatives(w)), n)


@pytest.mark.parametrize("lower,upper", [(0.0, 100.0), (10.0, 60.0), (5.0, 50.0), (40.0, 45.0)])
def test_ring_weights_are_its_band(lower, upper):
    z1, z2 = _views(b=8)
    loss = L.RingContrastiveLoss(temperature=T, lower_percentile=lower, upper_percentile=upper)
    pairs = core.in_batch_pairs(tensor(z1), tensor(z2))
    w = to_numpy(loss.negative_weights(pairs))
    eff = to_numpy(L.effective_negatives(w))
    for a, negs, neg in _per_anchor(z1, z2):
        expected = ref.ring_weights(neg, lower, upper)
        np.testing.assert_array_equal(_weights_at(w, a, negs), expected)
        np.testing.assert_allclose(eff[a], expected.sum() if expected.sum() else 0.0)


def test_unremix_weights_match_numpy():
    z1, z2 = _views(b=4, d=3, seed=1)
    loss = L.UnReMixContrastiveLoss(temperature=T, tau_plus=0.0, beta=1.0,
                                    weights=(1.0, 2.0, 1.0))
    pairs = core.in_batch_pairs(tensor(z1), tensor(z2))
    w = to_numpy(loss.negative_weights(pairs))
    _, expected = ref.unremix_in_batch(z1, z2, T, 0.0, 1.0, (1.0, 2.0, 1.0),
                                       return_weights=True)
    for (a, negs, _), e in zip(_per_anchor(z1, z2), expected):
        np.testing.assert_allclose(_weights_at(w, a, negs), e, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("loss", [
    L.NTXentLoss(temperature=T), L.DebiasedContrastiveLoss(temperature=T, tau_plus=0.1),
    L.HardNegativeContrastiveLoss(temperature=T, beta=2.0),
    L.RingContrastiveLoss(temperature=T, lower_percentile=10, upper_percentile=60),
    L.UnReMixContrastiveLoss(temperature=T)], ids=lambda loss: type(loss).__name__)
@pytest.mark.parametrize("queue", [False, True])
def test_weights_rebuild_the_loss_own_negative_term(loss, queue):
    """log sum_j w_aj e^{s_aj} is the loss's own log R_a (one definition, two routes)."""
    rng = np.random.default_rng(2)
    if queue:
        q, k, neg = (rng.normal(size=s).astype("float32") for s in ((4, 5), (4, 5), (11, 5)))
        pairs = core.queue_pairs(tensor(q), tensor(k), tensor(neg))
    else:
        z1, z2 = _views(b=5)
        pairs = core.in_batch_pairs(tensor(z1), tensor(z2))
    _, neg_logits = loss.logits(pairs)
    w = to_numpy(loss.negative_weights(pairs))
    s = to_numpy(neg_logits).astype(np.float64)
    rebuilt = np.log(np.sum(w * np.exp(s), axis=1))
    if hasattr(loss, "negative_log_sum"):
        own = loss.negative_log_sum(pairs, neg_logits)
    elif hasattr(loss, "band_logsumexp"):
        own = loss.band_logsumexp(pairs, neg_logits)
    else:
        own = core.masked_logsumexp(neg_logits, pairs.negative_mask)
    np.testing.assert_allclose(rebuilt, to_numpy(own), rtol=1e-5, atol=1e-5)


def test_effective_negatives_of_an_empty_band_is_zero():
    np.testing.assert_array_equal(to_numpy(L.effective_negatives(np.zeros((2, 3), "float32"))),
                                  [0.0, 0.0])
