"""Contrastive frameworks as ``keras.Model`` subclasses trained with ``fit()``."""

from keras_hardneg.models.base import ContrastiveModel
from keras_hardneg.models.moco import MoCo
from keras_hardneg.models.simclr import SimCLR

__all__ = ["ContrastiveModel", "MoCo", "SimCLR"]
