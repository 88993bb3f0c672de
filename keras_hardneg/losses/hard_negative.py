"""Hard-negative contrastive loss (Robinson et al., ICLR 2021)."""

import math

import keras
from keras import ops

from keras_hardneg.losses import core
from keras_hardneg.losses import hyperparameters as hp
from keras_hardneg.losses.base import check_param
from keras_hardneg.losses.debiased import DebiasedContrastiveLoss
from keras_hardneg.registry import LOSSES

__all__ = ["HardNegativeContrastiveLoss", "hard_negative_log_sum", "hard_negative_weights"]


def hard_negative_log_sum(neg_logits, mask, num_negatives, beta):
    """``log R_a`` of Robinson et al.: ``R_a = sum_j imp_aj e^{s_aj} / mean_j imp_aj``.

    With ``imp_aj = e^{beta s_aj}``, in log space:
    ``log R_a = LSE_j((beta + 1) s_aj) - LSE_j(beta s_aj) + log N``.
    ``beta = 0`` returns ``LSE_j(s_aj)`` (the debiased sum) exactly. Gradients
    flow through the importance weights, as in the authors' code.

    Args:
        neg_logits: ``[A, M]`` temperature-scaled negative logits.
        mask: ``[A, M]`` bool negative mask, or None.
        num_negatives: ``N``.
        beta: concentration ``>= 0`` (Python float).
    """
    if beta == 0.0:
        return core.masked_logsumexp(neg_logits, mask)
    log_n = (math.log(num_negatives) if isinstance(num_negatives, int)
             else ops.log(ops.cast(num_negatives, "float32")))
    return (
        core.masked_logsumexp((beta + 1.0) * neg_logits, mask)
        - core.masked_logsumexp(beta * neg_logits, mask)
        + log_n
    )


def hard_negative_weights(neg_logits, mask, num_negatives, beta):
    """``[A, M]`` importance weights ``imp_aj / mean_j imp_aj = N softmax_j(beta s_aj)`` of
    Robinson et al. over each anchor's negatives (0 elsewhere): the ``w_aj`` of
    :func:`hard_negative_log_sum`'s ``R_a = sum_j w_aj e^{s_aj}``."""
    n = ops.cast(core.negatives_column(num_negatives), "float32")
    return n * ops.softmax(core.mask_logits(beta * neg_logits, mask), axis=-1)


@LOSSES.register("hard", aliases=("hard_negative",),
                 params={"temperature": hp.TEMPERATURE, "tau_plus": hp.TAU_PLUS,
                         "beta": hp.BETA})
@keras.saving.register_keras_serializable(package="keras_hardneg")
class HardNegativeContrastiveLoss(DebiasedContrastiveLoss):
    """Hard negative sampling of Robinson et al., "Contrastive Learning with
    Hard Negative Samples" (ICLR 2021; HCL), Fig. 13 of the paper.

    Negatives are importance-weighted towards those most similar to the anchor
    (a von Mises-Fisher tilt of concentration ``beta``), then debiased::

        imp_aj = e^{beta * s_aj}
        R_a    = sum_j imp_aj e^{s_aj} / mean_j imp_aj
        Ng_a   = max( (R_a - tau_plus * N * e^{pos_a}) / (1 - tau_plus), N e^{-1/t} )
        loss_a = -log( e^{pos_a} / (e^{pos_a} + Ng_a) )

    ``beta`` multiplies the temperature-scaled logit ``s_aj = cos/t``, as in the
    authors' code. Everything is computed with log-sum-exp, so no setting
    overflows (the authors' float32 code overflows once ``(beta+1)/t > 88``).
    ``beta = 0`` is the debiased loss; ``beta = 0, tau_plus = 0`` is NT-Xent.
    The paper reports ``beta`` in ``0.5-2`` "tends to work well".

    Shapes as every loss of the package: ``loss(z1, z2)`` with two ``[B, d]`` views
    (in-batch, ``N = 2B - 2``) or ``loss.call_with_negatives(anchors [B, d], positives
    [B, d], negatives [K, d])`` (queue, ``N = K``); the per-anchor losses reduced by
    ``reduction`` (default: their mean; ``sample_weight`` and the other reductions as in
    :meth:`~keras_hardneg.losses.ContrastiveLoss.reduce`).

    Args:
        temperature: ``t > 0``.
        tau_plus: class prior in ``[0, 1)``.
        beta: concentration ``>= 0``. Can be changed between epochs (see
            :class:`keras_hardneg.callbacks.BetaAnnealing`).

    Example:
    >>> import numpy as np
    >>> z1, z2 = np.random.default_rng(0).normal(size=(2, 8, 16)).astype("float32")
    >>> loss = HardNegativeContrastiveLoss(temperature=0.5, tau_plus=0.1, beta=1.0)
    >>> float(loss(z1, z2)) > 0
    True
    """

    #: ``annealing.beta_changes``: :class:`keras_hardneg.callbacks.BetaAnnealing`.
    annealing = {"beta_changes": "beta"}

    def __init__(self, temperature: float = 0.5, tau_plus: float = 0.1, beta: float = 1.0,
                 **kwargs):
        super().__init__(temperature=temperature, tau_plus=tau_plus, **kwargs)
        self.beta = beta

    @property
    def beta(self):
        return self._beta

    @beta.setter
    def beta(self, value):
        self._beta = check_param("beta", value, hp.BETA)

    def negative_log_sum(self, pairs, neg_logits):
        return hard_negative_log_sum(
            neg_logits, pairs.negative_mask, pairs.num_negatives, self.beta
        )

    def weights_of_negatives(self, pairs, neg_logits):
        return hard_negative_weights(neg_logits, pairs.negative_mask, pairs.num_negatives,
                                     self.beta)

    def get_config(self):
        config = super().get_config()
        config["beta"] = self.beta
        return config
