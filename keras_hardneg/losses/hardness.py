"""Additive hardness weighting of the negative logits (sentence-transformers' school).

sentence-transformers' ``MultipleNegativesRankingLoss`` (2026; its documentation of
``hardness_mode`` / ``hardness_strength``, after Lan et al. 2025, LLaVE, Eq. 5, and Schechter
Vera et al. 2025, EmbeddingGemma) adds ``strength * stop_gradient(cos_aj)`` to the logit
``cos_aj / t`` of some of a query's negatives, the positive left as it is::

    s_aj = cos_aj / t + strength * sg(cos_aj)      (j a negative the mode selects)

so a harder negative (a higher cosine) weighs more in the softmax's denominator, with a
gradient that is still ``1 / t`` times the cosine's. The offset is not divided by ``t``.
Which negatives, per query (``hardness_mode``):

* ``"in_batch_negatives"``: the other examples' positives and mined negatives;
* ``"hard_negatives"``: the query's own mined negatives only;
* ``"all_negatives"``: both.

This is the behaviour the library documents, written here from that description. Our own
school of hardness, the multiplicative importance tilt ``e^{beta s_aj}`` of Robinson et al.
(ICLR 2021, HCL), is :class:`~keras_hardneg.losses.HardNegativeContrastiveLoss`; the two
compose (the tilt then applies to the shifted logits). The offset reaches every loss of the
family through :attr:`~keras_hardneg.losses.core.ContrastivePairs.negative_offset`, which
:meth:`~keras_hardneg.losses.ContrastiveLoss.logits` adds.
"""

import math
from typing import Any, Optional

from keras import ops

__all__ = ["HARDNESS_MODES", "check_hardness", "hardness_offset"]

#: The ``hardness_mode`` values (sentence-transformers' names); None switches it off.
HARDNESS_MODES = ("in_batch_negatives", "hard_negatives", "all_negatives")


def check_hardness(strength, mode: Optional[str]) -> float:
    """Validates ``hardness_strength`` (a finite number ``>= 0``) and ``hardness_mode``
    (None or one of :data:`HARDNESS_MODES`); returns the strength as a float.

    A positive strength without a mode raises (sentence-transformers ignores it silently).

    Example:
    >>> check_hardness(5, "hard_negatives")
    5.0
    """
    if (isinstance(strength, bool) or not isinstance(strength, (int, float))
            or not math.isfinite(strength) or strength < 0):
        raise ValueError(f"`hardness_strength` must be a finite number >= 0; got {strength!r}.")
    strength = float(strength)
    if mode is not None and mode not in HARDNESS_MODES:
        raise ValueError(f"`hardness_mode` must be None or one of {list(HARDNESS_MODES)}; "
                         f"got {mode!r}.")
    if mode is None and strength > 0.0:
        raise ValueError(f"`hardness_strength` = {strength:g} needs a `hardness_mode` (one of "
                         f"{list(HARDNESS_MODES)}); got None.")
    return strength


def hardness_offset(negative_cos, selected, strength: float) -> Any:
    """``[A, M]`` float32 logit offsets: ``strength * stop_gradient(cos)`` where ``selected``,
    0 elsewhere.

    Args:
        negative_cos: ``[A, M]`` cosines of the anchors with the pool rows.
        selected: ``[A, M]`` bool, the negatives the mode selects.
        strength: ``>= 0`` (Python float).

    Example:
    >>> import numpy as np
    >>> cos = np.array([[0.5, -0.2]], "float32")
    >>> [round(float(v), 4) for v in hardness_offset(cos, np.array([[True, False]]), 2.0)[0]]
    [1.0, 0.0]
    """
    cos = ops.stop_gradient(ops.cast(negative_cos, "float32"))
    return ops.where(selected, strength * cos, ops.zeros_like(cos))
