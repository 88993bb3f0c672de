"""Export encoders as reusable TF2 SavedModels (TF Hub format) with a model card.

    from keras_hardneg.export import export_encoder, load_encoder, load_model_card, ModelCard
"""

from keras_hardneg.export.model_card import ModelCard
from keras_hardneg.export.savedmodel import (
    SavedModelEncoder,
    export_encoder,
    find_device_strings,
    load_encoder,
    load_model_card,
)

__all__ = [
    "ModelCard",
    "SavedModelEncoder",
    "export_encoder",
    "find_device_strings",
    "load_encoder",
    "load_model_card",
]
