"""Nearest documents of each query by cosine similarity: exact (blocked matrix products in
NumPy) or approximate (the ScaNN index of :mod:`keras_hardneg.sampling.graph`).

:func:`top_k_cosine` returns, per query, the ``k`` corpus rows of largest cosine, best first,
with some rows per query excluded (a query's known positives when mining, the document
whose id equals the query's when evaluating BEIR-style).

Conventions: cosine is the dot product of L2-normalised rows, in float32; a zero row has
cosine 0 with everything. ``"brute"`` is exact: ties are broken by the lower corpus row
(so results do not depend on the blocking). Memory: one block of ``[b, N]`` float32 scores,
``b`` chosen so that the block stays under ``max_block_bytes`` (default 64 MiB). When fewer
than ``k`` rows remain after the exclusions, the tail is padded with index -1 and score
``-inf``.

Example:
>>> corpus = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]], "float32")
>>> queries = np.array([[2.0, 0.0], [0.0, 3.0]], "float32")
>>> idx, scores = top_k_cosine(queries, corpus, 2, exclude=[[], [2]])
>>> idx
array([[0, 1],
       [1, 0]])
>>> scores.round(2)
array([[1. , 0.6],
       [0.8, 0. ]], dtype=float32)
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

__all__ = ["INDEXES", "top_k_cosine", "unit_rows", "unit_pair"]

#: Values of ``index``.
INDEXES = ("brute", "scann")
_DEFAULT_BLOCK_BYTES = 64 * 2 ** 20


def unit_rows(x, name: str) -> np.ndarray:
    """``x`` as float32 ``[n, d]`` with L2-normalised rows (zero rows stay zero).

    Raises:
        ValueError: not rank 2, no row or column, not numeric, or a non-finite value.
    """
    a = np.asarray(x)
    if a.ndim != 2 or a.shape[0] < 1 or a.shape[1] < 1:
        raise ValueError(f"`{name}` must be a [n, d] array with n, d >= 1; got shape {a.shape}.")
    if not np.issubdtype(a.dtype, np.number):
        raise ValueError(f"`{name}` must be numeric; got dtype {a.dtype}.")
    a = a.astype(np.float32)
    if not np.isfinite(a).all():
        row = int(np.nonzero(~np.isfinite(a).all(axis=1))[0][0])
        raise ValueError(f"`{name}` has a non-finite value (NaN or inf), e.g. in row {row}.")
    norms = np.linalg.norm(a.astype(np.float64), axis=1)
    norms[norms == 0] = 1.0
    return (a / norms[:, None]).astype(np.float32)


def _exclusions(exclude, num_queries: int, num_docs: int) -> list[np.ndarray]:
    if exclude is None:
        return [np.empty(0, np.int64)] * num_queries
    if len(exclude) != num_queries:
        raise ValueError(f"`exclude` must have one entry per query ({num_queries}); got "
                         f"{len(exclude)}.")
    out = []
    for i, rows in enumerate(exclude):
        rows = np.unique(np.asarray(list(rows), dtype=np.int64))
        if rows.size and (rows[0] < 0 or rows[-1] >= num_docs):
            bad = int(rows[0] if rows[0] < 0 else rows[-1])
            raise ValueError(f"`exclude[{i}]` names corpus row {bad}; rows must lie in "
                             f"[0, {num_docs}).")
        out.append(rows)
    return out


def _check_k(k) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"`k` must be an integer >= 1; got {k!r}.")
    return int(k)


def unit_pair(query_emb: Any, corpus_emb: Any, index: str) -> tuple[np.ndarray, np.ndarray]:
    """Unit rows of ``query_emb [Q, d]`` and ``corpus_emb [N, d]`` (same ``d``), after
    ``index`` is checked to be one of :data:`INDEXES`; one-line errors otherwise."""
    if index not in INDEXES:
        raise ValueError(f"`index` must be one of {', '.join(map(repr, INDEXES))}; got "
                         f"{index!r}.")
    q = unit_rows(query_emb, "query_emb")
    c = unit_rows(corpus_emb, "corpus_emb")
    if q.shape[1] != c.shape[1]:
        raise ValueError(f"`query_emb` and `corpus_emb` must have the same width d; got "
                         f"{q.shape[1]} and {c.shape[1]}.")
    return q, c


def top_k_cosine(query_emb: np.ndarray, corpus_emb: np.ndarray, k: int, *,
                 exclude: Sequence[Sequence[int]] | None = None, index: str = "brute",
                 max_block_bytes: int = _DEFAULT_BLOCK_BYTES,
                 scann_options: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` corpus rows of largest cosine for each query, best first.

    Args:
        query_emb: ``[Q, d]`` query embeddings (any scale).
        corpus_emb: ``[N, d]`` document embeddings (any scale).
        k: results per query (``>= 1``; more than ``N`` pads with -1).
        exclude: per query, corpus rows never returned (or None).
        index: ``"brute"`` (exact) or ``"scann"`` (approximate; needs the ``scann`` package
            and TensorFlow, imported on use; scores are re-computed exactly).
        max_block_bytes: memory bound of one block of scores (``"brute"``).
        scann_options: ScaNN settings (see :class:`keras_hardneg.sampling.ProximityGraph`).

    Returns:
        ``(indices int64 [Q, k], scores float32 [Q, k])``, sorted by decreasing score.
    """
    q, c = unit_pair(query_emb, corpus_emb, index)
    k = _check_k(k)
    if isinstance(max_block_bytes, bool) or not isinstance(max_block_bytes, (int, np.integer)) \
            or max_block_bytes < 1:
        raise ValueError(f"`max_block_bytes` must be an integer >= 1; got {max_block_bytes!r}.")
    excl = _exclusions(exclude, q.shape[0], c.shape[0])
    if index == "scann":
        return _scann_top_k(q, c, k, excl, scann_options or {})
    return _brute_top_k(q, c, k, excl, int(max_block_bytes))


def _brute_top_k(q, c, k, excl, max_block_bytes):
    n_q, n = q.shape[0], c.shape[0]
    kk = min(k, n)
    indices = np.full((n_q, k), -1, dtype=np.int64)
    scores = np.full((n_q, k), -np.inf, dtype=np.float32)
    rows = max(1, min(n_q, max_block_bytes // (4 * n)))
    for a in range(0, n_q, rows):
        b = min(a + rows, n_q)
        s = q[a:b] @ c.T
        for r in range(b - a):
            if excl[a + r].size:
                s[r, excl[a + r]] = -np.inf
        idx = _top_rows(s, kk)
        sc = np.take_along_axis(s, idx, axis=1)
        indices[a:b, :kk] = np.where(np.isneginf(sc), -1, idx)
        scores[a:b, :kk] = sc
    return indices, scores


def _top_rows(s: np.ndarray, k: int) -> np.ndarray:
    """Column indices of the ``k`` largest entries of each row, best first, ties to the lower
    column (exact: rows whose k-th value is tied beyond the cut are resolved by a stable
    sort)."""
    n = s.shape[1]
    if k < n:
        part = np.argpartition(-s, k - 1, axis=1)[:, :k]
        kth = np.take_along_axis(s, part, axis=1).min(axis=1)
        ties = (s >= kth[:, None]).sum(axis=1) > k
        for r in np.nonzero(ties)[0]:  # rare with float embeddings: a tie at the cut
            part[r] = np.argsort(-s[r], kind="stable")[:k]
    else:
        part = np.broadcast_to(np.arange(n), s.shape).copy()
    vals = np.take_along_axis(s, part, axis=1)
    order = np.lexsort((part, -vals), axis=1)
    return np.take_along_axis(part, order, axis=1)


def _scann_top_k(q, c, k, excl, opts):
    try:
        import scann  # noqa: F401  (imports TensorFlow; keep lazy)
    except ImportError as err:  # pragma: no cover
        raise ImportError("index='scann' needs the `scann` package and TensorFlow (pip install "
                          "scann); index='brute' needs neither.") from err
    from keras_hardneg.sampling.graph import _scann_searcher

    n = c.shape[0]
    most = max((e.size for e in excl), default=0)
    want = min(n, k + most)
    # _scann_searcher returns `num + 1` results (a kNN graph drops the node itself)
    searcher, _ = _scann_searcher(c, want - 1, opts)
    found, _ = searcher.search_batched_parallel(q, final_num_neighbors=want, batch_size=256)
    found = np.asarray(found, dtype=np.int64)
    indices = np.full((q.shape[0], k), -1, dtype=np.int64)
    scores = np.full((q.shape[0], k), -np.inf, dtype=np.float32)
    for i in range(q.shape[0]):
        row = found[i][found[i] >= 0]
        if excl[i].size:
            row = row[~np.isin(row, excl[i])]
        s = c[row] @ q[i]  # exact scores of the candidates
        order = np.lexsort((row, -s))[:k]
        indices[i, :order.size] = row[order]
        scores[i, :order.size] = s[order]
    return indices, scores
