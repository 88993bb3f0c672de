"""A uniformly random proximity graph: the first graph of a sampler when no embedding of the
data is cheap enough to compute.

BatchSampler (Yang et al., KDD 2023, Alg. 1) starts from a proximity graph over the ``N``
examples. On a dataset read by index (``keras_hardneg.data.random_access``) any content-based
first graph would read, i.e. decode, all ``N`` images before the first step (1.28M JPEGs for
ImageNet). :func:`random_graph` gives each node ``K`` distinct out-neighbours drawn uniformly
from the other nodes, in ``O(N K)`` time and ``4 N K`` bytes: random walks on it give batches
unrelated to content, i.e. uniform batches, until the first
:class:`~keras_hardneg.callbacks.GraphRefreshCallback` rebuild from the embedding bank the
model fills in training. (Nodes the model has not seen yet keep these random neighbours at
refreshes: ``keep_unseen_rows``.)

Example:
>>> g = random_graph(1000, 8, seed=0)
>>> g.neighbors.shape, g.neighbors.dtype.name
((1000, 8), 'int32')
>>> bool((g.neighbors != np.arange(1000)[:, None]).all())
True
"""

from __future__ import annotations

import numbers

import numpy as np

from keras_hardneg.sampling.graph import ProximityGraph

__all__ = ["random_graph"]

_CHUNK = 65536  # rows drawn at a time: bounds the int64 temporaries


def random_graph(num_nodes: int, num_neighbors: int, seed: int = 0) -> ProximityGraph:
    """``K`` distinct uniformly random out-neighbours per node, no self loops.

    Row ``i`` is ``(i + d) mod N`` for ``K`` distinct offsets ``d`` drawn from ``1..N-1``
    (duplicates within a row, rare when ``K^2 << N``, are redrawn).

    Args:
        num_nodes: ``N >= 2``.
        num_neighbors: ``K``, ``1 <= K <= N - 1``.
        seed: integer seed.

    Returns:
        :class:`~keras_hardneg.sampling.graph.ProximityGraph` with int32 ``[N, K]``
        neighbours (``backend="random"``, ``num_candidates=0``: no candidates were scored).
    """
    for name, value, low in (("num_nodes", num_nodes, 2), ("num_neighbors", num_neighbors, 1)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
            raise ValueError(f"`{name}` must be an integer >= {low}; got {value!r}.")
    n, k = int(num_nodes), int(num_neighbors)
    if k > n - 1:
        raise ValueError(f"`num_neighbors` (K={k}) must be <= num_nodes - 1 = {n - 1}.")
    rng = np.random.default_rng(seed)
    out = np.empty((n, k), np.int32)
    for start in range(0, n, _CHUNK):
        stop = min(start + _CHUNK, n)
        offsets = _distinct_offsets(rng, stop - start, k, n)
        out[start:stop] = (np.arange(start, stop)[:, None] + offsets) % n
    return ProximityGraph(neighbors=out, num_candidates=0, backend="random", seed=int(seed),
                          info={"random": True})


def _distinct_offsets(rng, rows, k, n):
    """``[rows, k]`` offsets in ``1..n-1``, distinct within each row."""
    if 2 * k >= n - 1:  # dense: a permutation per row
        return np.stack([rng.permutation(n - 1)[:k] + 1 for _ in range(rows)])
    offsets = rng.integers(1, n, size=(rows, k), dtype=np.int64)
    while True:
        srt = np.sort(offsets, axis=1)
        dup_rows = np.nonzero((srt[:, 1:] == srt[:, :-1]).any(axis=1))[0]
        if dup_rows.size == 0:
            return offsets
        for r in dup_rows:  # few rows: redraw the repeated entries of each
            row = offsets[r]
            _, first = np.unique(row, return_index=True)
            repeat = np.setdiff1d(np.arange(k), first)
            row[repeat] = rng.integers(1, n, size=repeat.size)
