"""Running a frozen encoder over images (arrays, a ``keras.utils.PyDataset`` or a ``tf.data``
dataset) into numpy features.

Arrays go through the encoder in NumPy batches under every backend: compiled with
``tf.function`` on TensorFlow and with ``jax.jit`` (a stateless call of the current weights)
on JAX, so TensorFlow is imported only on its own backend or for a ``tf.data`` input.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable

import keras
import numpy as np

from keras_hardneg.data._checks import check_batch_size
from keras_hardneg.data._tf import is_tf_dataset

__all__ = ["extract_features", "has_labels"]

_COMPILED = weakref.WeakKeyDictionary()


def has_labels(data):
    """Whether ``data`` (see :func:`extract_features`) carries labels."""
    if isinstance(data, keras.utils.PyDataset):
        return _py_dataset_labelled(data)
    if is_tf_dataset(data):
        spec = data.element_spec
        return isinstance(spec, (tuple, list)) and len(spec) >= 2
    return isinstance(data, (tuple, list)) and len(data) == 2


def _compile(encoder):
    """``images -> features`` for a keras layer, compiled for the running backend."""
    ref = weakref.ref(encoder)  # the cached function must not keep the encoder alive
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(lambda x: ref()(x, training=False), reduce_retracing=True)
    if backend == "jax":
        import jax

        @jax.jit
        def stateless(trainable, non_trainable, x):
            out, _ = ref().stateless_call(trainable, non_trainable, x, training=False)
            return out

        def call(x):
            layer = ref()
            if not layer.built:
                layer(x, training=False)
            return stateless([v.value for v in layer.trainable_variables],
                             [v.value for v in layer.non_trainable_variables], x)

        return call
    return lambda x: ref()(x, training=False)


def compiles_each_shape() -> bool:
    """Whether the running backend's compiled encoder (:func:`_encoder_fn`) compiles again
    for every new input shape: ``jax.jit`` does; TensorFlow's function relaxes to any shape
    after the second (``reduce_retracing``). Callers with many lengths bucket them then."""
    return keras.backend.backend() == "jax"


def _encoder_fn(encoder):
    """A function ``images -> features`` that runs ``encoder`` in inference mode."""
    if isinstance(encoder, keras.layers.Layer):
        # A compiled function is much faster than eager calls; keras layers trace cleanly.
        # Cached per encoder so that a monitor calling this every epoch traces once.
        try:
            return _COMPILED[encoder]
        except (KeyError, TypeError):
            pass
        compiled = _compile(encoder)
        try:
            _COMPILED[encoder] = compiled
        except TypeError:
            pass
        return compiled
    if not callable(encoder):
        raise ValueError(f"`encoder` must be a keras.Model or a callable; got {encoder!r}.")

    def call(x):
        try:
            return encoder(x, training=False)
        except TypeError:  # plain callables may not take `training`
            return encoder(x)

    return call


def _py_dataset_labelled(data):
    first = data[0]
    return isinstance(first, (tuple, list)) and len(first) >= 2


def _array_batches(images, labels, batch_size):
    for start in range(0, images.shape[0], batch_size):
        if labels is None:
            yield images[start:start + batch_size]
        else:
            yield images[start:start + batch_size], labels[start:start + batch_size]


def _py_dataset_batches(data, labelled):
    count = data.num_batches
    if count is None:
        raise ValueError("`images_or_dataset` is an endless PyDataset (num_batches is None); "
                         "give a finite one.")
    for i in range(count):
        element = data[i]
        if labelled:
            images = element[0]
            if isinstance(images, dict):
                raise ValueError("`images_or_dataset` elements must be images or (images, "
                                 f"labels); got a dict with keys {sorted(images)}.")
            yield np.asarray(images), np.asarray(element[1])
        else:
            if isinstance(element, (tuple, list)):
                element = element[0]
            if isinstance(element, dict):
                raise ValueError("`images_or_dataset` elements must be images or (images, "
                                 f"labels); got a dict with keys {sorted(element)}.")
            yield np.asarray(element)


def _as_dataset(data, batch_size):
    """``(iterable of (images[, labels]) batches, labelled?)``."""
    if isinstance(data, keras.utils.PyDataset):
        labelled = has_labels(data)
        return _py_dataset_batches(data, labelled), labelled
    if is_tf_dataset(data):
        labelled = has_labels(data)
        spec = data.element_spec[0] if labelled else data.element_spec
        if isinstance(spec, dict):
            raise ValueError(
                "`images_or_dataset` elements must be images or (images, labels); got a dict "
                f"with keys {sorted(spec)}."
            )
        if labelled:
            data = data.map(lambda *e: (e[0], e[1]))
        if spec.shape.rank == 3:  # unbatched images [H, W, C]
            data = data.batch(batch_size)
        elif spec.shape.rank != 4:
            raise ValueError(
                "`images_or_dataset` must yield images [H, W, C] or batches [B, H, W, C]; got "
                f"element shape {spec.shape}."
            )
        return data, labelled
    labelled = has_labels(data)
    images, labels = (data[0], data[1]) if labelled else (data, None)
    images = np.asarray(images)
    if images.ndim != 4:
        raise ValueError(
            "`images_or_dataset` must be an array [n, H, W, C] (or a pair (images, labels), or "
            f"a tf.data.Dataset); got shape {images.shape}."
        )
    if labelled:
        labels = np.asarray(labels)
        if labels.shape[:1] != images.shape[:1]:
            raise ValueError(
                f"`images_or_dataset` labels {labels.shape} do not match images {images.shape}."
            )
        return _array_batches(images, labels, batch_size), True
    return _array_batches(images, None, batch_size), False


def extract_features(encoder: keras.Model | Callable, images_or_dataset: Any,
                     batch_size: int = 256) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Encodes every image with ``encoder`` in inference mode (``training=False``).

    Args:
        encoder: a ``keras.Model`` (compiled: ``tf.function`` on TensorFlow, ``jax.jit`` on
            JAX) or any callable mapping images ``[B, H, W, 3]`` to features ``[B, ...]``.
        images_or_dataset: a numpy/tensor array ``[n, H, W, 3]``; a pair
            ``(images, labels)`` of arrays; a finite ``keras.utils.PyDataset`` of batches
            ``images`` or ``(images, labels)``; or a ``tf.data.Dataset`` (TensorFlow) of
            images or ``(images, labels[, ...])``, batched or not (unbatched elements are
            batched with ``batch_size``; batched datasets keep their own batch size).
        batch_size: batch size for arrays and unbatched datasets, ``>= 1``.

    Returns:
        ``features`` float32 ``[n, F]`` (features of higher rank are flattened), or
        ``(features, labels int64 [n])`` when the input has labels.

    Raises:
        ValueError: a batch holds NaN or inf pixels. (A compiled encoder may not pass them
            on: TensorFlow fuses batch norm with ReLU, which maps NaN to 0, so broken images
            would otherwise give finite, wrong features.)

    Example:
        >>> import keras, numpy as np
        >>> enc = keras.Sequential([keras.layers.Flatten(), keras.layers.Dense(4)])
        >>> extract_features(enc, np.zeros((10, 8, 8, 3), "float32"), batch_size=4).shape
        (10, 4)
    """
    batch_size = check_batch_size(batch_size)
    dataset, labelled = _as_dataset(images_or_dataset, batch_size)
    encode = _encoder_fn(encoder)
    features, labels = [], []
    seen = 0
    for element in dataset:
        images = element[0] if labelled else element
        images = np.asarray(images)
        if images.dtype.kind == "f":
            bad = int(np.count_nonzero(~np.isfinite(images)))
            if bad:
                raise ValueError(
                    f"`images_or_dataset` has {bad} non-finite (NaN/inf) pixel values among "
                    f"images {seen}..{seen + int(images.shape[0]) - 1}; fix or drop them.")
        seen += int(images.shape[0])
        out = keras.ops.convert_to_numpy(encode(images))
        out = np.asarray(out, dtype=np.float32)
        features.append(out.reshape(out.shape[0], -1))
        if labelled:
            labels.append(np.asarray(element[1]).reshape(-1).astype(np.int64))
    if not features:
        raise ValueError("`images_or_dataset` is empty (dataset empty).")
    features = np.concatenate(features, axis=0)
    if labelled:
        return features, np.concatenate(labels)
    return features
