"""Mini-batch samplers: BatchSampler (Yang et al., KDD 2023, Alg. 1) and its baselines.

All samplers share one interface:

* ``iter(sampler)`` -- an endless stream of int64 index batches of shape ``[batch_size]``
  (concatenated epochs); ``sampler.epoch()`` -- the batches of the rest of the current epoch;
  ``next_batch()`` -- one batch.
* ``steps_per_epoch`` = ``ceil(N / batch_size)``: pass it to ``model.fit`` with an endless
  dataset (``make_dataset(..., repeat=True)``).
* ``get_state()`` / ``set_state(state)``: rng, coverage, restart probability and graph, so a
  resumed sampler continues with exactly the batches the original would have produced.
  ``save_state(path)`` / ``load_state(path)`` store the same in a ``.npz`` file.
* ``update_graph(neighbors)`` and ``set_restart_prob(alpha)`` (graph samplers).

Epochs and coverage (``BatchSampler``, ``KNNSampler``; spec: "seeds drawn from nodes not yet
covered this epoch, until every node is covered").  Each batch is drawn from a seed chosen
uniformly among the nodes not yet covered in this epoch (the next uncovered node of a random
permutation; such a node is uniform among the uncovered ones); all nodes of the batch become
covered.  Every batch has exactly ``batch_size`` distinct nodes, so an epoch has
``>= ceil(N / B)`` batches -- walks revisit covered nodes, more so late in the epoch, and nodes
that are nobody's neighbour (in-degree 0, "anti-hubs") can only be covered as seeds, one batch
each.  Measured (``docs/notes/sampling.md``): the literal rule can need tens of times ``N / B``
batches.  The tail: with ``tail="fill"`` (default), once at most ``fill_threshold`` (default
``B``) nodes remain uncovered, the remaining uncovered nodes are emitted ``B`` at a time in
random order, each batch completed to ``B`` distinct nodes by a walk from its first node (those
fillers were already seen this epoch; no node is dropped, none is duplicated inside a batch).
``fill_threshold=0.1`` (a fraction of ``N``) bounds the epoch length at the price of easier
(more uniform) batches at the end of each epoch.  ``tail="walk"`` keeps drawing walk batches until the last node is covered (the
paper's literal rule; the tail can then be long).  ``last_epoch_batches`` records the length of
the last finished epoch.

Small components: a walk from a seed with fewer than ``B`` reachable nodes raises
``ValueError`` in ``random_walk_with_restart``; the samplers instead take all the reachable
nodes and complete the batch with uniformly drawn uncovered nodes (counted in
``small_component_batches``; set ``complete_small_components = False`` to raise).  This happens
with degenerate embeddings, e.g. a memory bank early in training.

``UniformSampler``: a random permutation cut into batches; the last partial batch is completed
with distinct nodes drawn uniformly from the rest of the data.

``KNNSampler`` (the paper's "kNN Sampler" baseline): on the exact kNN graph (``M = N - 1``,
neighbours sorted by similarity), a batch is the seed followed by its nearest neighbours, in
breadth-first order (seed, its ``K`` neighbours, their neighbours, ...) until ``B`` distinct
nodes.  Default ``K = B - 1``: seed + its ``B - 1`` nearest neighbours.

Example
-------
>>> import numpy as np
>>> from keras_hardneg.sampling import BatchSampler
>>> emb = np.random.default_rng(0).normal(size=(2000, 16))
>>> s = BatchSampler(emb, batch_size=128, num_candidates=200, num_neighbors=20, seed=0)
>>> batches = list(s.epoch())
>>> len(np.unique(np.concatenate(batches))) == 2000, batches[0].shape
(True, (128,))
"""

from __future__ import annotations

import json
import math
import warnings
from typing import Sized

import numpy as np

from keras_hardneg._io import state_from_npz, state_to_arrays
from keras_hardneg.data.batches import epoch_permutation
from keras_hardneg.registry import SAMPLERS, Param
from keras_hardneg.sampling.graph import ProximityGraph
from keras_hardneg.sampling.walk import (_check_neighbors, random_walk_with_restart,
                                         reachable_count, reachable_nodes)

__all__ = ["BatchSampler", "UniformSampler", "KNNSampler", "INITIAL_GRAPHS"]

#: ``BatchSampler``'s ``num_neighbors`` when none is given: the paper's ``K = 100``, lowered
#: to ``min(M, N - 1) - 1`` on data too small for it (with one warning).
DEFAULT_NUM_NEIGHBORS = 100

#: Where a graph sampler's first graph comes from in a run (``initial_graph``): a fixed
#: random projection of the inputs, or the encoder's features before the first step.
INITIAL_GRAPHS = ("inputs", "encoder")


def _check_batch_size(batch_size, n):
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
            or batch_size < 2:
        raise ValueError(f"`batch_size` must be an integer >= 2, got {batch_size!r}.")
    if batch_size > n:
        raise ValueError(f"`batch_size` ({batch_size}) must be <= the number of examples N={n}.")
    return int(batch_size)


def _check_alpha(a):
    try:
        a = float(a)
    except (TypeError, ValueError):
        raise ValueError(f"`restart_prob` must be a float in [0, 1), got {a!r}.")
    if not 0.0 <= a < 1.0:
        raise ValueError(f"`restart_prob` must be in [0, 1), got {a!r}.")
    return a


class _Sampler:
    """Common state handling: rng + epoch permutation."""

    def __init__(self, num_nodes, batch_size, seed):
        self.num_nodes = int(num_nodes)
        self.batch_size = _check_batch_size(batch_size, self.num_nodes)
        self._rng = np.random.default_rng(seed)
        self._perm = None
        self._ptr = 0
        self.epoch_index = 0  # number of completed epochs
        self.batches_in_epoch = 0
        self.last_epoch_batches = None

    @property
    def steps_per_epoch(self):
        return int(math.ceil(self.num_nodes / self.batch_size))

    def __iter__(self):
        while True:
            yield self.next_batch()

    def epoch(self):
        """Yield the batches of the rest of the current epoch (a full epoch if none started)."""
        start = self.epoch_index
        while self.epoch_index == start:
            yield self.next_batch()

    def __len__(self):
        return self.steps_per_epoch

    # -------------------------------------------------------------- state
    def _extra_state(self, include_graph=True):
        return {}

    def _set_extra_state(self, state):
        pass

    def get_state(self, include_graph=True):
        """Snapshot (dict of numpy arrays / plain values) for checkpoint-resume."""
        st = {
            "class": type(self).__name__,
            "num_nodes": self.num_nodes,
            "batch_size": self.batch_size,
            "rng": json.dumps(self._rng.bit_generator.state),
            "perm": None if self._perm is None else self._perm.copy(),
            "ptr": self._ptr,
            "epoch_index": self.epoch_index,
            "batches_in_epoch": self.batches_in_epoch,
            "last_epoch_batches": self.last_epoch_batches,
        }
        st.update(self._extra_state(include_graph))
        return st

    def set_state(self, state):
        if state["class"] != type(self).__name__:
            raise ValueError(f"`state` is from a {state['class']}, not a {type(self).__name__}.")
        if int(state["num_nodes"]) != self.num_nodes or int(state["batch_size"]) != self.batch_size:
            raise ValueError("`state` has a different num_nodes or batch_size.")
        rs = state["rng"]
        rs = json.loads(rs if isinstance(rs, str) else str(rs))
        bg = getattr(np.random, rs["bit_generator"])()
        bg.state = rs
        self._rng = np.random.Generator(bg)
        perm = state["perm"]
        self._perm = None if perm is None or np.ndim(perm) == 0 else np.array(perm)
        self._ptr = int(state["ptr"])
        self.epoch_index = int(state["epoch_index"])
        self.batches_in_epoch = int(state["batches_in_epoch"])
        leb = state.get("last_epoch_batches")
        self.last_epoch_batches = None if leb is None or np.ndim(leb) and leb.size == 0 \
            else int(leb)
        self._set_extra_state(state)

    def save_state(self, path, include_graph=True):
        """Write ``get_state()`` to an ``.npz`` file."""
        st = self.get_state(include_graph)
        np.savez(path, **state_to_arrays(st))

    def load_state(self, path):
        with np.load(path, allow_pickle=False) as z:
            st = {k: state_from_npz(z, k) for k in z.files}
        self.set_state(st)


class UniformSampler(_Sampler):
    """Uniform baseline: a random permutation per epoch cut into ``[batch_size]`` batches.

    Args:
        num_nodes: ``N`` (or an array / sequence whose ``len`` is ``N``).
        batch_size: ``B``.
        seed: rng seed.
        drop_remainder: False (default): ``ceil(N / B)`` batches per epoch, the last partial
            batch completed with distinct other nodes. True: ``N // B`` batches, the last
            partial batch dropped, and epoch ``e`` is
            :func:`keras_hardneg.data.batches.epoch_permutation` ``(seed, e, N)`` -- exactly
            the batches of :class:`keras_hardneg.data.ShuffledBatches` with the same seed (the
            single-process uniform feed off TensorFlow), so a sharded feed can equal it.

    Example:
    >>> from keras_hardneg.sampling import UniformSampler
    >>> s = UniformSampler(10, 4, seed=0, drop_remainder=True)
    >>> s.steps_per_epoch, sorted(len(b) for b in s.epoch())
    (2, [4, 4])
    """

    def __init__(self, num_nodes: int | Sized, batch_size: int, seed: int = 0,
                 drop_remainder: bool = False):
        if not isinstance(num_nodes, (int, np.integer)):
            num_nodes = len(num_nodes)
        if not isinstance(drop_remainder, bool):
            raise ValueError(f"`drop_remainder` must be a bool, got {drop_remainder!r}.")
        if drop_remainder and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))
                               or seed < 0):
            raise ValueError("`seed` must be an integer >= 0 with `drop_remainder=True`, got "
                             f"{seed!r}.")
        super().__init__(num_nodes, batch_size, seed)
        self.drop_remainder = drop_remainder
        self._seed = int(seed) if drop_remainder else None

    @property
    def steps_per_epoch(self):
        if self.drop_remainder:
            return self.num_nodes // self.batch_size
        return super().steps_per_epoch

    def next_batch(self):
        n, b = self.num_nodes, self.batch_size
        if self._perm is None:
            self._perm = (epoch_permutation(self._seed, self.epoch_index, n)
                          if self.drop_remainder else self._rng.permutation(n).astype(np.int64))
            self._ptr = 0
        batch = self._perm[self._ptr:self._ptr + b]
        self._ptr += b
        if batch.size < b:  # last partial batch: complete with distinct other nodes
            mask = np.ones(n, dtype=bool)
            mask[batch] = False
            others = np.nonzero(mask)[0]
            fill = self._rng.choice(others, size=b - batch.size, replace=False)
            batch = np.concatenate([batch, fill])
        else:
            batch = batch.copy()
        self.batches_in_epoch += 1
        if self._ptr >= n or (self.drop_remainder and self._ptr + b > n):
            self._end_epoch()
        return batch

    def _extra_state(self, include_graph=True):
        return {"drop_remainder": self.drop_remainder}

    def _set_extra_state(self, state):
        if bool(state.get("drop_remainder", False)) != self.drop_remainder:
            raise ValueError("`state` is from a UniformSampler with a different "
                             "`drop_remainder`.")

    def _end_epoch(self):
        self.last_epoch_batches = self.batches_in_epoch
        self.batches_in_epoch = 0
        self.epoch_index += 1
        self._perm = None
        self._ptr = 0


class _GraphSampler(_Sampler):
    """Coverage epochs over a graph; subclasses define ``_draw(seed_node)``."""

    def __init__(self, neighbors, batch_size, seed, tail, fill_threshold=None,
                 refresh_every=100, initial_graph="inputs"):
        if isinstance(refresh_every, bool) or not isinstance(refresh_every, (int, np.integer)) \
                or refresh_every < 1:
            raise ValueError(f"`refresh_every` must be an int >= 1; got {refresh_every!r}.")
        if initial_graph not in INITIAL_GRAPHS:
            raise ValueError(f"`initial_graph` must be one of {list(INITIAL_GRAPHS)}; got "
                             f"{initial_graph!r}.")
        #: Steps between graph rebuilds in training (read by the run layer's
        #: :class:`~keras_hardneg.callbacks.GraphRefreshCallback`; the sampler only walks).
        self.refresh_every = int(refresh_every)
        #: Where a run takes the first graph from (:data:`INITIAL_GRAPHS`).
        self.initial_graph = initial_graph
        nb = _check_neighbors(neighbors)
        super().__init__(nb.shape[0], batch_size, seed)
        if tail not in ("fill", "walk"):
            raise ValueError(f"`tail` must be 'fill' or 'walk', got {tail!r}.")
        self.tail = tail
        if fill_threshold is None:
            fill_threshold = self.batch_size
        if isinstance(fill_threshold, float) and 0.0 <= fill_threshold <= 1.0:
            fill_threshold = int(round(fill_threshold * self.num_nodes))
        if isinstance(fill_threshold, bool) or not isinstance(fill_threshold, (int, np.integer)) \
                or fill_threshold < 0:
            raise ValueError("`fill_threshold` must be an int >= 0 or a fraction in [0, 1], got "
                             f"{fill_threshold!r}.")
        self.fill_threshold = int(fill_threshold)
        self._set_neighbors(nb)
        self._covered = np.zeros(self.num_nodes, dtype=bool)
        self._n_uncovered = self.num_nodes
        self.complete_small_components = True
        self.small_component_batches = 0

    def _set_neighbors(self, nb):
        nb = np.ascontiguousarray(nb)
        if nb.min() < 0 or nb.max() >= self.num_nodes:
            raise ValueError("`neighbors` entries must be node ids in [0, N).")
        self._neighbors = nb

    @property
    def neighbors(self):
        return self._neighbors

    def update_graph(self, neighbors):
        """Replace the graph (``ProximityGraph`` or int ``[N, K]``); coverage is kept."""
        if isinstance(neighbors, ProximityGraph):
            neighbors = neighbors.neighbors
        nb = _check_neighbors(neighbors)
        if nb.shape[0] != self.num_nodes:
            raise ValueError(f"`neighbors` has {nb.shape[0]} rows, the sampler has N="
                             f"{self.num_nodes} nodes.")
        self._set_neighbors(nb)

    def _next_seed(self):
        if self._perm is None:
            self._perm = self._rng.permutation(self.num_nodes).astype(np.int64)
            self._ptr = 0
        n = self.num_nodes
        while True:  # first uncovered node of the permutation, scanned in chunks
            chunk = self._covered[self._perm[self._ptr:self._ptr + 4096]]
            j = int(np.argmin(chunk))
            if not chunk[j]:
                self._ptr += j
                return int(self._perm[self._ptr])
            self._ptr += chunk.size
            if self._ptr >= n:  # cannot happen while nodes are uncovered
                raise RuntimeError("internal error: no uncovered node left")

    def next_batch(self):
        b = self.batch_size
        if self.tail == "fill" and self._n_uncovered <= self.fill_threshold:
            rest = np.nonzero(~self._covered)[0]
            rest = rest[self._rng.permutation(rest.size)][:b]
            batch = rest
            if rest.size < b:
                try:
                    walk = self._draw(int(rest[0]))
                except ValueError:  # seed in a small component: fill uniformly below
                    walk = np.empty(0, dtype=np.int64)
                extra = walk[~np.isin(walk, rest)]
                if rest.size + extra.size < b:  # small component: fill uniformly
                    mask = np.ones(self.num_nodes, dtype=bool)
                    mask[rest] = False
                    mask[extra] = False
                    more = self._rng.choice(np.nonzero(mask)[0],
                                            size=b - rest.size - extra.size, replace=False)
                    extra = np.concatenate([extra, more])
                batch = np.concatenate([rest, extra[: b - rest.size]])
        else:
            seed = self._next_seed()
            try:
                batch = self._draw(seed)
            except ValueError:
                if not self.complete_small_components:
                    raise
                batch = self._small_component_batch(seed)
        batch = np.asarray(batch, dtype=np.int64)
        newly = int(np.count_nonzero(~self._covered[batch]))
        self._covered[batch] = True
        self._n_uncovered -= newly
        self.batches_in_epoch += 1
        if self._n_uncovered == 0:
            self.last_epoch_batches = self.batches_in_epoch
            self.batches_in_epoch = 0
            self.epoch_index += 1
            self._covered[:] = False
            self._n_uncovered = self.num_nodes
            self._perm = None
            self._ptr = 0
        return batch

    def _small_component_batch(self, seed):
        """Seed in a component with < B reachable nodes: take all of them, complete the batch
        with uniformly drawn uncovered (then covered) nodes."""
        b = self.batch_size
        reach = reachable_nodes(self._neighbors, seed, b)
        mask = ~self._covered
        mask[reach] = False
        pool = np.nonzero(mask)[0]
        if pool.size < b - reach.size:
            mask = np.ones(self.num_nodes, dtype=bool)
            mask[reach] = False
            pool = np.nonzero(mask)[0]
        fill = self._rng.choice(pool, size=b - reach.size, replace=False)
        self.small_component_batches += 1
        return np.concatenate([reach, fill])

    @property
    def coverage(self):
        """Fraction of nodes covered in the current epoch."""
        return 1.0 - self._n_uncovered / self.num_nodes

    def _extra_state(self, include_graph=True):
        st = {"covered": np.packbits(self._covered), "tail": self.tail}
        if include_graph:
            st["neighbors"] = self._neighbors.copy()
        return st

    def _set_extra_state(self, state):
        self._covered = np.unpackbits(np.asarray(state["covered"]),
                                      count=self.num_nodes).astype(bool)
        self._n_uncovered = int(self.num_nodes - self._covered.sum())
        if "neighbors" in state and state["neighbors"] is not None:
            self.update_graph(np.asarray(state["neighbors"]))


def _is_int(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _embedding_rows(graph):
    """``N`` when ``graph`` is float embeddings ``[N, d]`` with ``N >= 2`` (the sampler
    builds the graph), else None (a given graph, or input the graph build refuses)."""
    if isinstance(graph, ProximityGraph):
        return None
    arr = np.asarray(graph)
    if np.issubdtype(arr.dtype, np.integer) or arr.ndim != 2 or arr.shape[0] < 2:
        return None
    return int(arr.shape[0])


def _fitted_default(sampler, wanted, limit, rule, stacklevel=3):
    """``min(wanted, limit)`` for a ``num_neighbors`` the caller left unset, with one
    warning when the data lowers it (an explicit value is never changed: the graph build
    refuses one the data cannot have)."""
    if limit >= wanted:
        return wanted
    warnings.warn(f"{sampler}: `num_neighbors` not given and the default K={wanted} needs more "
                  f"nodes than the data has; using K={max(limit, 1)} ({rule}). Set "
                  "`num_neighbors` to choose.", UserWarning, stacklevel=stacklevel)
    return max(limit, 1)


def _default_batchsampler_neighbors(graph, num_candidates):
    """``K`` for ``BatchSampler(num_neighbors=None)``: :data:`DEFAULT_NUM_NEIGHBORS`, or
    ``min(M, N - 1) - 1`` where the data has fewer candidates (embeddings only: a given graph
    has its own ``K``)."""
    n = _embedding_rows(graph)
    if n is None or not _is_int(num_candidates):  # a given graph (its own K), or input
        return None                                # the graph build refuses, naming it
    return _fitted_default("BatchSampler", DEFAULT_NUM_NEIGHBORS,
                           min(int(num_candidates), n - 1) - 1, "min(num_candidates, N - 1) - 1",
                           stacklevel=4)


def _check_explicit_neighbors(graph, num_candidates, num_neighbors):
    """Refuses a given ``K`` the data cannot have (never lowered behind the caller's back)."""
    n = _embedding_rows(graph)
    if n is None or not (_is_int(num_candidates) and _is_int(num_neighbors)):
        return  # a given graph has its own K; the graph build names a bad value
    limit = min(int(num_candidates), n - 1)
    if num_neighbors >= limit:
        raise ValueError(f"`num_neighbors` (K={num_neighbors}) must be < min(`num_candidates`, "
                         f"N - 1) = {limit} for these N={n} examples; lower it, or leave it "
                         f"unset (default K={DEFAULT_NUM_NEIGHBORS}, fitted to the data).")


def _as_neighbors(graph_or_embeddings, num_candidates, num_neighbors, backend, seed):
    if isinstance(graph_or_embeddings, ProximityGraph):
        return graph_or_embeddings.neighbors
    arr = np.asarray(graph_or_embeddings)
    if np.issubdtype(arr.dtype, np.integer):
        return arr
    return ProximityGraph.build(arr, num_candidates, num_neighbors, backend=backend,
                                seed=seed).neighbors


class BatchSampler(_GraphSampler):
    """BatchSampler (paper Alg. 1): batches by random walk with restart on a proximity graph.

    Args:
        graph: a ``ProximityGraph``, an int neighbour array ``[N, K]``, or float embeddings
            ``[N, d]`` (then the graph is built with ``num_candidates``, ``num_neighbors``,
            ``backend``).
        batch_size: ``B``, distinct nodes per batch.
        restart_prob: ``alpha`` in ``[0, 1)``, or ``(start, end)``: the walks start with
            ``start``, and a ``GraphRefreshCallback`` anneals it linearly to ``end`` over the
            run (default ``(0.2, 0.05)``, the paper's schedule for vision).
        num_candidates, num_neighbors, backend: graph settings when ``graph`` is embeddings
            (paper defaults ``M = 1000``, ``K = 100``); kept for refreshes. ``M >= N - 1``
            builds the exact kNN graph (``ProximityGraph.build``). ``num_neighbors=None``
            (default) is ``K = 100``, lowered to ``min(M, N - 1) - 1`` on smaller data with
            one ``UserWarning``; an explicit ``K >= min(M, N - 1)`` is refused
            (``ValueError``).
        seed: rng seed (seeds, walks and the graph's candidate draw).
        tail: ``"fill"`` or ``"walk"`` (module docstring).
        fill_threshold: with ``tail="fill"``, once at most this many nodes (int, or a fraction
            of ``N`` as float) are uncovered, the rest of the epoch is batches of the uncovered
            nodes completed by walks (default ``batch_size``).
        refresh_every: steps between graph rebuilds in a training run (default 100; kept
            as ``self.refresh_every`` for the run's
            :class:`~keras_hardneg.callbacks.GraphRefreshCallback`).
        initial_graph: a run's first graph, ``"inputs"`` (default) or ``"encoder"``
            (:data:`INITIAL_GRAPHS`; kept as ``self.initial_graph``).

    Example:
        >>> import numpy as np
        >>> s = BatchSampler(np.random.default_rng(0).normal(size=(500, 8)), batch_size=64,
        ...                  num_candidates=100, num_neighbors=10)
        >>> next(iter(s)).shape
        (64,)
    """

    def __init__(self, graph: ProximityGraph | np.ndarray, batch_size: int,
                 restart_prob: float | tuple[float, float] = (0.2, 0.05), *,
                 num_candidates: int = 1000, num_neighbors: int | None = None,
                 backend: str = "auto", seed: int = 0, tail: str = "fill",
                 fill_threshold: int | float | None = None, refresh_every: int = 100,
                 initial_graph: str = "inputs"):
        if num_neighbors is None:
            num_neighbors = _default_batchsampler_neighbors(graph, num_candidates)
        else:
            _check_explicit_neighbors(graph, num_candidates, num_neighbors)
        self.num_candidates = num_candidates
        self.backend = backend
        nb = _as_neighbors(graph, num_candidates, num_neighbors, backend, seed)
        #: ``K``, neighbours per node of the graph (the default resolved for the data).
        self.num_neighbors = int(np.shape(nb)[1]) if num_neighbors is None else num_neighbors
        schedule = (tuple(restart_prob) if isinstance(restart_prob, (tuple, list))
                    else (restart_prob, restart_prob))
        if len(schedule) != 2:
            raise ValueError("`restart_prob` must be a float in [0, 1) or (start, end); got "
                             f"{restart_prob!r}.")
        #: ``(start, end)`` of the restart probability over a run.
        self.restart_prob_schedule = tuple(_check_alpha(a) for a in schedule)
        self._restart_prob = self.restart_prob_schedule[0]
        super().__init__(nb, batch_size, seed, tail, fill_threshold, refresh_every,
                         initial_graph)

    @property
    def restart_prob(self):
        return self._restart_prob

    def set_restart_prob(self, restart_prob):
        self._restart_prob = _check_alpha(restart_prob)

    def _draw(self, seed_node):
        return random_walk_with_restart(self._neighbors, seed_node, self._restart_prob,
                                        self.batch_size, self._rng)

    def _extra_state(self, include_graph=True):
        st = super()._extra_state(include_graph)
        st["restart_prob"] = self._restart_prob
        return st

    def _set_extra_state(self, state):
        super()._set_extra_state(state)
        self._restart_prob = _check_alpha(state["restart_prob"])


class KNNSampler(_GraphSampler):
    """kNN Sampler baseline: seed + its nearest neighbours (breadth-first on the kNN graph).

    Args:
        graph: embeddings ``[N, d]`` (the exact/ScaNN kNN graph is built with ``K =
            num_neighbors``), a ``ProximityGraph`` or int ``[N, K]`` sorted by similarity.
        batch_size: ``B``.
        num_neighbors: ``K`` of the kNN graph (default ``B - 1``, lowered to ``N - 2`` with
            one ``UserWarning`` when the batch is the whole dataset).
        backend: graph backend (``"auto"``: exact for ``N <= 50000``, ScaNN above).
        seed: rng seed.
        tail, fill_threshold, refresh_every, initial_graph: as for ``BatchSampler``.
    """

    def __init__(self, graph: ProximityGraph | np.ndarray, batch_size: int, *,
                 num_neighbors: int | None = None, backend: str = "auto", seed: int = 0,
                 tail: str = "fill", fill_threshold: int | float | None = None,
                 refresh_every: int = 100, initial_graph: str = "inputs"):
        embeddings = not isinstance(graph, ProximityGraph) and \
            not np.issubdtype(np.asarray(graph).dtype, np.integer)
        if num_neighbors is None:
            num_neighbors = int(batch_size) - 1
            if _embedding_rows(graph) is not None and _is_int(batch_size):
                num_neighbors = _fitted_default("KNNSampler", num_neighbors,
                                                _embedding_rows(graph) - 2, "N - 2")
        self.num_neighbors = num_neighbors
        self.backend = backend
        arr = graph
        if embeddings:
            n = np.asarray(graph).shape[0]
            arr = ProximityGraph.build(graph, n - 1, num_neighbors, backend=backend, seed=seed,
                                       sort_neighbors=True)
        nb = _as_neighbors(arr, None, None, backend, seed)
        super().__init__(nb, batch_size, seed, tail, fill_threshold, refresh_every,
                         initial_graph)

    def _draw(self, seed_node):
        nb, b = self._neighbors, self.batch_size
        order = [np.array([seed_node], dtype=np.int64)]
        seen = np.array([seed_node], dtype=np.int64)
        frontier = order[0]
        count = 1
        while count < b:
            cand = nb[frontier].ravel().astype(np.int64)
            _, first = np.unique(cand, return_index=True)
            cand = cand[np.sort(first)]
            cand = cand[~np.isin(cand, seen)]
            if cand.size == 0:
                r = reachable_count(nb, seed_node, b)
                raise ValueError(f"Only {r} nodes are reachable from seed_node={seed_node} in "
                                 f"the kNN graph, fewer than batch_size={b}.")
            order.append(cand)
            seen = np.concatenate([seen, cand])
            count += cand.size
            frontier = cand
        return np.concatenate(order)[:b]


# ------------------------------------------------------------------ registrations
#: Config keys shared by the graph samplers: how often the training loop rebuilds the graph.
REFRESH_EVERY = Param(int, low=1,
                      help="rebuild the proximity graph from the model's embeddings every N steps")
INITIAL_GRAPH = Param(str, choices=INITIAL_GRAPHS,
                      help="first graph: 'inputs' (a fixed random projection of the inputs, "
                           "no forward pass) or 'encoder' (the encoder's features at the "
                           "start, one forward pass over the data: what a pretrained encoder "
                           "needs; images in memory and text)")
_BACKEND = Param(str, choices=("auto", "scann", "brute"),
                 help="graph search: exact (brute), ScaNN, or auto (exact up to 50k nodes)")


def _check_batchsampler(config):
    if config["num_neighbors"] is not None and config["num_neighbors"] >= config["num_candidates"]:
        return (f"'num_neighbors' must be < 'num_candidates'; got {config['num_neighbors']} "
                f"and {config['num_candidates']}")
    if isinstance(config["restart_prob"], list) and len(config["restart_prob"]) != 2:
        return f"'restart_prob' must be a number or [start, end]; got {config['restart_prob']}"
    return None


SAMPLERS.register("uniform", UniformSampler, graph=False,
                  help="uniformly shuffled batches, a new order every epoch")
SAMPLERS.register(
    "batchsampler", BatchSampler, graph=True, check=_check_batchsampler,
    help="BatchSampler (Yang et al., KDD 2023): random walks with restart on a proximity graph",
    params={
        "num_candidates": Param(int, low=2, tunable=True,
                                help="M: candidates drawn per node to build the graph"),
        "num_neighbors": Param(int, low=1, help="K: neighbours kept per node (default: 100, "
                                                "or min(num_candidates, N - 1) - 1 on "
                                                "smaller data)"),
        "restart_prob": Param("number_or_list", low=0.0, high=1.0, high_inclusive=False,
                              tunable=True,
                              help="restart probability alpha, or [start, end] annealed "
                                   "linearly over the run (paper: 0.2 -> 0.05)"),
        "backend": _BACKEND,
        "refresh_every": REFRESH_EVERY,
        "initial_graph": INITIAL_GRAPH,
    })
SAMPLERS.register(
    "knn", KNNSampler, graph=True,
    help="kNN sampler baseline: a seed node and its nearest neighbours",
    params={"num_neighbors": Param(int, low=1, help="K of the kNN graph (default B - 1)"),
            "backend": _BACKEND, "refresh_every": REFRESH_EVERY,
            "initial_graph": INITIAL_GRAPH})
