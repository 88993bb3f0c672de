"""A worker's share of a global sampler: one global walk, a contiguous block per worker.

Multi-worker training (issue #19; :mod:`keras_hardneg.run.distribution`) keeps the batches of
a single process: every worker builds the *same* sampler (same seed, same graph, so the same
random walk of :class:`~keras_hardneg.sampling.BatchSampler`, or the same shuffled order of
:class:`~keras_hardneg.sampling.UniformSampler`), draws every *global* batch of ``B`` indices,
and keeps only its own block: rows ``[i * B / W, (i + 1) * B / W)`` of worker ``i`` among
``W`` (the convention of ``WorkerPlace.local_rows``). The ``W`` blocks of a global batch are
therefore disjoint and together are that batch, in order: nothing is on two workers, nothing
is dropped, and an epoch covers every example as on one process. After the cross-replica
gather (:func:`keras_hardneg.distribute.gather`) the loss sees the global batch.

No communication is needed, only determinism: the walk depends on the seed, the graph and the
restart probability. The graph is rebuilt from the embedding bank
(:class:`~keras_hardneg.callbacks.GraphRefreshCallback`), which holds every worker's
projections and is identical on all workers, with the refresh's seed; the exact ("brute")
build is bit-deterministic (``docs/notes/sampling_workers.md``).

Timing is the one thing that differs between workers: a feed (``tf.data`` prefetch, a
``PyDataset``'s queue) draws batches ahead of training by a number that depends on timing,
so a graph or restart-probability update, applied at once, would reach each worker's walk at
a different batch and the walks would part. :class:`WorkerShard` therefore keys updates to
training steps. The training loop runs a *clock* (:meth:`WorkerShard.start_clock`,
:meth:`WorkerShard.step_done`; the refresh callback calls them): an update made while step
``s`` (1-based) ends applies from global batch ``s + lookahead`` (0-based, counted from the
clock's start), and the feed may draw batch ``d`` only once step ``d - lookahead`` has ended,
so it runs at most ``lookahead + 1`` batches ahead of training. Without a running clock,
updates apply at once, as on a plain sampler.

State: :meth:`WorkerShard.get_state` is the global sampler's state (keys unchanged, so a
backup from one worker count resumes with another, or on one process) with any update still
pending folded in; every worker restores the same (the chief's) backup, so all resume the same
walk.

Example:
>>> import numpy as np
>>> from keras_hardneg.sampling import UniformSampler
>>> one = UniformSampler(100, batch_size=8, seed=0)
>>> w0, w1 = (WorkerShard(UniformSampler(100, batch_size=8, seed=0), 2, i) for i in (0, 1))
>>> b0, b1 = w0.next_batch(), w1.next_batch()
>>> b0.shape, bool((np.concatenate([b0, b1]) == one.next_batch()).all())
((4,), True)
"""

from __future__ import annotations

import copy
import threading
from typing import Any

import numpy as np

from keras_hardneg.registry import ConfigError

__all__ = ["WorkerShard", "DEFAULT_LOOKAHEAD"]

#: Batches a clocked feed may draw beyond the one training needs next (see the module doc).
DEFAULT_LOOKAHEAD = 2


def _int(value: Any, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ConfigError(f"`{name}` must be an integer >= {low}; got {value!r}.")
    return int(value)


class WorkerShard:
    """Worker ``index`` of ``num_workers``: the global walk of ``sampler``, this worker's block.

    Args:
        sampler: an index sampler of :mod:`keras_hardneg.sampling` (``UniformSampler``,
            ``BatchSampler``, ``KNNSampler``, or anything with ``num_nodes``, ``batch_size``,
            ``steps_per_epoch``, ``next_batch()``, ``get_state()``/``set_state()``), built
            the same on every worker (same data, settings and seed). Its ``batch_size`` is the
            global batch ``B``; it must be divisible by ``num_workers``.
        num_workers: ``W >= 1``.
        index: this worker, ``0 <= index < W`` (0 is the chief).
        lookahead: with a running clock, how many batches the feed may draw beyond the one
            training needs next (module docstring); updates take effect that many batches
            after the step that made them, on every worker alike.

    Attributes:
        batch_size: the local block ``B / W`` (what the feed of this worker yields).
        global_batch_size: ``B``.
        rows: this worker's rows of a global batch (a ``slice``).
        num_nodes, steps_per_epoch: the global sampler's (an epoch is the global walk's).
    """

    def __init__(self, sampler: Any, num_workers: int, index: int, *,
                 lookahead: int = DEFAULT_LOOKAHEAD):
        for attr in ("num_nodes", "batch_size", "steps_per_epoch", "next_batch",
                     "get_state", "set_state"):
            if not hasattr(sampler, attr):
                raise ConfigError(f"`sampler` must be an index sampler of "
                                  f"keras_hardneg.sampling (it has no `{attr}`); got "
                                  f"{type(sampler).__name__}.")
        if isinstance(sampler, WorkerShard):
            raise ConfigError("`sampler` is already a WorkerShard; shard the global sampler.")
        self.num_workers = _int(num_workers, "num_workers", 1)
        self.index = _int(index, "index", 0)
        if self.index >= self.num_workers:
            raise ConfigError(f"worker `index` must be in [0, {self.num_workers}); "
                              f"got {index!r}.")
        self.lookahead = _int(lookahead, "lookahead", 0)
        self.sampler = sampler
        self.global_batch_size = int(sampler.batch_size)
        if self.global_batch_size % self.num_workers:
            raise ConfigError(f"the global batch size ({self.global_batch_size}, the sampler's "
                              f"`batch_size`) must be divisible by the number of workers "
                              f"({self.num_workers}).")
        self.batch_size = self.global_batch_size // self.num_workers
        self.rows = slice(self.index * self.batch_size, (self.index + 1) * self.batch_size)
        self.num_nodes = int(sampler.num_nodes)
        self._cond = threading.Condition()
        self._clock = False
        self._clock_thread = None  # the thread that ends steps (the training loop)
        self._steps = 0      # steps ended since the clock started
        self._drawn = 0      # global batches drawn since the clock started
        self._pending: list[tuple[int, str, Any]] = []  # (due draw, kind, value)

    # ------------------------------------------------------------------ walk
    @property
    def steps_per_epoch(self) -> int:
        return int(self.sampler.steps_per_epoch)

    def __len__(self) -> int:
        return self.steps_per_epoch

    def next_global_batch(self) -> np.ndarray:
        """The next global batch ``[B]`` (all workers' blocks); advances the walk."""
        with self._cond:
            if self._clock and self._drawn > self._steps + self.lookahead:
                if threading.get_ident() == self._clock_thread:
                    raise RuntimeError(
                        f"the training thread asks for global batch {self._drawn} after "
                        f"{self._steps} steps: more than `lookahead` ({self.lookahead}) "
                        "ahead, and only that thread ends steps (it would wait forever). "
                        "Build the WorkerShard with a larger `lookahead`.")
                while self._clock and self._drawn > self._steps + self.lookahead:
                    self._cond.wait(timeout=1.0)
            self._apply_due(self._drawn)
            batch = np.asarray(self.sampler.next_batch(), dtype=np.int64)
            if self._clock:
                self._drawn += 1
        if batch.shape != (self.global_batch_size,):
            raise ValueError(f"the sampler drew a batch of shape {batch.shape}; expected "
                             f"({self.global_batch_size},).")
        return batch

    def sampler_copy(self) -> Any:
        """A deep copy of the global sampler as it stands (graph, walk position, random
        state), taken under the shard's lock: drawing from it leaves this shard's walk as it
        is (a run's report measures batches so)."""
        with self._cond:
            return copy.deepcopy(self.sampler)

    def next_batch(self) -> np.ndarray:
        """This worker's block ``[B / W]`` of the next global batch."""
        return self.next_global_batch()[self.rows].copy()

    def __iter__(self):
        while True:
            yield self.next_batch()

    def epoch(self):
        """This worker's blocks of the rest of the current (global) epoch."""
        start = self.sampler.epoch_index
        while self.sampler.epoch_index == start:
            yield self.next_batch()

    # --------------------------------------------------------------- updates
    def _apply_due(self, draw: int) -> None:
        keep = []
        for due, kind, value in self._pending:
            if due <= draw:
                getattr(self.sampler, kind)(value)
            else:
                keep.append((due, kind, value))
        self._pending = keep

    def _schedule(self, kind: str, value: Any) -> None:
        with self._cond:
            if not self._clock:
                getattr(self.sampler, kind)(value)
                return
            # made while step `_steps + 1` ends: from global batch `_steps + 1 + lookahead`
            self._pending.append((self._steps + 1 + self.lookahead, kind, value))

    def _latest(self, kind: str) -> Any:
        for _, k, value in reversed(self._pending):
            if k == kind:
                return value
        return None

    def update_graph(self, neighbors: Any) -> None:
        """Replaces the walk's graph (now, or keyed to the clock's step: module docstring)."""
        if hasattr(neighbors, "neighbors"):  # a ProximityGraph
            neighbors = neighbors.neighbors
        self._schedule("update_graph", np.asarray(neighbors))

    def set_restart_prob(self, restart_prob: float) -> None:
        """Sets the walk's restart probability (now, or keyed to the clock's step)."""
        self._schedule("set_restart_prob", float(restart_prob))

    @property
    def neighbors(self) -> np.ndarray:
        """The latest graph given to the walk (pending or applied): the same on every
        worker whatever its feed has drawn."""
        with self._cond:
            latest = self._latest("update_graph")
            return self.sampler.neighbors if latest is None else latest

    @property
    def restart_prob(self) -> float:
        """The latest restart probability given to the walk (pending or applied)."""
        with self._cond:
            latest = self._latest("set_restart_prob")
            return self.sampler.restart_prob if latest is None else latest

    # ----------------------------------------------------------------- clock
    def start_clock(self) -> None:
        """Training starts: from now on updates are keyed to steps (module docstring)."""
        with self._cond:
            self._apply_due(np.iinfo(np.int64).max)
            self._clock, self._steps, self._drawn = True, 0, 0
            self._clock_thread = threading.get_ident()
            self._cond.notify_all()

    def step_done(self) -> None:
        """A training step ended (after the step's updates were made)."""
        with self._cond:
            self._steps += 1
            self._clock_thread = threading.get_ident()
            self._cond.notify_all()

    def stop_clock(self) -> None:
        """Training ended: pending updates apply now; the feed no longer waits."""
        with self._cond:
            self._apply_due(np.iinfo(np.int64).max)
            self._clock = False
            self._cond.notify_all()

    # ----------------------------------------------------------------- state
    def get_state(self, include_graph: bool = True) -> dict[str, Any]:
        """The global sampler's state, pending updates folded in (the same keys as the
        sampler's own ``get_state``)."""
        with self._cond:
            state = self.sampler.get_state(include_graph)
            graph, alpha = self._latest("update_graph"), self._latest("set_restart_prob")
            if graph is not None and include_graph:
                state["neighbors"] = np.array(graph, copy=True)
            if alpha is not None:
                state["restart_prob"] = alpha
            return state

    def set_state(self, state: dict[str, Any]) -> None:
        """Restores a global sampler state (any worker's, any worker count's); pending
        updates are dropped and a running clock restarts its count."""
        with self._cond:
            self.sampler.set_state(state)
            self._pending = []
            self._steps, self._drawn = 0, 0
            self._cond.notify_all()

    def save_state(self, path: str, include_graph: bool = True) -> None:
        from keras_hardneg._io import state_to_arrays

        np.savez(path, **state_to_arrays(self.get_state(include_graph)))

    def load_state(self, path: str) -> None:
        from keras_hardneg._io import state_from_npz

        with np.load(path, allow_pickle=False) as z:
            self.set_state({k: state_from_npz(z, k) for k in z.files})

    # ---------------------------------------------------------- pass-through
    def __getattr__(self, name: str) -> Any:
        # Everything else (num_candidates, restart_prob_schedule, coverage, epoch_index,
        # last_epoch_batches, ...) is the global sampler's.
        if name == "sampler" or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.sampler, name)

    def __repr__(self) -> str:
        return (f"WorkerShard({type(self.sampler).__name__}, worker {self.index} of "
                f"{self.num_workers}, {self.batch_size} of {self.global_batch_size} rows)")
