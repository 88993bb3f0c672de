import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_hardneg.data import load_digits
from keras_hardneg.callbacks import KNNMonitor


class TinyWithEncoder(keras.Model):
    """A classifier that exposes its trunk as ``encoder`` (the library's model contract)."""

    def __init__(self):
        super().__init__()
        self.encoder = keras.Sequential([keras.layers.Flatten(),
                                         keras.layers.Dense(32, activation="relu")])
        self.head = keras.layers.Dense(10)

    def call(self, images, training=False):
        return self.head(self.encoder(images, training=training))


@pytest.fixture(scope="module")
def digits():
    return load_digits(test_fraction=0.2, seed=0)


def test_monitor_writes_history(digits):
    (x, y), (xt, yt) = digits
    keras.utils.set_random_seed(0)
    model = TinyWithEncoder()
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    test_ds = tf.data.Dataset.from_tensor_slices((xt, yt)).batch(128)
    monitor = KNNMonitor((x, y), test_ds, k=20)
    history = model.fit(x, y, batch_size=128, epochs=2, verbose=0, callbacks=[monitor])
    accuracies = history.history["knn_accuracy"]
    assert len(accuracies) == 2 and all(0.8 < a <= 1.0 for a in accuracies)
    assert [e for e, _ in monitor.history] == [0, 1]
    assert [a for _, a in monitor.history] == accuracies
    # The monitor used the encoder: recompute directly.
    from keras_hardneg.evaluation import extract_features, weighted_knn_accuracy
    f, ft = extract_features(model.encoder, x), extract_features(model.encoder, xt)
    assert weighted_knn_accuracy(f, y, ft, yt, k=20) == pytest.approx(accuracies[-1])


def test_every_n_epochs_custom_name_and_model_without_encoder(digits):
    (x, y), (xt, yt) = digits
    inputs = keras.Input((8, 8, 3))
    model = keras.Model(inputs, keras.layers.Dense(10)(keras.layers.Flatten()(inputs)))
    model.compile(optimizer="adam", loss="mse")
    monitor = KNNMonitor((x[:200], y[:200]), (xt[:50], yt[:50]), k=5, every_n_epochs=2,
                         log_name="knn")
    model.fit(x[:200], np.zeros((200, 10)), epochs=3, verbose=0, callbacks=[monitor])
    assert [e for e, _ in monitor.history] == [1]
    assert len(model.history.history["knn"]) == 1


def test_labels_missing_is_a_clear_error(digits):
    (x, y), (xt, yt) = digits
    with pytest.raises(ValueError, match="train_data.*labels missing"):
        KNNMonitor(x, (xt, yt))
    with pytest.raises(ValueError, match="test_data.*labels missing"):
        KNNMonitor((x, y), tf.data.Dataset.from_tensor_slices(xt).batch(8))
    with pytest.raises(ValueError, match="test_data"):
        KNNMonitor((x, y), (xt, yt[:3]))


@pytest.mark.parametrize("kwargs, name", [
    ({"k": 0}, "k"), ({"temperature": -1}, "temperature"), ({"every_n_epochs": 0},
    "every_n_epochs"), ({"log_name": ""}, "log_name"), ({"batch_size": 0}, "batch_size"),
])
def test_invalid_arguments(digits, kwargs, name):
    (x, y), (xt, yt) = digits
    with pytest.raises(ValueError, match=name):
        KNNMonitor((x, y), (xt, yt), **kwargs)


def test_get_config_round_trip(digits):
    (x, y), (xt, yt) = digits
    monitor = KNNMonitor((x, y), (xt, yt), k=7, temperature=0.2, every_n_epochs=3,
                         log_name="knn7", batch_size=64)
    config = monitor.get_config()
    assert config == {"k": 7, "temperature": 0.2, "every_n_epochs": 3, "log_name": "knn7",
                      "batch_size": 64}
    clone = KNNMonitor((x, y), (xt, yt), **config)
    assert clone.get_config() == config
