"""Ring's two band selectors (top_k for small cuts, exact radix-select thresholds for large
ones) against the NumPy transcription, with ties, gradients and dynamic shapes."""

import numpy as np
import pytest

from keras_hardneg import losses as L
from keras_hardneg.losses.ring import kth_largest
from tests.losses import numpy_reference as ref
from tests.losses.backend_utils import compiled, grid, tensor, to_numpy, value_and_grad


def _threshold_loss(**kwargs):
    loss = L.RingContrastiveLoss(**kwargs)
    loss.topk_limit = loss.topk_fraction = 0  # force the threshold path
    return loss


@pytest.mark.parametrize("b,d,t,lower,upper", grid(
    [(2, 3, 0.5), (5, 32, 0.07), (16, 8, 1.0)],
    [(0, 100), (5, 50), (1, 10), (10, 90), (0, 30), (50, 100)]))
@pytest.mark.backends
def test_threshold_path_matches_reference(b, d, t, lower, upper):
    """Eager on both backends: under JAX the 32-pass radix select costs ~5 s of XLA
    compilation per case under ``jax.jit``, but op by op only its first case per shape."""
    rng = np.random.default_rng(b + d)
    z1, z2 = rng.normal(size=(2, b, d)).astype("float32")
    queue = rng.normal(size=(40, d)).astype("float32")
    loss = _threshold_loss(temperature=t, lower_percentile=lower, upper_percentile=upper)
    np.testing.assert_allclose(float(loss(z1, z2)), ref.in_batch_loss(
        ref.ring, z1, z2, t, lower=lower, upper=upper), rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(float(loss.call_with_negatives(z1, z2, queue)), ref.queue_loss(
        ref.ring, z1, z2, queue, t, lower=lower, upper=upper), rtol=2e-5, atol=2e-5)


@pytest.mark.backends
def test_ties_are_counted_exactly():
    # Many identical negatives: a band boundary falls inside a run of ties.
    rng = np.random.default_rng(0)
    q = rng.normal(size=(3, 4)).astype("float32")
    base = rng.normal(size=(4, 4)).astype("float32")
    queue = np.repeat(base, 5, axis=0)  # 20 negatives, 4 distinct values x 5
    for lower, upper in [(10, 30), (5, 50), (0, 45), (12, 13.5)]:
        want = ref.queue_loss(ref.ring, q, q, queue, 0.5, lower=lower, upper=upper)
        for loss in (L.RingContrastiveLoss(0.5, lower, upper), _threshold_loss(
                temperature=0.5, lower_percentile=lower, upper_percentile=upper)):
            np.testing.assert_allclose(float(loss.call_with_negatives(q, q, queue)), want,
                                       rtol=1e-5)


@pytest.mark.backends
def test_gradients_agree_between_paths():
    rng = np.random.default_rng(1)
    z1, z2 = rng.normal(size=(2, 8, 16)).astype("float32")
    queue = tensor(rng.normal(size=(64, 16)), "float32")
    grads = []
    for loss in (L.RingContrastiveLoss(0.2, 5, 50), _threshold_loss(
            temperature=0.2, lower_percentile=5, upper_percentile=50)):
        _, g = value_and_grad(
            lambda a, b, loss=loss: loss.call_with_negatives(a, b, queue) + loss(a, b), z1, z2,
            jit=True)
        grads.append(g)
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_dynamic_batch_and_empty_band():
    """TensorFlow only: unknown batch size (JAX shapes are always static)."""
    import tensorflow as tf

    loss = _threshold_loss(temperature=0.5, lower_percentile=10, upper_percentile=40)
    f = tf.function(lambda a, b: loss(a, b), input_signature=[
        tf.TensorSpec([None, 4], tf.float32), tf.TensorSpec([None, 4], tf.float32)])
    rng = np.random.default_rng(2)
    z1, z2 = rng.normal(size=(2, 2, 4)).astype("float32")  # N = 2: empty band -> 0
    assert float(f(z1, z2)) == 0.0
    z1, z2 = rng.normal(size=(2, 6, 4)).astype("float32")
    np.testing.assert_allclose(float(f(z1, z2)), ref.in_batch_loss(
        ref.ring, z1, z2, 0.5, lower=10, upper=40), rtol=2e-5)


@pytest.mark.backends
def test_kth_largest_is_exact():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(5, 50)).astype("float32")
    x[:, :10] = -np.abs(x[:, :10])  # negatives and positives mixed
    for k in (1, 7, 25, 50):
        np.testing.assert_array_equal(to_numpy(kth_largest(tensor(x), k)),
                                      -np.sort(-x, axis=1)[:, k - 1])


@pytest.mark.backends
def test_threshold_path_eager_equals_jit():
    rng = np.random.default_rng(4)
    q, k = (tensor(v) for v in rng.normal(size=(2, 8, 16)).astype("float32"))
    queue = tensor(rng.normal(size=(100, 16)), "float32")
    loss = _threshold_loss(temperature=0.07, lower_percentile=1, upper_percentile=10)
    eager = loss.call_with_negatives(q, k, queue)
    jit = compiled(loss.call_with_negatives)(q, k, queue)  # XLA on TF, jax.jit on JAX
    np.testing.assert_allclose(float(eager), float(jit), rtol=1e-5)


@pytest.mark.backends
def test_kth_largest_extremes_and_infinities():
    """The int32 midpoint never overflows: keys at both ends of the int32 range
    (-inf, the largest floats, +-0) are selected exactly (denormals are left out: CPU
    kernels may flush them to zero)."""
    big = np.finfo(np.float32).max
    x = np.array([[-np.inf, -big, -0.0, 0.0, 1e-30, big, np.inf, -np.inf]], "float32")
    want = -np.sort(-x, axis=1)
    for k in range(1, 9):
        np.testing.assert_array_equal(to_numpy(kth_largest(tensor(x), k)), want[:, k - 1])


def test_ring_band_of_a_tensor_count_is_the_float64_band_under_every_backend():
    """A run-time ``N`` (InfoGraph with padding graphs) bounded by a static pool size gets
    the band of the float64 formula (a table), also under JAX, which has no float64."""
    import keras

    from keras_hardneg.losses.ring import ring_band

    for lower, upper in ((5, 50), (1, 10), (10, 30), (0.1, 99.9)):
        for n in (0, 1, 7, 10, 29, 30, 31, 100):
            lo, hi = ring_band(keras.ops.convert_to_tensor(n, "int32"), lower, upper,
                               max_negatives=128)
            assert (int(lo), int(hi)) == ring_band(n, lower, upper), (lower, upper, n)
