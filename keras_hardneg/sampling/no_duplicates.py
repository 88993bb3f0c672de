"""Batches of retrieval tuples in which no document and no query appears twice.

A retrieval tuple is (query row, positive document row, ``K`` negative document rows), e.g.
one row of :class:`~keras_hardneg.sampling.MinedNegatives`. With in-batch negatives every
document of a batch is a negative of every other query of the batch, so a document that
appears twice in a batch (one query's positive is another's mined negative, or two tuples
share a positive or a negative) is scored against itself: the same text is both the
positive and a negative. A query twice (a query with several positives) would push its
positives apart. sentence-transformers' ``NoDuplicatesBatchSampler`` avoids both for text
rows; :func:`pack_without_duplicates` does it on row ids, so the rule is exact and cheap.

Rules of :func:`pack_without_duplicates` (greedy, deterministic given ``order``):

1. Tuples are taken in ``order`` (a permutation drawn from ``seed`` when None). A batch is
   filled with the next tuples that share neither the query nor any document with the
   tuples already in it. A tuple that conflicts is **carried**: the next batch tries the
   carried tuples first (oldest first), then continues with the order.
2. A tuple whose own documents repeat (its positive among its negatives, or a negative
   twice) can never be placed; it is counted in ``conflicting``.
3. When the order is exhausted, batches keep being packed from the carried tuples; the
   first batch that cannot be filled to ``batch_size`` ends the packing. It is the **last
   incomplete batch**: dropped with ``drop_remainder=True`` (the default, as ``tf.data``'s
   ``drop_remainder``: every batch has exactly ``batch_size`` tuples, so a compiled step
   compiles once; its tuples are counted in ``dropped``) or kept as a smaller last batch
   with ``drop_remainder=False``. The carried tuples still left conflict with it; they are
   counted in ``conflicting``.
4. Every tuple given is either in exactly one batch or counted once (``unplaced`` =
   ``dropped`` + ``conflicting``).

Queries and documents are separate tables: query row 3 and document row 3 are different
items (use one table for both when queries are documents).

Example (tuples 0 and 1 share document 7; the next batch takes the carried tuple 1):
>>> q = np.array([0, 1, 2, 3])
>>> p = np.array([7, 8, 9, 10])
>>> n = np.array([[11], [7], [12], [13]])
>>> packing = pack_without_duplicates(q, p, n, batch_size=2, order=np.arange(4))
>>> [b.tolist() for b in packing.batches], packing.unplaced.tolist()
([[0, 2], [1, 3]], [])
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

__all__ = ["Packing", "pack_without_duplicates", "tuple_arrays"]


@dataclass
class Packing:
    """The result of :func:`pack_without_duplicates`.

    Attributes:
        batches: int64 ``[b]`` arrays of tuple indices (positions in the tuples given), in
            batch order; every one has ``batch_size`` tuples except, with
            ``drop_remainder=False``, possibly the last.
        dropped: int64 tuple indices of the last incomplete batch when it was dropped.
        conflicting: int64 tuple indices that could not be placed without a duplicate
            (they conflict with the last incomplete batch, or with themselves).
        carried: how many tuples were carried past at least one batch before being placed.
    """

    batches: list
    dropped: np.ndarray
    conflicting: np.ndarray
    carried: int

    @property
    def unplaced(self) -> np.ndarray:
        """int64 tuple indices in no batch: ``dropped`` then ``conflicting``."""
        return np.concatenate([self.dropped, self.conflicting]).astype(np.int64)

    @property
    def num_placed(self) -> int:
        return int(sum(len(b) for b in self.batches))

    def summary(self) -> dict:
        """``{"batches", "placed", "dropped", "conflicting", "carried"}`` as ints."""
        return {"batches": len(self.batches), "placed": self.num_placed,
                "dropped": int(self.dropped.size), "conflicting": int(self.conflicting.size),
                "carried": int(self.carried)}


def _int_rows(name: str, value: Any, ndim: int) -> np.ndarray:
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError):
        arr = None
    if arr is None or arr.ndim != ndim or (arr.size and (
            not np.issubdtype(arr.dtype, np.integer) or arr.min() < 0)):
        shape = "[T]" if ndim == 1 else "[T, K]"
        got = "?" if arr is None else f"{arr.dtype} {arr.shape}"
        raise ValueError(f"`{name}` must be non-negative integer rows {shape}; got {got}.")
    return arr.astype(np.int64, copy=False)


def tuple_arrays(tuples: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(query [T], positive [T], negatives [T, K])`` int64 of ``tuples``: a
    :class:`~keras_hardneg.sampling.MinedNegatives` (anything with ``query``, ``positive``,
    ``negatives``), or a sequence ``(query, positive)`` (pairs: ``K = 0``) or ``(query,
    positive, negatives)``; raises ``ValueError`` naming ``tuples`` otherwise."""
    if all(hasattr(tuples, a) for a in ("query", "positive", "negatives")):
        parts = (tuples.query, tuples.positive, tuples.negatives)
    elif isinstance(tuples, (tuple, list)) and len(tuples) in (2, 3):
        parts = tuple(tuples)
    else:
        raise ValueError("`tuples` must be a MinedNegatives or (query [T], positive [T]"
                         f"[, negatives [T, K]]); got {type(tuples).__name__}.")
    query = _int_rows("tuples.query", parts[0], 1)
    positive = _int_rows("tuples.positive", parts[1], 1)
    if len(parts) == 2:
        negatives = np.zeros((len(query), 0), np.int64)
    else:
        negatives = _int_rows("tuples.negatives", parts[2], 2)
    if not len(query) == len(positive) == len(negatives):
        raise ValueError(f"`tuples` parts must have one row per tuple; got query "
                         f"{len(query)}, positive {len(positive)}, negatives "
                         f"{len(negatives)}.")
    return query, positive, negatives


def _check_int(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"`{name}` must be an integer >= {low}; got {value!r}.")
    return int(value)


def pack_without_duplicates(query: Sequence[int], positive: Sequence[int], negatives: Any,
                            batch_size: int, *, order: Sequence[int] | None = None,
                            seed: int = 0, drop_remainder: bool = True) -> Packing:
    """Greedy batches of tuples with no query and no document twice (module rules).

    Args:
        query: int ``[T]`` query rows.
        positive: int ``[T]`` document rows of the positives.
        negatives: int ``[T, K]`` document rows of the negatives (``K >= 0``).
        batch_size: ``B >= 1`` tuples per batch.
        order: the tuple indices in the order to pack (a permutation of ``range(T)`` or a
            subset of it, no index twice); None: a permutation drawn from ``seed``.
        seed: seed of that permutation.
        drop_remainder: drop (True, default) or keep the last incomplete batch.

    Returns:
        :class:`Packing`: batches of tuple indices, and the tuples not placed.
    """
    q, p, n = tuple_arrays((query, positive, negatives))
    b = _check_int("batch_size", batch_size, 1)
    if not isinstance(drop_remainder, bool):
        raise ValueError(f"`drop_remainder` must be a bool; got {drop_remainder!r}.")
    t = len(q)
    if order is None:
        order = np.random.default_rng(_check_int("seed", seed, 0)).permutation(t)
    order = np.asarray(order)
    if order.ndim != 1 or (order.size and (not np.issubdtype(order.dtype, np.integer)
                                           or order.min() < 0 or order.max() >= t)) \
            or np.unique(order).size != order.size:
        raise ValueError(f"`order` must be distinct tuple indices in [0, {t}); got "
                         f"{order.dtype} {order.shape}.")
    docs = np.concatenate([p[:, None], n], axis=1)
    valid = np.array([np.unique(row).size == row.size for row in docs], dtype=bool)
    conflicting = [int(i) for i in order if not valid[i]]
    stream = [int(i) for i in order if valid[i]]
    q_list, doc_lists = q.tolist(), docs.tolist()

    batches, carried, ever_carried = [], [], set()
    pos = 0
    while True:
        members, q_in, d_in = [], set(), set()

        def fits(i):
            return q_list[i] not in q_in and not any(d in d_in for d in doc_lists[i])

        def take(i):
            members.append(i)
            q_in.add(q_list[i])
            d_in.update(doc_lists[i])

        still = []
        for k, i in enumerate(carried):
            if len(members) == b:
                still.extend(carried[k:])
                break
            if fits(i):
                take(i)
            else:
                still.append(i)
        carried = still
        while len(members) < b and pos < len(stream):
            i = stream[pos]
            pos += 1
            if fits(i):
                take(i)
            else:
                carried.append(i)
                ever_carried.add(i)
        if len(members) == b:
            batches.append(np.array(members, np.int64))
            continue
        # Order exhausted and the carried tuples cannot fill a batch: the last one.
        if members and not drop_remainder:
            batches.append(np.array(members, np.int64))
            dropped = []
        else:
            dropped = members
        conflicting.extend(carried)
        break
    placed_carried = len(ever_carried) - len(ever_carried.intersection(conflicting)) \
        - len(ever_carried.intersection(dropped))
    return Packing(batches, np.array(dropped, np.int64), np.array(conflicting, np.int64),
                   int(placed_carried))
