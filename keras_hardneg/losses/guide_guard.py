"""A guide model's false-negative guard (GISTEmbed: Solatorio 2024).

GISTEmbed ("Guided In-sample Selection of Training Negatives for Text Embedding
Fine-tuning", Solatorio 2024, arXiv:2402.16829) scores every (anchor, candidate) pair with a
guide encoder as well, and drops from an anchor's negatives every candidate the guide finds
at least about as relevant as the anchor's own positive: a likely false negative (an
unlabelled relevant document, a duplicate). With the guide's cosines ``g``::

    dropped_aj  iff  g(a, j) > threshold_a
    threshold_a = g(a, a+) - margin                 ("absolute")
    threshold_a = g(a, a+) - |g(a, a+)| * margin    ("relative")

the two margin strategies of sentence-transformers' ``GISTEmbedLoss`` (as its documentation
states them). ``margin = 0`` drops the candidates the guide ranks above the positive; a
larger margin drops more, a negative one fewer (``margin <= -2``, absolute, drops none: a
cosine is at most 1). The anchor's positive is never a negative, so it is never dropped.
The same margins select mined negatives offline (NV-Retriever's positive-aware mining,
Moreira et al. 2024: ``TopK-MarginPos`` / ``TopK-PercPos``); :mod:`keras_hardneg.sampling`
does that when mining, this guard while training, on every batch's pool (the in-batch
negatives included).

The guide is a frozen encoder's embeddings of the same rows (laid out as the training
embeddings, so that its pairs have the same ``[A, M]`` layout), or the encoder itself under
``stop_gradient`` (``guard="self"``). Masks only: no gradient flows through the guide.
"""

import dataclasses
import math
from typing import Any

from keras import ops

from keras_hardneg.losses import core

__all__ = ["GUARD_STRATEGIES", "check_guard", "guard_threshold", "guard_negatives"]

#: The margin strategies of the guard (sentence-transformers' GISTEmbedLoss names).
GUARD_STRATEGIES = ("absolute", "relative")


def check_guard(margin, strategy: str) -> float:
    """Validates ``guard_margin`` (a finite number) and ``guard_strategy`` (one of
    :data:`GUARD_STRATEGIES`); returns the margin as a float.

    Example:
    >>> check_guard(0.1, "relative")
    0.1
    """
    if (isinstance(margin, bool) or not isinstance(margin, (int, float))
            or not math.isfinite(margin)):
        raise ValueError(f"`guard_margin` must be a finite number; got {margin!r}.")
    margin = float(margin)
    if strategy not in GUARD_STRATEGIES:
        raise ValueError(f"`guard_strategy` must be one of {list(GUARD_STRATEGIES)}; got "
                         f"{strategy!r}.")
    return margin


def guard_threshold(guide_positive_cos, margin: float, strategy: str = "absolute") -> Any:
    """``[A]`` thresholds: a candidate whose guide cosine is above its anchor's is dropped.

    Args:
        guide_positive_cos: ``[A]`` the guide's cosine of each anchor with its positive.
        margin: the margin (Python float).
        strategy: ``"absolute"`` (``g - margin``) or ``"relative"`` (``g - |g| margin``).

    Example:
    >>> import numpy as np
    >>> [round(float(v), 4) for v in guard_threshold(np.array([0.8, -0.5]), 0.1, "relative")]
    [0.72, -0.55]
    """
    g = ops.cast(guide_positive_cos, "float32")
    if strategy == "absolute":
        return g - margin
    return g - ops.abs(g) * margin


def guard_negatives(pairs: core.ContrastivePairs, guide_pairs: core.ContrastivePairs,
                    margin: float = 0.0,
                    strategy: str = "absolute") -> core.ContrastivePairs:
    """``pairs`` without the negatives the guide flags as false negatives.

    Args:
        pairs: the training :class:`~keras_hardneg.losses.core.ContrastivePairs` ``[A, M]``.
        guide_pairs: the guide's pairs of the same rows, same layout (``[A, M]``; built by the
            same function with the same options from the guide's embeddings).
        margin, strategy: see the module docstring.

    Returns:
        The pairs with ``negative_mask`` ``[A, M]`` narrowed and ``num_negatives`` the
        per-anchor ``[A]`` counts (an anchor left without negatives has loss 0).

    Example:
    >>> import numpy as np
    >>> from keras_hardneg.losses.core import mined_pairs
    >>> q = p = np.eye(3, 4, dtype="float32"); n = np.zeros((3, 0, 4), "float32")
    >>> guide = mined_pairs(np.ones((3, 2), "float32"), np.ones((3, 2), "float32"), n[..., :2])
    >>> guarded = guard_negatives(mined_pairs(q, p, n), guide, margin=0.5)
    >>> np.asarray(guarded.num_negatives).tolist()  # the guide sees every pair alike
    [0, 0, 0]
    """
    threshold = guard_threshold(ops.stop_gradient(guide_pairs.positive_cos), margin, strategy)
    flagged = ops.stop_gradient(guide_pairs.negative_cos) > threshold[:, None]
    kept = ops.logical_not(flagged)
    if pairs.negative_mask is not None:
        kept = ops.logical_and(pairs.negative_mask, kept)
    count = ops.sum(ops.cast(kept, "int32"), axis=1)
    return dataclasses.replace(pairs, negative_mask=kept, num_negatives=count)
