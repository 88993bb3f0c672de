"""Hard-negative mining for retrieval: for each query, the corpus documents ranked just below
its known positives, filtered by margins against the positive's score.

The semantics follow sentence-transformers' ``util.mine_hard_negatives`` (its parameters and
names) and NV-Retriever (Moreira et al. 2024, "NV-Retriever: Improving text embedding models
with effective hard-negative mining"), whose best method "TopK-PercPos 95 %" is
``relative_margin=0.05, sampling_strategy="top"``. Ours, precisely, for query ``q`` with
judged positives ``P(q)`` (corpus rows), cosine scores ``s(q, d)`` in float32:

1. **Reference score.** ``pos(q) = min_{p in P(q)} s(q, p)``: the least similar positive, so
   a negative kept is below *every* positive by the margin (sentence-transformers' choice).
2. **Ranking.** All corpus rows except ``P(q)`` (when ``exclude_positives``, the default)
   and ``exclude[q]``, by decreasing score, ties to the lower row. Rank ``r`` is 0-based.
3. **Window.** Candidates are ranks ``range_min <= r < range_max``. ``range_max=None`` means
   ``range_min + num_negatives`` without score filters and ``range_min + 10 *
   num_negatives`` with any (as sentence-transformers derives it); it is clipped to the corpus.
4. **Filters**, in this order, each counted in the summary for what it removes of the
   candidates still left:
   ``absolute_margin`` keeps ``s <= pos(q) - absolute_margin``;
   ``relative_margin`` keeps ``s <= pos(q) - |pos(q)| * relative_margin`` (that is
   ``pos(q) * (1 - relative_margin)`` for a positive ``pos(q)``);
   ``max_score`` keeps ``s <= max_score``; ``min_score`` keeps ``s >= min_score``.
5. **Sampling.** ``"top"``: the ``num_negatives`` best survivors; ``"random"``: that many
   survivors drawn uniformly without replacement (``seed``), reported best first. A query
   with fewer survivors than ``num_negatives`` yields no tuple (counted as short).
6. **Tuples.** One row per (query, positive) with the query's negatives: sentence-transformers'
   ``"n-tuple"`` output with ``output_scores=True``.

Where ours differs from sentence-transformers 6.2: its ``range_min`` skips the first
candidates that *passed* the filters, ours skips ranks before filtering (so each parameter
acts alone); its window is the top ``range_max + max_positives`` of the ranking *with* the
positives, ours ``range_max`` ranks *without* them. With ``range_min=0`` (NV-Retriever's
setting) both pick the same negatives whenever the window holds enough survivors.

Indexes: ``"brute"`` (exact, blocked NumPy products; the default, right for corpora up to a few
hundred thousand rows) or ``"scann"`` (the approximate index of
:mod:`keras_hardneg.sampling.graph`, candidates re-scored exactly; needs ``scann`` and
TensorFlow).

Example (one query; documents at cosines 0.95, 0.9 (the positive), 0.8, 0.7, 0.3):
>>> c = np.array([0.95, 0.9, 0.8, 0.7, 0.3])
>>> corpus = np.stack([c, np.sqrt(1 - c ** 2)], axis=1)
>>> query = np.array([[1.0, 0.0]])
>>> mined = mine_hard_negatives(query, corpus, [[1]], num_negatives=2, absolute_margin=0.02)
>>> mined.query, mined.positive, mined.negatives
(array([0]), array([1]), array([[2, 3]]))
>>> mined.negative_scores.round(2), mined.summary.removed
(array([[0.8, 0.7]], dtype=float32), {'absolute_margin': 1})
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
from numpy.typing import ArrayLike

from keras_hardneg.sampling.search import top_k_cosine, unit_pair

__all__ = ["MinedNegatives", "MiningSummary", "SAMPLING_STRATEGIES", "mine_hard_negatives"]

#: Values of ``sampling_strategy``.
SAMPLING_STRATEGIES = ("top", "random")
_QUANTILES = (("min", 0.0), ("25%", 0.25), ("50%", 0.5), ("75%", 0.75), ("max", 1.0))


@dataclass
class MiningSummary:
    """What the miner did.

    Attributes:
        num_queries: queries given.
        without_positive: queries with no positive (no tuple).
        short: queries with fewer survivors than ``num_negatives`` (no tuple).
        window_candidates: candidates in the rank windows of the queries with a positive.
        removed: ``{filter: candidates it removed}`` for the filters that were set.
        positive_scores, negative_scores: ``{"count", "mean", "min", "25%", "50%", "75%",
            "max"}`` of the tuples' positive scores and of all their negatives' scores.
        range_max: the window's end actually used.
    """

    num_queries: int = 0
    without_positive: int = 0
    short: int = 0
    window_candidates: int = 0
    removed: dict = field(default_factory=dict)
    positive_scores: dict = field(default_factory=dict)
    negative_scores: dict = field(default_factory=dict)
    range_max: int = 0

    def __str__(self) -> str:
        def cell(stats, key):
            value = stats.get(key)
            if value is None:
                return f"{'-':>10s}"
            return f"{value:10d}" if key == "count" else f"{value:10.4f}"

        rows = [f"{'':8s}{'positive':>10s}{'negative':>10s}"]
        for key in ("count", "mean") + tuple(k for k, _ in _QUANTILES):
            rows.append(f"{key:8s}{cell(self.positive_scores, key)}"
                        f"{cell(self.negative_scores, key)}")
        for name, count in self.removed.items():
            share = count / self.window_candidates if self.window_candidates else 0.0
            rows.append(f"{name} removed {count} of {self.window_candidates} window candidates "
                        f"({share:.2%})")
        rows.append(f"{self.short} of {self.num_queries} queries had too few candidates; "
                    f"{self.without_positive} had no positive.")
        return "\n".join(rows)


@dataclass
class MinedNegatives:
    """Mined n-tuples, one row per (query, positive).

    Attributes:
        query: int64 ``[T]`` query rows.
        positive: int64 ``[T]`` corpus rows of the positives.
        negatives: int64 ``[T, K]`` corpus rows of the negatives, best first.
        positive_scores: float32 ``[T]`` cosine of (query, positive).
        negative_scores: float32 ``[T, K]`` cosine of (query, negative).
        summary: :class:`MiningSummary`.
    """

    query: np.ndarray
    positive: np.ndarray
    negatives: np.ndarray
    positive_scores: np.ndarray
    negative_scores: np.ndarray
    summary: MiningSummary

    def __len__(self) -> int:
        return int(self.query.shape[0])

    def texts(self, query_texts: Sequence[str], corpus_texts: Sequence[str]):
        """``(anchors, positives, negatives)`` as text lists (what
        :func:`keras_hardneg.data.retrieval.write_pairs` writes)."""
        anchors = [query_texts[i] for i in self.query]
        positives = [corpus_texts[j] for j in self.positive]
        negatives = [[corpus_texts[j] for j in row] for row in self.negatives]
        return anchors, positives, negatives


def _int(name, value, minimum, allow_none=False):
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        extra = " or None" if allow_none else ""
        raise ValueError(f"`{name}` must be an integer >= {minimum}{extra}; got {value!r}.")
    return int(value)


def _float(name, value, non_negative=False):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value) \
            or (non_negative and value < 0):
        what = "a finite number >= 0" if non_negative else "a finite number"
        raise ValueError(f"`{name}` must be {what} or None; got {value!r}.")
    return float(value)


def _rows(name, rows, num_queries, num_docs):
    if rows is None:
        return [np.empty(0, np.int64)] * num_queries
    if isinstance(rows, (str, bytes)) or len(rows) != num_queries:
        got = len(rows) if hasattr(rows, "__len__") else repr(rows)
        raise ValueError(f"`{name}` must hold one sequence of corpus rows per query "
                         f"({num_queries}); got {got}.")
    out = []
    for i, entry in enumerate(rows):
        items = list(entry) if isinstance(entry, (list, tuple, set, frozenset, range,
                                                  np.ndarray)) else [entry]
        try:
            a = np.asarray(items, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            a = None
        if a is None or (a.size and (not np.all(a == np.round(a)) or a.min() < 0 or
                                     a.max() >= num_docs)):
            raise ValueError(f"`{name}[{i}]` is {entry!r}; it must hold integer corpus rows in "
                             f"[0, {num_docs}).")
        out.append(np.array(list(dict.fromkeys(a.astype(np.int64).tolist())), dtype=np.int64))
    return out


def _quantiles(values: np.ndarray) -> dict:
    if values.size == 0:
        return {"count": 0}
    v = values.astype(np.float64)
    out = {"count": int(v.size), "mean": float(v.mean())}
    out.update({key: float(np.quantile(v, q)) for key, q in _QUANTILES})
    return out


def mine_hard_negatives(query_emb: ArrayLike, corpus_emb: ArrayLike,
                        positives: Sequence[Sequence[int]], *,
                        num_negatives: int = 3, range_min: int = 0,
                        range_max: int | None = None,
                        absolute_margin: float | None = None,
                        relative_margin: float | None = None,
                        max_score: float | None = None, min_score: float | None = None,
                        sampling_strategy: str = "top", exclude_positives: bool = True,
                        exclude: Sequence[Sequence[int]] | None = None, seed: int = 0,
                        index: str = "brute", scann_options: dict | None = None,
                        max_block_bytes: int = 64 * 2 ** 20) -> MinedNegatives:
    """Mine ``num_negatives`` hard negatives per query (rules in the module docstring).

    Args:
        query_emb: ``[Q, d]`` query embeddings (any scale; cosine is used).
        corpus_emb: ``[N, d]`` document embeddings.
        positives: per query, its relevant corpus rows (may be empty: no tuple), e.g.
            :meth:`keras_hardneg.data.retrieval.RetrievalSplit.positives`.
        num_negatives: ``K >= 1`` negatives per tuple.
        range_min, range_max: the rank window ``[range_min, range_max)``.
        absolute_margin, relative_margin: margins ``>= 0`` against the positive's score.
        max_score, min_score: absolute bounds on a negative's score.
        sampling_strategy: ``"top"`` or ``"random"``.
        exclude_positives: leave every judged positive out of the ranking (default).
        exclude: per query, more corpus rows never used as negatives (e.g. duplicates of a
            positive), or None.
        seed: seed of ``"random"`` sampling.
        index: ``"brute"`` (exact) or ``"scann"`` (approximate).
        scann_options: ScaNN settings (see :class:`keras_hardneg.sampling.ProximityGraph`).
        max_block_bytes: memory bound of one block of scores (``"brute"``).

    Returns:
        :class:`MinedNegatives` (``T`` tuples of ``K`` negatives, with scores and summary).
    """
    q, c = _check_embeddings(query_emb, corpus_emb, sampling_strategy, index)
    n_q, n = q.shape[0], c.shape[0]
    k, lo, hi, limits = _check_window(num_negatives, range_min, range_max, n,
                                      absolute_margin=absolute_margin,
                                      relative_margin=relative_margin,
                                      max_score=max_score, min_score=min_score)
    pos = _rows("positives", positives, n_q, n)
    extra = _rows("exclude", exclude, n_q, n)
    summary = MiningSummary(num_queries=n_q, range_max=hi)
    summary.removed = {name: 0 for name in limits}
    has_pos = np.array([p.size > 0 for p in pos])
    summary.without_positive = int((~has_pos).sum())
    rows = np.nonzero(has_pos)[0]
    empty = MinedNegatives(np.empty(0, np.int64), np.empty(0, np.int64),
                           np.empty((0, k), np.int64), np.empty(0, np.float32),
                           np.empty((0, k), np.float32), summary)
    if rows.size == 0 or lo >= hi:
        summary.short = int(rows.size)
        return empty
    excl = [np.union1d(pos[i], extra[i]) if exclude_positives else extra[i] for i in rows]
    idx, scores = top_k_cosine(q[rows], c, hi, exclude=excl, index=index,
                               max_block_bytes=max_block_bytes, scann_options=scann_options)
    idx, scores = idx[:, lo:], scores[:, lo:].astype(np.float64)
    pos_scores = [(c[pos[i]] @ q[i]).astype(np.float32) for i in rows]
    alive = _filter(idx, scores, pos_scores, limits, summary)
    tuples = _pick(rows, pos, pos_scores, idx, scores, alive, k, sampling_strategy, seed,
                   summary)
    if not tuples[0]:
        return empty
    out_q, out_p, out_neg, out_ps, out_ns = tuples
    mined = MinedNegatives(np.array(out_q, np.int64), np.array(out_p, np.int64),
                           np.stack(out_neg).astype(np.int64),
                           np.array(out_ps, np.float32), np.stack(out_ns), summary)
    summary.positive_scores = _quantiles(mined.positive_scores)
    summary.negative_scores = _quantiles(mined.negative_scores.ravel())
    return mined


def _check_embeddings(query_emb, corpus_emb, sampling_strategy: str,
                      index: str) -> tuple[np.ndarray, np.ndarray]:
    """Unit rows of both embeddings, after the strategy and index names are checked."""
    if sampling_strategy not in SAMPLING_STRATEGIES:
        raise ValueError(f"`sampling_strategy` must be one of "
                         f"{', '.join(map(repr, SAMPLING_STRATEGIES))}; got "
                         f"{sampling_strategy!r}.")
    return unit_pair(query_emb, corpus_emb, index)


def _check_window(num_negatives, range_min, range_max, n: int, **given: Any
                  ) -> tuple[int, int, int, dict[str, float]]:
    """``(K, range_min, range_max clipped to N, {filter: value})`` of the checked settings
    (the filters given: margins and score bounds; the default ``range_max`` is
    ``range_min + 10 K`` with a filter, ``range_min + K`` without)."""
    k = _int("num_negatives", num_negatives, 1)
    lo = _int("range_min", range_min, 0)
    hi = _int("range_max", range_max, 1, allow_none=True)
    values = {"absolute_margin": _float("absolute_margin", given["absolute_margin"], True),
              "relative_margin": _float("relative_margin", given["relative_margin"], True),
              "max_score": _float("max_score", given["max_score"]),
              "min_score": _float("min_score", given["min_score"])}
    if values["min_score"] is not None and values["max_score"] is not None \
            and values["min_score"] > values["max_score"]:
        raise ValueError(f"`min_score` ({given['min_score']}) must be <= `max_score` "
                         f"({given['max_score']}).")
    limits = {name: v for name, v in values.items() if v is not None}
    if hi is None:
        hi = lo + (10 * k if limits else k)
    if hi - lo < k:
        raise ValueError(f"the window [range_min, range_max) = [{lo}, {hi}) holds {hi - lo} "
                         f"ranks; it must hold at least num_negatives={k}.")
    return k, lo, min(hi, n), limits


def _filter(idx: np.ndarray, scores: np.ndarray, pos_scores: list, limits: dict[str, float],
            summary: "MiningSummary") -> np.ndarray:
    """``[Q', W]`` which window candidates pass every filter (counting, per filter in
    order, how many it removed); margins are against the query's least similar positive."""
    alive = idx >= 0
    summary.window_candidates = int(alive.sum())
    ref = np.array([s.astype(np.float64).min() for s in pos_scores])[:, None]
    thresholds = {
        "absolute_margin": lambda m: scores > ref - m,
        "relative_margin": lambda m: scores > ref - np.abs(ref) * m,
        "max_score": lambda m: scores > m,
        "min_score": lambda m: scores < m,
    }
    for name, value in limits.items():
        drop = alive & thresholds[name](value)
        summary.removed[name] = int(drop.sum())
        alive &= ~drop
    return alive


def _pick(rows, pos, pos_scores, idx, scores, alive, k: int, strategy: str, seed: int,
          summary: "MiningSummary") -> tuple[list, list, list, list, list]:
    """One tuple per (query, positive): K of the query's surviving candidates (the top K,
    or K at random in rank order); a query with fewer than K is counted ``short``."""
    rng = np.random.default_rng(seed)
    out_q, out_p, out_neg, out_ps, out_ns = [], [], [], [], []
    for r, i in enumerate(rows):
        cols = np.nonzero(alive[r])[0]
        if cols.size < k:
            summary.short += 1
            continue
        pick = cols[:k] if strategy == "top" else np.sort(rng.choice(cols, size=k,
                                                                      replace=False))
        negs, negs_s = idx[r, pick], scores[r, pick].astype(np.float32)
        for p, ps in zip(pos[i], pos_scores[r]):
            out_q.append(i)
            out_p.append(p)
            out_neg.append(negs)
            out_ps.append(ps)
            out_ns.append(negs_s)
    return out_q, out_p, out_neg, out_ps, out_ns
