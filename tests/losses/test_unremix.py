import numpy as np
import pytest
import keras
import tensorflow as tf

from keras_hardneg import losses as L
from keras_hardneg.losses import core, unremix


def test_uncertainty_gram_equals_explicit_per_sample_gradients():
    """(h_a.h_j + 1)(e_a.e_j) equals the dot product of per-sample last-layer
    gradients computed with a real backward pass per sample."""
    rng = np.random.default_rng(0)
    b, m, d = 3, 5, 4
    h = tf.constant(rng.normal(size=(2 * b, m)), tf.float32)
    dense = keras.layers.Dense(d, kernel_initializer=keras.initializers.RandomNormal(seed=1),
                               bias_initializer=keras.initializers.RandomNormal(seed=2))
    z = dense(h)
    unit = tf.math.l2_normalize(z, axis=1)
    grads = []
    for j in range(2 * b):
        with tf.GradientTape() as tape:
            zj = dense(h[j:j + 1])[0]
            uj = tf.math.l2_normalize(zj)
            pool = tf.stop_gradient(tf.concat([unit[:j], unit[j + 1:]], 0))
            logits = tf.linalg.matvec(pool, uj)
            label = tf.argmax(logits)
            ce = tf.nn.sparse_softmax_cross_entropy_with_logits(label, logits)
        gk, gb = tape.gradient(ce, [dense.kernel, dense.bias])
        grads.append(np.concatenate([gk.numpy().ravel(), gb.numpy()]))
    grads = np.array(grads)
    pairs = core.in_batch_pairs({"embeddings": z[:b], "features": h[:b]},
                                {"embeddings": z[b:], "features": h[b:]})
    gram = unremix.uncertainty_scores(pairs).numpy()
    np.testing.assert_allclose(gram, grads @ grads.T, rtol=1e-4, atol=1e-6)


def test_representativeness_matches_definition():
    rng = np.random.default_rng(1)
    z1, z2 = rng.normal(size=(2, 4, 6)).astype("float32")
    pairs = core.in_batch_pairs(z1, z2)
    r = unremix.representativeness_scores(pairs).numpy()
    u = pairs.anchors.numpy()
    mask = pairs.negative_mask.numpy()
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
