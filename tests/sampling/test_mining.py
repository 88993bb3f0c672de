"""The hard-negative miner on a corpus whose answer is known by construction: one query at
(1, 0) and documents at chosen cosines to it, so every rank and every filter's cut is known.
Each filter is tested alone, then together (counted in order)."""

import importlib.util

import numpy as np
import pytest

from keras_hardneg.data.retrieval import read_pairs, write_pairs
from keras_hardneg.sampling.mining import mine_hard_negatives

#: cosine of each corpus row to the query; row 1 is the positive. Without it the ranking is
#: rows 0 (.95), 2 (.85), 3 (.8), 4 (.7), 5 (.5), 6 (.3), 7 (.1).
COS = np.array([0.95, 0.9, 0.85, 0.8, 0.7, 0.5, 0.3, 0.1])
CORPUS = np.stack([COS, np.sqrt(1 - COS ** 2)], axis=1) * np.linspace(1, 3, 8)[:, None]
QUERY = np.array([[2.0, 0.0]])


def mine(positives=((1,),), query=QUERY, **kwargs):
    return mine_hard_negatives(query, CORPUS, [list(p) for p in positives], **kwargs)


def test_top_negatives_are_the_best_non_positives():
    m = mine(num_negatives=3)
    np.testing.assert_array_equal(m.negatives, [[0, 2, 3]])
    np.testing.assert_allclose(m.negative_scores, [[0.95, 0.85, 0.8]], rtol=1e-6)
    np.testing.assert_allclose(m.positive_scores, [0.9], rtol=1e-6)
    assert (m.query.tolist(), m.positive.tolist()) == ([0], [1])
    assert m.summary.removed == {} and m.summary.window_candidates == 3  # range_max = 0 + K


def test_the_rank_window_alone():
    m = mine(num_negatives=2, range_min=2, range_max=5)  # ranks 2, 3, 4: rows 3, 4, 5
    np.testing.assert_array_equal(m.negatives, [[3, 4]])
    assert m.summary.window_candidates == 3


def test_random_sampling_draws_uniformly_from_the_window_and_is_seeded():
    window = {2, 3, 4, 5}  # ranks 1..4
    seen = set()
    for seed in range(40):
        m = mine(num_negatives=2, range_min=1, range_max=5, sampling_strategy="random", seed=seed)
        row = m.negatives[0].tolist()
        assert set(row) <= window and len(set(row)) == 2
        assert list(m.negative_scores[0]) == sorted(m.negative_scores[0], reverse=True)
        seen |= set(row)
    assert seen == window
    a = mine(num_negatives=2, range_max=6, sampling_strategy="random", seed=3).negatives
    b = mine(num_negatives=2, range_max=6, sampling_strategy="random", seed=3).negatives
    np.testing.assert_array_equal(a, b)


def test_absolute_margin_alone():
    m = mine(num_negatives=3, absolute_margin=0.07)  # keep cos <= 0.9 - 0.07 = 0.83
    np.testing.assert_array_equal(m.negatives, [[3, 4, 5]])
    assert m.summary.removed == {"absolute_margin": 2}  # rows 0 and 2
    assert m.summary.window_candidates == 7  # range_max = 0 + 10 K, clipped to the corpus


def test_relative_margin_alone():
    m = mine(num_negatives=3, relative_margin=0.2)  # keep cos <= 0.9 * 0.8 = 0.72
    np.testing.assert_array_equal(m.negatives, [[4, 5, 6]])
    assert m.summary.removed == {"relative_margin": 3}


def test_relative_margin_uses_the_magnitude_of_a_negative_positive_score():
    cos = np.array([-0.5, -0.55, -0.7, -0.9])  # positive row 0 at -0.5
    corpus = np.stack([cos, np.sqrt(1 - cos ** 2)], axis=1)
    m = mine_hard_negatives([[1.0, 0.0]], corpus, [[0]], num_negatives=1, relative_margin=0.2)
    # keep cos <= -0.5 - 0.5 * 0.2 = -0.6: row 1 (-0.55) goes, row 2 (-0.7) is the negative
    np.testing.assert_array_equal(m.negatives, [[2]])


def test_max_and_min_score_alone():
    np.testing.assert_array_equal(mine(num_negatives=3, max_score=0.82).negatives, [[3, 4, 5]])
    m = mine(num_negatives=5, min_score=0.4)
    np.testing.assert_array_equal(m.negatives, [[0, 2, 3, 4, 5]])
    assert m.summary.removed == {"min_score": 2}


def test_filters_together_count_in_order():
    m = mine(num_negatives=3, absolute_margin=0.07, relative_margin=0.2)
    assert m.summary.removed == {"absolute_margin": 2, "relative_margin": 1}
    np.testing.assert_array_equal(m.negatives, [[4, 5, 6]])


def test_positives_excluded_unless_asked_and_extra_exclusions():
    np.testing.assert_array_equal(mine(num_negatives=3, exclude_positives=False).negatives,
                                  [[0, 1, 2]])
    np.testing.assert_array_equal(mine(num_negatives=3, exclude=[[0]]).negatives, [[2, 3, 4]])


def test_positives_may_be_sets_arrays_or_one_row():
    want = mine(num_negatives=2).negatives
    for positives in ([{1}], [np.array([1])], [1]):
        got = mine_hard_negatives(QUERY, CORPUS, positives, num_negatives=2).negatives
        np.testing.assert_array_equal(got, want)


def test_several_positives_share_negatives_below_the_least_similar_one():
    m = mine(positives=((1, 4),), num_negatives=3, absolute_margin=0.05)
    # reference: min(0.9, 0.7) = 0.7; keep cos <= 0.65 among rows 0, 2, 3, 5, 6, 7
    np.testing.assert_array_equal(m.negatives, [[5, 6, 7], [5, 6, 7]])
    assert m.positive.tolist() == [1, 4]
    np.testing.assert_allclose(m.positive_scores, [0.9, 0.7], rtol=1e-6)


def test_short_and_positive_less_queries_give_no_tuple_and_are_counted():
    queries = np.concatenate([QUERY, QUERY, QUERY])
    m = mine(positives=((1,), (), (1,)), query=queries, num_negatives=3, range_min=5)
    # ranks 5, 6 only (rows 6, 7): too few for 3 negatives
    assert len(m) == 0 and m.negatives.shape == (0, 3)
    assert (m.summary.short, m.summary.without_positive) == (2, 1)
    m = mine(positives=((1,), (), (1,)), query=queries, num_negatives=2)
    assert m.query.tolist() == [0, 2]
    text = str(m.summary)
    assert "0 of 3 queries had too few candidates; 1 had no positive." in text


def test_summary_quantiles_are_those_of_the_tuples():
    rng = np.random.default_rng(0)
    q, c = rng.normal(size=(40, 8)), rng.normal(size=(300, 8))
    m = mine_hard_negatives(q, c, [[i] for i in range(40)], num_negatives=4, range_max=20)
    s = m.summary
    assert s.positive_scores["count"] == 40 and s.negative_scores["count"] == 160
    assert s.negative_scores["50%"] == pytest.approx(np.quantile(m.negative_scores, 0.5))
    assert s.positive_scores["max"] == pytest.approx(m.positive_scores.max())


def test_tuples_to_a_pair_file_and_back(tmp_path):
    m = mine(num_negatives=2)
    docs = [f"doc {i}" for i in range(8)]
    anchors, positives, negatives = m.texts(["the query"], docs)
    write_pairs(tmp_path / "mined.jsonl", anchors, positives, negatives)
    pairs = read_pairs(tmp_path / "mined.jsonl")
    assert pairs.negatives == (("doc 0", "doc 2"),) and pairs.positives == ("doc 1",)


@pytest.mark.parametrize("kwargs, needle", [
    ({"sampling_strategy": "hard"}, "`sampling_strategy` must be one of 'top', 'random'"),
    ({"num_negatives": 3, "range_min": 2, "range_max": 4}, "holds 2 ranks; it must hold at"),
    ({"absolute_margin": -0.1}, "`absolute_margin` must be a finite number >= 0"),
    ({"relative_margin": float("nan")}, "`relative_margin` must be a finite number >= 0"),
    ({"min_score": 0.5, "max_score": 0.1}, "`min_score` \\(0.5\\) must be <= `max_score`"),
    ({"num_negatives": 0}, "`num_negatives` must be an integer >= 1"),
    ({"index": "faiss"}, "`index` must be one of 'brute', 'scann'"),
])
def test_bad_arguments_are_one_line(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        mine(**kwargs)


def test_bad_positives_are_one_line():
    with pytest.raises(ValueError, match="one sequence of corpus rows per query \\(1\\); got 2"):
        mine(positives=((1,), (2,)))
    with pytest.raises(ValueError, match=r"`positives\[0\]` is \[9\]; it must hold integer"):
        mine(positives=((9,),))
    with pytest.raises(ValueError, match=r"`positives\[0\]` is \['a'\]; it must hold integer"):
        mine(positives=(("a",),))


@pytest.mark.skipif(importlib.util.find_spec("scann") is None, reason="scann not installed")
def test_scann_index_mines_the_same_negatives_on_a_small_corpus():
    rng = np.random.default_rng(1)
    q, c = rng.normal(size=(15, 8)), rng.normal(size=(200, 8))
    pos = [[i, i + 20] for i in range(15)]
    kwargs = dict(num_negatives=3, relative_margin=0.05, range_max=30)
    a = mine_hard_negatives(q, c, pos, index="scann", **kwargs)
    b = mine_hard_negatives(q, c, pos, **kwargs)
    np.testing.assert_array_equal(a.negatives, b.negatives)
    assert a.summary.removed == b.summary.removed
