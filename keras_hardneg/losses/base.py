"""The base class of every contrastive loss, and the debiasing step they share.

Written with ``keras.ops`` only: every loss runs on every Keras backend.
"""

import math
from typing import Any, Dict, Optional, Tuple

import keras
from keras import ops

from keras_hardneg._validation import describe_interval, outside_interval
from keras_hardneg.losses import core

__all__ = ["ContrastiveLoss", "debiased_log_negatives", "check_float", "effective_negatives"]


def check_float(name: str, value, low=None, high=None, low_inclusive=True,
                high_inclusive=True) -> float:
    """Validates a float hyper-parameter; raises ``ValueError`` naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"`{name}` must be a number; got {value!r}.")
    value = float(value)
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"`{name}` must be finite; got {value}.")
    if outside_interval(value, low, high, low_inclusive, high_inclusive):
        allowed = describe_interval(low, high, low_inclusive, high_inclusive)
        raise ValueError(f"`{name}` must be {allowed}; got {value:g}.")
    return value


def _log_count(num_negatives):
    """``log N`` for an int (a Python float) or a scalar tensor (a float32 tensor)."""
    if isinstance(num_negatives, int):
        return math.log(num_negatives) if num_negatives > 0 else float("-inf")
    return ops.log(ops.cast(num_negatives, "float32"))


def debiased_log_negatives(log_r, pos_logit, num_negatives, tau_plus: float,
                           temperature: float) -> Tuple[Any, Any]:
    """The debiased negative term of Chuang et al. (2020), in log space.

    Computes ``log Ng`` with
    ``Ng = max((R - tau_plus * N * e^pos) / (1 - tau_plus), N * e^(-1/t))``
    from ``log R`` without ever exponentiating a logit.

    Args:
        log_r: ``[A]`` log of the (possibly importance-weighted) negative sum ``R``.
        pos_logit: ``[A]`` positive logit ``cos / t``.
        num_negatives: ``N`` (int or scalar tensor).
        tau_plus: class prior in ``[0, 1)`` (Python float).
        temperature: ``t > 0`` (Python float).

    Returns:
        ``(log_ng [A], clamped [A] bool)``; ``clamped`` marks anchors where the
        lower bound ``N e^{-1/t}`` is active (they get no gradient from negatives).

    Example:
    >>> import numpy as np
    >>> log_ng, clamped = debiased_log_negatives(np.log([10.0], dtype="float32"),
    ...                                          np.zeros(1, "float32"), 4, 0.0, 0.5)
    >>> round(float(log_ng[0]), 4), bool(clamped[0])
    (2.3026, False)
    """
    log_n = _log_count(num_negatives)
    log_clamp = log_n - 1.0 / temperature
    if tau_plus == 0.0:
        candidate = log_r
    else:
        # c = log(tau N e^pos / R); the difference R - tau N e^pos is positive iff c < 0.
        c = math.log(tau_plus) + log_n + pos_logit - log_r
        valid = c < 0.0
        c_safe = ops.where(valid, c, -1.0)
        candidate = log_r + ops.log(-ops.expm1(c_safe)) - math.log1p(-tau_plus)
        candidate = ops.where(valid, candidate, float("-inf"))
    log_ng = ops.maximum(candidate, log_clamp)
    clamped = candidate <= log_clamp
    return log_ng, clamped


def effective_negatives(weights) -> Any:
    """``[A]`` effective number of negatives of each anchor: ``1 / sum_j wn_aj^2`` with the
    normalised weights ``wn_aj = w_aj / sum_j w_aj`` (Kish's effective sample size,
    ``(sum w)^2 / sum w^2``). ``N`` for uniform weights over ``N`` negatives, the band size
    for Ring, fewer the more a loss concentrates on some negatives; 0 for an anchor without
    weight (an empty Ring band).

    Args:
        weights: ``[A, M]`` non-negative weights, 0 where the pool row is not a negative
            (:meth:`ContrastiveLoss.negative_weights`).

    Example:
    >>> import numpy as np
    >>> w = np.array([[1.0, 1.0, 0.0], [3.0, 1.0, 0.0]])
    >>> [round(float(v), 4) for v in effective_negatives(w)]
    [2.0, 1.6]
    """
    w = ops.cast(weights, "float32")
    total = ops.sum(w, axis=-1)
    squares = ops.sum(ops.square(w), axis=-1)
    return ops.where(squares > 0.0, ops.square(total) / ops.maximum(squares, 1e-30), 0.0)


class ContrastiveLoss(keras.losses.Loss):
    """Base class: one anchor-positive-negatives loss, in-batch or against a queue.

    Subclasses implement :meth:`anchor_terms`, mapping a
    :class:`~keras_hardneg.losses.core.ContrastivePairs` to per-anchor losses.
    This class supplies the two call conventions of the library:

    * ``loss(z1, z2)``: SimCLR, two views ``[B, d]``; mean over ``2B`` anchors.
    * ``loss.call_with_negatives(anchors, positives, negatives)``: MoCo, with
      ``[B, d]``, ``[B, d]``, ``[K, d]``; mean over ``B`` anchors.

    and :meth:`compute_terms`, which frameworks use to log diagnostics.
    All arithmetic is float32 whatever the input precision, in ``keras.ops`` (any backend).
    """

    has_clamp = False
    #: True when the loss uses the head's last-layer input (UnReMix's uncertainty).
    needs_features = False

    def __init__(self, temperature: float = 0.5, name: Optional[str] = None,
                 reduction: Optional[str] = "sum_over_batch_size", dtype=None):
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        self.temperature = check_float("temperature", temperature, low=0.0, low_inclusive=False)

    # --- subclass hook ------------------------------------------------------
    def anchor_terms(self, pairs: core.ContrastivePairs) -> Dict[str, Any]:
        """Returns ``{"loss": [A]}`` plus optional ``"clamped": [A] bool``."""
        raise NotImplementedError

    # --- conventions --------------------------------------------------------
    def call(self, y_true, y_pred):
        """Keras entry point: ``y_true`` is ``z1``, ``y_pred`` is ``z2``; ``[2B]`` losses."""
        return self.anchor_terms(core.in_batch_pairs(y_true, y_pred))["loss"]

    def call_with_negatives(self, anchors, positives, negatives, sample_weight=None):
        """The queue convention (MoCo): returns the reduced scalar loss."""
        pairs = core.queue_pairs(anchors, positives, negatives)
        return self.reduce(self.anchor_terms(pairs)["loss"], sample_weight)

    def reduce(self, per_anchor, sample_weight=None):
        """Applies this loss's reduction (``"sum_over_batch_size"``/``"mean"``,
        ``"sum"`` or ``None``/``"none"``) to per-anchor losses."""
        values = ops.cast(per_anchor, "float32")
        if sample_weight is not None:
            values = values * ops.cast(sample_weight, "float32")
        if self.reduction in (None, "none"):
            return values
        if self.reduction == "sum":
            return ops.sum(values)
        return ops.mean(values)

    def compute_terms(self, pairs: core.ContrastivePairs) -> Dict[str, Any]:
        """Per-anchor losses and diagnostics for a :class:`ContrastivePairs`.

        Returns a dict with ``"loss"`` (``[A]``), ``"positive_cosine"`` and
        ``"negative_cosine"`` (batch means) and, for losses with the
        debiasing clamp, ``"clamp_fraction"`` (share of clamped anchors).
        """
        terms = self.anchor_terms(pairs)
        out = {
            "loss": terms["loss"],
            "positive_cosine": ops.mean(pairs.positive_cos),
            "negative_cosine": ops.mean(
                core.masked_mean(pairs.negative_cos, pairs.negative_mask)
            ),
        }
        if self.has_clamp:
            out["clamp_fraction"] = ops.mean(ops.cast(terms["clamped"], "float32"))
        return out

    def negative_weights(self, pairs: core.ContrastivePairs):
        """``[A, M]`` float32: the weight ``w_aj`` with which pool row ``j`` enters anchor
        ``a``'s negative term ``R_a = sum_j w_aj e^{s_aj}`` (``s_aj = cos / t``); 0 where
        the row is not one of the anchor's negatives.

        This base (NT-Xent, and the debiased loss, whose correction subtracts a term tied to
        the positive, not to a negative) weighs every negative 1. The hard-negative loss
        gives ``N softmax_j(beta s_aj)`` (mean 1), UnReMix its mixture (mean 1), Ring 1
        inside its rank band and 0 outside. :func:`effective_negatives` of these weights is
        the effective number of negatives. Computed in ``keras.ops`` from the same
        quantities as the loss, without gradients of interest (a diagnostic).

        Example:
        >>> import numpy as np
        >>> from keras_hardneg.losses import NTXentLoss, in_batch_pairs
        >>> z = np.eye(3, 4, dtype="float32")
        >>> w = NTXentLoss().negative_weights(in_batch_pairs(z, z))
        >>> [float(v) for v in np.asarray(w)[0]]
        [0.0, 1.0, 1.0, 0.0, 1.0, 1.0]
        """
        _, neg = self.logits(pairs)
        return self.weights_of_negatives(pairs, neg)

    def weights_of_negatives(self, pairs: core.ContrastivePairs, neg_logits):
        """:meth:`negative_weights` from the temperature-scaled logits ``[A, M]`` (the hook
        subclasses override)."""
        return self.negative_indicator(pairs, neg_logits)

    @staticmethod
    def negative_indicator(pairs: core.ContrastivePairs, neg_logits):
        """``[A, M]`` float32: 1 where the pool row is a negative of the anchor, else 0."""
        if pairs.negative_mask is None:
            return ops.ones_like(ops.cast(neg_logits, "float32"))
        return ops.cast(pairs.negative_mask, "float32")

    def diagnostics(self, z1, z2) -> Dict[str, Any]:
        """In-batch diagnostics of two views (see :meth:`compute_terms`), without the loss."""
        terms = self.compute_terms(core.in_batch_pairs(z1, z2))
        terms.pop("loss")
        return terms

    # --- helpers for subclasses --------------------------------------------
    def logits(self, pairs: core.ContrastivePairs):
        """``(pos [A], neg [A, M])``: cosines divided by the temperature."""
        t = self.temperature
        return pairs.positive_cos / t, pairs.negative_cos / t

    def get_config(self):
        config = super().get_config()
        config["temperature"] = self.temperature
        return config
