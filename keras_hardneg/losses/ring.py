"""Ring: conditional negative sampling (Wu et al., ICLR 2021)."""

import math

import keras
import tensorflow as tf

from keras_hardneg.losses import core
from keras_hardneg.losses.base import ContrastiveLoss, check_float

__all__ = ["RingContrastiveLoss", "ring_band"]


def ring_band(num_negatives, lower_percentile, upper_percentile):
    """The rank band ``[floor(lower/100 * N), floor(upper/100 * N))`` of Ring.

    Ranks count from the most similar negative (rank 0). Returns Python ints
    when ``num_negatives`` is static, else int32 tensors.
    """
    if isinstance(num_negatives, int):
        return (
            math.floor(lower_percentile / 100.0 * num_negatives),
            math.floor(upper_percentile / 100.0 * num_negatives),
        )
    n = tf.cast(num_negatives, tf.float64)
    lo = tf.cast(tf.floor(lower_percentile / 100.0 * n), tf.int32)
    hi = tf.cast(tf.floor(upper_percentile / 100.0 * n), tf.int32)
    return lo, hi


@keras.saving.register_keras_serializable(package="keras_hardneg")
class RingContrastiveLoss(ContrastiveLoss):
    """Conditional negative sampling of Wu et al., "Conditional Negative
    Sampling for Contrastive Learning of Visual Representations" (ICLR 2021).

    For each anchor, only the negatives whose similarity rank (most similar
    first, rank 0) lies in the band ``[floor(lower/100 * N), floor(upper/100 * N))``
    are kept: too-similar ones (likely false negatives) and too-easy ones are
    dropped. The loss is ``logsumexp([pos_a, band_a]) - pos_a``. The band is
    found with ``top_k`` over the upper cut, never a full sort of the pool.
    ``lower=0, upper=100`` is NT-Xent / MoCo InfoNCE exactly. An empty band
    (``floor(upper N) <= floor(lower N)``) gives a zero loss for that anchor.

    Released settings: MoCo queue ``t=0.07, K=65536`` with band 1-10; SimCLR
    ``t=0.07`` with band 5-50. The paper anneals ``upper`` linearly from 100 to
    10 (see :class:`keras_hardneg.callbacks.RingAnnealing`).

    Args:
        temperature: ``t > 0``.
        lower_percentile, upper_percentile: ``0 <= lower < upper <= 100``.

    Example:
    >>> import numpy as np
    >>> z1, z2 = np.random.default_rng(0).normal(size=(2, 8, 16)).astype("float32")
    >>> loss = RingContrastiveLoss(temperature=0.5, lower_percentile=5, upper_percentile=50)
    >>> float(loss(z1, z2)) >= 0
    True
    """

    def __init__(self, temperature=0.5, lower_percentile=5.0, upper_percentile=50.0, **kwargs):
        super().__init__(temperature=temperature, **kwargs)
        self.set_band(lower_percentile, upper_percentile)

    def set_band(self, lower_percentile, upper_percentile):
        """Sets both percentiles, validating ``0 <= lower < upper <= 100``."""
        lower = check_float("lower_percentile", lower_percentile, low=0.0, high=100.0,
                            high_inclusive=False)
        upper = check_float("upper_percentile", upper_percentile, low=0.0, high=100.0,
                            low_inclusive=False)
        if not lower < upper:
            raise ValueError(
                "`lower_percentile` must be < `upper_percentile` (0 <= lower < upper <= 100); "
                f"got lower={lower:g}, upper={upper:g}."
            )
        self._lower, self._upper = lower, upper

    @property
    def lower_percentile(self):
        return self._lower

    @lower_percentile.setter
    def lower_percentile(self, value):
        self.set_band(value, self._upper)

    @property
    def upper_percentile(self):
        return self._upper

    @upper_percentile.setter
    def upper_percentile(self, value):
        self.set_band(self._lower, value)

    def band_logsumexp(self, pairs, neg_logits):
        """``[A]`` log-sum-exp of each anchor's negatives inside the band."""
        n = pairs.num_negatives
        lo, hi = ring_band(n, self._lower, self._upper)
        masked = core.mask_logits(neg_logits, pairs.negative_mask)
        if isinstance(n, int):
            if lo == 0 and hi == n:
                return tf.reduce_logsumexp(masked, axis=1)
            if hi <= lo:
                return tf.fill(tf.shape(neg_logits)[:1], float("-inf"))
        # Each anchor has exactly N valid negatives, so the top `hi` are all valid.
        top = tf.math.top_k(masked, k=hi, sorted=True).values
        band = top[:, lo:]
        return tf.reduce_logsumexp(band, axis=1)

    def anchor_terms(self, pairs):
        pos, neg = self.logits(pairs)
        band = self.band_logsumexp(pairs, neg)
        return {"loss": tf.nn.softplus(band - pos)}

    def get_config(self):
        config = super().get_config()
        config.update(lower_percentile=self._lower, upper_percentile=self._upper)
        return config
