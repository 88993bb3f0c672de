"""The metrics ``fit`` shows for the contrastive frameworks.

``loss``, ``positive_cosine`` and ``negative_cosine`` (mean cosine similarity of positive
and negative pairs, the alignment/uniformity view of Wang & Isola 2020, "Understanding
Contrastive Representation Learning through Alignment and Uniformity"),
``clamp_fraction`` (losses with a clamp: debiased, hard, UnReMix), ``false_negative_rate``
(share of negatives with the anchor's label, when labels are given) and
``nonfinite_steps`` (updates skipped because the step was not finite) and ``dropped_batches``
(batches not trained on because they had no negative, e.g. a final batch of one example; they
count in no other metric).

Example:
>>> tracked = ContrastiveMetrics()
>>> [m.name for m in tracked.metrics(has_clamp=False)][-3:]
['false_negative_rate', 'nonfinite_steps', 'dropped_batches']
"""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from keras_hardneg.losses import core

__all__ = ["ContrastiveMetrics"]


class ContrastiveMetrics:
    """The trackers, and how one step's loss terms update them."""

    def __init__(self):
        self.loss = keras.metrics.Mean(name="loss")
        self.positive_cosine = keras.metrics.Mean(name="positive_cosine")
        self.negative_cosine = keras.metrics.Mean(name="negative_cosine")
        self.clamp = keras.metrics.Mean(name="clamp_fraction")
        self.false_negative = keras.metrics.Mean(name="false_negative_rate")
        self.nonfinite = keras.metrics.Sum(name="nonfinite_steps")
        self.dropped = keras.metrics.Sum(name="dropped_batches")

    def metrics(self, has_clamp: bool) -> list:
        """The trackers shown, in order (``clamp_fraction`` only for a loss with a clamp)."""
        tracked = [self.loss, self.positive_cosine, self.negative_cosine]
        if has_clamp:
            tracked.append(self.clamp)
        return tracked + [self.false_negative, self.nonfinite, self.dropped]

    def record(self, terms: dict, loss_value: Any, pairs: Any = None,
               anchor_labels: Any = None, pool_labels: Any = None,
               false_negatives: Any = None, usable: Any = True) -> None:
        """Updates the trackers from the loss's ``terms``, and the false-negative rate
        from ``false_negatives`` (``(rate, count)``) or from ``pairs`` when both label
        sets are given. ``usable`` False (a Python bool, or a scalar bool tensor when known
        only at run time): the batch had no negative and was dropped; it counts in
        ``dropped_batches`` only."""
        if usable is False:
            self.dropped.update_state(1.0)
            return
        weight = None
        if usable is not True:
            weight = ops.cast(usable, "float32")
            self.dropped.update_state(1.0 - weight)

        def update(metric, value):
            if weight is None:
                metric.update_state(value)
            else:  # a dropped batch weighs 0 (its values are finite: see the losses' rule)
                value = ops.cast(value, "float32")
                metric.update_state(ops.where(usable, value, ops.zeros_like(value)),
                                    sample_weight=weight)

        update(self.loss, loss_value)
        update(self.positive_cosine, terms["positive_cosine"])
        update(self.negative_cosine, terms["negative_cosine"])
        if "clamp_fraction" in terms:
            update(self.clamp, terms["clamp_fraction"])
        if false_negatives is None and pairs is not None and anchor_labels is not None \
                and pool_labels is not None:
            false_negatives = core.false_negative_fraction(
                pairs, anchor_labels, pool_labels, return_count=True)
        if false_negatives is not None:
            fraction, count = false_negatives
            # Batches with no known pool label (an empty MoCo queue) do not count.
            counted = ops.cast(count > 0, "float32")
            self.false_negative.update_state(
                fraction, sample_weight=counted if weight is None else counted * weight)

    def count_step(self, finite: Any) -> None:
        """Counts a skipped (non-finite) update."""
        self.nonfinite.update_state(1.0 - ops.cast(finite, "float32"))
