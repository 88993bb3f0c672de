"""GIN: the Graph Isomorphism Network of Xu et al. (ICLR 2019, "How Powerful are Graph Neural
Networks?"), the encoder of InfoGraph (Sun et al. 2020), GraphCL (You et al. 2020) and of the
graph experiments of HCL (Robinson et al. 2021), UnReMix (Tabassum et al. 2022) and
BatchSampler (Yang et al. 2023).

Input: a padded graph batch (the library's one format, see :mod:`keras_hardneg.data.graphs`)::

    "nodes":      float32 [N_max, F]   padding rows 0
    "edges":      int32   [E_max, 2]   (source, target) rows into "nodes"
    "node_graph": int32   [N_max]      graph of each node in [0, B); padding nodes have B
    "node_mask":  float32 [N_max]      1 real node, 0 padding
    "edge_mask":  float32 [E_max]      1 real edge, 0 padding
    "graph_mask": float32 [B]          1 real graph, 0 an empty padding graph

Layer ``k`` (``k = 1..K``), as the GIN of the InfoGraph / GraphCL code (``GINConv`` with a
2-layer MLP, then ReLU, then batch norm)::

    a_v   = (1 + eps) h_v + sum_{(u, v) in edges} h_u         (messages from source at target)
    h'_v  = BN(ReLU(Dense(ReLU(Dense(a_v)))))                 (MLP width ``width``)

Readout (Xu et al. Eq. 4.2, InfoGraph's ``global_add_pool`` of every layer): the sum over
each graph's real nodes of every layer's states, concatenated: ``[B, K * width]``. The node
embeddings are the per-layer node states concatenated, ``[N_max, K * width]`` (padding rows
0); InfoGraph's local embeddings.

Padding never matters: padding edges carry ``edge_mask`` 0 (no message), padding nodes are
left out of the batch-norm statistics (Keras ``BatchNormalization(mask=node_mask)``: masked
mean and biased variance over the real nodes) and of the pooling, and their states are set
to 0 after every layer. So a graph's embedding does not depend on the budgets
``(N_max, E_max)`` nor, in inference mode, on the other graphs of the batch.

Defaults (``width=32``, ``num_layers=3``, ``eps=0`` fixed) are the unsupervised TU setting of
HCL (App. D.2: GIN, K = 3 layers, d = 32), UnReMix (App.: the same) and BatchSampler's GraphCL
(App. E.2: 3-layer GIN, hidden size 32). Batch norm follows PyTorch's defaults, which those
codes use (``momentum`` 0.1 -> Keras 0.9, ``epsilon`` 1e-5); the dense layers use Glorot
uniform weights and zero biases (InfoGraph's ``init_emb``: Xavier uniform, bias 0).

Written with ``keras.ops`` (``segment_sum``): one implementation for every Keras backend.

Example:
>>> import numpy as np
>>> enc = gin(input_shape=(3,), width=4, num_layers=2)
>>> batch = {"nodes": np.ones((5, 3), "float32"),
...          "edges": np.array([[0, 1], [1, 0], [4, 4]], "int32"),
...          "node_graph": np.array([0, 0, 1, 2, 2], "int32"),
...          "node_mask": np.array([1, 1, 1, 0, 0], "float32"),
...          "edge_mask": np.array([1, 1, 0], "float32"),
...          "graph_mask": np.ones(2, "float32")}
>>> tuple(enc(batch).shape), enc.output_shape
((2, 8), (None, 8))
>>> tuple(enc.node_embeddings(batch).shape)
(5, 8)
"""

from __future__ import annotations

import numbers
from typing import Any

import keras
from keras import ops

from keras_hardneg.registry import ENCODERS, Param

__all__ = ["GINEncoder", "gin", "GRAPH_KEYS", "check_graph_batch"]

#: The keys a graph batch must have.
GRAPH_KEYS = ("nodes", "edges", "node_graph", "node_mask", "edge_mask", "graph_mask")

# PyTorch BatchNorm1d defaults (InfoGraph / GraphCL code): momentum 0.1, eps 1e-5.
_BN_MOMENTUM = 0.9
_BN_EPSILON = 1e-5


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"`{name}` must be a positive int; got {value!r}.")
    return value


def _dim(x: Any, axis: int) -> Any:
    """The static size of ``x`` along ``axis`` (an int), else a scalar tensor (TensorFlow
    with unknown shapes)."""
    size = x.shape[axis]
    return int(size) if size is not None else ops.shape(x)[axis]


def check_graph_batch(batch: Any, name: str = "graph batch") -> None:
    """Raises a ``ValueError`` naming ``name`` when ``batch`` is not a dict with the graph
    keys :data:`GRAPH_KEYS`."""
    if not isinstance(batch, dict):
        raise ValueError(f"`{name}` must be a dict of arrays with keys {list(GRAPH_KEYS)} "
                         f"(a padded graph batch); got {type(batch).__name__}.")
    missing = [k for k in GRAPH_KEYS if k not in batch]
    if missing:
        raise ValueError(f"`{name}` lacks the keys {missing}; a graph batch has "
                         f"{list(GRAPH_KEYS)} (see keras_hardneg.data.graphs); got keys "
                         f"{sorted(batch)}.")


@keras.saving.register_keras_serializable(package="keras_hardneg")
class GINEncoder(keras.Model):
    """Graph Isomorphism Network encoder: graph batch -> ``[B, num_layers * width]``.

    Args:
        feature_dim: ``F``, the width of the node features.
        width: the hidden width of every layer (``>= 2``: batch norm's masked moments
            squeeze a width-1 axis away).
        num_layers: ``K``, the number of GIN layers.
        eps: GIN's ``epsilon`` (the weight of a node's own state is ``1 + eps``); the
            InfoGraph / GraphCL code uses ``GINConv``'s default, 0, fixed.
        train_eps: make ``eps`` a trainable scalar per layer (GIN's "GIN-eps").
        batch_norm: batch norm after every layer (default True, as the papers' GIN).

    Call: ``encoder(batch, training=None, return_nodes=False)`` -> ``[B, K * width]``
    float32, or ``(graph_embeddings, node_embeddings [N_max, K * width])`` with
    ``return_nodes=True``. :meth:`node_embeddings` returns the second alone.
    """

    def __init__(self, feature_dim: int, width: int = 32, num_layers: int = 3,
                 eps: float = 0.0, train_eps: bool = False, batch_norm: bool = True,
                 **kwargs: Any):
        super().__init__(**kwargs)
        self.feature_dim = _positive_int(feature_dim, "feature_dim")
        self.width = _positive_int(width, "width")
        if self.width < 2 and batch_norm:
            raise ValueError(f"`width` must be >= 2 with batch_norm=True; got {width}.")
        self.num_layers = _positive_int(num_layers, "num_layers")
        if isinstance(eps, bool) or not isinstance(eps, (int, float)):
            raise ValueError(f"`eps` must be a number; got {eps!r}.")
        self.eps = float(eps)
        self.train_eps = bool(train_eps)
        self.batch_norm = bool(batch_norm)
        self.mlps, self.norms, self.eps_weights = [], [], []
        for i in range(self.num_layers):
            self.mlps.append([
                keras.layers.Dense(self.width, activation="relu", name=f"layer{i}_dense0"),
                keras.layers.Dense(self.width, name=f"layer{i}_dense1")])
            if self.batch_norm:
                self.norms.append(keras.layers.BatchNormalization(
                    momentum=_BN_MOMENTUM, epsilon=_BN_EPSILON, name=f"layer{i}_bn"))
        self.build((None, self.feature_dim))

    @property
    def output_shape(self) -> tuple:
        """``(None, num_layers * width)``."""
        return (None, self.num_layers * self.width)

    @property
    def embedding_dim(self) -> int:
        """``num_layers * width``, the size of graph and node embeddings."""
        return self.num_layers * self.width

    def build(self, input_shape: Any = None) -> None:
        in_dim = self.feature_dim
        for i in range(self.num_layers):
            first, second = self.mlps[i]
            first.build((None, in_dim))
            second.build((None, self.width))
            if self.batch_norm:
                self.norms[i].build((None, self.width))
            if self.train_eps:
                self.eps_weights.append(self.add_weight(
                    shape=(), initializer=keras.initializers.Constant(self.eps),
                    name=f"layer{i}_eps"))
            in_dim = self.width
        self.built = True

    def call(self, inputs: dict, training: bool | None = None, return_nodes: bool = False):
        check_graph_batch(inputs, "inputs")
        h = ops.cast(inputs["nodes"], "float32")
        edges = ops.cast(inputs["edges"], "int32")
        node_graph = ops.cast(inputs["node_graph"], "int32")
        node_mask = ops.cast(inputs["node_mask"], "float32")
        edge_mask = ops.cast(inputs["edge_mask"], "float32")
        num_nodes = _dim(h, 0)
        num_graphs = _dim(inputs["graph_mask"], 0)
        source, target = edges[:, 0], edges[:, 1]
        keep = node_mask[:, None]
        states = []
        for i in range(self.num_layers):
            messages = ops.take(h, source, axis=0) * edge_mask[:, None]
            aggregated = ops.segment_sum(messages, target, num_segments=num_nodes)
            own = (1.0 + self.eps_weights[i]) if self.train_eps else (1.0 + self.eps)
            first, second = self.mlps[i]
            h = ops.relu(second(first(own * h + aggregated)))
            if self.batch_norm:
                h = self.norms[i](h, training=training, mask=node_mask)
            h = h * keep
            states.append(h)
        nodes = ops.concatenate(states, axis=-1)
        pooled = ops.segment_sum(nodes, node_graph, num_segments=num_graphs + 1)
        graphs = ops.cast(pooled[:num_graphs], "float32")
        if return_nodes:
            return graphs, ops.cast(nodes, "float32")
        return graphs

    def node_embeddings(self, inputs: dict, training: bool | None = None):
        """``[N_max, num_layers * width]``: every layer's node states, concatenated
        (padding rows 0)."""
        return self(inputs, training=training, return_nodes=True)[1]

    def compute_output_shape(self, input_shape: Any) -> tuple:
        return self.output_shape

    def get_config(self) -> dict:
        return {**super().get_config(),  # name, trainable, dtype policy
                "feature_dim": self.feature_dim, "width": self.width,
                "num_layers": self.num_layers, "eps": self.eps,
                "train_eps": self.train_eps, "batch_norm": self.batch_norm}

    @classmethod
    def from_config(cls, config: dict) -> "GINEncoder":
        return cls(**config)


@ENCODERS.register("gin", params={
    "width": Param(int, low=2, help="hidden width of every GIN layer (embedding: "
                   "num_layers * width)"),
    "num_layers": Param(int, low=1, help="number of GIN layers"),
}, modality="graph")
def gin(input_shape: tuple = (1,), width: int = 32, num_layers: int = 3, eps: float = 0.0,
        train_eps: bool = False, batch_norm: bool = True, name: str = "gin") -> GINEncoder:
    """GIN encoder (Xu et al. 2019) for graph batches with ``F``-wide node features.

    Defaults: the unsupervised TU setting of HCL / UnReMix (InfoGraph) and of BatchSampler's
    GraphCL (3 layers of width 32, graph embedding ``[B, 96]``).

    Args:
        input_shape: ``(F,)``, the node-feature width.
        width: hidden width of every layer, ``>= 2``.
        num_layers: ``K >= 1``.
        eps, train_eps, batch_norm: see :class:`GINEncoder`.
        name: model name.

    Returns:
        a :class:`GINEncoder`.

    Example:
    >>> gin(input_shape=(7,)).output_shape
    (None, 96)
    """
    try:
        shape = tuple(input_shape)
    except TypeError:
        shape = ()
    if len(shape) != 1:
        raise ValueError(f"`input_shape` must be (F,), the node-feature width; got "
                         f"{input_shape!r}.")
    feature_dim = shape[0]
    if isinstance(feature_dim, numbers.Integral) and not isinstance(feature_dim, bool):
        feature_dim = int(feature_dim)
    return GINEncoder(_positive_int(feature_dim, "input_shape[0]"), width=width,
                      num_layers=num_layers, eps=eps, train_eps=train_eps,
                      batch_norm=batch_norm, name=name)
