"""UnReMix: uncertainty, representativeness and similarity mixing (Tabassum et al. 2022)."""

import math
from typing import Sequence

import keras
from keras import ops

from keras_hardneg.losses import core
from keras_hardneg.losses import hyperparameters as hp
from keras_hardneg.losses.base import check_param
from keras_hardneg.losses.debiased import DebiasedContrastiveLoss
from keras_hardneg.losses.hard_negative import hard_negative_log_sum, hard_negative_weights
from keras_hardneg.registry import LOSSES

__all__ = ["UnReMixContrastiveLoss", "pseudo_label_gradients", "uncertainty_scores",
           "representativeness_scores"]

_EPS = 1e-12


def _one_hot_mask(index, m):
    """``[len(index), m]`` bool, True at ``[i, index[i]]``."""
    return ops.equal(ops.cast(index, "int32")[:, None], ops.arange(m, dtype="int32")[None, :])


def pseudo_label_gradients(query_unit, query_norms, pool_unit, self_mask=None):
    """Closed-form gradient of UnReMix's pseudo-label cross entropy (Eq. 2-3).

    For a sample ``j`` with unit embedding ``u_j`` (``z_j = ||z_j|| u_j``), the
    pseudo-posterior is ``p_j = softmax_k(u_k . u_j)`` over the pool rows ``k``
    (excluding ``j`` itself), the pseudo-label is ``argmax_k p_jk`` and the
    cross-entropy gradient with respect to the *unnormalised* ``z_j`` is::

        v_j = sum_k p_jk u_k - u_{argmax}
        e_j = (v_j - (u_j . v_j) u_j) / ||z_j||

    (other pool rows held fixed). This is the per-sample gradient w.r.t. the
    output of the projection head's last Dense layer.

    Args:
        query_unit: ``[Q, d]`` unit rows ``u_j``.
        query_norms: ``[Q]`` norms ``||z_j||``.
        pool_unit: ``[P, d]`` unit rows of the pool.
        self_mask: ``[Q, P]`` bool, True where the pool row is the query itself.

    Returns:
        ``[Q, d]`` gradients ``e_j``.
    """
    logits = ops.matmul(query_unit, ops.transpose(pool_unit))
    if self_mask is not None:
        logits = ops.where(self_mask, float("-inf"), logits)
    probs = ops.softmax(logits, axis=-1)
    # top_k(., 1) is argmax with the first index on ties, in one pass (Keras's TF argmax adds
    # a negative-zero fix: extra passes over the [Q, P] logits).
    _, first = ops.top_k(logits, 1)
    label = ops.cast(_one_hot_mask(first[:, 0], ops.shape(pool_unit)[0]), probs.dtype)
    v = ops.matmul(probs - label, pool_unit)
    v = v - ops.sum(query_unit * v, axis=-1, keepdims=True) * query_unit
    return v / ops.maximum(query_norms, _EPS)[:, None]


def uncertainty_scores(pairs):
    """``[A, M]`` raw uncertainty ``u_aj = g_a . g_j`` (may be negative).

    With ``h`` the input of the head's last Dense layer (``z = W h + b``) the
    per-sample gradient w.r.t. ``(W, b)`` is ``(e h^T, e)``, so
    ``g_a . g_j = (h_a . h_j + 1)(e_a . e_j)`` -- a Gram matrix, no per-sample
    backward pass. Without features (e.g. a MoCo queue that stores only
    keys) only the bias part ``e_a . e_j`` is used.

    The pseudo-label pool is the batch: in-batch, the pool of (gathered) views
    (each row excluding itself); with a queue, the ``2B`` rows
    ``[anchors; positives]`` (queue keys are scored against that pool, which
    keeps the cost ``O(B K d)``).
    """
    a = pairs.anchors
    if pairs.in_batch:
        pool = pairs.negatives
        m = ops.shape(pool)[0]
        # Pool rows that are no anchor's negative (InfoGraph's padding graphs) are no one's
        # pseudo-label either.
        outside = ops.logical_not(ops.any(pairs.negative_mask, axis=0))[None, :]
        e_n = pseudo_label_gradients(pool, pairs.negative_norms, pool, ops.logical_or(
            _one_hot_mask(ops.arange(m, dtype="int32"), m), outside))
        if pairs.anchor_index is not None:  # SimCLR: anchors are rows of the pool
            e_a = ops.take(e_n, pairs.anchor_index, axis=0)
        else:  # MoCo v3, InfoGraph: queries scored against the pool
            e_a = pseudo_label_gradients(a, pairs.anchor_norms, pool, ops.logical_or(
                outside, ops.zeros_like(pairs.negative_mask)))
    else:
        pool = ops.concatenate([a, pairs.positives], axis=0)
        b = ops.shape(a)[0]
        self_mask = _one_hot_mask(ops.arange(b, dtype="int32"), 2 * b)
        e_a = pseudo_label_gradients(a, pairs.anchor_norms, pool, self_mask)
        e_n = pseudo_label_gradients(pairs.negatives, pairs.negative_norms, pool)
    gram_e = ops.matmul(e_a, ops.transpose(e_n))
    if pairs.anchor_features is not None and pairs.negative_features is not None:
        gram_h = ops.matmul(pairs.anchor_features, ops.transpose(pairs.negative_features))
        return (gram_h + 1.0) * gram_e
    return gram_e


def representativeness_scores(pairs):
    """``[A, M]`` representativeness: mean ``1 - cos`` of a negative to the
    anchor's other negatives (Eq. 4), via one pool sum (``O(A M d)``)."""
    neg = pairs.negatives
    n = ops.cast(core.negatives_column(pairs.num_negatives), "float32")
    self_dot = ops.sum(neg * neg, axis=-1)  # 1 (0 for a zero row)
    if pairs.in_batch:
        # sum over the anchor's negatives j' of u_j.u_j' = (mask @ neg) @ neg^T: O(A M d).
        mask = ops.cast(pairs.negative_mask, "float32")
        totals = ops.matmul(ops.matmul(mask, neg), ops.transpose(neg))  # [A, M]
        others = totals - mask * self_dot[None, :]
    else:  # a queue: every pool row is every anchor's negative
        dot_total = ops.matmul(neg, ops.sum(neg, axis=0)[:, None])[:, 0]  # [M]
        others = (dot_total - self_dot)[None, :] + ops.zeros_like(pairs.negative_cos)
    count = ops.maximum(n - 1.0, 1.0)
    return 1.0 - others / count


def _normalized_log_weights(scores, mask):
    """``log(w / mean w)`` over the anchor's negatives, ``w = max(scores, 0)``.

    An anchor whose weights are all zero gets uniform weights (log 0).
    """
    w = ops.maximum(scores, 0.0)
    mean = core.masked_mean(w, mask)
    has_mass = mean > _EPS
    safe_mean = ops.where(has_mass, mean, 1.0)
    log_w = ops.log(w) - ops.log(safe_mean)[:, None]
    return ops.where(has_mass[:, None], log_w, ops.zeros_like(log_w))


def _check_weights(config):
    weights = config["weights"]
    if len(weights) != 3:
        return ("'weights' must be 3 numbers >= 0 (uncertainty, similarity, "
                f"representativeness); got {len(weights)}: {weights}")
    if sum(weights) <= 0:
        return f"'weights' must not all be zero; got {weights}"
    return None


@LOSSES.register("unremix", params={"temperature": hp.TEMPERATURE, "tau_plus": hp.TAU_PLUS,
                                    "beta": hp.BETA, "weights": hp.WEIGHTS},
                 check=_check_weights)
@keras.saving.register_keras_serializable(package="keras_hardneg")
class UnReMixContrastiveLoss(DebiasedContrastiveLoss):
    """UnReMix of Tabassum et al., "Hard Negative Sampling Strategies for
    Contrastive Representation Learning" (2022), Sec. 3 and Alg. 1.

    **This is our reconstruction; the authors' code is not public.** Each
    negative ``j`` of anchor ``a`` gets an importance weight mixing three
    components, each made non-negative and normalised to mean 1 over the
    anchor's negatives (``s_aj = cos(a, j)/t`` is the negative's logit throughout)::

        u_aj = max(g_a . g_j, 0)        uncertainty (pseudo-label CE gradient
                                        of the head's last layer, closed form)
        v_aj = e^{beta * s_aj}          similarity to the anchor (the paper's
                                        "anchor vicinity"; HCL's importance imp_aj)
        r_aj = mean_{j' != j} (1 - cos(j, j'))
                                        representativeness (Eq. 4), over the
                                        anchor's other N - 1 negatives
        w_aj = l_u u~_aj + l_v v~_aj + l_r r~_aj,   l = weights / sum(weights)

    ``w`` replaces HCL's ``imp / mean(imp)``: ``R_a = sum_j w_aj e^{s_aj}``,
    then the debiasing with ``tau_plus`` and the clamp ``N e^{-1/t}`` exactly as
    in :class:`HardNegativeContrastiveLoss`. With ``weights=(0, 1, 0)`` this *is*
    HCL (including gradients). Gradients flow through the similarity
    component (as in HCL) but not through ``u`` and ``r``. An anchor whose
    ``u`` (or ``r``) is zero for every negative gets uniform weights for that
    component. The paper also learns ``l`` through a softmax; here ``l`` is
    fixed (the paper's "fixed equal weights" variant, which it reports as
    comparable), because minimising the loss itself over ``l`` would favour
    whichever component makes the negatives easiest.

    Inputs: as every loss, or UnReMix dicts
    ``{"embeddings": [B, d], "features": [B, m]}`` where ``features`` is the
    input of the projection head's last Dense layer (the frameworks pass it
    automatically). Without features the uncertainty uses the bias gradient only.

    Args:
        temperature: ``t > 0``.
        tau_plus: class prior in ``[0, 1)`` (default 0, as in the paper).
        beta: concentration of the similarity component, ``>= 0``.
        weights: ``(l_u, l_v, l_r)`` (uncertainty, similarity, representativeness),
            non-negative, not all zero.

    Example:
    >>> import numpy as np
    >>> z1, z2 = np.random.default_rng(0).normal(size=(2, 8, 16)).astype("float32")
    >>> float(UnReMixContrastiveLoss(temperature=0.5)(z1, z2)) > 0
    True
    """

    #: ``annealing.beta_changes``: :class:`keras_hardneg.callbacks.BetaAnnealing`.
    annealing = {"beta_changes": "beta"}

    def __init__(self, temperature: float = 0.5, tau_plus: float = 0.0, beta: float = 1.0,
                 weights: Sequence[float] = (1.0, 1.0, 1.0), **kwargs):
        super().__init__(temperature=temperature, tau_plus=tau_plus, **kwargs)
        self.beta = check_param("beta", beta, hp.BETA)
        if isinstance(weights, str) or len(tuple(weights)) != 3:
            raise ValueError(
                "`weights` must be 3 non-negative numbers (uncertainty, similarity, "
                f"representativeness); got {weights!r}."
            )
        w = [check_param(f"weights[{i}]", x, hp.WEIGHTS) for i, x in enumerate(weights)]
        if sum(w) <= 0:
            raise ValueError(f"`weights` must not all be zero; got {tuple(weights)}.")
        self.weights = tuple(x / sum(w) for x in w)

    @property
    def needs_features(self):
        return self.weights[0] > 0

    def negative_log_sum(self, pairs, neg_logits):
        mask = pairs.negative_mask
        l_u, l_s, l_r = self.weights
        parts = []
        if l_s > 0:
            parts.append(math.log(l_s) + hard_negative_log_sum(
                neg_logits, mask, pairs.num_negatives, self.beta))
        for lam, scorer in ((l_u, uncertainty_scores), (l_r, representativeness_scores)):
            if lam > 0:
                log_w = ops.stop_gradient(_normalized_log_weights(scorer(pairs), mask))
                parts.append(math.log(lam) + core.masked_logsumexp(log_w + neg_logits, mask))
        if len(parts) == 1:
            return parts[0]
        return ops.logsumexp(ops.stack(parts, axis=0), axis=0)

    def weights_of_negatives(self, pairs, neg_logits):
        """``l_u u~ + l_v v~ + l_r r~`` (mean 1 over each anchor's negatives): the weights
        :meth:`negative_log_sum` puts on ``e^{s_aj}``."""
        mask = pairs.negative_mask
        l_u, l_s, l_r = self.weights
        indicator = self.negative_indicator(pairs, neg_logits)
        total = ops.zeros_like(indicator)
        if l_s > 0:
            total = total + l_s * hard_negative_weights(neg_logits, mask, pairs.num_negatives,
                                                        self.beta)
        for lam, scorer in ((l_u, uncertainty_scores), (l_r, representativeness_scores)):
            if lam > 0:
                log_w = _normalized_log_weights(scorer(pairs), mask)
                total = total + lam * ops.exp(log_w) * indicator
        return total

    def get_config(self):
        config = super().get_config()
        config.update(beta=self.beta, weights=list(self.weights))
        return config
