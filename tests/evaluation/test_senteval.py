"""SentEval classification: readers (counts of the shared data, skipped if absent), the
logistic-regression protocol on separable and noisy synthetic embeddings (it reaches
scikit-learn's optimum), determinism, the benchmark on a tiny SentEval-layout folder, errors."""

import math
import os

import numpy as np
import pytest

from keras_hardneg.evaluation.senteval import (BINARY_TASKS, SENTEVAL_TASKS, TREC_CLASSES,
                                               cross_validated_accuracy, read_binary_task,
                                               read_mrpc, read_trec, senteval_scores,
                                               train_test_accuracy)
from keras_hardneg.registry import EVALUATIONS

SHARED_TEXT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data", "text")
needs_shared = pytest.mark.skipif(not os.path.isdir(SHARED_TEXT), reason="shared text data absent")


@needs_shared
@pytest.mark.parametrize("task, n, positives", [("MR", 10662, 5331), ("CR", 3775, 2407),
                                                ("SUBJ", 10000, 5000), ("MPQA", 10606, 3312)])
def test_binary_readers_match_the_readme(task, n, positives):
    sentences, labels = read_binary_task(SHARED_TEXT, task)
    assert len(sentences) == len(labels) == n and int(labels.sum()) == positives
    assert all(isinstance(s, str) for s in sentences)


@needs_shared
def test_trec_and_mrpc_readers_match_the_readme():
    trec = read_trec(SHARED_TEXT)
    assert [len(trec[s][0]) for s in ("train", "test")] == [5452, 500]
    assert set(trec["train"][1]) == set(range(len(TREC_CLASSES)))
    assert trec["test"][0][0] == "How far is it from Denver to Aspen ?"   # fine label dropped
    assert TREC_CLASSES[trec["test"][1][0]] == "NUM"
    mrpc = read_mrpc(SHARED_TEXT)
    assert [len(mrpc[s]) for s in ("train", "test")] == [4076, 1725]
    assert set(mrpc["train"].targets) == {0, 1}
    assert mrpc["train"].first[0].startswith("Amrozi accused his brother")   # header skipped


def blobs(n, d, classes, separation, seed):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % classes
    centers = rng.normal(size=(classes, d)) * separation
    return centers[y] + rng.normal(size=(n, d)) + 50.0, y   # an offset: standardisation matters


def test_separable_embeddings_are_classified_perfectly():
    x, y = blobs(200, 8, 2, 6.0, 0)
    result = cross_validated_accuracy(x, y, kfold=5)
    assert result["acc"] == 1.0 and len(result["C"]) == 5
    x, y = blobs(300, 8, 6, 6.0, 1)                 # TREC-like: 6 classes, one-vs-rest
    result = train_test_accuracy(x[:200], y[:200], x[200:], y[200:])
    assert result["acc"] == 1.0 and result["predictions"].shape == (100,)


def test_the_solver_reaches_scikit_learns_optimum():
    sklearn = pytest.importorskip("sklearn.linear_model")
    x, y = blobs(400, 12, 2, 0.4, 2)                # overlapping classes: C matters
    mean, std = x[:300].mean(0), x[:300].std(0)
    for C in (0.25, 8.0):
        ours = train_test_accuracy(x[:300], y[:300], x[300:], y[300:], grid=[C])
        reference = sklearn.LogisticRegression(C=C, tol=1e-10, max_iter=10000).fit(
            (x[:300] - mean) / std, y[:300])
        expected = reference.predict((x[300:] - mean) / std)
        assert ours["C"] == C and math.isnan(ours["devacc"])
        np.testing.assert_array_equal(ours["predictions"], expected)


def test_deterministic_for_a_seed():
    x, y = blobs(300, 16, 2, 0.3, 3)
    a = cross_validated_accuracy(x, y, kfold=5, seed=0)
    b = cross_validated_accuracy(x, y, kfold=5, seed=0)
    c = cross_validated_accuracy(x, y, kfold=5, seed=1)
    assert a == b and 0.5 < a["acc"] < 1.0
    assert c["acc"] != a["acc"] or c["C"] != a["C"] or c["devacc"] != a["devacc"]


def test_more_inner_folds_and_no_standardisation_run():
    x, y = blobs(150, 4, 2, 0.5, 4)
    full = cross_validated_accuracy(x, y, kfold=3, inner_folds=3)
    raw = cross_validated_accuracy(x, y, kfold=3, standardize=False)
    assert 0.5 < full["acc"] <= 1.0 and 0.0 <= raw["acc"] <= 1.0


def write(path, lines):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))


def tiny_senteval(root, per_class=12):
    """Every task in the SentEval layout; a sentence's first word is its class."""
    for task, (folder, positive, negative) in BINARY_TASKS.items():
        write(os.path.join(root, folder, positive), [f"good {task} {i}" for i in range(per_class)])
        write(os.path.join(root, folder, negative), [f"bad {task} {i}" for i in range(per_class)])
    for split, name in (("train", "train_5500.label"), ("test", "TREC_10.label")):
        write(os.path.join(root, "TREC", name),
              [f"{c}:other {c.lower()} question {split} {i} ?" for c in TREC_CLASSES
               for i in range(per_class if split == "train" else 2)])
    header = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String"
    for split, n in (("train", per_class), ("test", 4)):
        # paraphrase (1): the same first word; not (0): different first words
        rows = [f"1\t{i}\t{i + 1}\tgood a {i}\tgood b {i}" for i in range(n)]
        rows += [f"0\t{i}\t{i + 1}\tgood a {i}\tbad b {i}" for i in range(n)]
        rows += [f"0\t{i}\t{i + 1}\tbad a {i}\tgood b {i}" for i in range(n // 2)]
        write(os.path.join(root, "MRPC", f"msr_paraphrase_{split}.txt"), [header] + rows)


WORDS = ["good", "bad"] + [c.lower() for c in TREC_CLASSES]


def word_embed(batch):
    """One-hot of the class word (first word, or the TREC class word) plus noise-free extras."""
    out = np.zeros((len(batch), len(WORDS) + 1))
    for i, sentence in enumerate(batch):
        words = sentence.split()
        key = words[1] if words[0] == "other" else words[0]
        out[i, WORDS.index(key)] = 1.0
        out[i, -1] = len(sentence) % 3
    return out


def test_benchmark_on_a_tiny_folder(tmp_path):
    tiny_senteval(str(tmp_path))
    calls = []

    def embed(batch):
        calls.append(len(batch))
        return word_embed(batch)

    result = senteval_scores(embed, str(tmp_path), kfold=3, batch_size=16)
    for task in SENTEVAL_TASKS:
        assert result[task] == 100.0, task
    assert result["MRPC_f1"] == 100.0 and result["avg"] == 100.0 and result["skipped"] == []
    assert set(result["details"]) == set(SENTEVAL_TASKS)
    assert result["details"]["TREC"]["n"] == 6 * 12 + 6 * 2
    assert max(calls) <= 16
    again = senteval_scores(word_embed, str(tmp_path), kfold=3, mrpc_features="infersent", C=1.0)
    assert again["MRPC"] == 100.0 and again["details"]["MR"]["C"] == [1.0] * 3


def test_mrpc_f1_is_of_the_paraphrase_class(tmp_path):
    tiny_senteval(str(tmp_path))
    # An embedding that cannot tell pairs apart: every test pair predicted alike. The test split
    # has 4 paraphrases of 10 pairs: all predicted 1 -> F1 = 2*4 / (2*4 + 6) = 8/14; all 0 -> 0.
    result = senteval_scores(lambda b: np.ones((len(b), 2)), str(tmp_path), tasks=["MRPC"],
                             kfold=3, standardize=False)
    assert result["MRPC"] in (40.0, 60.0)
    assert result["MRPC_f1"] == pytest.approx(100 * 8 / 14 if result["MRPC"] == 40.0 else 0.0)


def test_missing_task_folder_is_named_or_skipped(tmp_path):
    tiny_senteval(str(tmp_path))
    os.remove(os.path.join(str(tmp_path), "TREC", "TREC_10.label"))
    with pytest.raises(FileNotFoundError) as e:
        senteval_scores(word_embed, str(tmp_path), tasks=["TREC"], kfold=3)
    assert "TREC_10.label" in str(e.value) and "COARSE:fine question" in str(e.value)
    with pytest.warns(UserWarning, match="skipping TREC"):
        result = senteval_scores(word_embed, str(tmp_path), tasks=["CR", "TREC"], kfold=3,
                                 missing="skip")
    assert result["skipped"] == ["TREC"] and result["avg"] == result["CR"] == 100.0
    with pytest.raises(FileNotFoundError, match="not a folder"):
        senteval_scores(word_embed, str(tmp_path / "nope"))


@pytest.mark.parametrize("kwargs, match", [
    ({"tasks": ["SST2"]}, "tasks"),
    ({"inner_folds": 4, "kfold": 3}, "inner_folds"),
    ({"kfold": 1}, "kfold"),
    ({"mrpc_features": "concat"}, "mrpc_features"),
    ({"C": 0.0}, "grid"),
    ({"seed": -1}, "seed"),
])
def test_bad_arguments_are_refused(tmp_path, kwargs, match):
    with pytest.raises(ValueError, match=match):
        senteval_scores(word_embed, str(tmp_path), **kwargs)


def test_too_few_samples_per_class_for_the_folds():
    x, y = blobs(30, 3, 2, 3.0, 5)
    with pytest.raises(ValueError, match="kfold=20"):
        cross_validated_accuracy(x, y, kfold=20)
    with pytest.raises(ValueError, match="NaN"):
        cross_validated_accuracy(np.full((30, 3), np.nan), y, kfold=3)


def test_registered_as_a_text_evaluation():
    component = EVALUATIONS.get("senteval")
    assert component.tags == {"result": "senteval", "modality": "text"}
    assert EVALUATIONS.defaults("senteval")["tasks"] == list(SENTEVAL_TASKS)
    assert component.accepts("seed") and component.accepts("embed_fn")
