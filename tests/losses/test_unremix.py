import keras
import numpy as np
import pytest
from keras import ops

from keras_hardneg import losses as L
from keras_hardneg.losses import core, unremix
from tests.losses.backend_utils import tensor, to_numpy, value_and_grad

pytestmark = pytest.mark.backends


def test_uncertainty_gram_equals_explicit_per_sample_gradients():
    """(h_a.h_j + 1)(e_a.e_j) equals the dot product of per-sample last-layer
    gradients computed with a real backward pass per sample."""
    rng = np.random.default_rng(0)
    b, m, d = 3, 5, 4
    h = rng.normal(size=(2 * b, m)).astype("float32")
    dense = keras.layers.Dense(d, kernel_initializer=keras.initializers.RandomNormal(seed=1),
                               bias_initializer=keras.initializers.RandomNormal(seed=2))
    z = dense(h)
    kernel, bias = to_numpy(dense.kernel), to_numpy(dense.bias)
    unit = to_numpy(core.l2_normalize(z))
    grads = []
    for j in range(2 * b):
        pool = tensor(np.concatenate([unit[:j], unit[j + 1:]], 0))  # held fixed

        def ce(w, c, j=j, pool=pool):
            zj = ops.matmul(tensor(h[j:j + 1]), w)[0] + c
            uj = core.l2_normalize(zj[None, :])[0]
            logits = ops.matmul(pool, uj[:, None])[:, 0]
            label = ops.argmax(ops.stop_gradient(logits))
            return -ops.take(ops.log_softmax(logits), label)

        _, (gk, gb) = value_and_grad(ce, kernel, bias)
        grads.append(np.concatenate([gk.ravel(), gb]))
    grads = np.array(grads)
    pairs = core.in_batch_pairs({"embeddings": z[:b], "features": h[:b]},
                                {"embeddings": z[b:], "features": h[b:]})
    gram = to_numpy(unremix.uncertainty_scores(pairs))
    np.testing.assert_allclose(gram, grads @ grads.T, rtol=1e-4, atol=1e-6)


def test_representativeness_matches_definition():
    rng = np.random.default_rng(1)
    z1, z2 = rng.normal(size=(2, 4, 6)).astype("float32")
    pairs = core.in_batch_pairs(z1, z2)
    r = to_numpy(unremix.representativeness_scores(pairs))
    u = to_numpy(pairs.anchors)
    mask = to_numpy(pairs.negative_mask)
    for a in range(8):
        negs = np.flatnonzero(mask[a])
        for j in negs:
            others = [k for k in negs if k != j]
            np.testing.assert_allclose(r[a, j], np.mean(1 - u[others] @ u[j]), atol=1e-5)


def test_weights_validation():
    with pytest.raises(ValueError, match="weights"):
        L.UnReMixContrastiveLoss(weights=(0, 0, 0))
    with pytest.raises(ValueError, match="weights"):
        L.UnReMixContrastiveLoss(weights=(1, 1))
    with pytest.raises(ValueError, match=r"weights\[1\]"):
        L.UnReMixContrastiveLoss(weights=(1, -1, 1))


def test_identical_rows_fall_back_to_uniform_weights():
    z = np.ones((4, 3), "float32")
    value = L.UnReMixContrastiveLoss(weights=(1, 0, 1))(z, z)
    np.testing.assert_allclose(float(value), float(L.NTXentLoss()(z, z)), rtol=1e-6)
