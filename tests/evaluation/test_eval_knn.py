"""weighted_knn_accuracy against an independent brute-force NumPy transcription."""

import numpy as np
import pytest

from keras_hardneg.evaluation import weighted_knn_accuracy, weighted_knn_predict


def brute_weighted_knn(train_x, train_y, test_x, k, temperature, num_classes):
    """Wu et al. (2018) weighted kNN, one test point at a time, float64."""
    train_x = np.asarray(train_x, np.float64)
    train_x = train_x / np.linalg.norm(train_x, axis=1, keepdims=True)
    predictions = []
    for t in np.asarray(test_x, np.float64):
        t = t / np.linalg.norm(t)
        sims = train_x @ t
        k_eff = min(k, len(train_x))
        nearest = np.argsort(-sims, kind="stable")[:k_eff]
        scores = np.zeros(num_classes)
        for j in nearest:
            scores[train_y[j]] += np.exp(sims[j] / temperature)
        predictions.append(int(np.argmax(scores)))
    return np.array(predictions)


@pytest.mark.parametrize("k, temperature", [(1, 0.1), (7, 0.07), (50, 0.5), (1000, 0.1)])
def test_matches_numpy_reference(k, temperature):
    rng = np.random.default_rng(k)
    num_classes = 5
    centers = rng.normal(size=(num_classes, 16))
    train_y = rng.integers(0, num_classes, 300)
    test_y = rng.integers(0, num_classes, 120)
    train_x = (centers[train_y] + 1.5 * rng.normal(size=(300, 16))).astype(np.float32)
    test_x = (centers[test_y] + 1.5 * rng.normal(size=(120, 16))).astype(np.float32)
    expected = brute_weighted_knn(train_x, train_y, test_x, k, temperature, num_classes)
    predicted = weighted_knn_predict(train_x, train_y, test_x, k=k, temperature=temperature)
    np.testing.assert_array_equal(predicted, expected)
    accuracy = weighted_knn_accuracy(train_x, train_y, test_x, test_y, k=k,
                                     temperature=temperature)
    assert accuracy == pytest.approx(np.mean(expected == test_y))
    assert 0.3 < accuracy <= 1.0  # far above chance (0.2) on these blobs


def test_chunking_does_not_change_the_result(monkeypatch):
    from keras_hardneg.evaluation import knn

    rng = np.random.default_rng(1)
    train_x, test_x = rng.normal(size=(200, 8)), rng.normal(size=(37, 8))
    train_y = rng.integers(0, 3, 200)
    full = weighted_knn_predict(train_x, train_y, test_x, k=10)
    monkeypatch.setattr(knn, "_BLOCK_ELEMENTS", 200 * 5)  # chunks of 5 test rows
    np.testing.assert_array_equal(weighted_knn_predict(train_x, train_y, test_x, k=10), full)


def test_small_temperature_does_not_overflow_and_scale_invariance():
    rng = np.random.default_rng(2)
    train_x, test_x = rng.normal(size=(100, 4)), rng.normal(size=(20, 4))
    train_y, test_y = rng.integers(0, 4, 100), rng.integers(0, 4, 20)
    preds, scores = weighted_knn_predict(train_x, train_y, test_x, k=20, temperature=0.001,
                                         return_scores=True)
    assert np.all(np.isfinite(scores))
    a = weighted_knn_accuracy(train_x, train_y, test_x, test_y, k=20)
    b = weighted_knn_accuracy(5 * train_x, train_y, 0.1 * test_x, test_y, k=20)
    assert a == b


def test_num_classes_and_labels_shape():
    x = np.eye(3, dtype=np.float32)
    assert weighted_knn_accuracy(x, [0, 1, 2], x, [[0], [1], [2]], k=1, num_classes=10) == 1.0


@pytest.mark.parametrize("kwargs, name", [
    ({"k": 0}, "k"),
    ({"temperature": 0.0}, "temperature"),
    ({"num_classes": 2}, "num_classes"),
    ({"train_labels": np.zeros(4, int)}, "train_labels"),
    ({"test_features": np.zeros((3, 5))}, "test_features"),
    ({"train_features": np.zeros((0, 4))}, "train_features"),
])
def test_invalid_arguments_name_the_parameter(kwargs, name):
    args = dict(train_features=np.eye(5, 4), train_labels=np.array([0, 1, 2, 0, 1]),
                test_features=np.eye(3, 4), test_labels=np.array([0, 1, 2]))
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        weighted_knn_accuracy(**args)
