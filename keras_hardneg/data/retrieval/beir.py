"""A BEIR folder: the corpus, the queries and one split's relevance judgements.

The layout of BEIR (Thakur et al. 2021, "BEIR: A Heterogeneous Benchmark for Zero-shot
Evaluation of Information Retrieval Models"), which every BEIR and MTEB retrieval set uses::

    FOLDER/corpus.jsonl       {"_id": "4983", "title": "...", "text": "...", "metadata": {}}
    FOLDER/queries.jsonl      {"_id": "1", "text": "...", "metadata": {}}
    FOLDER/qrels/SPLIT.tsv    query-id <TAB> corpus-id <TAB> score   (first line a header)

Conventions (BEIR's):

* a document's text is ``(title + " " + text).strip()`` (:meth:`Corpus.documents`; the title
  may be missing or empty);
* the queries of a split are those its qrels judge, in the order of their first judgement
  (the other queries of ``queries.jsonl`` belong to other splits);
* ``qrels`` is ``{query_id: {doc_id: score}}``, scores integers; a document is relevant when
  its score is ``> 0`` (:meth:`RetrievalSplit.positives`).

Checks: each failure is one line naming the file, the line and what is allowed -- a line that
is not a JSON object, a missing or non-string ``_id``, an empty or missing text, a duplicate
id, a qrel naming a query or a document the files do not have, a qrel row that is not
``query-id, corpus-id, integer score``, a pair judged twice, a split with no judgement (or
none with a score > 0). Nothing is downloaded: the folder is the user's.

Example:
>>> import os, tempfile
>>> folder = tempfile.mkdtemp()
>>> with open(os.path.join(folder, "corpus.jsonl"), "w") as f:
...     _ = f.write('{"_id": "d1", "title": "Cats", "text": "Cats purr."}\\n'
...                 '{"_id": "d2", "title": "", "text": "Dogs bark."}\\n')
>>> with open(os.path.join(folder, "queries.jsonl"), "w") as f:
...     _ = f.write('{"_id": "q1", "text": "what purrs"}\\n{"_id": "q2", "text": "barking"}\\n')
>>> os.mkdir(os.path.join(folder, "qrels"))
>>> with open(os.path.join(folder, "qrels", "test.tsv"), "w") as f:
...     _ = f.write("query-id\\tcorpus-id\\tscore\\nq2\\td2\\t1\\n")
>>> split = load_beir(folder, "test")
>>> split.corpus.documents()
['Cats Cats purr.', 'Dogs bark.']
>>> split.queries.ids, split.qrels
(('q2',), {'q2': {'d2': 1}})
>>> split.positives()
[array([1])]
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from keras_hardneg.data.retrieval._lines import (RetrievalFileError, check_file, jsonl_rows,
                                                 location, tsv_rows)

__all__ = ["Corpus", "Queries", "RetrievalSplit", "load_beir", "read_corpus", "read_queries",
           "read_qrels", "beir_splits"]


@dataclass(frozen=True)
class Corpus:
    """The documents: ``ids[i]``, ``titles[i]`` ("" when missing) and ``texts[i]``."""

    ids: tuple[str, ...]
    titles: tuple[str, ...]
    texts: tuple[str, ...]
    position: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        if not len(self.ids) == len(self.titles) == len(self.texts):
            raise ValueError(f"`ids`, `titles` and `texts` must have one entry per document; "
                             f"got {len(self.ids)}, {len(self.titles)}, {len(self.texts)}.")
        object.__setattr__(self, "position", {d: i for i, d in enumerate(self.ids)})

    def __len__(self) -> int:
        return len(self.ids)

    def documents(self) -> list[str]:
        """What an encoder reads, as BEIR builds it: ``(title + " " + text).strip()``."""
        return [f"{title} {text}".strip() for title, text in zip(self.titles, self.texts)]

    def __repr__(self) -> str:
        return f"Corpus({len(self)} documents)"


@dataclass(frozen=True)
class Queries:
    """The queries: ``ids[i]`` and ``texts[i]``."""

    ids: tuple[str, ...]
    texts: tuple[str, ...]
    position: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        if len(self.ids) != len(self.texts):
            raise ValueError(f"`ids` and `texts` must have one entry per query; got "
                             f"{len(self.ids)} and {len(self.texts)}.")
        object.__setattr__(self, "position", {q: i for i, q in enumerate(self.ids)})

    def __len__(self) -> int:
        return len(self.ids)

    def __repr__(self) -> str:
        return f"Queries({len(self)} queries)"


@dataclass(frozen=True)
class RetrievalSplit:
    """One split of a BEIR folder.

    Attributes:
        corpus: every document of ``corpus.jsonl``.
        queries: the split's queries (those its qrels judge, in order of first judgement).
        qrels: ``{query_id: {doc_id: score}}`` (integer scores; relevant when ``> 0``).
        split: the split's name (``qrels/SPLIT.tsv``).
        folder: the folder read.
    """

    corpus: Corpus
    queries: Queries
    qrels: dict[str, dict[str, int]]
    split: str = ""
    folder: str = ""

    def positives(self) -> list[np.ndarray]:
        """Per query of :attr:`queries`, the corpus positions (int64, ascending) of its
        relevant documents (score ``> 0``); an array may be empty."""
        where = self.corpus.position
        return [np.array(sorted(where[d] for d, s in self.qrels[q].items() if s > 0),
                         dtype=np.int64) for q in self.queries.ids]

    def pairs(self) -> np.ndarray:
        """``int64 [P, 2]``: (query position, corpus position) of every relevant judgement, in
        query order then corpus order -- the (anchor, positive) pairs of training."""
        rows = [(i, j) for i, docs in enumerate(self.positives()) for j in docs]
        return np.array(rows, dtype=np.int64).reshape(-1, 2)

    def __repr__(self) -> str:
        judged = sum(len(v) for v in self.qrels.values())
        return (f"RetrievalSplit({self.split!r}: {len(self.queries)} queries, {judged} "
                f"judgements, {len(self.corpus)} documents)")


def _id_of(row: dict, path: str, number: int) -> str:
    value = row.get("_id")
    if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value) == "":
        raise RetrievalFileError(f"{location(path, number)}: `_id` is {value!r}; each line "
                                 "needs a non-empty string `_id`.")
    return str(value)


def _text_of(row: dict, key: str, path: str, number: int, required: bool = True) -> str:
    value = row.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise RetrievalFileError(f"{location(path, number)}: `{key}` is {value!r}; it must be "
                                 "a string.")
    return value


def _unique(ids_seen: dict, ident: str, path: str, number: int) -> None:
    if ident in ids_seen:
        raise RetrievalFileError(f"{location(path, number)}: duplicate _id {ident!r} (first at "
                                 f"line {ids_seen[ident]}); every _id must be unique.")
    ids_seen[ident] = number


def read_corpus(path: str | os.PathLike) -> Corpus:
    """Read a BEIR ``corpus.jsonl``: one object a line with ``_id``, ``text``, optional
    ``title`` (other keys, e.g. ``metadata``, are ignored). A document whose
    ``(title + " " + text).strip()`` is empty is refused."""
    path = check_file(path, "corpus file")
    seen: dict[str, int] = {}
    ids, titles, texts = [], [], []
    for number, row in jsonl_rows(path):
        ident = _id_of(row, path, number)
        _unique(seen, ident, path, number)
        title = _text_of(row, "title", path, number, required=False)
        text = _text_of(row, "text", path, number)
        if not f"{title} {text}".strip():
            raise RetrievalFileError(f"{location(path, number)}: document {ident!r} has an empty "
                                     "title and text; each document needs some text.")
        ids.append(ident)
        titles.append(title)
        texts.append(text)
    if not ids:
        raise RetrievalFileError(f"{path} has no document; a corpus needs at least one line.")
    return Corpus(tuple(ids), tuple(titles), tuple(texts))


def read_queries(path: str | os.PathLike) -> Queries:
    """Read a BEIR ``queries.jsonl``: one object a line with ``_id`` and a non-empty
    ``text`` (other keys are ignored)."""
    path = check_file(path, "queries file")
    seen: dict[str, int] = {}
    ids, texts = [], []
    for number, row in jsonl_rows(path):
        ident = _id_of(row, path, number)
        _unique(seen, ident, path, number)
        text = _text_of(row, "text", path, number)
        if not text.strip():
            raise RetrievalFileError(f"{location(path, number)}: query {ident!r} has an empty "
                                     "text; each query needs some text.")
        ids.append(ident)
        texts.append(text)
    if not ids:
        raise RetrievalFileError(f"{path} has no query; the file needs at least one line.")
    return Queries(tuple(ids), tuple(texts))


def read_qrels(path: str | os.PathLike, query_ids=None, doc_ids=None) -> dict[str, dict[str, int]]:
    """Read a BEIR ``qrels/SPLIT.tsv`` into ``{query_id: {doc_id: score}}``.

    Rows are ``query-id, corpus-id, score`` separated by tabs, the score an integer; a first
    line whose score field is not an integer is the header and skipped (BEIR writes
    ``query-id corpus-id score``).

    Args:
        path: the file.
        query_ids, doc_ids: when given (any container supporting ``in``), a row naming an id
            outside them is refused.

    Raises:
        RetrievalFileError: a malformed row, an unknown id, a pair judged twice, no judgement,
            or no judgement with a score ``> 0``.
    """
    path = check_file(path, "qrels file")
    qrels: dict[str, dict[str, int]] = {}
    first_line: dict[tuple[str, str], int] = {}
    allowed = "each row must be query-id <TAB> corpus-id <TAB> integer score"
    for row_index, (number, fields) in enumerate(tsv_rows(path)):
        if len(fields) != 3:
            raise RetrievalFileError(f"{location(path, number)}: {len(fields)} tab-separated "
                                     f"field(s); {allowed}.")
        query, doc, score = (f.strip() for f in fields)
        try:
            value = int(score)
        except ValueError:
            if row_index == 0:
                continue  # the header
            raise RetrievalFileError(f"{location(path, number)}: score {score!r} is not an "
                                     f"integer; {allowed}.") from None
        if not query or not doc:
            raise RetrievalFileError(f"{location(path, number)}: an empty id; {allowed}.")
        if query_ids is not None and query not in query_ids:
            raise RetrievalFileError(f"{location(path, number)}: query {query!r} is not in the "
                                     "queries file; a qrel may only name known queries.")
        if doc_ids is not None and doc not in doc_ids:
            raise RetrievalFileError(f"{location(path, number)}: document {doc!r} is not in the "
                                     "corpus; a qrel may only name known documents.")
        if (query, doc) in first_line:
            raise RetrievalFileError(f"{location(path, number)}: query {query!r} and document "
                                     f"{doc!r} judged again (first at line "
                                     f"{first_line[query, doc]}); judge each pair once.")
        first_line[query, doc] = number
        qrels.setdefault(query, {})[doc] = value
    if not qrels:
        raise RetrievalFileError(f"{path} has no judgement; a split needs at least one row "
                                 "after the header.")
    if not any(s > 0 for docs in qrels.values() for s in docs.values()):
        raise RetrievalFileError(f"{path} has no judgement with a score > 0; a split needs at "
                                 "least one relevant document.")
    return qrels


def beir_splits(folder: str | os.PathLike) -> list[str]:
    """The split names of a BEIR folder (``qrels/*.tsv``), sorted."""
    qrels = os.path.join(os.fspath(folder), "qrels")
    if not os.path.isdir(qrels):
        return []
    return sorted(name[:-4] for name in os.listdir(qrels) if name.endswith(".tsv"))


def load_beir(folder: str | os.PathLike, split: str = "test") -> RetrievalSplit:
    """Read a BEIR folder's corpus, queries and ``qrels/SPLIT.tsv`` (see the module docstring).

    Args:
        folder: the folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/``).
        split: the qrels file's name without ``.tsv`` (``"test"``, ``"train"``, ``"dev"``).

    Returns:
        :class:`RetrievalSplit` whose queries are the split's judged ones.
    """
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        raise RetrievalFileError(f"BEIR folder {folder!r} does not exist; give the folder "
                                 "holding corpus.jsonl, queries.jsonl and qrels/.")
    if not isinstance(split, str) or not split:
        raise ValueError(f"`split` must be a non-empty string; got {split!r}.")
    qrels_path = os.path.join(folder, "qrels", f"{split}.tsv")
    if not os.path.isfile(qrels_path):
        have = ", ".join(beir_splits(folder)) or "none"
        raise RetrievalFileError(f"{qrels_path} does not exist; `split` must be one of the "
                                 f"folder's qrels/*.tsv: {have}.")
    corpus = read_corpus(os.path.join(folder, "corpus.jsonl"))
    queries = read_queries(os.path.join(folder, "queries.jsonl"))
    qrels = read_qrels(qrels_path, query_ids=queries.position, doc_ids=corpus.position)
    order = tuple(qrels)
    judged = Queries(order, tuple(queries.texts[queries.position[q]] for q in order))
    return RetrievalSplit(corpus=corpus, queries=judged, qrels=qrels, split=split, folder=folder)
