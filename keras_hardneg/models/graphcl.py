"""GraphCL (You et al., "Graph Contrastive Learning with Augmentations", NeurIPS 2020) as a
Keras model trained with ``fit()``: SimCLR on two augmented views of a batch of graphs."""

from __future__ import annotations

from typing import Any, Sequence

import keras
from keras import ops

from keras_hardneg import distribute
from keras_hardneg.encoders.heads import HEAD_VERSIONS
from keras_hardneg.losses import core
from keras_hardneg.models.simclr import SimCLR
from keras_hardneg.registry import FRAMEWORKS, Param

__all__ = ["GraphCL", "PAIRINGS"]

#: How the two views' projections become pairs (see :class:`GraphCL`).
PAIRINGS = ("cross_view", "in_batch")


def _encoder_dim(encoder: Any) -> int:
    shape = getattr(encoder, "output_shape", None)
    if shape is None or shape[-1] is None:
        raise ValueError("`encoder` must be a built keras.Model with a known output shape "
                         f"[batch, features]; got {encoder!r}.")
    return int(shape[-1])


@FRAMEWORKS.register("graphcl", params={
    "head_version": Param(str, choices=HEAD_VERSIONS, help="projection head architecture "
                          "(GraphCL's: moco_v2, Dense-ReLU-Dense)"),
    "pairing": Param(str, choices=PAIRINGS, help="cross_view: GraphCL's B-1 negatives (the "
                     "other graphs' second views); in_batch: SimCLR's 2B-2"),
}, modality="graph")
@keras.saving.register_keras_serializable(package="keras_hardneg")
class GraphCL(SimCLR):
    """GraphCL: two views of each graph, a GIN encoder, a projection head, in-batch
    negatives; every loss of the family (NT-Xent, debiased, hard, Ring, UnReMix).

    The views are graph batches (dicts, :mod:`keras_hardneg.data.graphs`), made on the host
    before padding (so a dropped node is really gone); a graph batch cannot be concatenated
    along its first axis, so each view goes through the encoder on its own (batch norm sees
    each view's nodes, as in the GraphCL code), then both through the projection head in one
    ``[2B, F]`` batch, as in :class:`SimCLR`.

    Pairs (``pairing``):

    * ``"cross_view"`` (default, GraphCL's objective; BatchSampler, Yang et al. 2023, App.
      C.2, Eq. 17): anchor ``i`` is view 1 of graph ``i``, its positive view 2 of the same
      graph, its negatives the view-2 projections of the other ``B - 1`` graphs
      (:func:`keras_hardneg.losses.core.cross_view_pairs`; ``B`` anchors). As in the GraphCL
      code the loss is one-directional (view 1 anchors only). The family's NT-Xent keeps
      the positive in the denominator (Eq. 17 does; GraphCL's released code drops it).
    * ``"in_batch"``: SimCLR's pairs, ``2B`` anchors with ``2B - 2`` negatives each.

    Under a ``tf.distribute`` strategy the pool is gathered from every replica (as
    :class:`SimCLR`); on JAX the step holds the global batch.

    Args:
        encoder: a graph encoder (e.g. :func:`keras_hardneg.encoders.gin`), graph batch ->
            ``[B, F]``, with a known ``output_shape``.
        projection_dims: ``(hidden..., output)``; default ``(F, F)``, GraphCL's head
            (``Linear(F, F)``, ReLU, ``Linear(F, F)``, ``F = 96`` for the default GIN).
        augmentation: a view maker for raw graph batches, or None (default) when the data
            holds ``{"view1", "view2"}`` graph batches (the graph feed).
        head_version: default ``"moco_v2"`` (Dense-ReLU-Dense, no batch norm: GraphCL's).
        pairing: ``"cross_view"`` (default) or ``"in_batch"``.
        **kwargs: ``gather_across_replicas``, ``memory_bank_size``, ``sync_batchnorm`` as
            in :class:`SimCLR`.

    Dataset elements for ``fit``: ``({"view1": graph_batch, "view2": graph_batch,
    "index": int [B]}, labels [B])`` (``index`` and labels optional; labels feed only the
    ``false_negative_rate`` metric), one element per step: feed whole graph batches
    (:class:`keras_hardneg.data.graph_feed.GraphFeed`, a ``tf.data`` dataset, or
    ``train_on_batch``), never arrays for Keras to slice into batches.
    ``model(graph_batch)`` returns the encoder features ``[B, F]``.

    Example:
    >>> import numpy as np, keras_hardneg as khn
    >>> from keras_hardneg.data.graphs import pad_graphs
    >>> rng = np.random.default_rng(0)
    >>> graphs = [(rng.normal(size=(3, 4)).astype("float32"),
    ...            np.array([[0, 1], [1, 0], [1, 2], [2, 1]])) for _ in range(4)]
    >>> batch = pad_graphs(graphs, (16, 16))
    >>> model = GraphCL(khn.encoders.gin(input_shape=(4,), width=8, num_layers=2))
    >>> model.compile(optimizer="adam", loss="hard")
    >>> logs = model.train_on_batch({"view1": batch, "view2": batch}, return_dict=True)
    >>> bool(np.isfinite(logs["loss"])), tuple(model(batch).shape)
    (True, (4, 16))
    """

    def __init__(self, encoder: keras.Model, projection_dims: Sequence[int] | None = None,
                 augmentation: Any = None, head_version: str = "moco_v2",
                 pairing: str = "cross_view", **kwargs: Any):
        if pairing not in PAIRINGS:
            raise ValueError(f"`pairing` must be one of {list(PAIRINGS)}; got {pairing!r}.")
        if projection_dims is None:
            if not isinstance(encoder, keras.Model):
                raise ValueError(
                    f"`encoder` must be a keras.Model; got {type(encoder).__name__}.")
            dim = _encoder_dim(encoder)
            projection_dims = (dim, dim)
        super().__init__(encoder, projection_dims=projection_dims, augmentation=augmentation,
                         head_version=head_version, **kwargs)
        self.pairing = pairing

    def encode_views(self, view1: Any, view2: Any, training: bool) -> Any:
        """``[2B, F]``: each graph batch is encoded on its own (a graph batch cannot be
        concatenated along its first axis); view 1's rows first."""
        return ops.concatenate([self.encoder(view1, training=training),
                                self.encoder(view2, training=training)], axis=0)

    def pairs(self, z1: Any, z2: Any) -> Any:
        """The pairs of :attr:`pairing`, against the global batch when gathering."""
        if self.pairing == "in_batch":
            return super().pairs(z1, z2)
        if self.gather_across_replicas and distribute.num_replicas() > 1:
            batch = ops.shape(z1["embeddings"] if isinstance(z1, dict) else z1)[0]
            return core.cross_view_pairs(
                z1, z2, pool=(self.gathered(z2), self.replica_offset(batch)))
        return core.cross_view_pairs(z1, z2)

    def pair_labels(self, labels: Any, pool: Any) -> tuple:
        """In-batch pairing: both views' rows (as :class:`SimCLR`); cross-view: ``B``
        anchors against the ``B`` gathered second views."""
        if self.pairing == "in_batch":
            return super().pair_labels(labels, pool)
        return labels, pool

    def get_config(self) -> dict:
        config = super().get_config()
        config["pairing"] = self.pairing
        return config
