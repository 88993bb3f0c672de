"""One reduction path with Keras's semantics for every loss and both call conventions:
``loss(z1, z2, sample_weight)`` and ``loss.call_with_negatives(..., sample_weight)`` reduce
their per-anchor losses as ``keras.losses.Loss.__call__`` reduces a loss's values (every
``reduction``, ``sample_weight``, a mask), a ``[B]`` weight (one per example) applies to
both of an example's anchors in the in-batch convention, and bad weights are refused in
one line. Runs under TF and JAX (the ``MirroredStrategy`` half is test_reduction_mirrored.py).
The in-batch convention's reductions with one weight per example, against NumPy, are the
contract every loss's test runs (tests/losses/harness.py)."""

import keras
import numpy as np
import pytest

from keras_hardneg import losses as L
from tests.losses.backend_utils import tensor, to_numpy

pytestmark = pytest.mark.backends

REDUCTIONS = ["sum_over_batch_size", "mean", "sum", "mean_with_sample_weight", None, "none"]
LOSSES = {
    "nt_xent": lambda **kw: L.NTXentLoss(temperature=0.5, **kw),
    "debiased": lambda **kw: L.DebiasedContrastiveLoss(temperature=0.5, tau_plus=0.1, **kw),
    "hard": lambda **kw: L.HardNegativeContrastiveLoss(temperature=0.5, tau_plus=0.1, beta=1.0,
                                                       **kw),
    "ring": lambda **kw: L.RingContrastiveLoss(temperature=0.5, lower_percentile=5,
                                               upper_percentile=60, **kw),
    "unremix": lambda **kw: L.UnReMixContrastiveLoss(temperature=0.5, beta=1.0, **kw),
}
B, D, K = 6, 8, 20


class _KerasReference(keras.losses.Loss):
    """Keras's own reduction of given per-element values: ``call`` returns ``y_pred``."""

    def call(self, y_true, y_pred):
        return y_pred


def keras_reduce(values, reduction, sample_weight=None, mask=None):
    values = keras.ops.convert_to_tensor(np.asarray(values, "float32"))
    if mask is not None:
        from keras.src.backend import set_keras_mask  # the only way to hand Keras a mask

        set_keras_mask(values, keras.ops.convert_to_tensor(np.asarray(mask, bool)))
    ref_loss = _KerasReference(reduction=reduction)
    return to_numpy(ref_loss(values, values, sample_weight=None if sample_weight is None
                             else np.asarray(sample_weight, "float32")))


def _data(seed=0):
    rng = np.random.default_rng(seed)
    z1, z2 = rng.normal(size=(2, B, D)).astype("float32")
    queue = rng.normal(size=(K, D)).astype("float32")
    w = rng.uniform(0.1, 2.0, size=B).astype("float32")
    return z1, z2, queue, w


@pytest.mark.parametrize("name", list(LOSSES))
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_queue_convention_reduces_as_keras(name, reduction):
    z1, z2, queue, w = _data(1)
    loss = LOSSES[name](reduction=reduction)
    per_anchor = to_numpy(LOSSES[name](reduction=None).call_with_negatives(
        tensor(z1), tensor(z2), tensor(queue)))
    assert per_anchor.shape == (B,)
    got = to_numpy(loss.call_with_negatives(tensor(z1), tensor(z2), tensor(queue),
                                            sample_weight=w))
    np.testing.assert_allclose(got, keras_reduce(per_anchor, reduction, w), rtol=1e-5,
                               atol=1e-6)
    if reduction == "mean_with_sample_weight":
        np.testing.assert_allclose(got, (per_anchor * w).sum() / w.sum(), rtol=1e-5)


@pytest.mark.parametrize("reduction", ["sum_over_batch_size", "sum", "mean_with_sample_weight"])
def test_reduce_with_a_mask_is_keras_masked_reduction(reduction):
    """``reduce(values, sample_weight, mask)``: masked anchors (InfoGraph's padding nodes)
    weigh nothing, and the mean is over the anchors kept, as Keras's mask handling."""
    rng = np.random.default_rng(3)
    values = rng.uniform(size=10).astype("float32")
    w = rng.uniform(0.5, 1.5, size=10).astype("float32")
    mask = np.array([1, 1, 0, 1, 1, 1, 0, 0, 1, 1], bool)
    loss = L.NTXentLoss(reduction=reduction)
    got = to_numpy(loss.reduce(tensor(values), sample_weight=w, mask=mask))
    np.testing.assert_allclose(got, keras_reduce(values, reduction, w, mask), rtol=1e-5)


def test_bad_sample_weights_are_refused_in_one_line():
    z1, z2, queue, _ = _data()
    loss = L.HardNegativeContrastiveLoss()
    for bad in (np.ones(B - 1), np.ones((B, 2)), np.ones(3 * B + 1)):
        with pytest.raises(ValueError) as e:
            loss(tensor(z1), tensor(z2), sample_weight=bad)
        message = str(e.value)
        assert "`sample_weight`" in message and "\n" not in message, message
        assert f"[{B}]" in message and f"[{2 * B}]" in message, message
    with pytest.raises(ValueError, match=r"`sample_weight` must have one weight per"):
        loss.call_with_negatives(tensor(z1), tensor(z2), tensor(queue),
                                 sample_weight=np.ones(2 * B))
    with pytest.raises(ValueError, match=r"a scalar, \[6\] \(one per example\); got shape"):
        loss.call_with_negatives(tensor(z1), tensor(z2), tensor(queue),
                                 sample_weight=np.ones(B // 2))
    # A scalar weight scales every anchor, as in Keras.
    np.testing.assert_allclose(to_numpy(loss(tensor(z1), tensor(z2), sample_weight=2.0)),
                               2 * to_numpy(loss(tensor(z1), tensor(z2))), rtol=1e-6)
