"""Contrastive losses: NT-Xent, debiased, hard-negative, Ring and UnReMix.

Every loss is a :class:`keras.losses.Loss` with two call conventions:
``loss(z1, z2, sample_weight=None)`` (in-batch, SimCLR) and
``loss.call_with_negatives(anchors, positives, negatives, sample_weight=None)`` (queue,
MoCo), both reduced by the loss's ``reduction`` with Keras's semantics
(:meth:`ContrastiveLoss.reduce`); and, for retrieval tuples (query, positive, ``K`` mined
negatives), ``loss.call_with_mined_negatives(queries, positives, negatives [B, K, d])`` or,
for ``model.compile``, :class:`MinedNegativesLoss` wrapping any of them.
"""

import keras

from keras_hardneg.losses.base import ContrastiveLoss, effective_negatives
from keras_hardneg.losses.core import ContrastivePairs, in_batch_pairs, mined_pairs, queue_pairs
from keras_hardneg.losses.debiased import DebiasedContrastiveLoss
from keras_hardneg.losses.hyperparameters import ANNEALING
from keras_hardneg.losses.guide_guard import guard_negatives
from keras_hardneg.losses.hard_negative import HardNegativeContrastiveLoss
from keras_hardneg.losses.hardness import HARDNESS_MODES
from keras_hardneg.losses.mined_negatives import MinedNegativesLoss
from keras_hardneg.losses.nt_xent import NTXentLoss
from keras_hardneg.losses.ring import RingContrastiveLoss
from keras_hardneg.losses.unremix import UnReMixContrastiveLoss
from keras_hardneg.registry import LOSSES, ConfigError

#: The ``annealing`` recipe keys and their :class:`~keras_hardneg.registry.Param` (a loss
#: class's ``annealing`` maps the keys it has to the hyper-parameter each one changes).
ANNEALING_PARAMS = ANNEALING

__all__ = [
    "ContrastiveLoss",
    "ContrastivePairs",
    "DebiasedContrastiveLoss",
    "HardNegativeContrastiveLoss",
    "MinedNegativesLoss",
    "NTXentLoss",
    "RingContrastiveLoss",
    "UnReMixContrastiveLoss",
    "LOSS_ARGUMENTS",
    "ANNEALING_PARAMS",
    "annealing_keys",
    "baseline_names",
    "effective_negatives",
    "get",
    "guard_negatives",
    "HARDNESS_MODES",
    "in_batch_pairs",
    "mined_pairs",
    "queue_pairs",
]


#: Keyword arguments every loss takes besides its hyper-parameters (``keras.losses.Loss``'s).
LOSS_ARGUMENTS = ("name", "reduction", "dtype")


def annealing_keys() -> dict:
    """``annealing`` recipe key -> the loss hyper-parameter its schedule changes, over the
    registered losses (each loss class's ``annealing``; their :class:`Param` in
    :data:`ANNEALING_PARAMS`).

    Example:
    >>> annealing_keys()["beta_changes"], annealing_keys()["ring_end"]
    ('beta', 'upper_percentile')
    """
    out = {}
    for name in LOSSES.names():
        out.update(getattr(LOSSES.get(name).factory, "annealing", {}))
    return out


def baseline_names() -> list:
    """The registered losses that are the family's baseline (NT-Xent: registered with
    ``baseline=True``), which the others are compared with (the zoo's NT-Xent twins)."""
    return LOSSES.names(baseline=True)


def _by_class_name():
    return {LOSSES.get(n).factory.__name__: n for n in LOSSES.names()}


def get(identifier, **kwargs):
    """A contrastive loss from what ``keras.losses.get`` accepts, and the registry's names.

    ``identifier``: None (returns None, as Keras); a loss instance (returned as is); a
    serialized config ``{"class_name": ..., "config": ...}`` (the output of
    ``keras.saving.serialize_keras_object`` or ``keras.losses.serialize``); a registered name (``"nt_xent"``, ``"debiased"``,
    ``"hard"``, ``"ring"``, ``"unremix"``, or an alias) or class name
    (``"HardNegativeContrastiveLoss"``); a loss class; or a recipe section
    ``{"name": "hard", "beta": 2.0}``. ``kwargs`` (with a name or class) are the loss's
    hyper-parameters and ``name``, ``reduction``, ``dtype``.

    Raises:
        ValueError: an identifier that is no contrastive loss of the family, or an unknown
            key (a :class:`~keras_hardneg.registry.ConfigError`, naming what is allowed); a
            bad value raises what the loss's constructor raises (the same ``ValueError``).

    Example:
    >>> import keras
    >>> loss = get("hard", beta=2.0, reduction="sum")
    >>> type(get(keras.saving.serialize_keras_object(loss))).__name__
    'HardNegativeContrastiveLoss'
    """
    if identifier is None and not kwargs:
        return None
    if isinstance(identifier, ContrastiveLoss):
        if kwargs:
            raise ValueError(f"keyword arguments ({', '.join(sorted(kwargs))}) apply to a loss "
                             f"name or class, not to the instance {identifier!r}.")
        return identifier
    if isinstance(identifier, dict) and "class_name" in identifier and not kwargs:
        try:
            obj = keras.saving.deserialize_keras_object(identifier)
        except (TypeError, ValueError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise ValueError(f"cannot build a loss from {identifier.get('class_name')!r} "
                             f"({first}); allowed: {', '.join(LOSSES.names())} or their "
                             "serialized configs.") from None
        if isinstance(obj, ContrastiveLoss):
            return obj
        raise ValueError(f"{identifier.get('class_name')!r} is not a contrastive loss of "
                         f"keras_hardneg; allowed: {', '.join(LOSSES.names())}.")
    if isinstance(identifier, dict):  # a recipe section
        kwargs = {**{k: v for k, v in identifier.items() if k != "name"}, **kwargs}
        identifier = identifier.get("name")
    if isinstance(identifier, type) and issubclass(identifier, ContrastiveLoss):
        return identifier(**kwargs)
    if isinstance(identifier, str):
        name = _by_class_name().get(identifier, identifier)
        component = LOSSES.get(name)  # ConfigError naming the allowed names
        allowed = sorted(set(component.params) | set(LOSS_ARGUMENTS))
        unknown = sorted(set(kwargs) - set(allowed))
        if unknown:
            raise ConfigError(f"unknown loss key '{unknown[0]}' for loss '{component.name}'; "
                              f"allowed: {', '.join(allowed)}.")
        # The constructor checks the values: the same error as calling the class.
        return component.factory(**kwargs)
    raise ValueError(f"cannot interpret {identifier!r} as a contrastive loss of keras_hardneg; "
                     f"allowed: a loss name "
                     f"({', '.join(LOSSES.names())}), a class name, a serialized config, a "
                     "class or an instance.")
