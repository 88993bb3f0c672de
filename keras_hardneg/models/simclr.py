"""SimCLR (Chen et al., "A Simple Framework for Contrastive Learning of Visual
Representations", ICML 2020) as a Keras model trained with ``fit()``."""

from __future__ import annotations

from typing import Any, Sequence

import keras
from keras import ops

from keras_hardneg import distribute
from keras_hardneg.encoders.heads import DENSE_INITS, HEAD_VERSIONS
from keras_hardneg.losses import core
from keras_hardneg.models.base import ContrastiveModel, concat_batches
from keras_hardneg.registry import FRAMEWORKS, Param

__all__ = ["SimCLR", "BATCH_NORM_VIEWS"]

#: ``batch_norm_views``: which images one batch-norm batch holds in training.
BATCH_NORM_VIEWS = ("joint", "per_view")


@FRAMEWORKS.register("simclr", params={
    "head_version": Param(str, choices=HEAD_VERSIONS, help="projection head architecture"),
    "head_init": Param(str, choices=tuple(DENSE_INITS),
                       help="head Dense kernels: glorot_uniform (Keras) or torch_linear "
                            "(PyTorch's nn.Linear default)"),
    "batch_norm_views": Param(str, choices=BATCH_NORM_VIEWS,
                              help="joint: both views in one 2B batch-norm batch; per_view: "
                                   "one forward pass per view (lightly's SimCLR)"),
})
@keras.saving.register_keras_serializable(package="keras_hardneg")
class SimCLR(ContrastiveModel):
    """SimCLR: two augmented views, a projection head, in-batch negatives.

    Both views go through the encoder in one batch of ``2B`` images (so batch
    norm sees both; ``batch_norm_views="per_view"``: one forward pass per view, each
    normalised by its own ``B`` images' statistics, as lightly's SimCLR), then the
    projection head; the compiled loss gets the two
    projections ``[B, d]`` (with the head's last-layer input for UnReMix). Under
    a ``tf.distribute`` strategy, projections are gathered from all replicas
    (``gather_across_replicas=True``), each replica's ``2B`` anchors see the
    global batch's ``2B_global - 2`` negatives, and the loss is scaled so that R
    replicas with global batch B give one device's loss and gradients (exactly
    for BN-free encoders; the head's BN is synchronized across replicas by
    default when there is more than one).

    Args:
        encoder: keras.Model, images ``[B, H, W, 3]`` in ``[0, 1]`` -> ``[B, F]``.
        projection_dims: ``(hidden..., output)`` widths of the head, e.g. ``(512, 128)``.
        augmentation: a layer drawing one random view of a batch of images
            (e.g. :func:`keras_hardneg.augment.simclr_augmentation`; it is wrapped in
            :class:`keras_hardneg.augment.ImageViews`), a
            :class:`keras_hardneg.augment.ViewMaker` for any modality, or None when the
            data already holds ``{"view1", "view2"}``.
        head_version: ``"simclr_v1"`` (default), ``"simclr_v1_bn"`` or ``"simclr_v2"``.
        head_init: the head's Dense kernels, ``"glorot_uniform"`` (default) or
            ``"torch_linear"`` (PyTorch's ``nn.Linear`` default).
        batch_norm_views: ``"joint"`` (default: both views in one ``2B`` batch for the
            encoder and the head) or ``"per_view"`` (two forward passes of ``B``: the batch
            statistics, and the moving-statistics updates, are per view).
        gather_across_replicas: gather negatives from all replicas (default True).
        memory_bank_size: dataset size ``N`` to keep ``embedding_bank`` ``[N, d]`` filled
            with the projections computed in training (BatchSampler's graph refresh).
        sync_batchnorm: synchronized BN in the head (default: when replicas > 1).

    Metrics shown by ``fit``: ``loss``, ``positive_cosine``, ``negative_cosine``,
    ``clamp_fraction`` (debiased/hard/UnReMix), ``false_negative_rate`` (when labels
    are given), ``nonfinite_steps`` (skipped updates).

    Example:
    >>> import numpy as np, keras_hardneg as khn
    >>> enc = khn.encoders.small_convnet(input_shape=(8, 8, 3), width=4)
    >>> model = SimCLR(enc, projection_dims=(16, 8))
    >>> model.compile(optimizer="adam", loss=khn.losses.HardNegativeContrastiveLoss(beta=1.0))
    >>> x = np.random.default_rng(0).uniform(size=(8, 8, 8, 3)).astype("float32")
    >>> h = model.fit({"view1": x, "view2": x[:, ::-1]}, batch_size=8, epochs=1, verbose=0)
    """

    def __init__(self, encoder: keras.Model, projection_dims: Sequence[int] = (512, 128),
                 augmentation: Any = None, head_version: str = "simclr_v1",
                 head_init: str = "glorot_uniform", batch_norm_views: str = "joint",
                 **kwargs: Any):
        if batch_norm_views not in BATCH_NORM_VIEWS:
            raise ValueError(f"`batch_norm_views` must be one of {list(BATCH_NORM_VIEWS)}; "
                             f"got {batch_norm_views!r}.")
        super().__init__(encoder, projection_dims=projection_dims, head_version=head_version,
                         head_init=head_init, augmentation=augmentation, **kwargs)
        self.batch_norm_views = batch_norm_views
        self.built = True  # every sub-model is built: weights can be saved before fit

    def get_config(self) -> dict:
        config = super().get_config()
        config["batch_norm_views"] = self.batch_norm_views
        return config

    def encode_views(self, view1: Any, view2: Any, training: bool) -> Any:
        """Encoder features ``[2B, F]`` of both views, view 1's rows first (one ``2B``
        batch, so batch norm sees both views; two ``B`` batches with ``"per_view"``). A
        view may be a dict of batch-leading tensors (an encoder with several inputs): the
        views are joined leaf by leaf (:func:`~keras_hardneg.models.base.concat_batches`)."""
        if self.batch_norm_views == "per_view":
            return ops.concatenate([self.encoder(view1, training=training),
                                    self.encoder(view2, training=training)], axis=0)
        return self.encoder(concat_batches(view1, view2), training=training)

    def project(self, view1: Any, view2: Any, training: bool) -> tuple:
        """``(z1, z2)``: projections of both views (dicts with ``features`` for UnReMix);
        the head sees both views in one ``[2B, F]`` batch (one per view with
        ``"per_view"``)."""
        h = self.encode_views(view1, view2, training=training)
        if self.batch_norm_views == "per_view":
            (z1, f1), (z2, f2) = (self.projector(part, training=training, return_features=True)
                                  for part in ops.split(h, 2, axis=0))
        else:
            z, feats = self.projector(h, training=training, return_features=True)
            z1, z2 = ops.split(z, 2, axis=0)
            f1, f2 = ops.split(feats, 2, axis=0)
        if self.uses_features:
            return {"embeddings": z1, "features": f1}, {"embeddings": z2, "features": f2}
        return z1, z2

    def probe_projections(self, view1: Any, view2: Any) -> tuple:
        """:meth:`project` in inference mode."""
        return self.project(view1, view2, training=False)

    def pairs(self, z1: Any, z2: Any) -> Any:
        """The in-batch pairs, against the global batch when gathering (under
        ``tf.distribute``; on JAX the step's batch is already the global batch)."""
        if self.gather_across_replicas and distribute.num_replicas() > 1:
            batch = ops.shape(z1["embeddings"] if isinstance(z1, dict) else z1)[0]
            pool = (self.gathered(z1), self.gathered(z2), self.replica_offset(batch))
            return core.in_batch_pairs(z1, z2, pool=pool)
        return core.in_batch_pairs(z1, z2)

    def pair_labels(self, labels: Any, pool: Any) -> tuple:
        """``(anchor_labels, pool_labels)`` of :meth:`pairs` from the local ``labels [B]``
        and the gathered ``pool`` (both views' rows: ``2B`` anchors)."""
        return ops.concatenate([labels, labels], 0), ops.concatenate([pool, pool], 0)

    def contrastive_forward(self, view1: Any, view2: Any, labels: Any, training: bool,
                            sample_weight: Any = None) -> dict:
        z1, z2 = self.project(view1, view2, training=training)
        pairs = self.pairs(z1, z2)
        terms = self.contrastive_loss.compute_terms(pairs)
        false_negatives = None
        if labels is not None:
            false_negatives = self.false_negatives(
                pairs, *self.pair_labels(labels, self.gathered(labels)))
        # The anchors are the local rows of the views: 2B (in-batch) or B (cross_view).
        per_example = 2 if pairs.anchor_index is not None else 1
        loss_value = self.reduce_loss(terms["loss"], sample_weight,
                                      anchors_per_example=per_example)
        return {"loss": loss_value, "terms": terms, "projections": (z1, z2),
                "bank": z1["embeddings"] if isinstance(z1, dict) else z1,
                "false_negatives": false_negatives, "num_negatives": pairs.num_negatives}
