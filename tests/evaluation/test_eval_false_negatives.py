import numpy as np
import pytest
import tensorflow as tf

from keras_hardneg.evaluation import false_negative_rate


def numpy_rate(labels):
    """Enumerates the 2B SimCLR anchors and their 2B-2 negatives explicitly."""
    labels = np.asarray(labels)
    b = len(labels)
    views = np.concatenate([labels, labels])          # view v of example i is at i + v*B
    owner = np.concatenate([np.arange(b), np.arange(b)])
    rates = []
    for a in range(2 * b):
        negatives = [n for n in range(2 * b) if owner[n] != owner[a]]
        assert len(negatives) == 2 * b - 2
        rates.append(np.mean([views[n] == views[a] for n in negatives]))
    return np.mean(rates), np.array(rates[:b])


@pytest.mark.parametrize("seed, batch, classes", [(0, 2, 2), (1, 8, 3), (2, 33, 10), (3, 16, 1)])
def test_matches_explicit_enumeration(seed, batch, classes):
    labels = np.random.default_rng(seed).integers(0, classes, batch)
    mean, per_example = numpy_rate(labels)
    assert float(false_negative_rate(labels)) == pytest.approx(mean, abs=1e-6)
    np.testing.assert_allclose(false_negative_rate(labels, reduction="none"), per_example,
                               atol=1e-6)


def test_edge_cases_and_graph_mode():
    assert float(false_negative_rate([4])) == 0.0
    assert float(false_negative_rate([1, 2, 3])) == 0.0
    assert float(false_negative_rate([[5], [5], [5]])) == 1.0
    fn = tf.function(false_negative_rate)
    spec_result = fn(tf.constant([0, 0, 1, 2], tf.int64))
    assert float(spec_result) == pytest.approx(2 / 12)


def test_invalid_arguments():
    with pytest.raises(ValueError, match="reduction"):
        false_negative_rate([0, 1], reduction="sum")
    with pytest.raises(ValueError, match="labels"):
        false_negative_rate(np.zeros((2, 3)))
