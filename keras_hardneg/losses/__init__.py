"""Contrastive losses: NT-Xent, debiased, hard-negative, Ring and UnReMix.

Every loss is a :class:`keras.losses.Loss` with two call conventions:
``loss(z1, z2)`` (in-batch, SimCLR) and
``loss.call_with_negatives(anchors, positives, negatives)`` (queue, MoCo).
"""

from keras_hardneg.losses.base import ContrastiveLoss
from keras_hardneg.losses.core import ContrastivePairs, in_batch_pairs, queue_pairs
from keras_hardneg.losses.debiased import DebiasedContrastiveLoss
from keras_hardneg.losses.hard_negative import HardNegativeContrastiveLoss
from keras_hardneg.losses.nt_xent import NTXentLoss
from keras_hardneg.losses.ring import RingContrastiveLoss
from keras_hardneg.losses.unremix import UnReMixContrastiveLoss

__all__ = [
    "ContrastiveLoss",
    "ContrastivePairs",
    "DebiasedContrastiveLoss",
    "HardNegativeContrastiveLoss",
    "NTXentLoss",
    "RingContrastiveLoss",
    "UnReMixContrastiveLoss",
    "get",
    "in_batch_pairs",
    "queue_pairs",
]

_ALIASES = {
    "nt_xent": NTXentLoss,
    "ntxent": NTXentLoss,
    "infonce": NTXentLoss,
    "debiased": DebiasedContrastiveLoss,
    "hard": HardNegativeContrastiveLoss,
    "hard_negative": HardNegativeContrastiveLoss,
    "ring": RingContrastiveLoss,
    "unremix": UnReMixContrastiveLoss,
}


def get(identifier, **kwargs):
    """Returns a loss from a short name (``"nt_xent"``, ``"debiased"``, ``"hard"``,
    ``"ring"``, ``"unremix"``) and keyword hyper-parameters, or passes a
    :class:`ContrastiveLoss` instance through."""
    if isinstance(identifier, ContrastiveLoss):
        return identifier
    key = str(identifier).lower().replace("-", "_")
    if key not in _ALIASES:
        raise ValueError(
            f"Unknown loss {identifier!r}; choose one of {sorted(set(_ALIASES))}."
        )
    return _ALIASES[key](**kwargs)
