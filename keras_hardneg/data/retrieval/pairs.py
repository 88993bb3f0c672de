"""Training pairs and n-tuples in plain files: (anchor, positive, optional negatives).

Two formats, chosen by the file's extension:

* ``.jsonl``: one object a line, keys ``anchor`` and ``positive`` (strings) and optionally
  ``negatives`` (a list of strings) or ``negative`` (one string); no other key;
* ``.tsv``: ``anchor <TAB> positive [<TAB> negative ...]``; a first line reading
  ``anchor <TAB> positive ...`` is a header and skipped.

Every row must carry the same number ``K >= 0`` of negatives (a batch of n-tuples is
``[B, 2 + K]`` texts), every text must be non-empty. Each failure is one line naming the file,
the line and what is allowed. :func:`write_pairs` writes the JSON Lines form (what
:func:`keras_hardneg.sampling.mining.mine_hard_negatives` produces, once mapped to texts).

Example:
>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "train.jsonl")
>>> write_pairs(path, ["what purrs"], ["Cats purr."], [["Dogs bark.", "Cows moo."]])
>>> pairs = read_pairs(path)
>>> pairs
Pairs(1 rows, 2 negatives each)
>>> pairs.anchors, pairs.positives, pairs.negatives
(('what purrs',), ('Cats purr.',), (('Dogs bark.', 'Cows moo.'),))
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Sequence

from keras_hardneg.data.retrieval._lines import (RetrievalFileError, check_file, jsonl_rows,
                                                 location, tsv_rows)

__all__ = ["Pairs", "read_pairs", "write_pairs", "PAIR_FORMATS"]

#: File extensions read by :func:`read_pairs`.
PAIR_FORMATS = (".jsonl", ".tsv")
_JSON_KEYS = ("anchor", "positive", "negatives", "negative")


@dataclass(frozen=True)
class Pairs:
    """Rows of (anchor, positive, K negatives): ``anchors`` and ``positives`` are ``[n]``
    texts, ``negatives`` ``[n, K]`` (a tuple of ``K`` texts per row; ``K = num_negatives``,
    0 for plain pairs)."""

    anchors: tuple[str, ...]
    positives: tuple[str, ...]
    negatives: tuple[tuple[str, ...], ...]

    @property
    def num_negatives(self) -> int:
        return len(self.negatives[0]) if self.negatives else 0

    def __len__(self) -> int:
        return len(self.anchors)

    def __repr__(self) -> str:
        return f"Pairs({len(self)} rows, {self.num_negatives} negatives each)"


def _json_row(row: dict, path: str, number: int) -> list[str]:
    unknown = sorted(set(row) - set(_JSON_KEYS))
    if unknown:
        raise RetrievalFileError(f"{location(path, number)}: unknown key(s) "
                                 f"{', '.join(map(repr, unknown))}; allowed keys: anchor, "
                                 "positive, negatives (a list) or negative (one string).")
    if "negatives" in row and "negative" in row:
        raise RetrievalFileError(f"{location(path, number)}: both `negatives` and `negative`; "
                                 "give one of them.")
    for key in ("anchor", "positive"):
        if key not in row:
            raise RetrievalFileError(f"{location(path, number)}: no `{key}`; each line needs "
                                     "`anchor` and `positive` strings.")
    negatives = row.get("negatives", [row["negative"]] if "negative" in row else [])
    if not isinstance(negatives, list):
        raise RetrievalFileError(f"{location(path, number)}: `negatives` is a "
                                 f"{type(negatives).__name__}; it must be a list of strings.")
    return [row["anchor"], row["positive"], *negatives]


def read_pairs(path: str | os.PathLike) -> Pairs:
    """Read a pair / n-tuple file (``.jsonl`` or ``.tsv``; see the module docstring).

    Raises:
        RetrievalFileError: an unknown extension, a malformed row, an empty or non-string
            text, rows with different numbers of negatives, or no row.
    """
    path = check_file(path, "pair file")
    ext = os.path.splitext(path)[1].lower()
    if ext not in PAIR_FORMATS:
        raise RetrievalFileError(f"pair file {path!r} has extension {ext!r}; it must be one of "
                                 f"{', '.join(PAIR_FORMATS)}.")
    if ext == ".jsonl":
        rows = ((number, _json_row(row, path, number)) for number, row in jsonl_rows(path))
    else:
        rows = _tsv_pair_rows(path)
    anchors, positives, negatives = [], [], []
    first: tuple[int, int] | None = None  # (line, K) of the first row
    for number, fields in rows:
        for k, text in enumerate(fields):
            what = ("anchor", "positive")[k] if k < 2 else f"negative {k - 1}"
            if not isinstance(text, str) or not text.strip():
                raise RetrievalFileError(f"{location(path, number)}: the {what} is {text!r}; "
                                         "every text must be a non-empty string.")
        k = len(fields) - 2
        if first is None:
            first = (number, k)
        elif k != first[1]:
            raise RetrievalFileError(f"{location(path, number)}: {k} negative(s), but line "
                                     f"{first[0]} has {first[1]}; every row must have the same "
                                     "number of negatives.")
        anchors.append(fields[0])
        positives.append(fields[1])
        negatives.append(tuple(fields[2:]))
    if not anchors:
        raise RetrievalFileError(f"{path} has no row; a pair file needs at least one "
                                 "(anchor, positive) row.")
    return Pairs(tuple(anchors), tuple(positives), tuple(negatives))


def _tsv_pair_rows(path: str):
    for index, (number, fields) in enumerate(tsv_rows(path)):
        if index == 0 and [f.strip().lower() for f in fields[:2]] == ["anchor", "positive"]:
            continue  # header
        if len(fields) < 2:
            raise RetrievalFileError(f"{location(path, number)}: {len(fields)} tab-separated "
                                     "field; each row must be anchor <TAB> positive "
                                     "[<TAB> negative ...].")
        yield number, fields


def write_pairs(path: str | os.PathLike, anchors: Sequence[str], positives: Sequence[str],
                negatives: Sequence[Sequence[str]] | None = None) -> None:
    """Write rows to a ``.jsonl`` pair file that :func:`read_pairs` reads back.

    Args:
        path: the file (``.jsonl``; overwritten).
        anchors, positives: ``[n]`` strings, one per row.
        negatives: ``[n, K]``: per row a sequence of ``K`` strings (the same ``K`` for every
            row), or None.
    """
    path = os.fspath(path)
    if not path.endswith(".jsonl"):
        raise ValueError(f"`path` must end with .jsonl; got {path!r}.")
    if len(anchors) != len(positives) or (negatives is not None and
                                          len(negatives) != len(anchors)):
        raise ValueError("`anchors`, `positives` and `negatives` must have one entry per row; "
                         f"got {len(anchors)}, {len(positives)}, "
                         f"{None if negatives is None else len(negatives)}.")
    with open(path, "w", encoding="utf-8") as f:
        for i, (anchor, positive) in enumerate(zip(anchors, positives)):
            row: dict = {"anchor": anchor, "positive": positive}
            if negatives is not None:
                row["negatives"] = list(negatives[i])
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
