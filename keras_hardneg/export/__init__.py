"""Export encoders as reusable TF2 SavedModels (TF Hub format) with a model card.

    from keras_hardneg.export import export_encoder, load_encoder, load_model_card, ModelCard

An export (images ``[B, H, W, 3]`` float32 in [0, 1] -> features ``[B, F]``) loads with
``tensorflow_hub.load`` / ``tf.saved_model.load`` (``obj(images, training=False)``),
``obj.signatures["serving_default"](images=...)["features"]``, ``keras.layers.TFSMLayer``
(endpoints ``serve`` / ``call_training``), ``hub.KerasLayer(dir, trainable=True)`` under
tf_keras, and :func:`load_encoder` under Keras 3. Modules: ``write`` (export_encoder),
``saved_object`` (what the SavedModel holds), ``load`` (load_encoder, SavedModelEncoder),
``inspection`` (saved_model.pb checks), ``model_card`` (ModelCard, load_model_card).

SavedModel export and loading need Keras's TensorFlow backend: ``export_encoder``,
``load_encoder`` and ``SavedModelEncoder`` load TensorFlow when first used, and under another
backend (``KERAS_BACKEND=jax``) using them raises
:class:`~keras_hardneg.data._tf.TensorFlowBackendRequiredError` (a ``RuntimeError``) saying
so: train with JAX, export under TF. ``ModelCard``, ``load_model_card`` and
``find_device_strings`` work under every backend without TensorFlow.
"""

import importlib

from keras_hardneg.data._tf import require_tensorflow_backend
from keras_hardneg.export.inspection import find_device_strings
from keras_hardneg.export.model_card import ModelCard, load_model_card

__all__ = [
    "ModelCard",
    "SavedModelEncoder",
    "export_encoder",
    "find_device_strings",
    "load_encoder",
    "load_model_card",
]

_NEEDS_TENSORFLOW = {"export_encoder": "write", "load_encoder": "load",
                     "SavedModelEncoder": "load"}


def __getattr__(name):
    if name in _NEEDS_TENSORFLOW:
        require_tensorflow_backend(f"keras_hardneg.export.{name}")
        module = importlib.import_module(f"keras_hardneg.export.{_NEEDS_TENSORFLOW[name]}")
        value = getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'keras_hardneg.export' has no attribute {name!r}")


def __dir__():
    return sorted(__all__)
