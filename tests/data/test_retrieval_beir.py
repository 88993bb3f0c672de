"""BEIR folders: what is read (ids, BEIR's title + text, the split's queries, qrels) and the
one-line error of each broken rule, naming the file and the line."""

import json
import os

import numpy as np
import pytest

from keras_hardneg.data.retrieval import (RetrievalFileError, beir_splits, load_beir,
                                          read_corpus, read_qrels, read_queries)

SCIFACT = os.environ.get("KHN_SCIFACT", "/work/shared/data/retrieval/scifact")


def _jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write((row if isinstance(row, str) else json.dumps(row)) + "\n")
    return str(path)


def _folder(tmp_path, corpus=None, queries=None, qrels=None, split="test"):
    corpus = corpus or [{"_id": "d1", "title": "Cats", "text": "Cats purr.", "metadata": {}},
                        {"_id": "d2", "title": "", "text": "Dogs bark."},
                        {"_id": "d3", "text": "Cows moo."}]
    queries = queries or [{"_id": "q1", "text": "what purrs"}, {"_id": "q2", "text": "barking"},
                          {"_id": "q3", "text": "unjudged"}]
    qrels = qrels if qrels is not None else "query-id\tcorpus-id\tscore\nq2\td2\t1\nq1\td1\t2\n" \
        "q1\td3\t0\n"
    _jsonl(tmp_path / "corpus.jsonl", corpus)
    _jsonl(tmp_path / "queries.jsonl", queries)
    (tmp_path / "qrels").mkdir(exist_ok=True)
    (tmp_path / "qrels" / f"{split}.tsv").write_text(qrels, encoding="utf-8")
    return tmp_path


def test_a_folder_reads_with_beirs_conventions(tmp_path):
    split = load_beir(_folder(tmp_path), "test")
    assert split.corpus.ids == ("d1", "d2", "d3")
    # BEIR's document text: title + " " + text, stripped; a missing title is ""
    assert split.corpus.documents() == ["Cats Cats purr.", "Dogs bark.", "Cows moo."]
    # the split's queries: those judged, in order of first judgement
    assert split.queries.ids == ("q2", "q1")
    assert split.queries.texts == ("barking", "what purrs")
    assert split.qrels == {"q2": {"d2": 1}, "q1": {"d1": 2, "d3": 0}}
    # positives: score > 0 only, as corpus positions
    assert [p.tolist() for p in split.positives()] == [[1], [0]]
    np.testing.assert_array_equal(split.pairs(), [[0, 1], [1, 0]])
    assert beir_splits(tmp_path) == ["test"]


def test_qrels_without_a_header_read_too(tmp_path):
    _folder(tmp_path, qrels="q2\td2\t1\n")
    assert load_beir(tmp_path).qrels == {"q2": {"d2": 1}}


@pytest.mark.parametrize("rows, needle", [
    (['{"_id": "d1", "text": "a"}', '{"_id": "d1", "text": "b"}'],
     "line 2: duplicate _id 'd1' (first at line 1)"),
    (['{"_id": "d1", "text": "a"}', '{"_id": "d2", "title": " ", "text": ""}'],
     "line 2: document 'd2' has an empty title and text"),
    (['{"_id": "d1", "text": "a"}', '{"_id": "d2", "text": "b"'], "line 2: not valid JSON"),
    (['["d1", "a"]'], "line 1: a JSON list, not an object"),
    (['{"text": "a"}'], "line 1: `_id` is None"),
    (['{"_id": "d1", "text": 3}'], "line 1: `text` is 3; it must be a string"),
])
def test_a_broken_corpus_line_is_named(tmp_path, rows, needle):
    path = _jsonl(tmp_path / "corpus.jsonl", rows)
    with pytest.raises(RetrievalFileError) as err:
        read_corpus(path)
    assert needle in str(err.value) and path in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("rows, needle", [
    (['{"_id": "q1", "text": "a"}', '{"_id": "q1", "text": "b"}'], "duplicate _id 'q1'"),
    (['{"_id": "q1", "text": "  "}'], "line 1: query 'q1' has an empty text"),
])
def test_a_broken_query_line_is_named(tmp_path, rows, needle):
    with pytest.raises(RetrievalFileError, match=needle):
        read_queries(_jsonl(tmp_path / "queries.jsonl", rows))


@pytest.mark.parametrize("qrels, needle", [
    ("query-id\tcorpus-id\tscore\nq9\td1\t1\n", "line 2: query 'q9' is not in the queries file"),
    ("query-id\tcorpus-id\tscore\nq1\td9\t1\n", "line 2: document 'd9' is not in the corpus"),
    ("query-id\tcorpus-id\tscore\nq1\td1\n", "line 2: 2 tab-separated field"),
    ("query-id\tcorpus-id\tscore\nq1\td1\tyes\n", "line 2: score 'yes' is not an integer"),
    ("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td1\t1\n", "line 3: query 'q1' and document "
                                                           "'d1' judged again"),
    ("query-id\tcorpus-id\tscore\n", "has no judgement; a split needs"),
    ("query-id\tcorpus-id\tscore\nq1\td1\t0\n", "no judgement with a score > 0"),
])
def test_a_broken_qrels_line_is_named(tmp_path, qrels, needle):
    _folder(tmp_path, qrels=qrels)
    with pytest.raises(RetrievalFileError, match=needle) as err:
        load_beir(tmp_path, "test")
    assert os.path.join("qrels", "test.tsv") in str(err.value)


def test_a_missing_split_lists_the_splits_there(tmp_path):
    _folder(tmp_path, split="train")
    with pytest.raises(RetrievalFileError, match="must be one of the folder's qrels/.*: train"):
        load_beir(tmp_path, "test")
    with pytest.raises(RetrievalFileError, match="does not exist"):
        load_beir(tmp_path / "nowhere")


def test_read_qrels_alone_checks_only_the_rows(tmp_path):
    path = tmp_path / "q.tsv"
    path.write_text("a\tb\t1\n")
    assert read_qrels(path) == {"a": {"b": 1}}


@pytest.mark.skipif(not os.path.isdir(SCIFACT), reason="SciFact folder not present")
def test_scifact_has_the_published_counts():
    test = load_beir(SCIFACT, "test")
    assert (len(test.corpus), len(test.queries)) == (5183, 300)
    assert sum(len(v) for v in test.qrels.values()) == 339
    train = load_beir(SCIFACT, "train")
    assert (len(train.queries), train.pairs().shape) == (809, (919, 2))
