"""STS evaluation (SimCSE's protocol): readers of the SentEval layout, Spearman with ties, the
"all" setting, unscored pairs, errors; the pair counts of the shared data (skipped if absent)."""

import hashlib
import math
import os
import warnings

import numpy as np
import pytest

from keras_hardneg.evaluation.sts import (STS_TASKS, embed_sentences, read_sts_task, spearman,
                                          sts_scores)
from keras_hardneg.registry import EVALUATIONS

SHARED_TEXT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data", "text")


def angle_embed(batch):
    """'x' -> [1, 0]; 'y <c>' -> [c, sqrt(1 - c^2)], so cos('x', 'y <c>') = c exactly."""
    out = []
    for sentence in batch:
        word, *rest = sentence.split()
        c = float(rest[0]) if rest else 1.0
        out.append([1.0, 0.0] if word == "x" else [c, math.sqrt(max(0.0, 1 - c * c))])
    return np.array(out)


def write(path, lines, final_newline=True):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + ("\n" if final_newline else ""))


def write_sts_b(root, cosines, golds):
    write(os.path.join(root, "STS", "STSBenchmark", "sts-test.csv"),
          [f"main-captions\tMSRvid\t2012test\t{i:04d}\t{g:.3f}\tx\ty {c}"
           for i, (c, g) in enumerate(zip(cosines, golds))])


def write_sts13(root, subsets):
    """``subsets``: {name: [(cosine, gold or None)]}; None writes an empty (unscored) gold line."""
    folder = os.path.join(root, "STS", "STS13-en-test")
    for name, pairs in subsets.items():
        write(os.path.join(folder, f"STS.input.{name}.txt"), [f"x\ty {c}" for c, _ in pairs],
              final_newline=False)  # as the shared files: no final newline
        write(os.path.join(folder, f"STS.gs.{name}.txt"),
              ["" if g is None else f"{g:.3f}" for _, g in pairs])


def test_spearman_hand_computed_with_ties(tmp_path):
    # cosines [.9, .1, .5, .5, .3, .7] -> ranks [6, 1, 3.5, 3.5, 2, 5] (a tie: 3.5 each)
    # gold    [5,  1,  2,  4,  3,  4 ] -> ranks [6, 1, 2, 4.5, 3, 4.5] (a tie: 4.5 each)
    # centred (mean 3.5): [2.5, -2.5, 0, 0, -1.5, 1.5] and [2.5, -2.5, -1.5, 1, -0.5, 1]
    # covariance sum 6.25 + 6.25 + 0 + 0 + 0.75 + 1.5 = 14.75; each variance sum 17
    # Spearman = 14.75 / 17 = 0.8676470588...
    cosines, golds = [0.9, 0.1, 0.5, 0.5, 0.3, 0.7], [5, 1, 2, 4, 3, 4]
    assert spearman(cosines, golds) == pytest.approx(14.75 / 17, abs=1e-12)
    write_sts_b(str(tmp_path), cosines, golds)
    result = sts_scores(angle_embed, str(tmp_path), tasks=["STSBenchmark"])
    assert result["STSBenchmark"] == pytest.approx(100 * 14.75 / 17, abs=1e-9)
    assert result["avg"] == result["STSBenchmark"]
    assert result["pairs"] == {"STSBenchmark": 6} and result["skipped"] == []
    assert result["subsets"]["STSBenchmark"]["test"] == result["STSBenchmark"]


def test_spearman_agrees_with_scipy():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    for n in (2, 7, 200):
        a = rng.integers(0, 5, n).astype(float)      # many ties
        b = a + rng.integers(0, 3, n)
        if np.ptp(a) == 0 or np.ptp(b) == 0:
            continue
        assert spearman(a, b) == pytest.approx(stats.spearmanr(a, b)[0], abs=1e-12)
    a, b = rng.normal(size=500), rng.normal(size=500)
    assert spearman(a, b) == pytest.approx(stats.spearmanr(a, b)[0], abs=1e-12)


def test_spearman_rejects_bad_input_and_constant_is_nan():
    with pytest.raises(ValueError, match="same length"):
        spearman([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="at least 2"):
        spearman([1], [1])
    with pytest.raises(ValueError, match="finite"):
        spearman([1, np.nan, 3], [1, 2, 3])
    with pytest.warns(RuntimeWarning, match="constant"):
        assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))


def test_all_setting_concatenates_subsets_and_skips_unscored_pairs(tmp_path):
    # Each subset alone is perfectly ordered (Spearman 1, so SentEval's mean would be 100), but
    # concatenated: cosines [.1, .2 | .8, .9 | .5, .6] -> ranks [1, 2, 5, 6, 3, 4]
    #               gold    [4,  5  | 0,  1  | 2,  3 ] -> ranks [5, 6, 1, 2, 3, 4]
    # centred: [-2.5, -1.5, 1.5, 2.5, -.5, .5] and [1.5, 2.5, -2.5, -1.5, -.5, .5]
    # covariance sum -3.75 * 4 + .25 * 2 = -14.5; variance sums 17.5 -> -14.5 / 17.5
    # headlines' third pair (cosine 0.0) has an empty gold line: not scored, not counted.
    write_sts13(str(tmp_path), {"FNWN": [(0.1, 4), (0.2, 5)],
                                "headlines": [(0.8, 0), (0.0, None), (0.9, 1)],
                                "OnWN": [(0.5, 2), (0.6, 3)]})
    result = sts_scores(angle_embed, str(tmp_path), tasks=("STS13",))
    assert result["STS13"] == pytest.approx(-100 * 14.5 / 17.5, abs=1e-9)
    assert result["subsets"]["STS13"] == pytest.approx({"FNWN": 100.0, "headlines": 100.0,
                                                        "OnWN": 100.0})
    assert result["pairs"]["STS13"] == 6
    pairs = read_sts_task(str(tmp_path), "STS13")
    assert [len(pairs[s]) for s in ("FNWN", "headlines", "OnWN")] == [2, 2, 2]
    assert pairs["headlines"].second == ["y 0.8", "y 0.9"]


def test_each_distinct_sentence_is_embedded_once_in_batches(tmp_path):
    write_sts_b(str(tmp_path), [0.9, 0.1, 0.5, 0.9], [5, 1, 2, 4])
    seen = []

    def embed(batch):
        seen.append(list(batch))
        return angle_embed(batch)

    sts_scores(embed, str(tmp_path), tasks=["STSBenchmark"], batch_size=2)
    flat = [s for batch in seen for s in batch]
    assert sorted(flat) == sorted({"x", "y 0.9", "y 0.1", "y 0.5"})
    assert all(len(batch) <= 2 for batch in seen)


def test_whitespace_is_normalised_as_senteval(tmp_path):
    write(os.path.join(str(tmp_path), "SICK", "SICK_test_annotated.txt"),
          ["pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment",
           "1\t  a   b \ta b\t4.5\tENTAILMENT", "2\ta\tb\t1.0\tNEUTRAL"])
    pairs = read_sts_task(str(tmp_path), "SICKRelatedness")["test"]
    assert pairs.first == ["a b", "a"] and pairs.second == ["a b", "b"]
    assert pairs.targets.tolist() == [4.5, 1.0]


def test_missing_folder_names_it_and_the_layout(tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        sts_scores(angle_embed, str(tmp_path), tasks=["STS12"])
    message = str(e.value)
    assert os.path.join("STS", "STS12-en-test") in message
    assert "STS.input.<subset>.txt" in message and "MSRpar" in message
    with pytest.raises(FileNotFoundError, match="sts-test.csv"):
        sts_scores(angle_embed, str(tmp_path), tasks=["STSBenchmark"])
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        sts_scores(angle_embed, str(tmp_path / "nope"))
    # a year folder without one subset's file: named
    write_sts13(str(tmp_path), {"FNWN": [(0.1, 4), (0.2, 5)], "OnWN": [(0.5, 2), (0.6, 3)]})
    with pytest.raises(FileNotFoundError, match="STS.input.headlines.txt"):
        sts_scores(angle_embed, str(tmp_path), tasks=["STS13"])


def test_missing_skip_lists_what_was_skipped(tmp_path):
    write_sts_b(str(tmp_path), [0.9, 0.1, 0.5], [5, 1, 2])
    with pytest.warns(UserWarning, match="skipping STS12"):
        result = sts_scores(angle_embed, str(tmp_path), tasks=["STS12", "STSBenchmark"],
                            missing="skip")
    assert result["skipped"] == ["STS12"]
    assert "STS12" not in result and result["avg"] == result["STSBenchmark"] == 100.0


def test_malformed_files_and_arguments_are_refused(tmp_path):
    folder = os.path.join(str(tmp_path), "STS", "STS13-en-test")
    write_sts13(str(tmp_path), {"FNWN": [(0.1, 4)], "headlines": [(0.8, 0)], "OnWN": [(0.5, 2)]})
    write(os.path.join(folder, "STS.gs.OnWN.txt"), ["2.0", "3.0"])   # one line too many
    with pytest.raises(ValueError, match="aligned"):
        sts_scores(angle_embed, str(tmp_path), tasks=["STS13"])
    write(os.path.join(folder, "STS.gs.OnWN.txt"), ["high"])
    with pytest.raises(ValueError, match="not a number"):
        sts_scores(angle_embed, str(tmp_path), tasks=["STS13"])
    write(os.path.join(folder, "STS.gs.OnWN.txt"), ["2.0"])
    write(os.path.join(folder, "STS.input.OnWN.txt"), ["only one sentence"])
    with pytest.raises(ValueError, match="2 tab-separated"):
        sts_scores(angle_embed, str(tmp_path), tasks=["STS13"])
    with pytest.raises(ValueError, match="tasks"):
        sts_scores(angle_embed, str(tmp_path), tasks=["STS17"])
    with pytest.raises(ValueError, match="missing"):
        sts_scores(angle_embed, str(tmp_path), tasks=["STS13"], missing="ignore")


@pytest.mark.parametrize("bad, match", [
    (lambda b: np.zeros((len(b) + 1, 2)), r"\[2, d\] array"),
    (lambda b: np.full((len(b), 2), np.nan), "NaN or infinite"),
    (lambda b: np.zeros(len(b)), "array"),
])
def test_embed_fn_output_is_checked(bad, match):
    with pytest.raises(ValueError, match=match):
        embed_sentences(bad, ["a", "b"], batch_size=4)
    with pytest.raises(ValueError, match="batch_size"):
        embed_sentences(angle_embed, ["x"], batch_size=0)


def test_zero_embedding_has_cosine_zero_and_constant_cosine_is_nan(tmp_path):
    write_sts_b(str(tmp_path), [0.9, 0.1, 0.5], [5, 1, 2])
    zero = lambda batch: np.zeros((len(batch), 3))  # noqa: E731
    with pytest.warns(RuntimeWarning, match="undefined"):
        result = sts_scores(zero, str(tmp_path), tasks=["STSBenchmark"])
    assert math.isnan(result["STSBenchmark"])


def test_registered_as_a_text_evaluation():
    component = EVALUATIONS.get("sts")
    assert component.tags == {"result": "sts", "modality": "text"}
    assert EVALUATIONS.defaults("sts")["tasks"] == list(STS_TASKS)


def hash_embed(batch):
    """A cheap deterministic 'random' embedding: 16 bytes of MD5 per sentence."""
    return np.array([np.frombuffer(hashlib.md5(s.encode()).digest(), np.uint8) for s in batch],
                    dtype=np.float32) - 127.5


@pytest.mark.skipif(not os.path.isdir(SHARED_TEXT), reason="shared text data absent")
def test_shared_data_pair_counts_match_the_readme():
    with warnings.catch_warnings():
        warnings.simplefilter("error")               # nothing skipped, nothing undefined
        result = sts_scores(hash_embed, SHARED_TEXT, batch_size=4096)
    assert result["pairs"] == {"STS12": 3108, "STS13": 1500, "STS14": 3750, "STS15": 3000,
                               "STS16": 1186, "STSBenchmark": 1379, "SICKRelatedness": 4927}
    assert result["skipped"] == [] and set(result["subsets"]["STS13"]) == {"FNWN", "headlines",
                                                                          "OnWN"}
    # random embeddings: near 0 (identical sentences in a pair still get cosine 1)
    assert all(-15 < result[t] < 15 for t in STS_TASKS)
