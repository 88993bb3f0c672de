"""Retrieval metrics by BEIR's protocol: nDCG@k, Recall@k and MRR@k.

BEIR (Thakur et al. 2021, "BEIR: A Heterogeneous Benchmark for Zero-shot Evaluation of
Information Retrieval Models") and MTEB score a dense retriever this way, and so does
:func:`retrieval_scores`:

* every query is scored against the **whole corpus** by cosine similarity (exact top-k by
  blocked matrix products, :func:`keras_hardneg.sampling.search.top_k_cosine`; ties go to the
  lower corpus row);
* a document whose id equals the query's id is dropped from that query's ranking (BEIR's
  ``ignore_identical_ids=True``: in some sets a query is also a corpus document);
* the queries scored are those of the qrels; each metric is averaged over them.

The metrics, for one query with judgements ``{doc_id: score}`` and a ranking ``d_1, d_2, ...``
(trec_eval's definitions, which BEIR calls through pytrec_eval):

* ``ndcg@k``: ``DCG / IDCG`` with ``DCG = sum_{i<=k} g(d_i) / log2(i + 1)``, the gain ``g``
  the judgement's score when ``> 0`` and 0 otherwise (graded, linear gains: trec_eval's
  ``ndcg_cut``, whose gains are the qrels values), and ``IDCG`` the same sum over the
  judged scores sorted decreasingly. With binary judgements (every score 1, as in SciFact)
  this is binary nDCG. A query with no score ``> 0`` gets 0.
* ``recall@k``: relevant documents (score ``> 0``) among the top ``k``, over all relevant
  documents of the query (0 when it has none).
* ``mrr@k``: ``1 / rank`` of the first relevant document within the top ``k``, else 0
  (BEIR's ``mrr``).

Example (one query, relevant documents ``a`` and ``c``; the ranking ``c, b, a``):
>>> ranking = {"q": ["c", "b", "a"]}
>>> qrels = {"q": {"a": 1, "c": 1}}
>>> scores = ranking_scores(ranking, qrels, metrics=("ndcg@10", "recall@2", "mrr@10"))
>>> dcg = 1 / np.log2(2) + 1 / np.log2(4)
>>> idcg = 1 / np.log2(2) + 1 / np.log2(3)
>>> bool(np.isclose(scores["ndcg@10"], dcg / idcg)), scores["recall@2"], scores["mrr@10"]
(True, 0.5, 1.0)
"""

from __future__ import annotations

import math
import re
from typing import Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike

from keras_hardneg.sampling.search import top_k_cosine

__all__ = ["DEFAULT_METRICS", "METRIC_NAMES", "ndcg_at_k", "recall_at_k", "mrr_at_k",
           "parse_metric", "rank_corpus", "ranking_scores", "retrieval_scores"]

#: BEIR's headline metrics.
DEFAULT_METRICS = ("ndcg@10", "recall@100", "mrr@10")
#: Metric names accepted before ``@k``.
METRIC_NAMES = ("ndcg", "recall", "mrr")

Qrels = Mapping[str, Mapping[str, float]]


def parse_metric(metric: str) -> tuple[str, int]:
    """``"ndcg@10"`` -> ``("ndcg", 10)``; a one-line error for anything else."""
    match = re.fullmatch(r"([a-z]+)@([0-9]+)", metric) if isinstance(metric, str) else None
    if not match or match.group(1) not in METRIC_NAMES or int(match.group(2)) < 1:
        raise ValueError(f"a metric must be NAME@K with NAME one of {', '.join(METRIC_NAMES)} "
                         f"and K >= 1 (e.g. 'ndcg@10'); got {metric!r}.")
    return match.group(1), int(match.group(2))


def _check_ranked(ranked: Sequence[str]) -> list[str]:
    ranked = list(ranked)
    if len(set(ranked)) != len(ranked):
        seen = set()
        dup = next(d for d in ranked if d in seen or seen.add(d))
        raise ValueError(f"a ranking lists document {dup!r} twice; each document may appear "
                         "once.")
    return ranked


def ndcg_at_k(ranked: Sequence[str], judgements: Mapping[str, float], k: int) -> float:
    """nDCG@k of one ranking (doc ids, best first) against ``{doc_id: score}`` (graded linear
    gains, scores ``<= 0`` count 0; see the module docstring)."""
    ranked = _check_ranked(ranked)
    dcg = sum(judgements.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k])
              if judgements.get(d, 0) > 0)
    ideal = sorted((s for s in judgements.values() if s > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return float(dcg / idcg) if idcg > 0 else 0.0


def recall_at_k(ranked: Sequence[str], judgements: Mapping[str, float], k: int) -> float:
    """Share of the relevant documents (score ``> 0``) found in the top ``k``."""
    ranked = _check_ranked(ranked)
    relevant = {d for d, s in judgements.items() if s > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(ranked[:k])) / len(relevant)


def mrr_at_k(ranked: Sequence[str], judgements: Mapping[str, float], k: int) -> float:
    """``1 / rank`` of the first relevant document (score ``> 0``) in the top ``k``, else 0."""
    ranked = _check_ranked(ranked)
    for i, d in enumerate(ranked[:k]):
        if judgements.get(d, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


_METRICS = {"ndcg": ndcg_at_k, "recall": recall_at_k, "mrr": mrr_at_k}


def ranking_scores(ranking: Mapping[str, Sequence[str]], qrels: Qrels,
                   metrics: Sequence[str] = DEFAULT_METRICS,
                   per_query: bool = False) -> dict:
    """Average each metric over the queries of ``qrels``.

    Args:
        ranking: ``{query_id: [doc_id, ...]}`` best first (at least as long as the largest
            ``k`` to be exact; a query of the ranking without judgements is not scored).
        qrels: ``{query_id: {doc_id: score}}``; every query here must be in ``ranking``.
        metrics: names ``NAME@K`` (:data:`METRIC_NAMES`).
        per_query: also return ``"per_query"``: ``{metric: float64 [Q]}`` in qrels order.

    Returns:
        ``{metric: mean, ..., "num_queries": Q}`` (plus ``"per_query"``).
    """
    parsed = [parse_metric(m) for m in metrics]
    if not parsed:
        raise ValueError("`metrics` must name at least one metric, e.g. ('ndcg@10',).")
    if not qrels:
        raise ValueError("`qrels` has no query; give {query_id: {doc_id: score}}.")
    missing = [q for q in qrels if q not in ranking]
    if missing:
        raise ValueError(f"{len(missing)} judged queries have no ranking (e.g. {missing[0]!r}); "
                         "`ranking` must rank every query of `qrels`.")
    values = {m: np.array([_METRICS[name](ranking[q], qrels[q], k) for q in qrels])
              for m, (name, k) in zip(metrics, parsed)}
    out: dict = {m: float(v.mean()) for m, v in values.items()}
    out["num_queries"] = len(qrels)
    if per_query:
        out["per_query"] = values
    return out


def _ids(ids, n: int, name: str, what: str) -> list[str]:
    ids = [str(i) for i in ids]
    if len(ids) != n:
        raise ValueError(f"`{name}` must have one id per row of {what} ({n}); got {len(ids)}.")
    if len(set(ids)) != n:
        raise ValueError(f"`{name}` has duplicate ids; each row needs its own id.")
    return ids


def rank_corpus(query_emb: ArrayLike, corpus_emb: ArrayLike, query_ids: Sequence[str], corpus_ids: Sequence[str],
                k: int, *, ignore_identical_ids: bool = True,
                max_block_bytes: int = 64 * 2 ** 20) -> dict[str, list[str]]:
    """``{query_id: [doc_id, ...]}``: the ``k`` documents of largest cosine, best first.

    Args:
        query_emb: ``[Q, d]``; row ``i`` is query ``query_ids[i]``.
        corpus_emb: ``[N, d]``; row ``j`` is document ``corpus_ids[j]``.
        k: documents per query.
        ignore_identical_ids: drop the document whose id equals the query's (BEIR's default).
        max_block_bytes: memory bound of one block of scores.
    """
    q_emb, c_emb = np.asarray(query_emb), np.asarray(corpus_emb)
    query_ids = _ids(query_ids, q_emb.shape[0] if q_emb.ndim else -1, "query_ids", "query_emb")
    corpus_ids = _ids(corpus_ids, c_emb.shape[0] if c_emb.ndim else -1, "corpus_ids",
                      "corpus_emb")
    exclude = None
    if ignore_identical_ids:
        where = {d: j for j, d in enumerate(corpus_ids)}
        exclude = [[where[q]] if q in where else [] for q in query_ids]
    idx, _ = top_k_cosine(q_emb, c_emb, k, exclude=exclude, max_block_bytes=max_block_bytes)
    return {q: [corpus_ids[j] for j in row if j >= 0] for q, row in zip(query_ids, idx)}


def retrieval_scores(query_emb: ArrayLike, corpus_emb: ArrayLike, query_ids: Sequence[str],
                     corpus_ids: Sequence[str], qrels: Qrels, *,
                     metrics: Sequence[str] = DEFAULT_METRICS,
                     ignore_identical_ids: bool = True, per_query: bool = False,
                     max_block_bytes: int = 64 * 2 ** 20) -> dict:
    """BEIR's evaluation of a dense retriever from its embeddings (module docstring).

    Args:
        query_emb: ``[Q, d]`` embeddings of ``query_ids`` (may include queries that ``qrels``
            does not judge: they are not scored).
        corpus_emb: ``[N, d]`` embeddings of ``corpus_ids`` (the whole corpus).
        qrels: ``{query_id: {doc_id: score}}``.
        metrics, per_query: as :func:`ranking_scores`.
        ignore_identical_ids, max_block_bytes: as :func:`rank_corpus`.

    Returns:
        ``{"ndcg@10": ..., "recall@100": ..., "mrr@10": ..., "num_queries": Q}``.

    Example:
    >>> corpus = np.eye(3, dtype="float32")             # documents a, b, c
    >>> queries = np.array([[0.1, 0.0, 1.0]], "float32")  # nearest c, then a
    >>> retrieval_scores(queries, corpus, ["q"], ["a", "b", "c"], {"q": {"a": 1}},
    ...                  metrics=("mrr@10", "recall@1"))
    {'mrr@10': 0.5, 'recall@1': 0.0, 'num_queries': 1}
    """
    k = max(parse_metric(m)[1] for m in metrics) if metrics else 1
    ranking = rank_corpus(query_emb, corpus_emb, query_ids, corpus_ids, k,
                          ignore_identical_ids=ignore_identical_ids,
                          max_block_bytes=max_block_bytes)
    return ranking_scores(ranking, qrels, metrics=metrics, per_query=per_query)
