"""Contrastive losses: NT-Xent, debiased, hard-negative, Ring and UnReMix.

Every loss is a :class:`keras.losses.Loss` with two call conventions:
``loss(z1, z2)`` (in-batch, SimCLR) and
``loss.call_with_negatives(anchors, positives, negatives)`` (queue, MoCo).
"""

from keras_hardneg.losses.base import ContrastiveLoss, effective_negatives
from keras_hardneg.losses.core import ContrastivePairs, in_batch_pairs, queue_pairs
from keras_hardneg.losses.debiased import DebiasedContrastiveLoss
from keras_hardneg.losses.hard_negative import HardNegativeContrastiveLoss
from keras_hardneg.losses.nt_xent import NTXentLoss
from keras_hardneg.losses.ring import RingContrastiveLoss
from keras_hardneg.losses.unremix import UnReMixContrastiveLoss
from keras_hardneg.registry import LOSSES

__all__ = [
    "ContrastiveLoss",
    "ContrastivePairs",
    "DebiasedContrastiveLoss",
    "HardNegativeContrastiveLoss",
    "NTXentLoss",
    "RingContrastiveLoss",
    "UnReMixContrastiveLoss",
    "effective_negatives",
    "get",
    "in_batch_pairs",
    "queue_pairs",
]


def get(identifier, **kwargs):
    """Returns a loss from its registered name (``"nt_xent"``, ``"debiased"``, ``"hard"``,
    ``"ring"``, ``"unremix"``, or an alias) and keyword hyper-parameters, or passes a
    :class:`ContrastiveLoss` instance through. Unknown names and keys raise
    :class:`~keras_hardneg.registry.ConfigError` naming what is allowed."""
    if isinstance(identifier, ContrastiveLoss):
        return identifier
    return LOSSES.build(identifier, **kwargs)
