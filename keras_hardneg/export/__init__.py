"""Export encoders as reusable TF2 SavedModels (TF Hub format) with a model card.

    from keras_hardneg.export import export_encoder, load_encoder, load_model_card, ModelCard

An export maps inputs of one modality to features ``[B, F]``: images ``[B, H, W, 3]``
float32 in [0, 1] (default), a padded graph batch (the six tensors ``nodes``, ``edges``,
``node_graph``, ``node_mask``, ``edge_mask``, ``graph_mask``; ``input_signature=
graph_input_signature(F)``) or token ids ``[B, L]`` int32 (``input_signature=
text_input_signature(L)``, the tokenizer shipped as ``assets={"tokenizer.json": path}``).
It loads with ``tensorflow_hub.load`` / ``tf.saved_model.load`` (``obj(inputs,
training=False)``), ``obj.signatures["serving_default"](**named inputs)["features"]``,
``keras.layers.TFSMLayer`` (endpoints ``serve`` / ``call_training``),
``hub.KerasLayer(dir, trainable=True)`` under tf_keras (images), and :func:`load_encoder`
under Keras 3 (text: also ``load_encoder(dir).embed_sentences(list_of_str)``); that wrapper
is for inference and fine-tuning under TensorFlow. The Keras-native artifact is the preset
(``preset`` module: :func:`save_preset`, :func:`load_preset`): ``config.json`` +
``model.weights.h5`` that load as a trainable ``keras.Model`` under every backend, without
TensorFlow; every export carries one in ``DIR/preset/``. Modules:
``write`` (export_encoder), ``saved_object`` (what the SavedModel holds), ``load``
(load_encoder, SavedModelEncoder), ``inspection`` (saved_model.pb checks), ``model_card``
(ModelCard, load_model_card), ``signatures`` (the input signatures per modality).

SavedModel export and loading need Keras's TensorFlow backend: ``export_encoder``,
``load_encoder`` and ``SavedModelEncoder`` load TensorFlow when first used, and under another
backend (``KERAS_BACKEND=jax``) using them raises
:class:`~keras_hardneg.data._tf.TensorFlowBackendRequiredError` (a ``RuntimeError``) saying
so: train with JAX, export under TF. ``ModelCard``, ``load_model_card`` and
``find_device_strings``, ``graph_input_signature`` and ``text_input_signature`` work under
every backend without TensorFlow.
"""

import importlib

from keras_hardneg.data._tf import require_tensorflow_backend
from keras_hardneg.export.inspection import find_device_strings
from keras_hardneg.export.model_card import ModelCard, load_model_card
from keras_hardneg.export.preset import (PresetError, find_preset, load_preset,
                                         read_preset_metadata, save_preset)
from keras_hardneg.modalities.signatures import graph_input_signature, text_input_signature

__all__ = [
    "ModelCard",
    "PresetError",
    "SavedModelEncoder",
    "export_encoder",
    "find_device_strings",
    "find_preset",
    "graph_input_signature",
    "load_encoder",
    "load_model_card",
    "load_preset",
    "read_preset_metadata",
    "save_preset",
    "text_input_signature",
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
