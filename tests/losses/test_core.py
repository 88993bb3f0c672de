import keras
import numpy as np
import pytest

from keras_hardneg.losses import core
from tests.losses.backend_utils import to_numpy

pytestmark = pytest.mark.backends


def test_in_batch_pairs_masks_and_positives():
    rng = np.random.default_rng(0)
    z1, z2 = rng.normal(size=(2, 3, 5)).astype("float32")
    p = core.in_batch_pairs(z1, z2)
    mask = to_numpy(p.negative_mask)
    assert p.num_negatives == 4
    assert mask.shape == (6, 6)
    for a in range(6):
        partner = (a + 3) % 6
        assert not mask[a, a] and not mask[a, partner]
        assert mask[a].sum() == 4
        np.testing.assert_allclose(to_numpy(p.positives)[a], to_numpy(p.anchors)[partner], rtol=1e-6)
    u = np.concatenate([z1, z2]) / np.linalg.norm(np.concatenate([z1, z2]), axis=1, keepdims=True)
    np.testing.assert_allclose(to_numpy(p.negative_cos), u @ u.T, atol=1e-6)
    np.testing.assert_allclose(to_numpy(p.positive_cos), np.sum(u * np.roll(u, 3, axis=0), 1), atol=1e-6)


def test_queue_pairs_shapes():
    rng = np.random.default_rng(1)
    q, k = rng.normal(size=(2, 4, 8))
    queue = rng.normal(size=(10, 8))
    p = core.queue_pairs(q, k, queue)
    assert p.num_negatives == 10 and p.negative_mask is None
    assert tuple(p.negative_cos.shape) == (4, 10)
    assert keras.backend.standardize_dtype(p.negative_cos.dtype) == "float32"


@pytest.mark.parametrize(
    "z1,z2,match",
    [
        (np.zeros((4, 3)), np.zeros((5, 3)), "same shape"),
        (np.zeros((4, 3, 1)), np.zeros((4, 3, 1)), "rank 2"),
        (np.zeros((0, 3)), np.zeros((0, 3)), "at least 1"),
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
    assert np.all(np.isfinite(to_numpy(p.negative_cos)))


def test_cross_view_pairs_masks_and_pool():
    rng = np.random.default_rng(2)
    q, k = rng.normal(size=(2, 3, 5)).astype("float32")
    p = core.cross_view_pairs(q, k)
    assert p.num_negatives == 2
    np.testing.assert_array_equal(to_numpy(p.negative_mask), ~np.eye(3, dtype=bool))
    gathered = rng.normal(size=(6, 5)).astype("float32")
    gathered[3:] = k
    p = core.cross_view_pairs(q, k, pool=(gathered, 3))
    assert p.num_negatives == 5
    want = np.ones((3, 6), bool)
    want[np.arange(3), np.arange(3) + 3] = False
    np.testing.assert_array_equal(to_numpy(p.negative_mask), want)
    np.testing.assert_array_equal(to_numpy(p.partner_index), [3, 4, 5])


def test_in_batch_pool_is_the_global_batch():
    """Local rows of replica 1 of 2 against the gathered batch: the same cosines and
    masks as those rows of the one-device pairs."""
    rng = np.random.default_rng(5)
    z1, z2 = rng.normal(size=(2, 6, 4)).astype("float32")
    whole = core.in_batch_pairs(z1, z2)
    local = core.in_batch_pairs(z1[3:], z2[3:], pool=(z1, z2, 3))
    rows = np.r_[3:6, 9:12]
    assert local.num_negatives == whole.num_negatives == 10
    np.testing.assert_array_equal(to_numpy(local.negative_mask),
                                  to_numpy(whole.negative_mask)[rows])
    np.testing.assert_allclose(to_numpy(local.negative_cos), to_numpy(whole.negative_cos)[rows],
                               atol=1e-6)
    np.testing.assert_array_equal(to_numpy(local.anchor_index), rows)


def test_l2_normalize_float32_and_zero_safe():
    x = np.array([[3.0, 4.0], [0.0, 0.0]], "float16")
    y = core.l2_normalize(x)
    assert keras.backend.standardize_dtype(y.dtype) == "float32"
    np.testing.assert_allclose(to_numpy(y), [[0.6, 0.8], [0.0, 0.0]], atol=1e-6)
