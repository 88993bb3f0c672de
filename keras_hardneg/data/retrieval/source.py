"""The ``"beir"`` dataset of a recipe: a BEIR folder (or a pair file) as token ids, ready to mine
and feed (``modality="retrieval"``).

:func:`beir_dataset` reads the user's folder (``path``), or a public BEIR set by name
(``dataset``: ``"scifact"``, ``"nfcorpus"``, ...) fetched once from BEIR's host into the cache
and checked (:func:`keras_hardneg.data.public.beir_folder`), with
:func:`~keras_hardneg.data.retrieval.load_beir`
(the training split's judged queries and the test split's), tokenizes every query and every
document once (BEIR's ``title + " " + text``; the pretrained encoder's tokenizer when
``tokenizer`` is its checkpoint folder, as the ``text_file`` dataset does) and returns two
:class:`RetrievalData`: the training side (the corpus, the training queries, their positives
and the (query, positive) pairs) and the test side (the same corpus, the test queries and
qrels). A pair or n-tuple file (``pairs``: :func:`~keras_hardneg.data.retrieval.read_pairs`)
replaces the training split: its anchors are the queries, its positives (and negatives) the
documents, matched to the folder's corpus by text (a text not there is added to the training
corpus only; the test side scores the folder's corpus as BEIR does).

The labels are ``None`` (a retrieval run is judged by its qrels, not by classes).

Example (a folder of two documents and one training query):
>>> import os, tempfile
>>> folder = tempfile.mkdtemp()
>>> with open(os.path.join(folder, "corpus.jsonl"), "w") as f:
...     _ = f.write('{"_id": "d1", "title": "Cats", "text": "Cats purr."}\\n'
...                 '{"_id": "d2", "title": "", "text": "Dogs bark."}\\n')
>>> with open(os.path.join(folder, "queries.jsonl"), "w") as f:
...     _ = f.write('{"_id": "q1", "text": "what purrs"}\\n{"_id": "q2", "text": "barking"}\\n')
>>> os.mkdir(os.path.join(folder, "qrels"))
>>> for split, row in (("train", "q1\\td1\\t1"), ("test", "q2\\td2\\t1")):
...     with open(os.path.join(folder, "qrels", f"{split}.tsv"), "w") as f:
...         _ = f.write("query-id\\tcorpus-id\\tscore\\n" + row + "\\n")
>>> (x, y), (x_test, _), desc = beir_dataset(0, path=folder, max_length=8, vocab_size=300)
>>> len(x), x.corpus_ids.shape, x.query_ids.shape, y
(1, (2, 8), (1, 8), None)
>>> x.pairs.tolist(), x_test.queries.ids
([[0, 0]], ('q2',))
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from keras_hardneg.data.retrieval._lines import RetrievalFileError
from keras_hardneg.data.retrieval.beir import Corpus, Queries, beir_splits, load_beir
from keras_hardneg.data.retrieval.pairs import read_pairs
from keras_hardneg.registry import DATASETS, Param

__all__ = ["RetrievalData", "beir_dataset"]


@dataclass(eq=False)
class RetrievalData:
    """One side (training or test) of a retrieval dataset, tokenized.

    Attributes:
        corpus: the documents (:class:`~keras_hardneg.data.retrieval.Corpus`).
        queries: this side's queries.
        qrels: ``{query_id: {doc_id: score}}`` (empty for a pair file's training side).
        positives: per query, its relevant corpus rows (int64).
        pairs: int64 ``[P, 2]``: (query row, corpus row) of every relevant judgement.
        negatives: int64 ``[P, K]`` corpus rows of a pair file's own negatives, or None.
        query_ids: int32 ``[Q, L]`` token ids of the queries.
        corpus_ids: int32 ``[N, L]`` token ids of the documents.
        tokenizer: the :class:`~keras_hardneg.data.tokenizer.SentenceTokenizer`.
        max_length: ``L``.
        query_max_length: ids a query holds at most (``<= L``; its row is padded to ``L``).
        split: the split's name (``"pairs"`` for a pair file).
        folder: the BEIR folder.
        runtime: what a run shares about this data while it trains (the mined tuples, the
            feed's batches); empty until a run fills it.

    ``len(data)`` is the number of pairs ``P`` (the training examples).
    """

    corpus: Corpus
    queries: Queries
    qrels: dict
    positives: list
    pairs: np.ndarray
    query_ids: np.ndarray
    corpus_ids: np.ndarray
    tokenizer: Any
    max_length: int
    query_max_length: int | None = None
    split: str = ""
    folder: str = ""
    negatives: np.ndarray | None = None
    runtime: dict = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return int(len(self.pairs))

    @property
    def documents(self) -> list[str]:
        """The documents' texts as encoded (BEIR's ``title + " " + text``)."""
        return self.corpus.documents()

    @property
    def shape(self) -> tuple[int, int]:
        """``(P, L)``: pairs and token ids per text (what a text encoder's input is)."""
        return (len(self), int(self.max_length))

    def __repr__(self) -> str:
        return (f"RetrievalData({self.split!r}: {len(self.queries)} queries, {len(self)} pairs, "
                f"{len(self.corpus)} documents, max_length {self.max_length})")


def _positives_of(num_queries: int, pairs: np.ndarray) -> list[np.ndarray]:
    out: list[list[int]] = [[] for _ in range(num_queries)]
    for q, d in pairs.tolist():
        out[q].append(d)
    return [np.array(sorted(set(rows)), np.int64) for rows in out]


def _from_pairs(path: str, corpus: Corpus
                ) -> tuple[Corpus, Queries, np.ndarray, np.ndarray | None]:
    """The training side of a pair file: queries (distinct anchors), the corpus extended by
    the file's documents it lacks, pairs and the file's negatives (corpus rows)."""
    rows = read_pairs(path)
    documents = corpus.documents()
    where = {text: j for j, text in enumerate(documents)}
    ids, titles, texts = list(corpus.ids), list(corpus.titles), list(corpus.texts)

    def doc(text: str) -> int:
        if text not in where:
            where[text] = len(ids)
            ids.append(f"pairs:{len(ids)}")
            titles.append("")
            texts.append(text)
        return where[text]

    anchors: dict[str, int] = {}
    pairs, negatives = [], []
    for anchor, positive, negs in zip(rows.anchors, rows.positives, rows.negatives):
        q = anchors.setdefault(anchor, len(anchors))
        pairs.append((q, doc(positive)))
        negatives.append([doc(t) for t in negs])
    queries = Queries(tuple(f"pairs:q{i}" for i in range(len(anchors))), tuple(anchors))
    extended = Corpus(tuple(ids), tuple(titles), tuple(texts))
    neg = (np.array(negatives, np.int64).reshape(len(pairs), -1)
           if rows.num_negatives else None)
    return extended, queries, np.array(pairs, np.int64).reshape(-1, 2), neg


_NEEDS = ("'path' (a BEIR folder: corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv) or 'dataset' "
          "(a BEIR set by name, e.g. 'scifact', fetched once) is required")


def _check_beir(config: dict[str, Any]) -> str | None:
    if config.get("path"):
        return None
    if not config.get("dataset"):
        return _NEEDS
    from keras_hardneg.data.public import BEIR_SETS

    if config["dataset"] not in BEIR_SETS:
        return (f"'dataset' must be a BEIR set by name, one of {', '.join(BEIR_SETS)} (or give "
                f"'path', a BEIR folder); got {config['dataset']!r}")
    return None


@DATASETS.register(
    "beir", modality="retrieval",
    params={
        "path": Param("path", help="a BEIR folder: corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv "
                                   "(wins over 'dataset')"),
        "dataset": Param(str, help="a BEIR set by name ('scifact', 'nfcorpus', 'fiqa', "
                                   "'arguana', ...), fetched once from BEIR's host into the "
                                   "cache (DATA_DIR/beir/NAME) and checked"),
        "data_dir": Param("path", help="cache folder of fetched sets (default "
                                       "~/.keras/datasets)"),
        "train_split": Param(str, help="the qrels split whose (query, positive) pairs train"),
        "test_split": Param(str, help="the qrels split scored at the end (nDCG@10, "
                                      "Recall@100, MRR@10)"),
        "pairs": Param("path", help="a pair / n-tuple file (.jsonl or .tsv: anchor, "
                                    "positive, negatives...) to train on instead of "
                                    "train_split"),
        "max_length": Param(int, low=2, help="token ids per query and per document, [CLS] "
                                             "and [SEP] included"),
        "query_max_length": Param(int, low=2, default=None,
                                  help="token ids per query (default max_length); a shorter "
                                       "one encodes training queries without the documents' "
                                       "padding"),
        "tokenizer": Param(str, help="'train' (byte-level BPE on the corpus), a saved "
                                     "tokenizer JSON path, or a pretrained checkpoint folder "
                                     "(its tokenizer: give the encoder's preset)"),
        "vocab_size": Param(int, low=258, help="vocabulary of a trained tokenizer (>= 258)"),
    },
    check=_check_beir)
def beir_dataset(seed: int, path: str | None = None, train_split: str = "train",
                 test_split: str = "test", pairs: str | None = None, max_length: int = 256,
                 tokenizer: str = "train", vocab_size: int = 8192,
                 query_max_length: int | None = None, dataset: str | None = None,
                 data_dir: str | None = None):
    """A BEIR folder as ``((train RetrievalData, None), (test RetrievalData, None),
    description)`` (module docstring).

    Args:
        seed: the recipe's seed (a trained tokenizer is deterministic: unused).
        path: the BEIR folder (the user's; nothing is downloaded). Wins over ``dataset``.
        dataset: a BEIR set by name (:data:`keras_hardneg.data.public.BEIR_SETS`), fetched
            once into ``data_dir/beir/NAME`` and checked when ``path`` is not given.
        data_dir: the cache folder (default ``~/.keras/datasets``).
        train_split, test_split: qrels split names (``qrels/NAME.tsv``).
        pairs: a pair / n-tuple file training instead of ``train_split``.
        max_length: token ids per text.
        query_max_length: token ids per query (at most ``max_length``; default
            ``max_length``); the queries' ids are padded to ``max_length`` with 0.
        tokenizer, vocab_size: as the ``text_file`` dataset's.

    Raises:
        RetrievalFileError: the folder, a split or a file is missing or malformed (one line
            naming the file, the line and what is allowed).
        ValueError: ``dataset`` is not a BEIR set by name.
        FetchError: ``dataset`` cannot be fetched (one line saying what to give instead) or
            differs from the published set.
    """
    from keras_hardneg.data.text import _tokenizer_for

    if not path and not dataset:
        raise RetrievalFileError("dataset 'beir' needs `path` (a BEIR folder: corpus.jsonl, "
                                 "queries.jsonl, qrels/SPLIT.tsv) or `dataset` (a BEIR set by "
                                 "name, e.g. 'scifact', fetched once).")
    if path:
        folder = os.fspath(path)
        where = f"BEIR folder {folder}"
    else:
        from keras_hardneg.data.public import beir_folder, describe_cache

        folder = beir_folder(dataset, data_dir)
        where = f"BEIR {dataset} {describe_cache(folder)}"
    test = load_beir(folder, test_split)
    if pairs:
        corpus, queries, train_pairs, negatives = _from_pairs(pairs, test.corpus)
        qrels: dict = {}
        split = "pairs"
    else:
        train = load_beir(folder, train_split)
        corpus, queries, qrels, negatives = train.corpus, train.queries, train.qrels, None
        train_pairs, split = train.pairs(), train_split
    q_len = max_length if query_max_length is None else min(int(query_max_length),
                                                               int(max_length))

    def queries_ids(texts):
        ids = np.asarray(tok.encode(list(texts), q_len), np.int32)
        return np.pad(ids, ((0, 0), (0, int(max_length) - q_len)))

    documents = corpus.documents()
    tok, _, tok_desc = _tokenizer_for(tokenizer, documents + list(queries.texts), vocab_size,
                                      seed)
    corpus_ids = np.asarray(tok.encode(documents, max_length), np.int32)
    x_train = RetrievalData(
        corpus=corpus, queries=queries, qrels=qrels,
        positives=_positives_of(len(queries), train_pairs), pairs=train_pairs,
        query_ids=queries_ids(queries.texts),
        corpus_ids=corpus_ids, tokenizer=tok, max_length=int(max_length),
        query_max_length=q_len, split=split,
        folder=folder, negatives=negatives)
    n = len(test.corpus)
    x_test = RetrievalData(
        corpus=test.corpus, queries=test.queries, qrels=test.qrels, positives=test.positives(),
        pairs=test.pairs(), query_ids=queries_ids(test.queries.texts),
        corpus_ids=corpus_ids[:n], tokenizer=tok, max_length=int(max_length),
        query_max_length=q_len, split=test_split, folder=folder)
    source = f"pair file {os.fspath(pairs)}" if pairs else f"split {train_split!r}"
    desc = (f"{where} (train: {source}, {len(queries)} queries, "
            f"{len(train_pairs)} pairs; test: split {test_split!r}, {len(test.queries)} "
            f"queries; {n} documents; max_length {max_length}; {tok_desc}; splits "
            f"{', '.join(beir_splits(folder))})")
    return (x_train, None), (x_test, None), desc
