"""InfoGraph (Sun et al., "InfoGraph: Unsupervised and Semi-supervised Graph-Level
Representation Learning via Mutual Information Maximization", ICLR 2020), the graph set-up of
HCL (Robinson et al. 2021, App. D.2) and UnReMix (Tabassum et al. 2022, Sec. 4.3), as a Keras
model trained with ``fit()``.

InfoGraph maximises the mutual information between a graph's embedding (global) and the
embeddings of its nodes (local, every GIN layer's node states concatenated). Each real node
is an anchor; its positive is its own graph's global embedding; its negatives are the other
``B - 1`` graphs of the batch. Both embeddings go through InfoGraph's projection networks
(``FF``: three Dense-ReLU layers plus a linear shortcut, :class:`InfoGraphProjection`).

Objectives (``estimator``):

* ``"contrastive"`` (default): the pairs above as a
  :class:`~keras_hardneg.losses.core.ContrastivePairs` (:func:`local_global_pairs`: a pool of
  the ``B`` global embeddings, a negative mask removing the anchor's own graph, ``N = B - 1``)
  scored by the compiled loss of the family on cosines / temperature: NT-Xent (the InfoNCE
  form of InfoGraph's objective), the debiased loss (Chuang et al. 2020) and the hard-negative
  loss (HCL, what Robinson et al. ran on InfoGraph); Ring and UnReMix work too (UnReMix's
  uncertainty uses the bias part of its gradient Gram, ``e_a . e_j``: InfoGraph's projection
  is not a single Dense layer). Padding nodes are anchors with weight 0 (``node_mask``).
* ``"jsd"``: InfoGraph's own Jensen-Shannon estimator (Deep InfoMax, Hjelm et al. 2019) on
  raw inner products ``T = local . global``:
  ``mean_neg(softplus(-T) + T - log 2) - mean_pos(log 2 - softplus(-T))``; only with the
  default NT-Xent compiled (which then only names the metrics).

What HCL changed: its App. D.2 says it took the InfoGraph code and modified only
``gan_losses.py`` (the estimators), "adding in our proposed hard sampling via reweighting",
with the inner products clipped to ``[-2, 2]`` for the reweighting because graph embeddings
are not normalised (its Fig. 14 gives that objective in the NCE form
``-log(pos / (pos + Ng))``). So HCL's InfoGraph objective is the hard-negative objective on
InfoGraph's local-global pairs; here it is the family's ``hard`` loss on those pairs. One
difference: the family scores cosines / temperature (bounded, so no clipping is needed),
where HCL scored raw inner products with the clipping trick.

Padding and masks: nodes with ``node_mask`` 0 weigh nothing in the loss and the metrics;
graphs with ``graph_mask`` 0 (empty padding graphs) are no one's negative, and the losses
count ``N = G_real - 1`` negatives (the real graphs other than the node's own). Negatives come from the local (per-replica)
batch; on JAX the step holds the global batch.

Example:
>>> import numpy as np, keras_hardneg as khn
>>> from keras_hardneg.data.graphs import pad_graphs
>>> rng = np.random.default_rng(0)
>>> graphs = [(rng.normal(size=(3, 4)).astype("float32"),
...            np.array([[0, 1], [1, 0], [1, 2], [2, 1]])) for _ in range(4)]
>>> model = InfoGraph(khn.encoders.gin(input_shape=(4,), width=8, num_layers=2))
>>> model.compile(optimizer="adam", loss="hard")
>>> logs = model.train_on_batch(pad_graphs(graphs, (16, 16)), return_dict=True)
>>> bool(np.isfinite(logs["loss"]))
True
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Sequence

import keras
from keras import ops

from keras_hardneg import losses as losses_lib
from keras_hardneg.losses import core
from keras_hardneg.losses.base import reduce_anchor_losses
from keras_hardneg.models.base import ContrastiveModel
from keras_hardneg.registry import FRAMEWORKS, Param

__all__ = ["InfoGraph", "InfoGraphProjection", "local_global_pairs", "jsd_local_global_loss",
           "ESTIMATORS"]

#: InfoGraph's objectives (see the module docstring).
ESTIMATORS = ("contrastive", "jsd")

_LOG2 = math.log(2.0)


def _static(x: Any, axis: int) -> Any:
    size = x.shape[axis]
    return int(size) if size is not None else ops.shape(x)[axis]


@keras.saving.register_keras_serializable(package="keras_hardneg")
class InfoGraphProjection(keras.Model):
    """InfoGraph's projection network (``FF`` in its code): Dense-ReLU layers of widths
    ``dims`` plus a linear shortcut, ``f(x) = block(x) + Dense(x)``.

    Args:
        input_dim: ``F``.
        dims: the widths of the block's layers (InfoGraph: three of width ``F``); the
            output has ``dims[-1]``.

    Call: ``[*, F] -> [*, dims[-1]]`` float32.
    """

    def __init__(self, input_dim: int, dims: Sequence[int], **kwargs: Any):
        super().__init__(**kwargs)
        self.input_dim = int(input_dim)
        self.dims = [int(d) for d in dims]
        if not self.dims or min(self.dims) < 1:
            raise ValueError(f"`dims` must be positive widths; got {dims!r}.")
        self.block = [keras.layers.Dense(d, activation="relu", name=f"dense_{i}")
                      for i, d in enumerate(self.dims)]
        self.shortcut = keras.layers.Dense(self.dims[-1], name="shortcut")
        self.build((None, self.input_dim))

    def build(self, input_shape: Any = None) -> None:
        shape = self.input_dim
        for layer, d in zip(self.block, self.dims):
            layer.build((None, shape))
            shape = d
        self.shortcut.build((None, self.input_dim))
        self.built = True

    def call(self, x: Any, training: bool | None = None):
        h = x
        for layer in self.block:
            h = layer(h)
        return ops.cast(h + self.shortcut(x), "float32")

    def compute_output_shape(self, input_shape: Any) -> tuple:
        return tuple(input_shape[:-1]) + (self.dims[-1],)

    def get_config(self) -> dict:
        return {**super().get_config(),  # name, trainable, dtype policy
                "input_dim": self.input_dim, "dims": list(self.dims)}

    @classmethod
    def from_config(cls, config: dict) -> "InfoGraphProjection":
        return cls(**config)


def _own_graph(node_graph: Any, num_graphs: Any) -> Any:
    """Each node's graph; padding nodes (``node_graph == B``) get graph ``B - 1`` (any real
    row works: their weight is 0), so every anchor has one positive and ``B - 1`` negatives."""
    return ops.minimum(ops.cast(node_graph, "int32"), num_graphs - 1)


def local_global_pairs(local: Any, global_: Any, node_graph: Any,
                       graph_mask: Any = None) -> core.ContrastivePairs:
    """InfoGraph's pairs: anchors = nodes, positive = own graph, negatives = other graphs.

    Args:
        local: ``[N_max, d]`` node (local) embeddings.
        global_: ``[B, d]`` graph (global) embeddings.
        node_graph: int ``[N_max]``, the graph of each node (``B`` for padding nodes).
        graph_mask: optional ``[B]``, 0 for empty padding graphs (never a negative).

    Returns:
        :class:`~keras_hardneg.losses.core.ContrastivePairs` with ``A = N_max`` anchors, the
        pool of ``M = B`` graphs, a negative mask and ``N = B - 1`` (an int), or with
        ``graph_mask`` ``N = G_real - 1``, the real graphs other than the node's own (a scalar
        int32 tensor): what the debiased, hard, Ring and UnReMix terms count.

    Example:
    >>> import numpy as np
    >>> p = local_global_pairs(np.eye(3, 4, dtype="float32"), np.eye(2, 4, dtype="float32"),
    ...                        np.array([0, 1, 2]))
    >>> p.num_negatives, np.asarray(p.negative_mask).tolist()
    (1, [[False, True], [True, False], [True, False]])
    """
    local = core.validate_embeddings(local, "local", min_rows=1)
    global_ = core.validate_embeddings(global_, "global_", min_rows=1)
    local_f = ops.cast(local, "float32")
    global_f = ops.cast(global_, "float32")
    if local_f.shape[-1] is not None and global_f.shape[-1] is not None and \
            local_f.shape[-1] != global_f.shape[-1]:
        raise ValueError(f"`local` and `global_` must have the same dimension; got "
                         f"{tuple(local_f.shape)} and {tuple(global_f.shape)}.")
    num_graphs = _static(global_f, 0)
    anchor_norms = ops.sqrt(ops.sum(ops.square(local_f), axis=-1))
    pool_norms = ops.sqrt(ops.sum(ops.square(global_f), axis=-1))
    anchors = core.l2_normalize(local_f)
    pool = core.l2_normalize(global_f)
    own = _own_graph(node_graph, num_graphs)
    positives = ops.take(pool, own, axis=0)
    graph_ids = ops.arange(num_graphs, dtype="int32")
    mask = ops.not_equal(own[:, None], graph_ids[None, :])
    num_negatives = num_graphs - 1
    if graph_mask is not None:
        real = ops.greater(ops.cast(graph_mask, "float32"), 0.0)
        mask = ops.logical_and(mask, real[None, :])
        # A real node's negatives are the other *real* graphs (a scalar tensor: the number
        # of padding graphs is known only at run time).
        num_negatives = ops.sum(ops.cast(real, "int32")) - 1
    return core.ContrastivePairs(
        anchors=anchors, positives=positives, negatives=pool,
        positive_cos=ops.sum(anchors * positives, axis=-1),
        negative_cos=ops.matmul(anchors, ops.transpose(pool)),
        negative_mask=mask, num_negatives=num_negatives, partner_index=own,
        anchor_norms=anchor_norms, negative_norms=pool_norms)


def jsd_node_terms(local: Any, global_: Any, node_graph: Any, graph_mask: Any = None) -> Any:
    """``[N_max]`` InfoGraph's Jensen-Shannon objective per node (see
    :func:`jsd_local_global_loss`): ``mean over the node's negative graphs of
    (softplus(-T) + T - log 2)  -  (log 2 - softplus(-T[n, own(n)]))``. Every real node has
    the same negatives' count (the real graphs other than its own), so the mean of these over
    the real nodes is the estimator's ``E_neg - E_pos``; padding nodes' values are to be
    masked."""
    local = ops.cast(local, "float32")
    global_ = ops.cast(global_, "float32")
    num_graphs = _static(global_, 0)
    scores = ops.matmul(local, ops.transpose(global_))                    # [N, B]
    own = _own_graph(node_graph, num_graphs)
    positive = ops.equal(own[:, None], ops.arange(num_graphs, dtype="int32")[None, :])
    negative = ops.cast(ops.logical_not(positive), "float32")
    if graph_mask is not None:
        negative = negative * ops.cast(graph_mask, "float32")[None, :]
    e_pos = ops.sum(ops.where(positive, _LOG2 - ops.softplus(-scores), 0.0), axis=1)
    e_neg = ops.sum((ops.softplus(-scores) + scores - _LOG2) * negative, axis=1) / \
        ops.maximum(ops.sum(negative, axis=1), 1.0)
    return e_neg - e_pos


def jsd_local_global_loss(local: Any, global_: Any, node_graph: Any, node_mask: Any,
                          graph_mask: Any = None) -> Any:
    """InfoGraph's Jensen-Shannon MI estimator (as its ``local_global_loss_``, measure
    ``"JSD"``), on raw inner products ``T[n, g] = local[n] . global_[g]``::

        E_pos = mean over real nodes of        log 2 - softplus(-T[n, own(n)])
        E_neg = mean over real (node, other real graph) of  softplus(-T) + T - log 2
        loss  = E_neg - E_pos

    Args:
        local: ``[N_max, d]``; global_: ``[B, d]``; node_graph: int ``[N_max]``;
        node_mask: ``[N_max]`` (1 real node); graph_mask: optional ``[B]``.

    Returns:
        the scalar loss (float32).

    Example:
    >>> import numpy as np
    >>> z = np.zeros((2, 3), "float32")
    >>> round(float(jsd_local_global_loss(z, z, np.array([0, 1]), np.ones(2, "float32"))), 5)
    0.0
    """
    # Every real node has the same number of negative graphs, so the mean over (node,
    # negative) pairs is the mean over real nodes of each node's mean: jsd_node_terms.
    return reduce_anchor_losses(jsd_node_terms(local, global_, node_graph, graph_mask),
                                mask=ops.greater(ops.cast(node_mask, "float32"), 0.0))


def _weighted_mean(values: Any, weights: Any) -> Any:
    values = ops.cast(values, "float32")
    return ops.sum(values * weights) / ops.maximum(ops.sum(weights), 1.0)


@FRAMEWORKS.register("infograph", params={
    "estimator": Param(str, choices=ESTIMATORS, help="contrastive: the compiled loss of the "
                       "family on local-global pairs (nt_xent, debiased, hard); jsd: "
                       "InfoGraph's Jensen-Shannon estimator"),
}, modality="graph")
@keras.saving.register_keras_serializable(package="keras_hardneg")
class InfoGraph(ContrastiveModel):
    """InfoGraph: local (node) vs global (graph) contrast of one batch of graphs.

    See the module docstring for the pairs, the objectives and HCL's variant.

    Args:
        encoder: a graph encoder that returns node embeddings too:
            ``encoder(batch, training=..., return_nodes=True) -> ([B, F], [N_max, F])``
            (:func:`keras_hardneg.encoders.gin`).
        projection_dims: widths of InfoGraph's projection networks (the same for the local
            and the global one); default ``(F, F, F)`` as InfoGraph's ``FF``.
        augmentation: must be None: InfoGraph makes no views.
        estimator: ``"contrastive"`` (default) or ``"jsd"``.
        **kwargs: ``memory_bank_size`` (the bank keeps the global projections),
            ``gather_across_replicas`` (unused: negatives are the local batch's graphs),
            ``sync_batchnorm``, ``head_version`` (unused) as in :class:`ContrastiveModel`.

    Attributes:
        projector: the global projection network (:class:`InfoGraphProjection`).
        local_projector: the local one.

    Data: one graph batch per step, no views. ``fit`` takes a plain graph batch
    (``x`` a dict with ``"nodes"``, ...), ``{"graphs": graph_batch, "index": [B]}``, or the
    GraphCL feed ``{"view1": ..., "view2": ..., "index": ...}`` (``view1`` is used,
    ``view2`` ignored: feed unaugmented graphs as ``view1`` for InfoGraph proper), each
    optionally with labels (they feed only the ``false_negative_rate`` metric); one element
    per step (whole graph batches, never arrays for Keras to slice).

    Losses: every loss of the family with ``estimator="contrastive"``; only NT-Xent (the
    default) with ``"jsd"``, which refuses any other at :meth:`compile`.
    """

    def __init__(self, encoder: keras.Model, projection_dims: Sequence[int] | None = None,
                 augmentation: Any = None, estimator: str = "contrastive", **kwargs: Any):
        if estimator not in ESTIMATORS:
            raise ValueError(f"`estimator` must be one of {list(ESTIMATORS)}; got "
                             f"{estimator!r}.")
        if augmentation is not None:
            raise ValueError("InfoGraph makes no views: `augmentation` must be None; got "
                             f"{augmentation!r}.")
        if not isinstance(encoder, keras.Model):
            raise ValueError(f"`encoder` must be a keras.Model; got {type(encoder).__name__}.")
        shape = getattr(encoder, "output_shape", None)
        if shape is None or shape[-1] is None:
            raise ValueError("`encoder` must have a known output shape [batch, features]; "
                             f"got {encoder!r}.")
        dim = int(shape[-1])
        if projection_dims is None:
            projection_dims = (dim, dim, dim)
        kwargs.setdefault("head_version", "moco_v2")  # recorded in the config only
        super().__init__(encoder, projection_dims=projection_dims, augmentation=None,
                         **kwargs)
        self.estimator = estimator
        self.local_projector = InfoGraphProjection(dim, list(self.projection_dims),
                                                   name="local_projection")
        self.built = True

    def make_projector(self) -> keras.layers.Layer:
        """The global projection network (in the base's ``projector`` slot)."""
        return InfoGraphProjection(self.feature_dim, list(self.projection_dims),
                                   name="global_projection")

    def query_layers(self) -> list:
        return [self.encoder, self.projector, self.local_projector]

    # ----------------------------------------------------------------- compile
    def compile(self, optimizer: Any = "adam", loss: Any = None, jit_compile: Any = "auto",
                **kwargs: Any) -> None:
        """As :meth:`ContrastiveModel.compile`; with ``estimator="jsd"`` only NT-Xent (the
        default) is accepted: the JSD estimator has no negative weighting."""
        super().compile(optimizer=optimizer, loss=loss, jit_compile=jit_compile, **kwargs)
        if self.estimator == "jsd" and type(self.contrastive_loss) is not losses_lib.NTXentLoss:
            raise ValueError(
                "InfoGraph(estimator='jsd') uses InfoGraph's Jensen-Shannon estimator, which "
                "takes no other loss; compile with loss='nt_xent' (the default), or use "
                f"estimator='contrastive' for {type(self.contrastive_loss).__name__}.")

    # ------------------------------------------------------------------ inputs
    @staticmethod
    def graph_batch(x: Any) -> tuple:
        """``(graph_batch, index or None)`` of a dataset element's ``x`` (see the class
        docstring)."""
        if isinstance(x, dict):
            if "nodes" in x:
                return x, x.get("index")
            for key in ("graphs", "view1"):
                if key in x:
                    return x[key], x.get("index")
        raise ValueError(
            "InfoGraph takes a graph batch (a dict with 'nodes', ...), {'graphs': batch}, "
            "or {'view1': batch, ...}; got "
            f"{sorted(x) if isinstance(x, dict) else type(x).__name__}.")

    def make_views(self, x: Any, training: bool | None) -> tuple:
        """InfoGraph has one view: ``(graph_batch, None, index)``."""
        graph, index = self.graph_batch(x)
        return graph, None, index

    def call(self, x: Any, training: bool = False):
        """Encoder features ``[B, F]`` of a graph batch (or of the training formats)."""
        return self.encoder(self.graph_batch(x)[0], training=training)

    # ---------------------------------------------------------------- the step
    def forward(self, inputs: dict, training: bool) -> dict:
        step = self.contrastive_forward(inputs["view1"], None, inputs["labels"], training,
                                        sample_weight=inputs.get("sample_weight"))
        step.update(views=(inputs["view1"],), index=inputs["index"])
        return self.mark_usable(step)

    def contrastive_forward(self, view1: Any, view2: Any, labels: Any, training: bool,
                            sample_weight: Any = None) -> dict:
        """The step's pairs and loss; ``sample_weight`` ``[B]`` (one per graph) weighs each
        node by its graph's weight; padding nodes are masked out of the reduction."""
        graph = view1
        g, nodes = self.encoder(graph, training=training, return_nodes=True)
        global_z = self.projector(g, training=training)
        local_z = self.local_projector(nodes, training=training)
        node_graph = ops.cast(graph["node_graph"], "int32")
        node_mask = ops.cast(graph["node_mask"], "float32")
        graph_mask = graph.get("graph_mask")
        pairs = local_global_pairs(local_z, global_z, node_graph, graph_mask)
        weights = node_mask
        terms = {
            "positive_cosine": _weighted_mean(pairs.positive_cos, weights),
            "negative_cosine": _weighted_mean(
                core.masked_mean(pairs.negative_cos, pairs.negative_mask), weights),
        }
        if self.estimator == "jsd":
            per_node = jsd_node_terms(local_z, global_z, node_graph, graph_mask)
        else:
            anchor_terms = self.contrastive_loss.per_anchor_terms(pairs)
            per_node = anchor_terms["loss"]
            if self.contrastive_loss.has_clamp:
                terms["clamp_fraction"] = _weighted_mean(anchor_terms["clamped"], weights)
        node_weight = None
        if sample_weight is not None:  # a graph's weight, for each of its nodes
            node_weight = ops.take(ops.reshape(ops.cast(sample_weight, "float32"), (-1,)),
                                   pairs.partner_index, axis=0)
        loss_value = self.reduce_loss(per_node, node_weight,
                                      mask=ops.greater(node_mask, 0.0))
        false_negatives = None
        if labels is not None:
            num_graphs = _static(global_z, 0)
            labels = ops.cast(ops.reshape(labels, (-1,)), "int32")
            anchor_labels = ops.take(labels, _own_graph(node_graph, num_graphs), axis=0)
            real = ops.greater(node_mask, 0.0)[:, None]
            counted = dataclasses.replace(
                pairs, negative_mask=ops.logical_and(pairs.negative_mask, real))
            false_negatives = self.false_negatives(counted, anchor_labels, labels)
        return {"loss": loss_value, "terms": terms, "projections": (global_z, local_z),
                "bank": global_z, "false_negatives": false_negatives,
                "num_negatives": pairs.num_negatives}

    def get_config(self) -> dict:
        config = super().get_config()
        config.pop("augmentation", None)
        config["estimator"] = self.estimator
        return config
