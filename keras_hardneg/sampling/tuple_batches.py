"""Epochs of retrieval-tuple batches without duplicates: uniform (``TupleBatches``) or in
BatchSampler's random-walk order (``TupleBatchSampler``).

A tuple is (query row, positive document row, ``K`` negative document rows), e.g. a row of
:class:`~keras_hardneg.sampling.MinedNegatives` (``K = 0``: pairs, in-batch negatives only).
Each epoch orders the current tuples and packs them with
:func:`~keras_hardneg.sampling.no_duplicates.pack_without_duplicates` (no query and no
document twice in a batch; conflicting tuples carried to the next batch).

* ``TupleBatches``: the order is a uniform permutation (epoch ``e``, packing ``r`` draw it
  from ``(seed, e, r)``), as sentence-transformers' ``NoDuplicatesBatchSampler`` does.
* ``TupleBatchSampler``: the order is one epoch of a
  :class:`~keras_hardneg.sampling.BatchSampler` (Yang et al., KDD 2023: random walks with
  restart on a proximity graph) over the tuples, the graph built from the embeddings of
  the tuples' positives (``on="positives"``, default) or of their queries
  (``on="queries"``): the walk's batches concatenated, each tuple at its first visit. Tuples
  whose positives are neighbours then come close together in the order, so they share a
  batch and one query's hard documents are the others' in-batch negatives.

Epoch length: Keras needs the same number of steps every epoch, so an epoch is always
``steps_per_epoch`` batches (default: ``T // batch_size`` of the tuples given first;
``ceil`` with ``drop_remainder=False``). A packing leaves out the tuples that conflict at
its end (and its last incomplete batch), so it can give fewer batches: the epoch then goes
on with another packing whose order starts with the tuples the first one left out,
completed with tuples already seen this epoch (as the samplers complete a last partial
batch with other nodes; counted in ``last_epoch["extra_packings"]`` and
``["repeated"]``); batches packed beyond ``steps_per_epoch`` are not used
(``["unused_batches"]``). Re-mining that changes
the number of tuples (:meth:`TupleBatches.set_tuples`, what
:class:`~keras_hardneg.callbacks.ReminingCallback` calls) keeps ``steps_per_epoch``.

Each epoch reads the tuples current when it starts (:meth:`~TupleBatches.epoch`), so
tuples replaced between epochs are used from the next epoch on. The feeds
(:mod:`keras_hardneg.sampling.tuple_feed`) turn batches into model inputs.

Example:
>>> q, p = np.arange(42), np.arange(42)
>>> neg = np.stack([p + 42, p + 84], axis=1)        # no document shared: nothing conflicts
>>> batches = TupleBatches((q, p, neg), batch_size=8, seed=0)
>>> epoch = batches.epoch_batches()
>>> len(epoch), epoch[0].shape, batches.last_epoch["unplaced"]   # 42 // 8 batches, 2 dropped
(5, (8,), 2)
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Iterator

import numpy as np

from keras_hardneg.sampling.no_duplicates import (Packing, pack_without_duplicates,
                                                  tuple_arrays)
from keras_hardneg.sampling.samplers import BatchSampler

__all__ = ["TupleBatches", "TupleBatchSampler", "GRAPH_ON"]

#: What ``TupleBatchSampler``'s graph is built on.
GRAPH_ON = ("positives", "queries")


def _check_int(name: str, value: Any, low: int, allow_none: bool = False) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        extra = " or None" if allow_none else ""
        raise ValueError(f"`{name}` must be an integer >= {low}{extra}; got {value!r}.")
    return int(value)


class TupleBatches:
    """Epochs of ``[B]`` tuple-index batches, uniform order, no duplicates in a batch.

    Args:
        tuples: a :class:`~keras_hardneg.sampling.MinedNegatives`, or ``(query [T],
            positive [T])`` (pairs, ``K = 0``) or ``(query, positive, negatives [T, K])``
            int rows.
        batch_size: ``B``, tuples per batch (``2 <= B <= T``).
        seed: seed of the orders (and of a ``TupleBatchSampler``'s walks).
        drop_remainder: drop (True, default) or keep the last incomplete batch of a
            packing (module :mod:`~keras_hardneg.sampling.no_duplicates`, rule 3).
        steps_per_epoch: batches per epoch (default from the first tuples: ``T // B``, or
            ``ceil(T / B)`` with ``drop_remainder=False``).

    Attributes:
        epoch_index: epochs started so far.
        last_epoch: counts of the last epoch started: ``tuples`` (``T``), ``batches``,
            ``placed`` (distinct tuples in its batches), ``repeated`` (slots taken by a
            tuple a second time), ``unplaced`` (tuples in none of its batches),
            ``carried`` (tuples placed after being carried past a batch, first packing),
            ``extra_packings``, ``unused_batches``.
        version: incremented by every :meth:`set_tuples`.
    """

    def __init__(self, tuples: Any, batch_size: int, *, seed: int = 0,
                 drop_remainder: bool = True, steps_per_epoch: int | None = None):
        if not isinstance(drop_remainder, bool):
            raise ValueError(f"`drop_remainder` must be a bool; got {drop_remainder!r}.")
        self.seed = _check_int("seed", seed, 0)
        self.batch_size = _check_int("batch_size", batch_size, 2)
        self.drop_remainder = drop_remainder
        self.epoch_index = 0
        self.version = 0
        self.last_epoch: dict = {}
        self._tuples = None
        self._install(tuple_arrays(tuples))
        t = self.num_tuples
        default = t // self.batch_size if drop_remainder else math.ceil(t / self.batch_size)
        self.steps_per_epoch = (default if steps_per_epoch is None
                                else _check_int("steps_per_epoch", steps_per_epoch, 1))

    # ------------------------------------------------------------ the tuples
    def _install(self, arrays: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
        q, p, n = arrays
        if self._tuples is not None and n.shape[1] != self.num_negatives:
            raise ValueError(f"`tuples` have K={n.shape[1]} negatives; this feed was built "
                             f"with K={self.num_negatives} (the batch layout and the loss "
                             "depend on it).")
        if len(q) < self.batch_size:
            raise ValueError(f"`batch_size` ({self.batch_size}) must be <= the number of "
                             f"tuples T={len(q)}.")
        self._tuples = (q, p, n)

    def set_tuples(self, tuples: Any) -> None:
        """Replace the tuples (same ``K``); the next epoch reads them."""
        self._install(tuple_arrays(tuples))
        self.version += 1

    @property
    def tuples(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(query [T], positive [T], negatives [T, K])`` int64, the current tuples."""
        return self._tuples

    @property
    def num_tuples(self) -> int:
        return int(len(self._tuples[0]))

    @property
    def num_negatives(self) -> int:
        """``K``, negatives per tuple."""
        return int(self._tuples[2].shape[1])

    def __len__(self) -> int:
        return self.steps_per_epoch

    # ------------------------------------------------------------ state
    def get_state(self) -> dict[str, Any]:
        """The tuples and the epoch count, as NumPy values (what a run's backup keeps):
        ``query``, ``positive``, ``negatives``, ``epoch_index``. The orders are drawn from
        ``(seed, epoch_index)``, so nothing else is needed to go on as before."""
        q, p, n = self._tuples
        return {"query": q.copy(), "positive": p.copy(), "negatives": n.copy(),
                "epoch_index": np.asarray(self.epoch_index, np.int64)}

    def set_state(self, state: dict[str, Any]) -> None:
        """Put back what :meth:`get_state` gave (same ``K``; ``version`` goes up, as with
        :meth:`set_tuples`: the tuples are new to a feed that packed before)."""
        self._install(self._state_tuples(state))
        self.epoch_index = int(np.asarray(state["epoch_index"]))
        self.version += 1

    @staticmethod
    def _state_tuples(state: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return tuple_arrays((np.asarray(state["query"], np.int64),
                             np.asarray(state["positive"], np.int64),
                             np.asarray(state["negatives"], np.int64)))

    # ------------------------------------------------------------ epochs
    def _order(self, packing: int) -> np.ndarray:
        """Tuple indices in the order packing ``packing`` of this epoch takes them."""
        rng = np.random.default_rng([self.seed, self.epoch_index, packing])
        return rng.permutation(self.num_tuples)

    def _pack(self, tuples, packing: int, first: np.ndarray) -> Packing:
        """Packing ``packing`` of this epoch; ``first``: tuples to take before the order."""
        q, p, n = tuples
        order = self._order(packing)
        if first.size:
            order = np.concatenate([first, order[~np.isin(order, first)]])
        return pack_without_duplicates(q, p, n, self.batch_size, order=order,
                                       drop_remainder=self.drop_remainder)

    def epoch_batches(self) -> list[np.ndarray]:
        """The next epoch's ``steps_per_epoch`` batches of tuple indices (int64 ``[B]``,
        positions in :attr:`tuples` as they are now), packed from the current tuples."""
        tuples = self._tuples
        batches, stats, packing = [], None, 0
        first = np.empty(0, np.int64)
        while len(batches) < self.steps_per_epoch:
            packed = self._pack(tuples, packing, first)
            if not packed.batches:
                raise ValueError(f"no batch of {self.batch_size} tuples without duplicates "
                                 f"can be packed from these {len(tuples[0])} tuples; lower "
                                 "`batch_size`.")
            if stats is None:
                stats = packed.summary()
            batches.extend(packed.batches)
            first = packed.unplaced if packing == 0 else first[np.isin(first, packed.unplaced)]
            packing += 1
        used = batches[:self.steps_per_epoch]
        slots = np.concatenate(used)
        placed = np.unique(slots).size
        self.last_epoch = {"tuples": len(tuples[0]), "batches": len(used),
                           "placed": int(placed), "repeated": int(slots.size - placed),
                           "unplaced": int(len(tuples[0]) - placed),
                           "carried": stats["carried"], "extra_packings": packing - 1,
                           "unused_batches": len(batches) - len(used)}
        self.epoch_index += 1
        return used

    def epoch(self) -> Iterator[tuple[np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]]:
        """Yield the next epoch's batches as ``(indices [B], (query [B], positive [B],
        negatives [B, K]))``, from the tuples current when the epoch starts."""
        tuples = self._tuples
        for idx in self.epoch_batches():
            yield idx, (tuples[0][idx], tuples[1][idx], tuples[2][idx])

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.num_tuples} tuples, K={self.num_negatives}, "
                f"batch_size={self.batch_size}, steps_per_epoch={self.steps_per_epoch})")


class TupleBatchSampler(TupleBatches):
    """BatchSampler order for tuples: neighbours (by their positives' or queries'
    embeddings) share a batch; no duplicates in a batch.

    Each epoch draws one epoch of a :class:`~keras_hardneg.sampling.BatchSampler` over the
    ``T`` tuples (its nodes), takes the tuples in the order the walks first visit them and
    packs that order (module docstring). The graph is rebuilt when the tuples change.

    Args:
        tuples, batch_size, seed, drop_remainder, steps_per_epoch: as
            :class:`TupleBatches`.
        embeddings: float ``[N, d]`` document embeddings (``on="positives"``: tuple ``t``'s
            node is ``embeddings[positive[t]]``) or ``[Q, d]`` query embeddings
            (``on="queries"``).
        on: ``"positives"`` (default) or ``"queries"`` (:data:`GRAPH_ON`).
        restart_prob: the walks' restart probability ``alpha`` in ``[0, 1)`` (default 0.2,
            BatchSampler's starting value; no schedule here).
        num_candidates, num_neighbors, backend: BatchSampler's graph settings (``M``,
            ``K``; ``M >= T - 1`` builds the exact kNN graph).

    Example:
    >>> rng = np.random.default_rng(0)
    >>> emb = rng.normal(size=(60, 8))
    >>> s = TupleBatchSampler((np.arange(60), np.arange(60)), 6, embeddings=emb,
    ...                       num_candidates=59, num_neighbors=5)
    >>> [b.shape for b in s.epoch_batches()][:2], s.steps_per_epoch
    ([(6,), (6,)], 10)
    """

    def __init__(self, tuples: Any, batch_size: int, *, embeddings: Any, on: str = "positives",
                 restart_prob: float = 0.2, num_candidates: int = 1000,
                 num_neighbors: int | None = None, backend: str = "auto", seed: int = 0,
                 drop_remainder: bool = True, steps_per_epoch: int | None = None):
        if on not in GRAPH_ON:
            raise ValueError(f"`on` must be one of {', '.join(map(repr, GRAPH_ON))}; got "
                             f"{on!r}.")
        self.on = on
        self.restart_prob = restart_prob
        self.num_candidates = num_candidates
        self.num_neighbors = num_neighbors
        self.backend = backend
        self._embeddings = self._check_embeddings(embeddings)
        self._walk = None
        self._walk_seed = _check_int("seed", seed, 0)
        self._rebuilds = 0  # set_tuples calls so far: the walk of rebuild r is seeded seed + r
        super().__init__(tuples, batch_size, seed=seed, drop_remainder=drop_remainder,
                         steps_per_epoch=steps_per_epoch)

    @staticmethod
    def _check_embeddings(embeddings: Any) -> np.ndarray:
        try:
            emb = np.asarray(embeddings, dtype=np.float32)
        except (TypeError, ValueError):
            emb = None
        if emb is None or emb.ndim != 2 or not np.all(np.isfinite(emb)):
            got = "?" if emb is None else f"shape {emb.shape}"
            raise ValueError(f"`embeddings` must be finite float [rows, d]; got {got}.")
        return emb

    def _rows(self, arrays) -> np.ndarray:
        """The embedding rows of the tuples' nodes (checked against the embeddings)."""
        rows = arrays[1] if self.on == "positives" else arrays[0]
        if rows.size and rows.max() >= len(self._embeddings):
            raise ValueError(f"`embeddings` has {len(self._embeddings)} rows; the tuples' "
                             f"{self.on} need row {int(rows.max())}.")
        return rows

    def _install(self, arrays, graph: Any = None):
        rows = self._rows(arrays)
        super()._install(arrays)
        m = min(int(self.num_candidates), len(rows) - 1) if isinstance(
            self.num_candidates, numbers.Integral) else self.num_candidates
        # ``graph``: a saved walk's neighbour array (set_state), instead of a new build.
        self._walk = BatchSampler(self._embeddings[rows] if graph is None else graph,
                                  self.batch_size, self.restart_prob, num_candidates=m,
                                  num_neighbors=self.num_neighbors if graph is None else None,
                                  backend=self.backend, seed=self._walk_seed)

    def set_tuples(self, tuples: Any, embeddings: Any = None) -> None:
        """Replace the tuples (same ``K``) and rebuild the graph, from new ``embeddings``
        when given (e.g. the re-mining encoder's), else from the ones held."""
        arrays = tuple_arrays(tuples)
        old = self._embeddings, self._walk_seed
        if embeddings is not None:
            self._embeddings = self._check_embeddings(embeddings)
        self._walk_seed = self.seed + self._rebuilds + 1
        try:
            self._install(arrays)
        except ValueError:
            self._embeddings, self._walk_seed = old
            raise
        self._rebuilds += 1
        self.version += 1

    def get_state(self) -> dict[str, Any]:
        """:meth:`TupleBatches.get_state` plus the walk: the embeddings held (float32
        ``[rows, d]``, what a later :meth:`set_tuples` without new ones builds from), the
        rebuild count and the current :class:`~keras_hardneg.sampling.BatchSampler`'s state
        (its graph, generator and coverage) under ``"walk/..."``: a restored sampler walks
        on exactly as this one would."""
        state = super().get_state()
        state.update(embeddings=self._embeddings.copy(), on=self.on,
                     walk_seed=np.asarray(self._walk_seed, np.int64),
                     rebuilds=np.asarray(self._rebuilds, np.int64))
        state.update({f"walk/{k}": v for k, v in self._walk.get_state().items()})
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        """Put back what :meth:`get_state` gave (same ``K`` and ``on``); the saved graph is
        reused, not rebuilt."""
        if str(state.get("on")) != self.on:
            raise ValueError(f"`state` is of a walk on {state.get('on')!r}; this one is on "
                             f"{self.on!r}.")
        self._embeddings = self._check_embeddings(state["embeddings"])
        self._walk_seed = int(np.asarray(state["walk_seed"]))
        self._rebuilds = int(np.asarray(state["rebuilds"]))
        walk = {k[len("walk/"):]: v for k, v in state.items() if k.startswith("walk/")}
        self._install(self._state_tuples(state), graph=np.asarray(walk["neighbors"], np.int64))
        self._walk.set_state(walk)
        self.epoch_index = int(np.asarray(state["epoch_index"]))
        self.version += 1

    def _order(self, packing: int) -> np.ndarray:
        visits = np.concatenate(list(self._walk.epoch()))
        _, first = np.unique(visits, return_index=True)
        return visits[np.sort(first)]

    def __repr__(self) -> str:
        return super().__repr__()[:-1] + f", on={self.on!r})"
