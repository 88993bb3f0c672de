"""Debiased contrastive loss (Chuang et al., NeurIPS 2020)."""

import keras
from keras import ops

from keras_hardneg.losses import core
from keras_hardneg.losses import hyperparameters as hp
from keras_hardneg.losses.base import ContrastiveLoss, check_param, debiased_log_negatives
from keras_hardneg.registry import LOSSES

__all__ = ["DebiasedContrastiveLoss"]


@LOSSES.register("debiased", params={"temperature": hp.TEMPERATURE,
                                     "tau_plus": hp.TAU_PLUS})
@keras.saving.register_keras_serializable(package="keras_hardneg")
class DebiasedContrastiveLoss(ContrastiveLoss):
    """Debiased contrastive loss of Chuang et al., "Debiased Contrastive Learning" (2020).

    Corrects the negative term for the chance ``tau_plus`` that a "negative"
    shares the anchor's latent class (positive-unlabeled view)::

        Ng_a   = max( (sum_j e^{s_aj} - tau_plus * N * e^{pos_a}) / (1 - tau_plus),
                      N * e^{-1/t} )
        loss_a = -log( e^{pos_a} / (e^{pos_a} + Ng_a) )

    with ``pos_a = cos(a, a+)/t`` and ``s_aj = cos(a, j)/t`` over the ``N``
    negatives of ``a``. Computed in log space. ``tau_plus = 0`` is NT-Xent
    exactly. Anchors at the clamp ``N e^{-1/t}`` get no gradient from their
    negatives; :meth:`compute_terms` reports their share as ``clamp_fraction``.

    Shapes as every loss of the package: ``loss(z1, z2)`` with two ``[B, d]`` views
    (in-batch, ``N = 2B - 2``) or ``loss.call_with_negatives(anchors [B, d], positives
    [B, d], negatives [K, d])`` (queue, ``N = K``); the per-anchor losses reduced by
    ``reduction`` (default: their mean; ``sample_weight`` and the other reductions as in
    :meth:`~keras_hardneg.losses.ContrastiveLoss.reduce`).

    Args:
        temperature: ``t > 0``.
        tau_plus: class prior, in ``[0, 1)``.

    Example:
    >>> import numpy as np
    >>> z1, z2 = np.random.default_rng(0).normal(size=(2, 8, 16)).astype("float32")
    >>> float(DebiasedContrastiveLoss(tau_plus=0.1)(z1, z2)) > 0
    True
    """

    has_clamp = True

    def __init__(self, temperature: float = 0.5, tau_plus: float = 0.1, **kwargs):
        super().__init__(temperature=temperature, **kwargs)
        self.tau_plus = check_param("tau_plus", tau_plus, hp.TAU_PLUS)

    def negative_log_sum(self, pairs, neg_logits):
        """``log R_a``: the log of the anchor's (weighted) negative sum."""
        return core.masked_logsumexp(neg_logits, pairs.negative_mask)

    def anchor_terms(self, pairs):
        pos, neg = self.logits(pairs)
        log_r = self.negative_log_sum(pairs, neg)
        log_ng, clamped = debiased_log_negatives(
            log_r, pos, pairs.num_negatives, self.tau_plus, self.temperature
        )
        return {"loss": ops.softplus(log_ng - pos), "clamped": clamped}

    def get_config(self):
        config = super().get_config()
        config["tau_plus"] = self.tau_plus
        return config
