import numpy as np
import pytest
import tensorflow as tf

from keras_hardneg.losses import core


def test_in_batch_pairs_masks_and_positives():
    rng = np.random.default_rng(0)
    z1, z2 = rng.normal(size=(2, 3, 5)).astype("float32")
    p = core.in_batch_pairs(z1, z2)
    mask = p.negative_mask.numpy()
    assert p.num_negatives == 4
    assert mask.shape == (6, 6)
    for a in range(6):
        partner = (a + 3) % 6
        assert not mask[a, a] and not mask[a, partner]
        assert mask[a].sum() == 4
        np.testing.assert_allclose(p.positives.numpy()[a], p.anchors.numpy()[partner], rtol=1e-6)
    u = np.concatenate([z1, z2]) / np.linalg.norm(np.concatenate([z1, z2]), axis=1, keepdims=True)
    np.testing.assert_allclose(p.negative_cos.numpy(), u @ u.T, atol=1e-6)
    np.testing.assert_allclose(p.positive_cos.numpy(), np.sum(u * np.roll(u, 3, axis=0), 1), atol=1e-6)


def test_queue_pairs_shapes():
    rng = np.random.default_rng(1)
    q, k = rng.normal(size=(2, 4, 8))
    queue = rng.normal(size=(10, 8))
    p = core.queue_pairs(q, k, queue)
    assert p.num_negatives == 10 and p.negative_mask is None
    assert tuple(p.negative_cos.shape) == (4, 10)
    assert p.negative_cos.dtype == tf.float32


@pytest.mark.parametrize(
    "z1,z2,match",
    [
        (np.zeros((4, 3)), np.zeros((5, 3)), "same shape"),
        (np.zeros((4, 3, 1)), np.zeros((4, 3, 1)), "rank 2"),
        (np.zeros((1, 3)), np.zeros((1, 3)), "at least 2"),
        (np.zeros((4,), "int32"), np.zeros((4,), "int32"), "float"),
    ],
)
def test_in_batch_bad_input(z1, z2, match):
    with pytest.raises(ValueError, match=match):
        core.in_batch_pairs(z1, z2)


def test_queue_bad_input():
    with pytest.raises(ValueError, match="dimension"):
        core.queue_pairs(np.ones((2, 3)), np.ones((2, 3)), np.ones((5, 4)))
    with pytest.raises(ValueError, match="same shape"):
        core.queue_pairs(np.ones((2, 3)), np.ones((3, 3)), np.ones((5, 3)))
    with pytest.raises(ValueError, match="'embeddings'"):
        core.queue_pairs({"emb": np.ones((2, 3))}, np.ones((2, 3)), np.ones((5, 3)))


def test_zero_rows_do_not_make_nan():
    z = np.zeros((4, 3), "float32")
    p = core.in_batch_pairs(z, z)
    assert np.all(np.isfinite(p.negative_cos.numpy()))
