"""TensorFlow, only where it is needed.

``import keras_hardneg`` and training under ``KERAS_BACKEND=jax`` never import TensorFlow
(issue 15). The modules that are TensorFlow-only by nature (``tf.data`` pipelines, TFDS,
SavedModel export, ScaNN) import it through :func:`require_tensorflow` inside the function
that needs it, so that a machine without TensorFlow gets an error naming what needs it.

Example:
>>> from keras_hardneg.data._tf import tensorflow_backend
>>> isinstance(tensorflow_backend(), bool)
True
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["TensorFlowBackendRequiredError", "TensorFlowRequiredError", "is_tf_dataset",
           "is_tf_tensor", "require_tensorflow", "require_tensorflow_backend",
           "tensorflow_backend"]


class TensorFlowRequiredError(ImportError):
    """A TensorFlow-only feature was used where TensorFlow cannot be imported."""


def tensorflow_backend() -> bool:
    """Whether Keras runs on the TensorFlow backend (``keras.backend.backend()``)."""
    import keras

    return keras.backend.backend() == "tensorflow"


def require_tensorflow(what: str) -> Any:
    """``import tensorflow`` for ``what``, or a :class:`TensorFlowRequiredError` naming it.

    Args:
        what: the feature, e.g. ``"make_dataset (a tf.data pipeline)"``.
    """
    try:
        import tensorflow as tf
    except ImportError as err:
        raise TensorFlowRequiredError(
            f"{what} needs TensorFlow, which cannot be imported here ({err}). Install it "
            "(`pip install keras-hardneg` brings tensorflow) or use the TensorFlow-free "
            "route: numpy arrays, keras.utils.PyDataset (sampling.make_py_dataset), and "
            "training under KERAS_BACKEND=jax.") from err
    return tf


def is_tf_tensor(x: Any) -> bool:
    """Whether ``x`` is a TensorFlow tensor or variable (without importing TensorFlow)."""
    if "tensorflow" not in sys.modules:
        return False
    return type(x).__module__.startswith("tensorflow")


def is_tf_dataset(x: Any) -> bool:
    """Whether ``x`` is a ``tf.data.Dataset`` (without importing TensorFlow)."""
    if "tensorflow" not in sys.modules:
        return False
    return any(c.__module__.startswith("tensorflow.python.data") for c in type(x).__mro__)


class TensorFlowBackendRequiredError(RuntimeError):
    """A feature that needs Keras's TensorFlow backend was used under another backend."""


def require_tensorflow_backend(what: str) -> Any:
    """``import tensorflow`` for ``what``, which needs Keras's TensorFlow backend (SavedModel
    export and loading); a :class:`TensorFlowBackendRequiredError` naming it under another."""
    import keras

    backend = keras.backend.backend()
    if backend != "tensorflow":
        raise TensorFlowBackendRequiredError(
            f"{what}: SavedModel export needs the TensorFlow backend, and Keras runs on "
            f"{backend!r}. Train with JAX, export under TF: keep the weights (the run's "
            "backup/, or model.save_weights), then in a process with KERAS_BACKEND=tensorflow "
            "rebuild the model, load_weights and export (`keras-hardneg export RUN_DIR`).")
    return require_tensorflow(what)
