"""The false-negative rate of in-batch SimCLR negatives, from the batch's labels."""

import tensorflow as tf

__all__ = ["false_negative_rate"]


def false_negative_rate(labels, reduction="mean"):
    """Fraction of a SimCLR anchor's negatives that share its class.

    Definition. A batch of ``B`` examples with labels ``y`` gives ``2B`` views; the anchor
    ``(i, v)`` (view ``v`` of example ``i``) has its other view as positive and the
    ``2B - 2`` views of the other examples as negatives. Its false negatives are the views
    of examples ``j != i`` with ``y_j == y_i`` (each such example counts twice, once per
    view), so its false-negative rate is

        ``r_i = 2 * #{j != i : y_j == y_i} / (2B - 2) = #{j != i : y_j == y_i} / (B - 1)``,

    the same for both views of ``i``. With ``reduction="mean"`` the result is the mean over
    the ``2B`` anchors, ``sum_i #{j != i : y_j == y_i} / (B (B - 1))``: the fraction of
    ordered pairs of distinct examples that share a class. A batch of one example has no
    negatives; its rate is defined as 0. Labels are compared for equality only (any ints).

    TensorFlow ops only (``O(B^2)`` memory), usable inside ``train_step``.

    Args:
        labels: int ``[B]`` (or ``[B, 1]``) class ids of the batch.
        reduction: ``"mean"`` -> float32 scalar; ``"none"`` -> float32 ``[B]`` rates
            ``r_i`` per example (the same for its two views).

    Returns:
        float32 scalar or ``[B]`` tensor in ``[0, 1]``.

    Example:
        >>> round(float(false_negative_rate([0, 0, 1, 2])), 4)  # 2 same-class pairs / 12
        0.1667
    """
    if reduction not in ("mean", "none"):
        raise ValueError(f"`reduction` must be 'mean' or 'none'; got {reduction!r}.")
    labels = tf.convert_to_tensor(labels)
    if labels.shape.rank == 2 and labels.shape[-1] == 1:
        labels = labels[:, 0]
    if labels.shape.rank != 1:
        raise ValueError(f"`labels` must have shape [B] or [B, 1]; got {labels.shape}.")
    batch = tf.shape(labels)[0]
    same = tf.cast(tf.equal(labels[:, None], labels[None, :]), tf.float32)   # [B, B]
    same_other = tf.reduce_sum(same, axis=1) - 1.0                           # excludes self
    denominator = tf.maximum(tf.cast(batch - 1, tf.float32), 1.0)
    per_example = same_other / denominator                                   # [B]
    if reduction == "none":
        return per_example
    return tf.math.divide_no_nan(tf.reduce_sum(per_example), tf.cast(batch, tf.float32))
