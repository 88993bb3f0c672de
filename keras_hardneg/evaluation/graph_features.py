"""Frozen graph embeddings: a graph encoder run over a whole set of graphs.

The encoder runs in inference mode over fixed-shape evaluation batches
(``graphset.batches(batch_size)``: every batch has ``batch_size`` graphs, the last one padded
with empty graphs, and the budgets of the set), compiled once (``tf.function`` on
TensorFlow, ``jax.jit`` of a stateless call on JAX; see :mod:`.features`); the rows of
padding graphs are dropped.
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np

from keras_hardneg.evaluation.features import _encoder_fn

__all__ = ["embed_graphs"]


def embed_graphs(encoder: Any, graphset: Any, batch_size: int = 128) -> np.ndarray:
    """``[N, F]`` float32 NumPy embeddings of every graph of ``graphset``, in order.

    Args:
        encoder: a graph encoder (e.g. :func:`keras_hardneg.encoders.gin`): graph batch ->
            ``[B, F]``; run with ``training=False``.
        graphset: a :class:`keras_hardneg.data.graphs.GraphSet` (anything with ``len()``
            and ``batches(batch_size)`` yielding graph batches with ``"graph_mask"``).
        batch_size: graphs per batch, ``>= 1`` (default 128).

    Returns:
        float32 array ``[len(graphset), F]``.

    Example:
    >>> import numpy as np
    >>> from keras_hardneg.data.graphs import GraphSet
    >>> from keras_hardneg.encoders import gin
    >>> edges = np.array([[0, 1], [1, 0]])
    >>> graphs = GraphSet.from_graphs([(np.ones((2, 3), "float32"), edges)] * 5, [0, 1] * 2 + [0])
    >>> embed_graphs(gin(input_shape=(3,), width=4, num_layers=2), graphs, batch_size=2).shape
    (5, 8)
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
            or batch_size < 1:
        raise ValueError(f"`batch_size` must be a positive integer; got {batch_size!r}.")
    if not hasattr(graphset, "batches") or not hasattr(graphset, "__len__"):
        raise ValueError("`graphset` must be a GraphSet (keras_hardneg.data.graphs) with "
                         f"len() and batches(batch_size); got {type(graphset).__name__}.")
    if len(graphset) == 0:
        raise ValueError("`graphset` is empty.")
    run = _encoder_fn(encoder)
    rows = []
    for batch in graphset.batches(int(batch_size)):
        out = np.asarray(keras.ops.convert_to_numpy(run(batch)), dtype=np.float32)
        rows.append(out[np.asarray(batch["graph_mask"]) > 0])
    features = np.concatenate(rows, axis=0)
    if features.shape[0] != len(graphset):
        raise ValueError(f"`graphset.batches` gave {features.shape[0]} real graphs for a set "
                         f"of {len(graphset)}.")
    return features
