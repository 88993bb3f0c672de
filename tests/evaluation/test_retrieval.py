"""BEIR metrics on hand-made cases whose answers are computed by hand here, and the protocol
(whole-corpus cosine ranking, the query's own id dropped)."""

import numpy as np
import pytest

from keras_hardneg.evaluation.retrieval import (mrr_at_k, ndcg_at_k, parse_metric, rank_corpus,
                                                ranking_scores, recall_at_k, retrieval_scores)

RANKED = ["d3", "d1", "d2", "d4"]
GRADED = {"d1": 2, "d2": 1, "d5": 1}  # d5 is relevant but never retrieved


def test_ndcg_by_hand_graded_gains():
    # DCG@10: d3 (0) + d1 gain 2 at rank 2 + d2 gain 1 at rank 3; d4 unjudged
    dcg = 2 / np.log2(3) + 1 / np.log2(4)
    # ideal: gains 2, 1, 1 at ranks 1, 2, 3
    idcg = 2 / np.log2(2) + 1 / np.log2(3) + 1 / np.log2(4)
    assert ndcg_at_k(RANKED, GRADED, 10) == pytest.approx(dcg / idcg)
    # @2: only d3, d1 count; the ideal stops at 2 documents
    assert ndcg_at_k(RANKED, GRADED, 2) == pytest.approx((2 / np.log2(3)) / (2 + 1 / np.log2(3)))
    # @1: d3 is not relevant
    assert ndcg_at_k(RANKED, GRADED, 1) == 0.0


def test_ndcg_binary_and_non_positive_judgements():
    assert ndcg_at_k(["a", "b"], {"a": 1}, 10) == 1.0
    assert ndcg_at_k(["b", "a"], {"a": 1}, 10) == pytest.approx(1 / np.log2(3))
    # a score of 0 (or below) is judged non-relevant: no gain, not in the ideal
    assert ndcg_at_k(["z", "a"], {"z": 0, "y": -1, "a": 1}, 10) == pytest.approx(1 / np.log2(3))
    assert ndcg_at_k(["a"], {"a": 0}, 10) == 0.0


def test_recall_and_mrr_by_hand():
    assert recall_at_k(RANKED, GRADED, 2) == pytest.approx(1 / 3)  # d1 of {d1, d2, d5}
    assert recall_at_k(RANKED, GRADED, 100) == pytest.approx(2 / 3)
    assert recall_at_k(RANKED, {"d3": 0}, 10) == 0.0
    assert mrr_at_k(RANKED, GRADED, 10) == 0.5  # first relevant (d1) at rank 2
    assert mrr_at_k(["x", "y", "d2"], GRADED, 10) == pytest.approx(1 / 3)
    assert mrr_at_k(["x", "y", "d2"], GRADED, 2) == 0.0  # beyond the cut


def test_ranking_scores_average_over_the_judged_queries():
    ranking = {"q1": ["a", "b"], "q2": ["c", "a"], "q_unjudged": ["a"]}
    qrels = {"q1": {"a": 1}, "q2": {"a": 1}}
    out = ranking_scores(ranking, qrels, metrics=("mrr@10", "ndcg@10", "recall@1"),
                         per_query=True)
    assert out["mrr@10"] == pytest.approx((1 + 1 / 2) / 2)
    assert out["ndcg@10"] == pytest.approx((1 + 1 / np.log2(3)) / 2)
    assert out["recall@1"] == 0.5
    assert out["num_queries"] == 2
    np.testing.assert_allclose(out["per_query"]["mrr@10"], [1.0, 0.5])


def test_bad_input_is_one_line():
    with pytest.raises(ValueError, match="1 judged queries have no ranking"):
        ranking_scores({"q1": ["a"]}, {"q1": {"a": 1}, "q2": {"a": 1}})
    with pytest.raises(ValueError, match="lists document 'a' twice"):
        ndcg_at_k(["a", "b", "a"], {"a": 1}, 10)
    for bad in ("ndcg", "map@10", "ndcg@0", 10):
        with pytest.raises(ValueError, match="a metric must be NAME@K"):
            parse_metric(bad)
    with pytest.raises(ValueError, match="`query_ids` must have one id per row"):
        rank_corpus(np.eye(2), np.eye(2), ["q"], ["a", "b"], 1)


def _angles(cosines):
    c = np.asarray(cosines, dtype=np.float64)
    return np.stack([c, np.sqrt(1 - c ** 2)], axis=1)


def test_retrieval_scores_rank_the_whole_corpus_by_cosine():
    # documents at cosines 0.9, 0.2, 0.7, 0.99 to query q (scaled: cosine ignores norms)
    corpus = _angles([0.9, 0.2, 0.7, 0.99]) * np.array([[1.0], [3.0], [0.5], [2.0]])
    ids = ["a", "b", "c", "q"]
    query = np.array([[5.0, 0.0]])
    # "q" (the query's own id) is dropped: ranking a, c, b
    assert rank_corpus(query, corpus, ["q"], ids, 10) == {"q": ["a", "c", "b"]}
    assert rank_corpus(query, corpus, ["q"], ids, 2, ignore_identical_ids=False) == \
        {"q": ["q", "a"]}
    out = retrieval_scores(query, corpus, ["q"], ids, {"q": {"c": 1}})
    assert out["mrr@10"] == 0.5
    assert out["ndcg@10"] == pytest.approx(1 / np.log2(3))
    assert out["recall@100"] == 1.0
    kept = retrieval_scores(query, corpus, ["q"], ids, {"q": {"c": 1}}, metrics=("mrr@10",),
                            ignore_identical_ids=False)
    assert kept["mrr@10"] == pytest.approx(1 / 3)


def test_retrieval_scores_match_a_plain_argsort_on_random_data():
    rng = np.random.default_rng(0)
    q, c = rng.normal(size=(30, 8)), rng.normal(size=(200, 8))
    qids, cids = [f"q{i}" for i in range(30)], [f"d{j}" for j in range(200)]
    qrels = {qids[i]: {cids[j]: 1 for j in rng.choice(200, 3, replace=False)} for i in range(30)}
    qn = q / np.linalg.norm(q, axis=1, keepdims=True)
    cn = c / np.linalg.norm(c, axis=1, keepdims=True)
    ranking = {qids[i]: [cids[j] for j in np.argsort(-(qn @ cn.T)[i])] for i in range(30)}
    want = ranking_scores(ranking, qrels)
    got = retrieval_scores(q, c, qids, cids, qrels, max_block_bytes=4 * 200 * 7)  # 7-row blocks
    for m in ("ndcg@10", "recall@100", "mrr@10"):
        assert got[m] == pytest.approx(want[m], abs=1e-12)
