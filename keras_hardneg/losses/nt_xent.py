"""NT-Xent / InfoNCE (Oord et al. 2018; Chen et al., SimCLR, ICML 2020)."""

import keras
from keras import ops

from keras_hardneg.losses import core
from keras_hardneg.losses import hyperparameters as hp
from keras_hardneg.losses.base import ContrastiveLoss
from keras_hardneg.registry import LOSSES

__all__ = ["NTXentLoss"]


@LOSSES.register("nt_xent", aliases=("ntxent", "infonce"),
                 params={"temperature": hp.TEMPERATURE}, baseline=True)
@keras.saving.register_keras_serializable(package="keras_hardneg")
class NTXentLoss(ContrastiveLoss):
    """Normalised temperature-scaled cross entropy (NT-Xent, InfoNCE).

    For anchor ``a`` with positive logit ``pos_a = cos(a, a+) / t`` and
    negative logits ``s_aj = cos(a, j) / t`` over its ``N`` negatives::

        loss_a = -log( e^{pos_a} / (e^{pos_a} + sum_j e^{s_aj}) )

    computed as ``logsumexp([pos_a, s_a]) - pos_a`` (never overflows).

    Call conventions (see :class:`~keras_hardneg.losses.base.ContrastiveLoss`):
    ``loss(z1, z2)`` with two ``[B, d]`` views (SimCLR; ``N = 2B - 2``), or
    ``loss.call_with_negatives(anchors [B, d], positives [B, d], negatives [K, d])``
    (MoCo; ``N = K``). Rows are L2-normalised by the loss. Returns the per-anchor
    losses reduced by ``reduction`` (default: their mean; see :meth:`ContrastiveLoss.reduce`).

    Args:
        temperature: ``t > 0``.

    Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> z1, z2 = rng.normal(size=(2, 8, 16)).astype("float32")
    >>> loss = NTXentLoss(temperature=0.5)
    >>> float(loss(z1, z2)) > 0
    True
    """

    def anchor_terms(self, pairs):
        pos, neg = self.logits(pairs)
        neg = core.mask_logits(neg, pairs.negative_mask)
        lse = ops.logsumexp(ops.concatenate([pos[:, None], neg], axis=1), axis=1)
        return {"loss": lse - pos}
