import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_hardneg.evaluation import extract_features, linear_probe_accuracy


def test_linear_probe_separable_and_deterministic():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, 400)
    centers = rng.normal(size=(4, 10)) * 4
    x = centers[y] + rng.normal(size=(400, 10)) + 100.0  # offset: standardisation matters
    a = linear_probe_accuracy(x[:300], y[:300], x[300:], y[300:], seed=0)
    b, model = linear_probe_accuracy(x[:300], y[:300], x[300:], y[300:], seed=0,
                                     return_model=True)
    assert a > 0.9 and a == b
    assert model.predict(x[300:]).shape == (100,)


@pytest.mark.parametrize("kwargs, name", [
    ({"C": 0}, "C"),
    ({"max_iter": 0}, "max_iter"),
    ({"train_labels": np.zeros(6, int)}, "train_labels"),
    ({"test_labels": np.zeros(2, int)}, "test_labels"),
    ({"test_features": np.zeros((3, 2))}, "test_features"),
])
def test_linear_probe_invalid_arguments(kwargs, name):
    args = dict(train_features=np.eye(6, 3), train_labels=np.array([0, 1, 2, 0, 1, 2]),
                test_features=np.eye(3), test_labels=np.array([0, 1, 2]))
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        linear_probe_accuracy(**args)


def _encoder():
    inputs = keras.Input((4, 4, 3))
    outputs = keras.layers.Dense(2)(keras.layers.GlobalAveragePooling2D()(inputs))
    model = keras.Model(inputs, outputs)
    model.set_weights([np.array([[1, 0], [0, 1], [1, 1]], "float32"), np.zeros(2, "float32")])
    return model


def test_extract_features_arrays_datasets_and_callables():
    rng = np.random.default_rng(0)
    x = rng.random((10, 4, 4, 3)).astype("float32")
    y = np.arange(10)
    expected = np.stack([x[..., 0].mean((1, 2)) + x[..., 2].mean((1, 2)),
                         x[..., 1].mean((1, 2)) + x[..., 2].mean((1, 2))], axis=1)
    enc = _encoder()
    np.testing.assert_allclose(extract_features(enc, x, batch_size=3), expected, rtol=1e-5)
    feats, labels = extract_features(enc, (x, y), batch_size=4)
    np.testing.assert_allclose(feats, expected, rtol=1e-5)
    assert labels.dtype == np.int64 and labels.tolist() == list(range(10))
    unbatched = tf.data.Dataset.from_tensor_slices((x, y))
    feats, labels = extract_features(enc, unbatched, batch_size=4)
    np.testing.assert_allclose(feats, expected, rtol=1e-5)
    feats = extract_features(enc, tf.data.Dataset.from_tensor_slices(x).batch(3))
    np.testing.assert_allclose(feats, expected, rtol=1e-5)
    # Any callable, without a `training` argument; higher-rank outputs are flattened.
    feats = extract_features(lambda images: images[:, :2, :2, :1], x)
    assert feats.shape == (10, 4)


def test_extract_features_errors():
    with pytest.raises(ValueError, match="images_or_dataset"):
        extract_features(_encoder(), np.zeros((4, 4, 3)))
    with pytest.raises(ValueError, match="batch_size"):
        extract_features(_encoder(), np.zeros((2, 4, 4, 3)), batch_size=0)
    with pytest.raises(ValueError, match="empty"):
        extract_features(_encoder(), tf.data.Dataset.from_tensor_slices(
            np.zeros((0, 4, 4, 3), "float32")).batch(2))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_extract_features_refuses_non_finite_pixels(bad):
    """A compiled encoder with batch norm + ReLU maps NaN pixels to finite features (TF fuses
    the two; oneDNN's ReLU turns NaN into 0): the input is checked instead."""
    from keras_hardneg.encoders import small_convnet

    x = np.random.default_rng(0).uniform(size=(12, 8, 8, 3)).astype("float32")
    x[9, 2, 2, 1] = bad
    enc = small_convnet(input_shape=(8, 8, 3), width=4)
    with pytest.raises(ValueError, match=r"images_or_dataset.*1 non-finite.*images 8\.\.11"):
        extract_features(enc, x, batch_size=4)
    assert np.isfinite(extract_features(enc, x[:8], batch_size=4)).all()
