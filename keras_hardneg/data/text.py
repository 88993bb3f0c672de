"""Sentence corpora for contrastive sentence embeddings: a text file -> token ids.

Two kinds of positive pairs (the views are drawn by :mod:`keras_hardneg.augment.text_views`):

* unsupervised SimCSE (Gao et al. 2021, "SimCSE: Simple Contrastive Learning of Sentence
  Embeddings"): each sentence is encoded twice, and the encoder's two dropout masks make
  the two views -- the data is ``int32 [N, L]`` (``pairs="none"``);
* quick-thought vectors (Logeswaran & Lee 2018, "An efficient framework for learning
  sentence representations"; the setting of HCL and UnReMix): a sentence and the one
  after it in the file -- the data is ``int32 [N - 1, 2, L]`` (``pairs="adjacent"``), row
  ``i`` holding sentences ``i`` and ``i + 1`` of the file order.

* :func:`read_sentences` -- one sentence per line, stripped, empty lines dropped.
* :class:`TokenizedSentences` -- the ids with their tokenizer and start (an array-like).
* :func:`text_file` -- the ``"text_file"`` source of :data:`~keras_hardneg.registry.DATASETS`
  (``modality="text"``); the corpus is unlabelled, so its labels are ``None``.

Example:
>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "corpus.txt")
>>> with open(path, "w") as f:
...     _ = f.write("The cat sat.\\n\\nThe dog ran.\\nA bird sang.\\n")
>>> read_sentences(path)
['The cat sat.', 'The dog ran.', 'A bird sang.']
>>> (x, y), (x_test, y_test), desc = text_file(0, path=path, max_length=16, vocab_size=300,
...                                           pairs="adjacent")
>>> x.shape, y, x_test
((2, 2, 16), None, None)
>>> x.tokenizer.decode(x[[0]][:, 1])
['the dog ran.']
"""

from __future__ import annotations

import numbers
import os
from typing import Any, Sequence

import numpy as np

from keras_hardneg._keras_hub import is_preset_name
from keras_hardneg.data.tokenizer import (SentenceTokenizer, load_tokenizer, pretrained_tokenizer,
                                          train_tokenizer, wordllama_start)
from keras_hardneg.registry import DATASETS, Param

__all__ = ["PAIRS", "TokenizedSentences", "read_sentences", "text_file"]

#: Values of ``pairs``: one sentence per row, or (sentence i, sentence i + 1).
PAIRS = ("none", "adjacent")


def read_sentences(path: str | os.PathLike, limit: int | None = None) -> list[str]:
    """The lines of a UTF-8 text file, stripped, without empty lines, in file order.

    Args:
        path: the file (one sentence per line).
        limit: keep only the first ``limit`` sentences (>= 1).

    Raises:
        ValueError: the file is missing, unreadable as UTF-8, or has no sentence.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ValueError(f"sentence file {path!r} does not exist.")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, numbers.Integral)
                              or limit < 1):
        raise ValueError(f"`limit` must be an integer >= 1 or None; got {limit!r}.")
    sentences = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if line:
                    sentences.append(line)
                    if limit is not None and len(sentences) >= limit:
                        break
    except UnicodeDecodeError as err:
        raise ValueError(f"sentence file {path!r} is not UTF-8 text: {err}.") from err
    if not sentences:
        raise ValueError(f"sentence file {path!r} has no non-empty line.")
    return sentences


class TokenizedSentences:
    """Token ids of a corpus with their tokenizer: an array-like over the rows.

    Attributes:
        ids: ``int32 [N, L]`` (``pairs="none"``) or ``[N - 1, 2, L]`` (``"adjacent"``:
            row ``i`` is sentences ``i`` and ``i + 1`` of ``sentences``); 0 is padding.
        sentences: the text, in file order.
        tokenizer: the :class:`~keras_hardneg.data.tokenizer.SentenceTokenizer`.
        initial_embeddings: ``float32 [tokenizer.vocab_size, d]`` token embeddings of the
            start (wordllama's table), or None (train from scratch).
        pairs: ``"none"`` or ``"adjacent"``.

    ``len(x)``, ``x[index]`` (``ids[index]``), ``x.shape``, ``x.dtype``, ``x.ndim`` and
    ``np.asarray(x)`` behave as on :attr:`ids`.

    Args:
        sentences: the text (a list of strings, at least 2 for ``"adjacent"``).
        tokenizer: a :class:`~keras_hardneg.data.tokenizer.SentenceTokenizer`.
        max_length: ``L >= 2`` ids per sentence (``[CLS]`` included).
        pairs: ``"none"`` or ``"adjacent"``.
        initial_embeddings: see the attribute (rows must match ``tokenizer.vocab_size``).
    """

    def __init__(self, sentences: Sequence[str], tokenizer: SentenceTokenizer,
                 max_length: int = 32, pairs: str = "none",
                 initial_embeddings: np.ndarray | None = None):
        if not isinstance(tokenizer, SentenceTokenizer):
            raise ValueError(f"`tokenizer` must be a SentenceTokenizer; got "
                             f"{type(tokenizer).__name__}.")
        if pairs not in PAIRS:
            raise ValueError(f"`pairs` must be one of {', '.join(PAIRS)}; got {pairs!r}.")
        ids = tokenizer.encode(sentences, max_length)
        if pairs == "adjacent":
            if len(ids) < 2:
                raise ValueError("`pairs='adjacent'` needs at least 2 sentences; got "
                                 f"{len(ids)}.")
            ids = np.stack([ids[:-1], ids[1:]], axis=1)
        elif len(ids) == 0:
            raise ValueError("`sentences` must not be empty.")
        if initial_embeddings is not None:
            initial_embeddings = np.asarray(initial_embeddings, np.float32)
            if initial_embeddings.ndim != 2 or initial_embeddings.shape[0] != \
                    tokenizer.vocab_size:
                raise ValueError(f"`initial_embeddings` must be [vocab_size="
                                 f"{tokenizer.vocab_size}, d]; got shape "
                                 f"{initial_embeddings.shape}.")
        self.sentences = list(sentences)
        self.tokenizer = tokenizer
        self.max_length = int(max_length)
        self.pairs = pairs
        self.initial_embeddings = initial_embeddings
        self.ids = ids

    @property
    def shape(self) -> tuple[int, ...]:
        return self.ids.shape

    @property
    def dtype(self) -> np.dtype:
        return self.ids.dtype

    @property
    def ndim(self) -> int:
        return self.ids.ndim

    @property
    def sentence_shape(self) -> tuple[int]:
        """``(L,)``: the shape of one sentence's ids (a text encoder's ``input_shape``)."""
        return (self.max_length,)

    def truncated_fraction(self) -> float:
        """Fraction of sentences longer than ``max_length`` ids (cut by encoding)."""
        lengths = self.tokenizer.lengths(self.sentences)
        return float(np.mean(lengths > self.max_length))

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index: Any) -> np.ndarray:
        return self.ids[index]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.ids if dtype is None else self.ids.astype(dtype)

    def __repr__(self) -> str:
        return (f"TokenizedSentences({len(self.sentences)} sentences, shape={self.shape}, "
                f"pairs={self.pairs!r}, {self.tokenizer!r})")


def _tokenizer_for(choice: str, sentences: Sequence[str], vocab_size: int,
                   seed: int) -> tuple[SentenceTokenizer, np.ndarray | None, str]:
    if choice == "train":
        tok = train_tokenizer(sentences, vocab_size=vocab_size, seed=seed)
        return tok, None, f"byte-level BPE trained on the file ({tok.vocab_size} ids)"
    if choice == "wordllama":
        tok, table = wordllama_start()
        return tok, table, (f"wordllama l2_supercat tokenizer and {table.shape[1]}-d token "
                            "embeddings")
    if isinstance(choice, (str, os.PathLike)) and os.path.isfile(choice):
        return load_tokenizer(choice), None, f"tokenizer {os.fspath(choice)}"
    allowed = ("`tokenizer` must be 'train', 'wordllama', the path of a saved tokenizer JSON "
               "file, a pretrained checkpoint folder or a keras-hub preset name")
    if is_preset_name(choice):
        try:
            tok = pretrained_tokenizer(choice)
        except (ValueError, ImportError) as err:  # offline / unknown name / no keras-hub
            raise ValueError(f"{allowed}; got {choice!r}, which is none of these here: "
                             f"{err}") from None
        return tok, None, (f"WordPiece tokenizer of the keras-hub preset {choice} "
                           f"({tok.vocab_size} ids)")
    if isinstance(choice, (str, os.PathLike)) and os.path.isdir(choice):
        tok = pretrained_tokenizer(choice)
        return tok, None, (f"WordPiece tokenizer of the pretrained checkpoint "
                           f"{os.fspath(choice)} ({tok.vocab_size} ids)")
    raise ValueError(f"{allowed}; got {choice!r} (no such file or folder).")


@DATASETS.register(
    "text_file", modality="text",
    params={
        "path": Param("path", help="a UTF-8 text file, one sentence per line (wins over "
                                   "'corpus')"),
        "corpus": Param(str, choices=("wiki1m",),
                        help="a public corpus by name, fetched once into the cache: wiki1m "
                             "(SimCSE's 10^6 Wikipedia sentences)"),
        "data_dir": Param("path", help="cache folder of a fetched corpus (default "
                                       "~/.keras/datasets)"),
        "max_length": Param(int, low=2, help="token ids per sentence, [CLS] included (>= 2)"),
        "vocab_size": Param(int, low=258, help="vocabulary of a trained tokenizer (>= 258)"),
        "tokenizer": Param(str, help="'train' (byte-level BPE on the file), 'wordllama' "
                                     "(its tokenizer and embedding table), a saved "
                                     "tokenizer JSON path, or a pretrained checkpoint "
                                     "folder (its tokenizer.json / vocab.txt)"),
        "pairs": Param(str, choices=PAIRS,
                       help="none: one sentence per row (SimCSE); adjacent: (sentence i, "
                            "i + 1) rows (quick-thought)"),
        "limit": Param(int, low=1, help="use only the first N sentences of the file"),
    },
    check=lambda c: None if c["path"] or c["corpus"] else (
        "'path' (a sentence file, one per line) or 'corpus' (a public corpus by name: "
        "wiki1m) is required"))
def text_file(seed: int, path: str | None = None, max_length: int = 32, vocab_size: int = 8192,
              tokenizer: str = "train", pairs: str = "none", limit: int | None = None,
              corpus: str | None = None, data_dir: str | None = None):
    """Sentences of a text file as token ids (unlabelled; no test split).

    Args:
        seed: the recipe's seed (a trained tokenizer is deterministic and uses all the
            sentences, so the result does not depend on it).
        path: the file, one sentence per line (:func:`read_sentences`).
        corpus, data_dir: a public corpus by name, fetched once into the cache
            (:func:`keras_hardneg.data.public.sentence_corpus`) when there is no ``path``.
        max_length, vocab_size, tokenizer, pairs, limit: see the registered keys.

    Returns:
        ``((TokenizedSentences, None), (None, None), description)``.
    """
    if not path and not corpus:
        raise ValueError("`path` (a text file, one sentence per line) or `corpus` is "
                         "required.")
    if not path:
        from keras_hardneg.data.public import sentence_corpus

        path = sentence_corpus(corpus, data_dir)
    if pairs not in PAIRS:
        raise ValueError(f"`pairs` must be one of {', '.join(PAIRS)}; got {pairs!r}.")
    sentences = read_sentences(path, limit=limit)
    tok, table, tok_desc = _tokenizer_for(tokenizer, sentences, vocab_size, seed)
    data = TokenizedSentences(sentences, tok, max_length=max_length, pairs=pairs,
                              initial_embeddings=table)
    kind = "adjacent-sentence pairs" if pairs == "adjacent" else "sentences"
    desc = (f"text file {os.fspath(path)} ({len(data)} {kind}"
            f"{f', first {limit} lines' if limit else ''}, max_length {max_length}; "
            f"{tok_desc})")
    return (data, None), (None, None), desc
