"""Export encoders as reusable TF2 SavedModels (TF Hub format) with a model card.

    from keras_hardneg.export import export_encoder, load_encoder, load_model_card, ModelCard

An export (images ``[B, H, W, 3]`` float32 in [0, 1] -> features ``[B, F]``) loads with
``tensorflow_hub.load`` / ``tf.saved_model.load`` (``obj(images, training=False)``),
``obj.signatures["serving_default"](images=...)["features"]``, ``keras.layers.TFSMLayer``
(endpoints ``serve`` / ``call_training``), ``hub.KerasLayer(dir, trainable=True)`` under
tf_keras, and :func:`load_encoder` under Keras 3. Modules: ``write`` (export_encoder),
``saved_object`` (what the SavedModel holds), ``load`` (load_encoder, SavedModelEncoder,
load_model_card), ``inspection`` (saved_model.pb checks), ``model_card``.
"""

from keras_hardneg.export.inspection import find_device_strings
from keras_hardneg.export.load import SavedModelEncoder, load_encoder, load_model_card
from keras_hardneg.export.model_card import ModelCard
from keras_hardneg.export.write import export_encoder

__all__ = [
    "ModelCard",
    "SavedModelEncoder",
    "export_encoder",
    "find_device_strings",
    "load_encoder",
    "load_model_card",
]
