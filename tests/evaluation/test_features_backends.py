"""extract_features and the weighted kNN on the running backend (no tf.data off TensorFlow)."""

import keras
import numpy as np
import pytest

from keras_hardneg.data import ShuffledBatches
from keras_hardneg.evaluation import extract_features, weighted_knn_accuracy, weighted_knn_predict

pytestmark = pytest.mark.backends


@pytest.fixture(scope="module")
def encoder():
    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((6, 6, 3)), keras.layers.Conv2D(4, 3),
                             keras.layers.BatchNormalization(), keras.layers.ReLU(),
                             keras.layers.GlobalAveragePooling2D()])


def test_arrays_pairs_and_py_dataset_match_predict(encoder):
    x = np.random.default_rng(0).uniform(size=(37, 6, 6, 3)).astype(np.float32)
    y = np.arange(37) % 5
    want = encoder.predict(x, verbose=0)
    got = extract_features(encoder, x, batch_size=8)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    feats, labels = extract_features(encoder, (x, y), batch_size=16)
    np.testing.assert_allclose(feats, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(labels, y)
    assert labels.dtype == np.int64 and feats.dtype == np.float32

    class Finite(keras.utils.PyDataset):
        def __len__(self):
            return 3

        def __getitem__(self, i):
            return x[i * 13:(i + 1) * 13], y[i * 13:(i + 1) * 13]

    feats, labels = extract_features(encoder, Finite())
    np.testing.assert_allclose(feats, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(labels, y)
    with pytest.raises(ValueError, match="endless"):
        extract_features(encoder, ShuffledBatches(x, y, batch_size=4))


def test_weights_are_read_at_each_call(encoder):
    x = np.random.default_rng(1).uniform(size=(4, 6, 6, 3)).astype(np.float32)
    before = extract_features(encoder, x)
    kernel = encoder.layers[0].kernel
    old = keras.ops.convert_to_numpy(kernel)
    kernel.assign(old * 2.0)
    try:
        after = extract_features(encoder, x)
    finally:
        kernel.assign(old)
    assert not np.allclose(before, after)


def test_non_finite_pixels_are_refused(encoder):
    x = np.zeros((3, 6, 6, 3), np.float32)
    x[1, 0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="images_or_dataset.*non-finite"):
        extract_features(encoder, x)


def test_knn_matches_a_brute_force_reference():
    rng = np.random.default_rng(0)
    train, test = rng.normal(size=(300, 8)), rng.normal(size=(50, 8))
    y_train, y_test = rng.integers(0, 4, 300), rng.integers(0, 4, 50)
    k, t = 15, 0.2
    tn = train / np.linalg.norm(train, axis=1, keepdims=True)
    sn = test / np.linalg.norm(test, axis=1, keepdims=True)
    sim = sn @ tn.T
    want = []
    for row in sim:
        top = np.argsort(-row, kind="stable")[:k]
        scores = np.zeros(4)
        np.add.at(scores, y_train[top], np.exp(row[top] / t))
        want.append(np.argmax(scores))
    np.testing.assert_array_equal(weighted_knn_predict(train, y_train, test, k=k,
                                                       temperature=t), want)
    assert weighted_knn_accuracy(train, y_train, test, y_test, k=k, temperature=t) == \
        pytest.approx(np.mean(np.asarray(want) == y_test))
