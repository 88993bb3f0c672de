"""``KNNMonitor``: weighted-kNN accuracy of the model's encoder, logged during ``fit``."""

from __future__ import annotations

import numbers
from typing import Any

import keras
import numpy as np

from keras_hardneg.data._checks import check_batch_size
from keras_hardneg.data._tf import is_tf_dataset
from keras_hardneg.evaluation.features import extract_features, has_labels
from keras_hardneg.evaluation.knn import weighted_knn_accuracy

__all__ = ["KNNMonitor"]


def _check_labelled(name, data):
    if data is None or not has_labels(data) or (
            isinstance(data, (tuple, list)) and data[1] is None):
        raise ValueError(
            f"`{name}`: labels missing where a monitor needs them; give (images, labels) "
            "arrays, a keras.utils.PyDataset or a tf.data.Dataset of (images, labels)."
        )
    if not is_tf_dataset(data) and not isinstance(data, keras.utils.PyDataset):
        images, labels = data
        if np.shape(images)[0] != np.shape(labels)[0] or np.shape(images)[0] == 0:
            raise ValueError(
                f"`{name}`: {np.shape(images)[0]} images and {np.shape(labels)[0]} labels; "
                "they must match and not be empty."
            )


class KNNMonitor(keras.callbacks.Callback):
    """Logs the weighted-kNN accuracy of ``model.encoder`` every ``every_n_epochs`` epochs.

    At the end of an epoch the encoder (``self.model.encoder``, a ``keras.Model`` images
    ``[B, H, W, 3]`` in ``[0, 1]`` -> features ``[B, F]``; the model itself if it has no
    ``encoder``) embeds the labelled train ("memory bank") and test data in inference mode,
    and :func:`~keras_hardneg.evaluation.weighted_knn_accuracy` classifies the test features.
    The accuracy goes into ``logs[log_name]`` (so it is shown by the progress bar and
    recorded in ``History``; on skipped epochs the key is absent) and into ``self.history``.

    Args:
        train_data: ``(images, labels)`` arrays, a finite ``keras.utils.PyDataset`` of
            ``(images, labels)`` batches or a ``tf.data.Dataset`` of ``(images, labels)``
            (batched or not); the kNN memory bank.
        test_data: same format; the points classified.
        k: neighbours (default 200), clipped to the train size.
        temperature: kNN weight temperature ``> 0``.
        every_n_epochs: run on epochs ``n-1, 2n-1, ...`` (0-based), ``>= 1``.
        log_name: key written into ``logs``.
        batch_size: batch size for array inputs and unbatched datasets.

    Attributes:
        history: list of ``(epoch, accuracy)`` tuples.

    Cost per evaluation: one forward pass over both sets plus an
    ``n_test x n_train`` similarity (about 1 s per 10^9 products on a CPU core).

    Example:
        >>> (x, y), (xt, yt) = keras_hardneg.data.load_digits()   # [n, 8, 8, 3] in [0, 1]
        >>> encoder = keras_hardneg.encoders.small_convnet((8, 8, 3), width=8)
        >>> model = keras_hardneg.models.SimCLR(
        ...     encoder, projection_dims=(16, 8),
        ...     augmentation=keras_hardneg.augment.simclr_augmentation(image_size=8))
        >>> model.compile(optimizer="adam", loss=keras_hardneg.losses.NTXentLoss())
        >>> monitor = KNNMonitor((x[:300], y[:300]), (xt[:100], yt[:100]), k=20)
        >>> _ = model.fit(x[:256], batch_size=64, epochs=2, callbacks=[monitor], verbose=0)
        >>> [epoch for epoch, accuracy in monitor.history]   # one (epoch, accuracy) per epoch
        [0, 1]
    """

    def __init__(self, train_data: Any, test_data: Any, k: int = 200, temperature: float = 0.1,
                 every_n_epochs: int = 1, log_name: str = "knn_accuracy",
                 batch_size: int = 256):
        super().__init__()
        _check_labelled("train_data", train_data)
        _check_labelled("test_data", test_data)
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
            raise ValueError(f"`k` must be an integer >= 1; got {k!r}.")
        if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real) or not (
            np.isfinite(temperature) and temperature > 0
        ):
            raise ValueError(f"`temperature` must be a finite number > 0; got {temperature!r}.")
        if isinstance(every_n_epochs, bool) or not isinstance(every_n_epochs, numbers.Integral) \
                or every_n_epochs < 1:
            raise ValueError(f"`every_n_epochs` must be an integer >= 1; got {every_n_epochs!r}.")
        if not isinstance(log_name, str) or not log_name:
            raise ValueError(f"`log_name` must be a non-empty string; got {log_name!r}.")
        self.train_data = train_data
        self.test_data = test_data
        self.k = int(k)
        self.temperature = float(temperature)
        self.every_n_epochs = int(every_n_epochs)
        self.log_name = log_name
        self.batch_size = check_batch_size(batch_size)
        self.history = []

    def _encoder(self):
        encoder = getattr(self.model, "encoder", None)
        return encoder if encoder is not None else self.model

    def evaluate(self):
        """Computes the kNN accuracy now (Python float), without logging it."""
        encoder = self._encoder()
        train_features, train_labels = extract_features(encoder, self.train_data,
                                                        self.batch_size)
        test_features, test_labels = extract_features(encoder, self.test_data, self.batch_size)
        return weighted_knn_accuracy(train_features, train_labels, test_features, test_labels,
                                     k=self.k, temperature=self.temperature)

    def on_epoch_end(self, epoch, logs=None):
        if (epoch + 1) % self.every_n_epochs != 0:
            return
        accuracy = self.evaluate()
        self.history.append((int(epoch), accuracy))
        if logs is not None:
            logs[self.log_name] = accuracy

    def get_config(self):
        """Hyper-parameters only: the data is not serialised (pass it again to rebuild)."""
        return {
            "k": self.k,
            "temperature": self.temperature,
            "every_n_epochs": self.every_n_epochs,
            "log_name": self.log_name,
            "batch_size": self.batch_size,
        }
