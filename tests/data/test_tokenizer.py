"""The sentence tokenizer: round trip, padding and truncation, determinism (in and across
processes), save/load, bad input, and wordllama's start when it is installed."""

import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("tokenizers")

from keras_hardneg.data import tokenizer as tokenizer_module  # noqa: E402
from keras_hardneg.data.tokenizer import (SentenceTokenizer, load_tokenizer,  # noqa: E402
                                          train_tokenizer, wordllama_available,
                                          wordllama_start)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CORPUS = [
    "The cat sat on the mat.",
    "A dog ran across the park in the morning.",
    "Researchers published the results of the study in 2019.",
    "The river flows through the old town and into the sea.",
    "She played the piano at the concert hall.",
    "Two men are playing football on a green field.",
    "The committee approved the new budget on Tuesday.",
    "Rain is expected across the northern region tomorrow.",
] * 3


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer(CORPUS, vocab_size=400)


def test_round_trip_lowercases_and_strips_accents(tok):
    sentences = ["The cat sat on the mat.", "Two men are playing football.", "Café in Zürich"]
    ids = tok.encode(sentences, max_length=40)
    assert tok.decode(ids) == ["the cat sat on the mat.", "two men are playing football.",
                               "cafe in zurich"]
    assert tok.decode(ids[0]) == "the cat sat on the mat."
    # Unseen characters still encode (byte-level alphabet): nothing is unknown.
    assert tok.decode(tok.encode(["東京 ok"], 40)) == ["東京 ok"]


def test_padding_truncation_and_cls(tok):
    ids = tok.encode(["the cat", "", "a dog ran across the park in the morning again"],
                     max_length=6)
    assert ids.shape == (3, 6) and ids.dtype == np.int32
    assert (ids[:, 0] == tok.cls_id).all() and tok.cls_id == 1 and tok.pad_id == 0
    assert (ids[1, 1:] == 0).all()  # an empty sentence is [CLS] and padding
    short = tok.tokenize(["the cat"])[0]
    assert ids[0, 1:1 + len(short)].tolist() == short and (ids[0, 1 + len(short):] == 0).all()
    assert (ids[2] != 0).all()  # truncated to fill the row exactly
    long = tok.tokenize(["a dog ran across the park in the morning again"])[0]
    assert ids[2, 1:].tolist() == long[:5]
    assert tok.lengths(["the cat"]).tolist() == [len(short) + 1]
    assert ids.max() < tok.vocab_size


def test_training_is_deterministic_in_and_across_processes(tok):
    again = train_tokenizer(CORPUS, vocab_size=400)
    assert again.to_dict() == tok.to_dict()
    digest = hashlib.sha256(json.dumps(tok.to_dict(), sort_keys=True).encode()).hexdigest()
    # Another process with another hash seed (the tokenizers WordPiece trainer changed its
    # ids between processes; the BPE trainer must not). The module is loaded alone, on
    # Keras's NumPy backend (its package import then loads no TensorFlow: ~5 CPU-s less).
    code = (
        "import hashlib, importlib.util, json, sys\n"
        f"spec = importlib.util.spec_from_file_location('tk', {tokenizer_module.__file__!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        f"t = m.train_tokenizer({CORPUS!r}, vocab_size=400)\n"
        "print(hashlib.sha256(json.dumps(t.to_dict(), sort_keys=True).encode()).hexdigest())\n")
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": ROOT, "KERAS_BACKEND": "numpy"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == digest


def test_max_sentences_draws_a_seeded_subset():
    a = train_tokenizer(CORPUS, vocab_size=400, max_sentences=5, seed=1)
    b = train_tokenizer(CORPUS, vocab_size=400, max_sentences=5, seed=1)
    assert a.to_dict() == b.to_dict()
    assert a.vocab_size < train_tokenizer(CORPUS, vocab_size=400).vocab_size


def test_save_and_load(tok, tmp_path):
    path = tok.save(tmp_path / "tok.json")
    loaded = load_tokenizer(path)
    assert isinstance(loaded, SentenceTokenizer) and loaded.vocab_size == tok.vocab_size
    sentences = ["The river flows.", "Rain tomorrow in the park"]
    np.testing.assert_array_equal(loaded.encode(sentences, 12), tok.encode(sentences, 12))
    assert json.load(open(path))["format"] == "keras_hardneg.SentenceTokenizer"
    with pytest.raises(ValueError, match="does not exist"):
        load_tokenizer(tmp_path / "missing.json")
    (tmp_path / "other.json").write_text('{"a": 1}')
    with pytest.raises(ValueError, match="Not a saved SentenceTokenizer"):
        load_tokenizer(tmp_path / "other.json")


def test_bad_input_is_refused(tok):
    with pytest.raises(ValueError, match="not one string"):
        tok.encode("the cat", 8)
    with pytest.raises(ValueError, match=r"sentences\[1\]"):
        tok.encode(["ok", 3], 8)
    with pytest.raises(ValueError, match="max_length"):
        tok.encode(["ok"], 1)
    with pytest.raises(ValueError, match="vocab_size"):
        train_tokenizer(CORPUS, vocab_size=100)
    with pytest.raises(ValueError, match="must not be empty"):
        train_tokenizer([])
    with pytest.raises(ValueError, match="ids"):
        tok.decode(np.zeros((2, 2, 2), np.int32))


def test_wordllama_start_names_the_install_when_absent(monkeypatch):
    monkeypatch.setattr(tokenizer_module, "_wordllama_folder", lambda: None)
    assert not tokenizer_module.wordllama_available()
    with pytest.raises(ImportError, match="pip install wordllama"):
        tokenizer_module.wordllama_start()


@pytest.mark.skipif(not wordllama_available(), reason="wordllama is not installed")
def test_wordllama_start_aligns_ids_and_table(tmp_path):
    tok, table = wordllama_start()
    assert table.shape == (tok.vocab_size, 256) and table.dtype == np.float32
    assert tok.vocab_size == 32001 and np.all(table[0] == 0) and np.all(np.isfinite(table))
    ids = tok.encode(["A man is playing a guitar.", ""], 16)
    assert ids[0, 0] == tok.cls_id and (ids[1, 1:] == 0).all() and ids.max() < tok.vocab_size
    assert tok.decode(ids)[0] == "A man is playing a guitar."
    loaded = load_tokenizer(tok.save(tmp_path / "wl.json"))
    np.testing.assert_array_equal(loaded.encode(["A man is playing a guitar."], 16), ids[:1])
