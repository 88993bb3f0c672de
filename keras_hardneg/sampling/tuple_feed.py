"""The feed of retrieval tuples: each batch of ``B`` tuples is ONE flat batch of
``B * (2 + K)`` rows, example-major (the tuple layout every retrieval piece shares):

    [q_0, p_0, n_0_1 .. n_0_K, q_1, p_1, n_1_1 .. n_1_K, ...]

A stock single-input embedding model maps it to ``y_pred [B * (2 + K), d]``; the
mined-negatives loss reshapes that to ``[B, 2 + K, d]`` (``[:, 0]`` queries, ``[:, 1]``
positives, ``[:, 2:]`` negatives). The batches come from a
:class:`~keras_hardneg.sampling.TupleBatches` (uniform order) or
:class:`~keras_hardneg.sampling.TupleBatchSampler` (BatchSampler's walk order), no query and
no document twice in a batch.

Two forms of input, chosen by what ``queries`` and ``corpus`` hold:

* texts (sequences of strings): ``x`` is ``string [B * (2 + K)]``, for a model whose
  preprocessor tokenizes (a keras-hub ``TextEmbedder``);
* token ids (int32 / int64 ``[Q, L]`` and ``[N, L']``, as the text modality feeds them;
  the shorter side is padded with 0 to ``max(L, L')``): ``x`` is ``int32 [B * (2 + K), L]``.

Elements are ``(x, rows)`` with ``rows`` int64 ``[B * (2 + K)]``: each row's position in the
combined table (query ``i`` is ``i``, document ``j`` is ``Q + j``), the ``y_true`` Keras
hands the loss (the mined-negatives loss reads only ``y_pred``).

* :func:`make_tuple_dataset`: a ``tf.data.Dataset`` of one epoch (cardinality
  ``steps_per_epoch``), built by :func:`keras_hardneg.sampling.make_dataset` on the combined
  table; Keras re-iterates it every epoch, and each iteration packs the tuples current at
  its start.
* :class:`TuplePyDataset` (:func:`make_tuple_py_dataset`): a ``keras.utils.PyDataset`` (any
  backend, no TensorFlow) of ``steps_per_epoch`` batches; ``on_epoch_begin`` (Keras calls
  it at every epoch start) packs the tuples current then.

Tuples replaced between epochs (``batches.set_tuples``, as
:class:`~keras_hardneg.callbacks.ReminingCallback` does at an epoch end) are therefore used
from the next epoch on, in both forms.

Example (pairs, ``K = 0``, token ids):
>>> from keras_hardneg.sampling import TupleBatches
>>> q_ids = np.arange(1, 13, dtype="int32").reshape(6, 2)
>>> doc_ids = np.arange(100, 116, dtype="int32").reshape(8, 2)
>>> feed = make_tuple_py_dataset(TupleBatches((np.arange(6), np.arange(6)), 2), q_ids,
...                              doc_ids)
>>> x, rows = feed[0]
>>> x.shape, rows.shape, len(feed)
((4, 2), (4,), 3)
>>> bool((rows[0::2] < 6).all() and (rows[1::2] >= 6).all())   # q, p, q, p
True
"""

from __future__ import annotations

import threading
from typing import Any

import keras
import numpy as np

from keras_hardneg.data._tf import require_tensorflow
from keras_hardneg.sampling.dataset import _AUTOTUNE, _Gather, _text_rows, make_dataset

__all__ = ["make_tuple_dataset", "make_tuple_py_dataset", "TuplePyDataset", "tuple_rows"]


def tuple_rows(query: np.ndarray, positive: np.ndarray, negatives: np.ndarray,
               num_queries: int) -> np.ndarray:
    """int64 ``[b * (2 + K)]``: the rows of ``b`` tuples in the combined table (queries
    ``[0, Q)``, document ``j`` at ``Q + j``), example-major.

    >>> tuple_rows(np.array([0, 1]), np.array([5, 6]), np.array([[7], [8]]), 3).tolist()
    [0, 8, 10, 1, 9, 11]
    """
    docs = np.concatenate([np.asarray(positive)[:, None], np.asarray(negatives)], axis=1)
    rows = np.concatenate([np.asarray(query)[:, None], docs + int(num_queries)], axis=1)
    return rows.reshape(-1).astype(np.int64)


def _is_texts(value: Any) -> bool:
    if isinstance(value, np.ndarray):
        return value.dtype.kind in ("U", "S", "O")
    return isinstance(value, (list, tuple)) and len(value) > 0 and isinstance(
        value[0], (str, bytes))


def _table(batches: Any, queries: Any, corpus: Any) -> tuple[bool, Any, int]:
    """``(texts?, combined rows [Q + N, ...], Q)``, checked against the tuples."""
    for name, value in (("queries", queries), ("corpus", corpus)):
        if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) == 0:
            raise ValueError(f"`{name}` must be a non-empty sequence of strings or token ids "
                             f"[n, L]; got {type(value).__name__}.")
    texts = _is_texts(queries)
    if texts != _is_texts(corpus):
        raise ValueError("`queries` and `corpus` must be the same form: both strings or both "
                         "token ids.")
    if texts:
        table = np.concatenate([_text_rows(queries), _text_rows(corpus)])
    else:
        parts = []
        for name, value in (("queries", queries), ("corpus", corpus)):
            ids = np.asarray(getattr(value, "ids", value))
            if ids.ndim != 2 or not np.issubdtype(ids.dtype, np.integer):
                raise ValueError(f"`{name}` token ids must be int [n, L]; got {ids.dtype} "
                                 f"{ids.shape}.")
            parts.append(ids.astype(np.int32, copy=False))
        width = max(p.shape[1] for p in parts)
        table = np.concatenate([np.pad(p, ((0, 0), (0, width - p.shape[1]))) for p in parts])
    q, p, n = batches.tuples
    n_q, n_docs = len(queries), len(corpus)
    if q.size and q.max() >= n_q:
        raise ValueError(f"`queries` has {n_q} rows; the tuples need query row {int(q.max())}.")
    docs = np.concatenate([p, n.ravel()])
    if docs.size and docs.max() >= n_docs:
        raise ValueError(f"`corpus` has {n_docs} rows; the tuples need document row "
                         f"{int(docs.max())}.")
    return texts, table, n_q


class _FlatRows:
    """A :class:`TupleBatches` seen as an index sampler over the combined table: what
    :func:`keras_hardneg.sampling.make_dataset` reads (``num_nodes``, ``batch_size``,
    ``epoch()``)."""

    def __init__(self, batches: Any, num_queries: int, num_rows: int):
        self.batches = batches
        self.num_queries = num_queries
        self.num_nodes = num_rows
        self.batch_size = batches.batch_size * (2 + batches.num_negatives)
        self.variable_batch_size = not batches.drop_remainder
        self.steps_per_epoch = batches.steps_per_epoch

    def epoch(self):
        k = self.batches.num_negatives
        for _, (q, p, n) in self.batches.epoch():
            if n.shape[1] != k:
                raise ValueError(f"the tuples now have K={n.shape[1]} negatives; the feed "
                                 f"was built for K={k}.")
            yield tuple_rows(q, p, n, self.num_queries)

    def __iter__(self):
        while True:
            yield from self.epoch()


def make_tuple_dataset(batches: Any, queries: Any, corpus: Any, *,
                       prefetch: int = _AUTOTUNE) -> Any:
    """A ``tf.data.Dataset`` of one epoch of flat tuple batches (needs TensorFlow; without
    it use :func:`make_tuple_py_dataset`).

    Args:
        batches: a :class:`~keras_hardneg.sampling.TupleBatches` (or
            ``TupleBatchSampler``).
        queries: the ``Q`` query texts, or token ids ``[Q, L]``.
        corpus: the ``N`` document texts, or token ids ``[N, L']`` (same form as
            ``queries``).
        prefetch: prefetch depth (elements).

    Returns:
        ``tf.data.Dataset`` of ``(x, rows)``: ``x`` string ``[B * (2 + K)]`` or int32
        ``[B * (2 + K), L]``, ``rows`` int64 ``[B * (2 + K)]`` (module docstring); its
        cardinality is ``batches.steps_per_epoch``, so ``fit`` needs no ``steps_per_epoch``.
    """
    tf = require_tensorflow("make_tuple_dataset (a tf.data pipeline; without TensorFlow "
                            "use make_tuple_py_dataset)")
    texts, table, n_q = _table(batches, queries, corpus)
    flat = _FlatRows(batches, n_q, len(table))
    ds = make_dataset(flat, table, repeat=False, prefetch=prefetch, texts=texts)
    ds = ds.map(lambda f: (f["images"], f["index"]))
    return ds.apply(tf.data.experimental.assert_cardinality(batches.steps_per_epoch))


class TuplePyDataset(keras.utils.PyDataset):
    """Flat tuple batches as a ``keras.utils.PyDataset`` (any backend; NumPy only).

    Element ``i``: ``(x, rows)`` of the ``i``-th batch of the current epoch (module
    docstring): ``x`` an object array of strings ``[B * (2 + K)]`` or int32
    ``[B * (2 + K), L]``, ``rows`` int64 ``[B * (2 + K)]``. ``len`` is
    ``batches.steps_per_epoch``. The epoch's batches are packed at ``on_epoch_begin``
    from the tuples current then, so elements can be read in any order by worker threads.
    A read before any epoch packs lazily, and the first ``on_epoch_begin`` keeps that
    packing if the tuples have not changed. Keras building an unbuilt model under JAX
    starts an epoch of its own first (measured: one packing more than epochs in
    ``batches.epoch_index``), like ``make_dataset``'s read-ahead: the sequence of
    packings stays deterministic.

    Args:
        batches, queries, corpus: as :func:`make_tuple_dataset`.
        **kwargs: ``workers``, ``max_queue_size`` of ``keras.utils.PyDataset``
            (``use_multiprocessing`` is refused: the batches are packed in this process).
    """

    def __init__(self, batches: Any, queries: Any, corpus: Any, **kwargs: Any):
        if kwargs.get("use_multiprocessing"):
            raise ValueError("`use_multiprocessing` must be False: the tuple batches are "
                             "packed in this process (use `workers` threads instead).")
        super().__init__(**kwargs)
        texts, table, n_q = _table(batches, queries, corpus)
        self.batches = batches
        self.texts = texts
        self._num_queries = n_q
        self._gather = _Gather(table, None, None, "image", "label", 0, 3, texts=texts)
        self._lock = threading.Lock()
        self._epoch = None       # (tuples, [B] index batches) of the current epoch
        self._fresh = False      # packed lazily, no epoch has begun on it yet
        self._version = None

    @property
    def num_batches(self) -> int:
        return int(self.batches.steps_per_epoch)

    def __len__(self) -> int:
        return self.num_batches

    def _pack(self) -> None:
        tuples = self.batches.tuples
        self._epoch = (tuples, self.batches.epoch_batches())
        self._version = self.batches.version

    def on_epoch_begin(self) -> None:
        with self._lock:
            if self._fresh and self._version == self.batches.version:
                self._fresh = False
                return
            self._fresh = False
            self._pack()

    def __getitem__(self, i: int):
        i = int(i)
        if not 0 <= i < self.num_batches:
            raise IndexError(f"element {i} of a feed of {self.num_batches} batches.")
        with self._lock:
            if self._epoch is None:
                self._pack()
                self._fresh = True
            (q, p, n), idx = self._epoch[0], self._epoch[1][i]
        rows = tuple_rows(q[idx], p[idx], n[idx], self._num_queries)
        x, _ = self._gather(rows)
        return x, rows


def make_tuple_py_dataset(batches: Any, queries: Any, corpus: Any, **kwargs: Any
                          ) -> TuplePyDataset:
    """:class:`TuplePyDataset` ``(batches, queries, corpus, **kwargs)``: the tuple feed as
    a ``keras.utils.PyDataset``, for ``fit`` under any backend without TensorFlow.
    ``queries``: ``Q`` texts or token ids ``[Q, L]``; ``corpus``: ``N`` texts or ``[N, L']``;
    element ``i`` is ``(x [B * (2 + K)] or [B * (2 + K), L], rows [B * (2 + K)])``."""
    return TuplePyDataset(batches, queries, corpus, **kwargs)
