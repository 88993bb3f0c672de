"""The false-negative statistic: the share of an anchor's negatives that share its label.

This module is the one implementation of the concept. Every other route is a call into
:func:`false_negative_rate`:

* :func:`false_negative_rate_of_pairs` (``keras_hardneg.losses.core.false_negative_fraction``
  is the same function): the models' ``false_negative_rate`` metric, from a
  :class:`~keras_hardneg.losses.core.ContrastivePairs` and the labels of its anchors and pool;
* ``keras_hardneg.evaluation.false_negative_rate``: this module's :func:`false_negative_rate`
  itself (a re-export);
* ``keras_hardneg.sampling.false_negative_fraction``: BatchSampler's batch statistic (Yang et
  al., KDD 2023): :func:`false_negative_rate` of a batch's labels, a Python float for NumPy
  input, and a ``ValueError`` for a batch of fewer than two examples.

Definition. An anchor ``a`` with label ``y_a`` and a pool of candidates with labels ``p_m``;
``negative_mask[a, m]`` says which pool rows are ``a``'s negatives. A pair ``(a, m)`` is
*counted* when ``m`` is a negative of ``a`` and both labels are known (``>= 0``; negative labels
mean "unknown": unlabeled image folders, queue slots not yet filled); it is a *false negative*
when, in addition, ``y_a == p_m``. The rate of anchor ``a`` is ``hits_a / counted_a``; the
``"mean"`` reduction is ``sum_a hits_a / sum_a counted_a`` (0 when nothing is counted).

Without ``pool_labels`` the pool is the batch itself and an anchor's negatives are the other
examples, so the mean rate is the fraction of ordered pairs ``(i, j), i != j`` of the batch that
share a label. That is also the SimCLR in-batch rate over the ``2B`` views: each example
appears twice in the pool, so hits and counts both double and the ratio is unchanged.

Written with ``keras.ops`` only (no TensorFlow calls): runs eagerly, inside ``tf.function`` /
``train_step`` and under any Keras backend. Memory is ``O(A * M)``.
"""

from __future__ import annotations

from typing import Any

from keras import ops

__all__ = ["false_negative_rate", "false_negative_rate_of_pairs"]


def _labels_vector(labels, name):
    y = ops.convert_to_tensor(labels)
    shape = tuple(y.shape)
    if len(shape) == 2 and shape[-1] == 1:
        y = ops.reshape(y, (-1,))
    elif len(shape) != 1:
        raise ValueError(f"`{name}` must have shape [B] or [B, 1]; got {shape}.")
    return y


def false_negative_rate(labels: Any, pool_labels: Any | None = None,
                        negative_mask: Any | None = None, reduction: str = "mean",
                        return_count: bool = False) -> Any:
    """Share of counted (anchor, negative) pairs whose labels agree.

    Args:
        labels: ``[A]`` (or ``[A, 1]``) labels of the anchors; ``< 0`` means unknown.
        pool_labels: ``[M]`` (or ``[M, 1]``) labels of the pool rows; ``< 0`` means unknown.
            ``None``: the pool is ``labels`` itself.
        negative_mask: ``[A, M]`` bool, ``True`` where the pool row is one of the anchor's
            negatives. ``None``: every pool row is, except, when ``pool_labels`` is ``None``,
            the anchor itself (the diagonal).
        reduction: ``"mean"`` -> float32 scalar ``sum hits / sum counted`` over all anchors;
            ``"none"`` -> float32 ``[A]`` rate of each anchor.
        return_count: also return the number of counted pairs (float32, scalar or ``[A]``
            like the rate), e.g. to weight a running mean; 0 where nothing is counted.

    Returns:
        The rate in ``[0, 1]`` (0 where nothing is counted), or ``(rate, count)``.

    Example:
        >>> round(float(false_negative_rate([0, 0, 1, 2])), 4)  # 2 same-label pairs / 12
        0.1667
    """
    if reduction not in ("mean", "none"):
        raise ValueError(f"`reduction` must be 'mean' or 'none'; got {reduction!r}.")
    anchors = _labels_vector(labels, "labels")
    pool = anchors if pool_labels is None else _labels_vector(pool_labels, "pool_labels")
    same = ops.equal(anchors[:, None], pool[None, :])                         # [A, M]
    counted = ops.logical_and(ops.greater_equal(anchors, 0)[:, None],
                              ops.greater_equal(pool, 0)[None, :])
    if negative_mask is None and pool_labels is None:
        index = ops.arange(ops.shape(anchors)[0])
        negative_mask = ops.not_equal(index[:, None], index[None, :])        # not itself
    if negative_mask is not None:
        counted = ops.logical_and(counted, ops.cast(negative_mask, "bool"))
    hits = ops.sum(ops.cast(ops.logical_and(same, counted), "float32"), axis=1)   # [A]
    count = ops.sum(ops.cast(counted, "float32"), axis=1)                         # [A]
    if reduction == "mean":
        hits, count = ops.sum(hits), ops.sum(count)
    rate = hits / ops.maximum(count, 1.0)
    return (rate, count) if return_count else rate


def false_negative_rate_of_pairs(pairs: Any, anchor_labels: Any, pool_labels: Any,
                                 return_count: bool = False) -> Any:
    """:func:`false_negative_rate` of a :class:`~keras_hardneg.losses.core.ContrastivePairs`.

    The models' ``false_negative_rate`` metric. Labels of any shape are flattened.

    Args:
        pairs: a ``ContrastivePairs``; its ``negative_mask`` (``None`` in the queue case: every
            pool row is a negative) says which pairs are negatives.
        anchor_labels: ``[A]`` labels of the anchors.
        pool_labels: ``[M]`` labels of the pool rows; negative values mean "unknown" (e.g.
            queue slots not yet filled) and are not counted.
        return_count: also return the number of counted pairs (0 when no pool label is known
            yet), to weight a running mean.

    Returns:
        Scalar float32 (and the count, with ``return_count``).
    """
    return false_negative_rate(ops.reshape(anchor_labels, (-1,)),
                               ops.reshape(pool_labels, (-1,)),
                               negative_mask=pairs.negative_mask, reduction="mean",
                               return_count=return_count)
