"""Ring: conditional negative sampling (Wu et al., ICLR 2021)."""

import math

import keras
from keras import ops

from keras_hardneg.losses import core
from keras_hardneg.losses import hyperparameters as hp
from keras_hardneg.losses.base import ContrastiveLoss, check_param
from keras_hardneg.registry import LOSSES

__all__ = ["RingContrastiveLoss", "ring_band", "kth_largest"]

_INT32_MIN, _INT32_MAX = -(2 ** 31), 2 ** 31 - 1
_NEG_INF = float("-inf")


def _order_keys(x):
    """int32 keys whose signed order is the float32 order of ``x``.

    The bits are read through a trailing axis of size 1, so that ``ops.view`` works with
    unknown (TensorFlow) dimensions too.
    """
    bits = ops.view(ops.expand_dims(ops.cast(x, "float32"), -1), "int32")[..., 0]
    return ops.where(bits < 0, ops.bitwise_xor(bits, _INT32_MAX), bits)


def _midpoint(lo, hi):
    """``ceil((lo + hi) / 2)`` of int32 tensors without overflowing int32 (JAX has no
    int64 by default): ``(lo >> 1) + (hi >> 1) + ((lo & 1) + (hi & 1) + 1) >> 1``."""
    halves = ops.right_shift(lo, 1) + ops.right_shift(hi, 1)
    carry = ops.right_shift(ops.bitwise_and(lo, 1) + ops.bitwise_and(hi, 1) + 1, 1)
    return halves + carry


def kth_largest(x, k):
    """``[A]``: the ``k``-th largest value of each row of ``x`` ``[A, M]`` (``k >= 1``).

    An exact radix select: 32 halvings of the int32 key range, each one count
    over the row, so ``O(32 M)`` per row whatever ``k`` is, where ``top_k`` with
    a large ``k`` is a partial sort. The result is an element of ``x`` (the
    gradient flows to it, as with ``top_k``).

    Example:
    >>> import numpy as np
    >>> float(kth_largest(np.array([[3.0, -1.0, 2.0, 2.0]], "float32"), 3)[0])
    2.0
    """
    keys = _order_keys(x)
    rows = ops.shape(keys)[:1]
    lo = ops.full(rows, _INT32_MIN, dtype="int32")
    hi = ops.full(rows, _INT32_MAX, dtype="int32")
    k = ops.cast(k, "int32")
    for _ in range(32):
        mid = _midpoint(lo, hi)
        count = ops.sum(ops.cast(keys >= mid[:, None], "int32"), axis=1)
        ok = count >= k
        lo = ops.where(ok, mid, lo)
        hi = ops.where(ok, hi, mid - 1)
    return ops.max(ops.where(keys <= lo[:, None], x, _NEG_INF), axis=1)


def _count(mask):
    return ops.sum(ops.cast(mask, "float32"), axis=1)


def _top_logsumexp(x, t_hi, n_hi):
    """LSE of the values above ``t_hi`` plus ``n_hi`` copies of ``t_hi``."""
    parts = [ops.where(x > t_hi[:, None], x, _NEG_INF), (ops.log(n_hi) + t_hi)[:, None]]
    return ops.logsumexp(ops.concatenate(parts, axis=1), axis=1)


def band_logsumexp_by_threshold(x, lo, hi):
    """``[A]`` log-sum-exp of the values of rank ``[lo, hi)`` (descending) of each row of
    ``x`` (masked entries ``-inf``), found by :func:`kth_largest` thresholds -- no sort.

    Ties at a threshold are counted exactly: the band holds every value strictly
    between the two thresholds plus the right number of copies of each threshold.
    """
    t_hi = kth_largest(x, hi)
    n_hi = ops.cast(hi, "float32") - _count(x > t_hi[:, None])  # copies of t_hi, >= 1
    if isinstance(lo, int) and lo == 0:
        return _top_logsumexp(x, t_hi, n_hi)
    t_lo = kth_largest(x, ops.maximum(ops.cast(lo, "int32"), 1))
    n_lo = _count(ops.equal(x, t_lo[:, None])) - (ops.cast(lo, "float32")
                                                   - _count(x > t_lo[:, None]))
    inside = ops.logical_and(x > t_hi[:, None], x < t_lo[:, None])
    parts = [ops.where(inside, x, _NEG_INF),
             (ops.log(n_lo) + t_lo)[:, None], (ops.log(n_hi) + t_hi)[:, None]]
    general = ops.logsumexp(ops.concatenate(parts, axis=1), axis=1)
    tied = ops.log(ops.cast(hi - lo, "float32")) + t_hi  # both thresholds equal
    band = ops.where(ops.equal(t_lo, t_hi), tied, general)
    if not isinstance(lo, int):
        band = ops.where(lo > 0, band, _top_logsumexp(x, t_hi, n_hi))
    return band


def ring_band(num_negatives, lower_percentile, upper_percentile, max_negatives=None):
    """The rank band ``[floor(lower/100 * N), floor(upper/100 * N))`` of Ring.

    Ranks count from the most similar negative (rank 0). Returns Python ints
    when ``num_negatives`` is static, else int32 tensors: looked up in a table of the
    float64 bands of ``0..max_negatives`` when that bound is a static int (InfoGraph's ``N``
    under padding, also under JAX, which has no float64 by default), else computed in
    float64 (TensorFlow with an unknown batch size).

    Example:
    >>> ring_band(40, 5, 50)
    (2, 20)
    """
    if isinstance(num_negatives, int):
        return (
            math.floor(lower_percentile / 100.0 * num_negatives),
            math.floor(upper_percentile / 100.0 * num_negatives),
        )
    if isinstance(max_negatives, int):
        index = ops.clip(ops.cast(num_negatives, "int32"), 0, max_negatives)
        bands = [ring_band(n, lower_percentile, upper_percentile)
                 for n in range(max_negatives + 1)]
        lo = ops.take(ops.convert_to_tensor([b[0] for b in bands], "int32"), index)
        hi = ops.take(ops.convert_to_tensor([b[1] for b in bands], "int32"), index)
        return lo, hi
    n = ops.cast(num_negatives, "float64")
    lo = ops.cast(ops.floor(lower_percentile / 100.0 * n), "int32")
    hi = ops.cast(ops.floor(upper_percentile / 100.0 * n), "int32")
    return lo, hi


def _check_band(config):
    if config["lower_percentile"] >= config["upper_percentile"]:
        return (f"'upper_percentile' = {config['upper_percentile']:g} must be above "
                f"'lower_percentile' = {config['lower_percentile']:g} (the band is "
                "[lower, upper), 0 <= lower < upper <= 100)")
    return None


@LOSSES.register("ring", params={"temperature": hp.TEMPERATURE,
                                 "lower_percentile": hp.LOWER_PERCENTILE,
                                 "upper_percentile": hp.UPPER_PERCENTILE},
                 check=_check_band)
@keras.saving.register_keras_serializable(package="keras_hardneg")
class RingContrastiveLoss(ContrastiveLoss):
    """Conditional negative sampling of Wu et al., "Conditional Negative
    Sampling for Contrastive Learning of Visual Representations" (ICLR 2021).

    For each anchor, only the negatives whose similarity rank (most similar
    first, rank 0) lies in the band ``[floor(lower/100 * N), floor(upper/100 * N))``
    are kept: too-similar ones (likely false negatives) and too-easy ones are
    dropped. The loss is ``logsumexp([pos_a, band_a]) - pos_a``. The band is
    found with ``top_k`` over the upper cut when that cut is small (at most
    ``topk_limit`` ranks or ``N/8``), else with an exact radix select of the two
    threshold values (:func:`kth_largest`, 32 counting passes each), which is
    1.5x faster than ``top_k`` for a 50% cut of a 65536 queue; never a full sort.
    ``lower=0, upper=100`` is NT-Xent / MoCo InfoNCE exactly. An empty band
    (``floor(upper N) <= floor(lower N)``) gives a zero loss for that anchor.

    Released settings: MoCo queue ``t=0.07, K=65536`` with band 1-10; SimCLR
    ``t=0.07`` with band 5-50. The paper anneals ``upper`` linearly from 100 to
    10 (see :class:`keras_hardneg.callbacks.RingAnnealing`).

    Shapes as every loss of the package: ``loss(z1, z2)`` with two ``[B, d]`` views
    (in-batch, ``N = 2B - 2``) or ``loss.call_with_negatives(anchors [B, d], positives
    [B, d], negatives [K, d])`` (queue, ``N = K``); the per-anchor losses reduced by
    ``reduction`` (default: their mean; ``sample_weight`` and the other reductions as in
    :meth:`~keras_hardneg.losses.ContrastiveLoss.reduce`).

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

    #: ``top_k`` handles upper cuts up to ``max(topk_limit, topk_fraction * N)`` ranks;
    #: larger cuts use threshold selection (measured in benchmarks/ring_queue.py).
    topk_limit = 1024
    topk_fraction = 0.125
    #: ``annealing.ring_start`` / ``ring_end``: :class:`keras_hardneg.callbacks.RingAnnealing`.
    annealing = {"ring_start": "upper_percentile", "ring_end": "upper_percentile"}

    def __init__(self, temperature: float = 0.5, lower_percentile: float = 5.0,
                 upper_percentile: float = 50.0, **kwargs):
        super().__init__(temperature=temperature, **kwargs)
        self.set_band(lower_percentile, upper_percentile)

    def set_band(self, lower_percentile, upper_percentile):
        """Sets both percentiles, validating ``0 <= lower < upper <= 100``."""
        lower = check_param("lower_percentile", lower_percentile, hp.LOWER_PERCENTILE)
        upper = check_param("upper_percentile", upper_percentile, hp.UPPER_PERCENTILE)
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

    def hcl_parameters(self):
        """None: Ring selects negatives by rank, it is not a point of Robinson et al.'s
        ``(beta, tau_plus)`` family."""
        return None

    def band(self, pairs, neg_logits):
        """``(lo, hi)``: :func:`ring_band` of the pairs' ``N`` (bounded by the pool size
        ``M``, static, when ``N`` is a tensor)."""
        pool = neg_logits.shape[-1]
        return ring_band(pairs.num_negatives, self._lower, self._upper,
                         max_negatives=int(pool) if pool is not None else None)

    def band_logsumexp(self, pairs, neg_logits):
        """``[A]`` log-sum-exp of each anchor's negatives inside the band."""
        n = pairs.num_negatives
        lo, hi = self.band(pairs, neg_logits)
        masked = core.mask_logits(neg_logits, pairs.negative_mask)
        if isinstance(n, int):
            if lo == 0 and hi == n:
                return ops.logsumexp(masked, axis=1)
            if hi <= lo:
                return ops.full(ops.shape(neg_logits)[:1], _NEG_INF, dtype="float32")
        # Measured on CPU (benchmarks/ring_queue.py): top_k wins for cuts up to ~N/8,
        # the 64 counting passes of the thresholds win for larger ones.
        if not isinstance(hi, int) or (hi > self.topk_limit and hi > self.topk_fraction * n):
            if isinstance(hi, int):
                return band_logsumexp_by_threshold(masked, lo, hi)
            # Dynamic N: compute with a non-empty band, then blank empty ones.
            band = band_logsumexp_by_threshold(masked, lo, ops.maximum(hi, lo + 1))
            return ops.where(hi > lo, band, _NEG_INF)
        # Each anchor has exactly N valid negatives, so the top `hi` are all valid.
        top, _ = ops.top_k(masked, k=hi, sorted=True)
        return ops.logsumexp(top[:, lo:], axis=1)

    def weights_of_negatives(self, pairs, neg_logits):
        """1 for the negatives of rank ``[lo, hi)`` (most similar first), 0 elsewhere: the
        negatives :meth:`band_logsumexp` sums (ties at a threshold split by position, which
        leaves the band's sum unchanged)."""
        lo, hi = self.band(pairs, neg_logits)
        masked = core.mask_logits(neg_logits, pairs.negative_mask)
        order = ops.argsort(-masked, axis=-1)
        rank = ops.argsort(order, axis=-1)  # rank of each pool row, non-negatives last
        inside = ops.logical_and(rank >= core.negatives_column(lo),
                                 rank < core.negatives_column(hi))
        return ops.cast(inside, "float32") * self.negative_indicator(pairs, neg_logits)

    def anchor_terms(self, pairs):
        pos, neg = self.logits(pairs)
        band = self.band_logsumexp(pairs, neg)
        return {"loss": ops.softplus(band - pos)}

    def get_config(self):
        config = super().get_config()
        config.update(lower_percentile=self._lower, upper_percentile=self._upper)
        return config
