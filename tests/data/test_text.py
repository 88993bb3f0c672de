"""Sentence files as token ids: reading, adjacent pairs, the array-like wrapper, the
``text_file`` registration (a tiny corpus written here), and the shared corpus when present."""

import os

import numpy as np
import pytest

pytest.importorskip("tokenizers")

from keras_hardneg.data import (TokenizedSentences, read_sentences, text_file,  # noqa: E402
                                train_tokenizer, wordllama_available)
from keras_hardneg.registry import DATASETS, ConfigError  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED_CORPUS = os.path.join(ROOT, "..", "shared", "data", "text", "corpus",
                             "wiki1m_prefix.txt")

LINES = ["  The cat sat on the mat.  ", "", "A dog ran across the park.", "   ",
         "The river flows into the sea.", "She played the piano.",
         "Rain is expected tomorrow."]


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return str(path)


def test_read_sentences_strips_and_drops_empty_lines(corpus, tmp_path):
    sentences = read_sentences(corpus)
    assert sentences == ["The cat sat on the mat.", "A dog ran across the park.",
                         "The river flows into the sea.", "She played the piano.",
                         "Rain is expected tomorrow."]
    assert read_sentences(corpus, limit=2) == sentences[:2]
    with pytest.raises(ValueError, match="does not exist"):
        read_sentences(tmp_path / "missing.txt")
    (tmp_path / "blank.txt").write_text("\n  \n")
    with pytest.raises(ValueError, match="no non-empty line"):
        read_sentences(tmp_path / "blank.txt")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    with pytest.raises(ValueError, match="not UTF-8"):
        read_sentences(tmp_path / "latin1.txt")
    with pytest.raises(ValueError, match="limit"):
        read_sentences(corpus, limit=0)


def test_tokenized_sentences_rows_and_adjacent_pairs(corpus):
    sentences = read_sentences(corpus)
    tok = train_tokenizer(sentences, vocab_size=300)
    single = TokenizedSentences(sentences, tok, max_length=10)
    assert single.shape == (5, 10) and len(single) == 5 and single.dtype == np.int32
    assert single.sentence_shape == (10,) and single.initial_embeddings is None
    np.testing.assert_array_equal(single[[3, 1]], tok.encode([sentences[3], sentences[1]], 10))
    np.testing.assert_array_equal(np.asarray(single), single.ids)
    assert 0.0 <= single.truncated_fraction() <= 1.0

    pairs = TokenizedSentences(sentences, tok, max_length=10, pairs="adjacent")
    assert pairs.shape == (4, 2, 10)
    for i in range(4):  # row i: sentence i and the next one, in file order
        np.testing.assert_array_equal(pairs[i], single.ids[[i, i + 1]])
    with pytest.raises(ValueError, match="at least 2 sentences"):
        TokenizedSentences(sentences[:1], tok, pairs="adjacent")
    with pytest.raises(ValueError, match="pairs"):
        TokenizedSentences(sentences, tok, pairs="next")
    with pytest.raises(ValueError, match="initial_embeddings"):
        TokenizedSentences(sentences, tok, initial_embeddings=np.zeros((3, 4)))


def test_text_file_source_through_the_registry(corpus, tmp_path):
    config = DATASETS.check("text_file", {"path": corpus, "max_length": 12,
                                          "vocab_size": 300})
    assert config == {"path": corpus, "max_length": 12, "vocab_size": 300,
                      "tokenizer": "train", "pairs": "none", "limit": None, "corpus": None,
                      "data_dir": None}
    assert DATASETS.get("text_file").tags["modality"] == "text"
    (x, y), (x_test, y_test), desc = DATASETS.make("text_file", config, 0)
    assert isinstance(x, TokenizedSentences) and x.shape == (5, 12)
    assert y is None and x_test is None and y_test is None
    assert "5 sentences" in desc and "byte-level BPE" in desc
    # Deterministic: the same file gives the same ids whatever the seed.
    (x2, _), _, _ = text_file(7, path=corpus, max_length=12, vocab_size=300)
    np.testing.assert_array_equal(x.ids, x2.ids)

    # A saved tokenizer by path; adjacent pairs; a line limit.
    tok_path = x.tokenizer.save(tmp_path / "tok.json")
    (p, _), _, desc = text_file(0, path=corpus, max_length=12, tokenizer=tok_path,
                                pairs="adjacent", limit=3)
    assert p.shape == (2, 2, 12) and "first 3 lines" in desc
    np.testing.assert_array_equal(p[0], x.ids[:2])

    with pytest.raises(ConfigError, match="'path'"):
        DATASETS.check("text_file", {})
    with pytest.raises(ConfigError, match="pairs"):
        DATASETS.check("text_file", {"path": corpus, "pairs": "next"})
    with pytest.raises(ConfigError, match="max_length"):
        DATASETS.check("text_file", {"path": corpus, "max_length": 1})
    with pytest.raises(ValueError, match="'train', 'wordllama', the path"):
        text_file(0, path=corpus, tokenizer="bert")


@pytest.mark.skipif(not wordllama_available(), reason="wordllama is not installed")
def test_text_file_with_the_wordllama_start(corpus):
    (x, _), _, desc = text_file(0, path=corpus, max_length=16, tokenizer="wordllama")
    assert x.initial_embeddings.shape == (32001, 256) and x.tokenizer.kind == "wordllama"
    assert "wordllama" in desc and x.ids.max() < 32001


@pytest.mark.skipif(not os.path.isfile(SHARED_CORPUS), reason="shared corpus absent")
def test_shared_wikipedia_prefix():
    (x, _), _, desc = text_file(0, path=SHARED_CORPUS, limit=300, vocab_size=2000)
    assert x.shape == (300, 32) and (x.ids[:, 0] == x.tokenizer.cls_id).all()
    real = (x.ids != 0).sum(axis=1)
    assert real.min() >= 2 and 10 < real.mean() <= 32
    (q, _), _, _ = text_file(0, path=SHARED_CORPUS, limit=300, vocab_size=2000,
                             pairs="adjacent")
    assert q.shape == (299, 2, 32)
