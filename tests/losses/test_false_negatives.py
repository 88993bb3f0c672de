"""The one false-negative statistic: every public route gives the same number."""

import keras
import numpy as np
import pytest

from keras_hardneg.evaluation import false_negative_rate as evaluation_rate
from keras_hardneg.losses import core
from keras_hardneg.losses.false_negatives import (false_negative_rate,
                                                  false_negative_rate_of_pairs)
from keras_hardneg.sampling import false_negative_fraction as sampling_fraction
from tests.losses.backend_utils import compiled, to_numpy

pytestmark = pytest.mark.backends


def pair_count(labels):
    y = np.asarray(labels)
    b = len(y)
    return ((y[:, None] == y[None, :]).sum() - b) / (b * (b - 1))


@pytest.mark.parametrize("seed, batch, classes", [(0, 2, 2), (1, 9, 3), (2, 64, 10), (3, 7, 1)])
def test_all_routes_agree(seed, batch, classes):
    labels = np.random.default_rng(seed).integers(0, classes, batch)
    want = pair_count(labels)
    rng = np.random.default_rng(seed + 100)
    z1, z2 = rng.normal(size=(2, batch, 8)).astype("float32")
    pairs = core.in_batch_pairs(z1, z2)
    views = np.concatenate([labels, labels])
    routes = {
        "evaluation": float(evaluation_rate(labels)),
        "sampling": sampling_fraction(labels),
        "sampling_tensor": float(sampling_fraction(keras.ops.convert_to_tensor(labels))),
        "core": float(false_negative_rate(labels)),
        "pairs": float(false_negative_rate_of_pairs(pairs, views, views)),
        "core_namespace": float(core.false_negative_fraction(pairs, views, views)),
    }
    for name, got in routes.items():
        assert got == pytest.approx(want, abs=1e-6), name


def test_one_implementation():
    assert evaluation_rate is false_negative_rate
    assert core.false_negative_fraction is false_negative_rate_of_pairs


def test_queue_unknown_labels_and_count():
    rng = np.random.default_rng(0)
    anchors = rng.normal(size=(4, 8)).astype("float32")
    pairs = core.queue_pairs(anchors, anchors, rng.normal(size=(6, 8)).astype("float32"))
    anchor_labels = np.array([0, 1, 1, 2])
    queue = np.array([1, -1, 1, 2, -1, 0])          # two slots not filled yet
    rate, count = false_negative_rate_of_pairs(pairs, anchor_labels, queue, return_count=True)
    known = queue[queue >= 0]
    hits = (anchor_labels[:, None] == known[None, :]).sum()
    assert float(count) == 4 * 4
    assert float(rate) == pytest.approx(hits / 16)
    empty = np.full(6, -1)
    rate, count = false_negative_rate_of_pairs(pairs, anchor_labels, empty, return_count=True)
    assert float(rate) == 0.0 and float(count) == 0.0
    # unknown labels within a batch are not counted either
    assert float(false_negative_rate([0, 0, -1, -1])) == pytest.approx(1.0)
    per = false_negative_rate([0, 0, 1, -1], reduction="none")
    np.testing.assert_allclose(to_numpy(per), [0.5, 0.5, 0.0, 0.0])


def test_per_anchor_counts_and_graph_mode():
    labels = np.array([3, 3, 3, 5])
    rate, count = false_negative_rate(labels, reduction="none", return_count=True)
    np.testing.assert_allclose(to_numpy(rate), [2 / 3, 2 / 3, 2 / 3, 0.0])
    np.testing.assert_allclose(to_numpy(count), [3, 3, 3, 3])
    fn = compiled(lambda y: false_negative_rate(y))  # tf.function (XLA) or jax.jit
    assert float(fn(keras.ops.convert_to_tensor(labels, "int32"))) == pytest.approx(6 / 12)
    with pytest.raises(ValueError, match="pool_labels"):
        false_negative_rate(labels, np.zeros((2, 2)))
