"""Proximity graph of BatchSampler (Yang et al., KDD 2023, Sec. 4.1, Eq. 3, Alg. 2).

For every node ``i`` draw ``M`` candidates uniformly at random from the other nodes and keep
the ``K`` candidates with the largest inner product of L2-normalised embeddings as its
neighbours. ``M >= N - 1`` gives the exact kNN graph.

Backends
--------
``"brute"``
    Blocked matrix product + exact top-k, in float32, on all cores.  Nodes are processed in
    blocks of at most ``block_size`` (default 256) consecutive node ids that **share one candidate
    pool**: the pool is ``M + 1`` distinct nodes drawn uniformly; each node of the block drops
    itself from the pool if present, otherwise it drops the pool's last entry.  Every node
    therefore sees exactly ``M`` candidates, a uniform ``M``-subset of the other nodes (the
    marginal law of Alg. 2 is exact); only candidates of nodes in the same block are correlated.
    Sharing turns the work into GEMMs ``[256, d] x [d, M + 1]``.  ``tests/sampling`` and
    ``benchmarks/sampling/bench_graph.py`` check that batch hardness and false-negative statistics
    match per-node candidate sets.
    Top-k: each float32 score's low ``ceil(log2(M + 1))`` mantissa bits are replaced by the
    candidate's column, so one SIMD ``np.partition`` of int32 keys selects the top ``K`` *and*
    returns their columns (no argpartition, no nonzero).  Rows where the truncation could change
    the selection (a tie at the cut within ``2**-(23 - bits)`` relative, or a non-positive K-th
    score, where int ordering of floats breaks) are recomputed exactly with ``np.argpartition``.
    The result is therefore the exact float32 top-K.
``"scann"``
    Approximate kNN graph with ScaNN (tree + anisotropic hashing + exact re-ordering).  Only for
    ``M >= N - 1`` (the kNN graph).  Recall is measured in the benchmark.
``"auto"``
    ``"scann"`` when the kNN graph is requested (``M >= N - 1``), ``N > 50_000`` and ScaNN
    imports (it needs TensorFlow; without it, ``"brute"``) (exact kNN
    costs ``2 N^2 d`` flops: 6 min at N = 200k on 2 cores), otherwise ``"brute"``.  A proximity
    graph with ``M < N - 1`` is always built exactly by ``"brute"``: its cost ``2 N M d`` is a
    GEMM (ImageNet, M = 1000: 3.3e11 flop).

Example
-------
>>> import numpy as np
>>> from keras_hardneg.sampling import ProximityGraph
>>> emb = np.random.default_rng(0).normal(size=(1000, 16)).astype("float32")
>>> g = ProximityGraph.build(emb, num_candidates=100, num_neighbors=10, seed=0)
>>> g.neighbors.shape, g.neighbors.dtype
((1000, 10), dtype('int32'))
>>> bool((g.neighbors != np.arange(1000)[:, None]).all())   # never a self loop
True
"""

from __future__ import annotations

import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

__all__ = ["ProximityGraph", "normalize_embeddings"]

_BACKENDS = ("auto", "brute", "scann")
_SCANN_MIN_NODES = 50_000


def _num_threads():
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def normalize_embeddings(embeddings, name="embeddings", num_threads=None):
    """Validate and L2-normalise rows.  ``embeddings``: ``[N, d]`` -> new float32 ``[N, d]``.

    Zero rows stay zero (all their scores are 0, i.e. they rank candidates at random).  Runs in
    row chunks on all cores (the finiteness check is fused with the norms).
    """
    x = np.asarray(embeddings)
    if x.ndim != 2:
        raise ValueError(f"`{name}` must have rank 2 [N, d], got shape {x.shape}.")
    if x.shape[0] < 2:
        raise ValueError(f"`{name}` must have at least 2 rows (N >= 2), got N={x.shape[0]}.")
    if x.shape[1] < 1:
        raise ValueError(f"`{name}` must have d >= 1 columns, got shape {x.shape}.")
    if not (np.issubdtype(x.dtype, np.number) or x.dtype == np.bool_):
        raise ValueError(f"`{name}` must be numeric, got dtype {x.dtype}.")
    n = x.shape[0]
    out = np.empty(x.shape, dtype=np.float32)
    bad = []

    def chunk(a):
        b = min(a + 65536, n)
        o = out[a:b]
        o[...] = x[a:b]
        norms = np.sqrt(np.einsum("ij,ij->i", o, o))
        fin = np.isfinite(norms)
        if not fin.all():
            rows = np.nonzero(~fin)[0]
            if not np.isfinite(o[rows]).all():
                bad.append(a + rows[0])
                return
            norms[rows] = np.linalg.norm(o[rows].astype(np.float64), axis=1)  # overflow
        norms[norms == 0] = 1.0
        o /= norms[:, None]

    starts = range(0, n, 65536)
    threads = num_threads or _num_threads()
    if threads > 1 and n > 65536:
        with ThreadPoolExecutor(threads) as ex:
            list(ex.map(chunk, starts))
    else:
        for a in starts:
            chunk(a)
    if bad:
        raise ValueError(f"`{name}` contains non-finite values (NaN or inf), e.g. in row "
                         f"{min(bad)}.")
    return out


def _check_int(value, name, minimum):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"`{name}` must be an integer, got {value!r}.")
    if value < minimum:
        raise ValueError(f"`{name}` must be >= {minimum}, got {value}.")
    return int(value)


@dataclass
class ProximityGraph:
    """Directed proximity graph: ``neighbors[i]`` are the ``K`` out-neighbours of node ``i``.

    Attributes:
        neighbors: int32 ``[N, K]``; no self loops; no duplicate within a row. Rows are sorted
            by decreasing float32 similarity with ``sort_neighbors=True``; by default the order
            is unspecified.
        num_candidates: effective ``M`` (clipped to ``N - 1``).
        backend: backend actually used (``"brute"`` or ``"scann"``).
        seed: seed of the candidate draw.

    Example:

    >>> import numpy as np
    >>> from keras_hardneg.sampling import ProximityGraph
    >>> emb = np.random.default_rng(0).normal(size=(300, 16))        # [N, d]
    >>> g = ProximityGraph.build(emb, num_candidates=50, num_neighbors=10, seed=0)
    >>> g.neighbors.shape, g.num_candidates, g.backend, g.is_knn
    ((300, 10), 50, 'brute', False)
    >>> bool((g.neighbors != np.arange(300)[:, None]).all())          # no self loops
    True
    """

    neighbors: np.ndarray
    num_candidates: int = 0
    backend: str = "brute"
    seed: int | None = None
    info: dict = field(default_factory=dict)

    @property
    def num_nodes(self):
        return int(self.neighbors.shape[0])

    @property
    def num_neighbors(self):
        return int(self.neighbors.shape[1])

    @property
    def is_knn(self):
        return self.num_candidates >= self.num_nodes - 1

    # ------------------------------------------------------------------ build
    @classmethod
    def build(cls, embeddings: np.ndarray, num_candidates: int, num_neighbors: int,
              backend: str = "auto", seed: int | np.random.Generator = 0, *,
              block_size: int = 256, sort_neighbors: bool = False,
              num_threads: int | None = None, scann_options: dict | None = None
              ) -> ProximityGraph:
        """Build the proximity graph (paper Alg. 2).

        Args:
            embeddings: ``[N, d]`` array (rows are L2-normalised here; any scale is fine).
            num_candidates: ``M``, candidates drawn per node. ``M >= N - 1`` is clipped to
                ``N - 1`` and gives the exact kNN graph (the paper's ``M = N``).
            num_neighbors: ``K``, neighbours kept per node, ``1 <= K < M``.
            backend: ``"auto"`` | ``"brute"`` | ``"scann"`` (see module docstring).
            seed: int seed of the candidate draw (or a ``np.random.Generator``).
            block_size: nodes sharing one candidate pool (``1..256``); 1 = per-node pools.
            sort_neighbors: sort each row by decreasing similarity (costs ~20% of the build at
                M = 1000; random walks pick neighbours uniformly and do not need it).
            num_threads: worker threads for ``"brute"`` (default: all cores).
            scann_options: dict overriding ScaNN settings (``num_leaves``,
                ``num_leaves_to_search``, ``reorder``, ``training_sample_size``).

        Returns:
            ``ProximityGraph`` with ``neighbors`` int32 ``[N, K]``.
        """
        if backend not in _BACKENDS:
            raise ValueError(f"`backend` must be one of {_BACKENDS}, got {backend!r}.")
        x = normalize_embeddings(embeddings)
        n = x.shape[0]
        m = _check_int(num_candidates, "num_candidates", 1)
        k = _check_int(num_neighbors, "num_neighbors", 1)
        block_size = _check_int(block_size, "block_size", 1)
        if block_size > 256:
            raise ValueError(f"`block_size` must be <= 256, got {block_size}.")
        m = min(m, n - 1)  # M >= N - 1 means the kNN graph
        if k >= m:
            raise ValueError(
                f"`num_neighbors` (K={k}) must be < `num_candidates` (M={m} after clipping to "
                f"N-1={n - 1}).")
        knn = m >= n - 1
        if backend == "auto":
            backend = "scann" if (knn and n > _SCANN_MIN_NODES and _scann_available()) \
                else "brute"
        if backend == "scann" and not knn:
            raise ValueError(
                "`backend`='scann' builds the kNN graph only (num_candidates >= N - 1); use "
                "'brute' or 'auto' for a proximity graph with random candidates.")
        if backend == "scann":
            nbrs, info = _scann_knn(x, k, scann_options or {})
            if sort_neighbors:
                nbrs = _sort_rows(x, nbrs)
            seed_val = None
        else:
            rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
            nbrs, fallback = _brute(x, m, k, rng, block_size, sort_neighbors,
                                    num_threads or _num_threads())
            info = {"block_size": block_size, "exact_fallback_rows": fallback}
            seed_val = None if isinstance(seed, np.random.Generator) else seed
        return cls(neighbors=nbrs, num_candidates=m, backend=backend, seed=seed_val, info=info)


# ---------------------------------------------------------------------- brute
def _draw_pools(rng, n, pool_size, num_pools):
    """``num_pools`` rows of ``pool_size`` distinct nodes, each a uniform random subset in random
    order, *balanced*: pools are consecutive chunks of fresh random permutations of all nodes, so
    every node lies in the same number of pools (+-1) instead of a Poisson number.  (With
    independent pools a node would be in ``Poisson(M / block_size)`` pools -- ``e^-3.9 = 2%`` of
    the nodes in none at M = 1000, block 256 -- which inflates the in-degree spread.)"""
    if pool_size == n:
        return None  # every pool is all nodes
    total = num_pools * pool_size
    stream = np.empty(total, dtype=np.int64)
    pos = 0
    while pos < total:  # a stream of permutations cut into chunks of pool_size
        a = pos % pool_size  # nodes of the chunk that straddles the permutation boundary
        perm = rng.permutation(n)
        if a:  # the new permutation's head must avoid that chunk's first part T
            tail = stream[pos - a:pos]
            h = pool_size - a
            clash = np.nonzero(np.isin(perm[:h], tail))[0]
            if clash.size:  # swap clashing head entries with the next non-clashing later ones
                later = np.arange(h, min(n, h + 2 * a + clash.size))
                later = later[~np.isin(perm[later], tail)][:clash.size]
                if later.size == clash.size:
                    perm[clash], perm[later] = perm[later], perm[clash].copy()
                else:  # small n: rebuild the head from the nodes outside T
                    mask = np.ones(n, dtype=bool)
                    mask[tail] = False
                    r = rng.permutation(np.nonzero(mask)[0])
                    rest = np.concatenate([r[h:], tail])
                    perm = np.concatenate([r[:h], rest[rng.permutation(rest.size)]])
        m = min(n, total - pos)
        stream[pos:pos + m] = perm[:m]
        pos += m
    return stream.reshape(num_pools, pool_size)


def _sort_rows(x, nbrs):
    """Sort each row of ``nbrs`` by decreasing similarity (chunked, float32)."""
    out = np.empty_like(nbrs)
    step = 8192
    for a in range(0, nbrs.shape[0], step):
        b = min(a + step, nbrs.shape[0])
        sims = np.einsum("nd,nkd->nk", x[a:b], x[nbrs[a:b]])
        order = np.argsort(-sims, axis=1, kind="stable")
        out[a:b] = np.take_along_axis(nbrs[a:b], order, axis=1)
    return out


class _BlockKernel:
    """Scores one block of nodes against its pool and writes their top-K (see module doc)."""

    def __init__(self, x, m, k, sort_neighbors):
        self.x, self.m, self.k, self.sort = x, m, k, sort_neighbors
        self.n = x.shape[0]
        self.pool_size = min(m + 1, self.n)
        self.bits = max(1, math.ceil(math.log2(self.pool_size)))
        # Packing leaves 23 - bits mantissa bits; below ~10 bits the exact fallback would fire
        # too often, so wide pools (kNN of large N) use argpartition directly.
        self.packed = self.bits <= 13
        self.cols = np.arange(self.pool_size, dtype=np.int32)
        self.lowmask = np.int32((1 << self.bits) - 1)
        self.fallback_rows = 0
        self._lock = threading.Lock()
        self._local = threading.local()

    def _workspace(self, b, p, d):
        ws = getattr(self._local, "ws", None)
        if ws is None or ws[0].shape != (p, d) or ws[1].shape[1] != p or ws[1].shape[0] < b:
            rows = max(b, 256)
            ws = (np.empty((p, d), np.float32), np.empty((rows, p), np.float32),
                  np.empty((rows, p), np.int32))
            self._local.ws = ws
        return ws[0], ws[1][:b], ws[2][:b]

    def __call__(self, start, stop, pool, out):
        x, k = self.x, self.k
        q = x[start:stop]
        b = stop - start
        if pool is None:  # kNN: the pool is every node
            cand = x
            s = q @ cand.T
            keys = np.empty(s.shape, np.int32) if self.packed else None
        else:
            cand, s, keys = self._workspace(b, pool.size, x.shape[1])
            np.take(x, pool, axis=0, out=cand)  # reused buffers: no page faults per block
            np.matmul(q, cand.T, out=s)  # [B, P] float32 GEMM
        p = s.shape[1]
        rows = np.arange(b)
        if pool is None:
            pool = np.arange(self.n)
            selfcol = np.arange(start, stop)
        else:
            pos = np.nonzero((pool >= start) & (pool < stop))[0]
            selfcol = np.full(b, p - 1)
            selfcol[pool[pos] - start] = pos
        s[rows, selfcol] = -np.inf  # drop self (or the pool's last entry): exactly M candidates
        kth = p - k
        if self.packed:
            # packed keys (truncated score | column) in a reused buffer; scores stay intact
            np.bitwise_and(s.view(np.int32), ~self.lowmask, out=keys)
            keys |= self.cols
            keys.partition(kth, axis=1)
            top = keys[:, kth:]
            cut = keys[:, kth] >> self.bits
            below = keys[:, :kth].max(axis=1) >> self.bits
            # ambiguous: tie across the cut at truncated precision, or K-th score <= 0 (negative
            # floats do not order as ints) -> exact recomputation for these rows.
            bad = np.nonzero((below == cut) | (keys[:, kth] < 0))[0]
            idx = (top & self.lowmask).astype(np.intp)
            if self.sort:  # exact float32 order of the K selected (all >= 0 on good rows)
                v = np.take(s.reshape(-1), idx + (np.arange(b) * p)[:, None])
                key = (v.view(np.int32).astype(np.int64) << 32) | idx
                key.sort(axis=1)
                idx = (key[:, ::-1] & 0xFFFFFFFF).astype(np.intp)
            if bad.size:
                idx[bad] = self._exact(s[bad], kth)
                with self._lock:
                    self.fallback_rows += int(bad.size)
        else:
            idx = self._exact(s, kth)
        out[start:stop] = pool[idx]

    def _exact(self, s, kth):
        idx = np.argpartition(s, kth, axis=1)[:, kth:]
        if self.sort:
            v = np.take_along_axis(s, idx, axis=1)
            idx = np.take_along_axis(idx, np.argsort(-v, axis=1, kind="stable"), axis=1)
        return idx


def _brute(x, m, k, rng, block_size, sort_neighbors, num_threads):
    n = x.shape[0]
    kern = _BlockKernel(x, m, k, sort_neighbors)
    starts = np.arange(0, n, block_size)
    pools = _draw_pools(rng, n, kern.pool_size, len(starts))
    out = np.empty((n, k), dtype=np.int32)

    def work(i):
        a = int(starts[i])
        kern(a, min(a + block_size, n), None if pools is None else pools[i], out)

    if num_threads <= 1 or len(starts) < 4:
        for i in range(len(starts)):
            work(i)
    else:
        # one BLAS thread per worker; numpy's GEMM, partition and fancy indexing release the GIL
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1, user_api="blas"):
            with ThreadPoolExecutor(num_threads) as ex:
                # chunks of consecutive blocks per task keep scheduling overhead negligible
                chunk = 8
                def run(c):
                    for i in range(c, min(c + chunk, len(starts))):
                        work(i)
                list(ex.map(run, range(0, len(starts), chunk)))
    return out, kern.fallback_rows


# ---------------------------------------------------------------------- scann
def _scann_available():
    """Whether ScaNN imports (it needs TensorFlow: "auto" falls back to exact search without)."""
    try:
        import scann  # noqa: F401  (imports TensorFlow; keep lazy)
    except ImportError:
        return False
    return True


def _scann_knn(x, k, opts):
    """Approximate kNN graph (self removed) with ScaNN. Returns (int32 [N, K], info)."""
    try:
        import scann  # noqa: F401  (imports TensorFlow; keep lazy)
    except ImportError as e:  # pragma: no cover
        raise ImportError("backend='scann' needs the `scann` package and TensorFlow, whose "
                          "ops it uses (pip install scann); backend='brute' needs neither.") from e
    searcher, info = _scann_searcher(x, k, opts)
    kk = min(k + 1, x.shape[0])
    idx, _ = searcher.search_batched_parallel(x, final_num_neighbors=kk, batch_size=256)
    idx = np.asarray(idx, dtype=np.int64)
    nbrs = _drop_self(idx, k)
    return nbrs.astype(np.int32), info


def _scann_searcher(x, k, opts):
    """ScaNN searcher over unit rows ``x`` returning ``k + 1`` results (self included).
    Defaults: ``sqrt(N)`` leaves (<= 2000), search ``max(16, leaves // 40)`` of them, AH with 2
    dims per block (anisotropic threshold 0.2), exact re-ordering of ``max(4 (k + 1), 250)``,
    trained on ``min(N, 250000)`` rows.  At N = 1.28M (1132 leaves, 25 searched) recall@100 is
    0.97 on the benchmark data (0.93 when trained on 100k rows; ``docs/notes/sampling.md``)."""
    from scann import scann_ops_pybind

    n = x.shape[0]
    kk = min(k + 1, n)
    num_leaves = int(opts.get("num_leaves", max(1, min(2000, int(round(math.sqrt(n)))))))
    leaves_to_search = int(opts.get("num_leaves_to_search", max(1, min(num_leaves, max(
        16, num_leaves // 40)))))
    reorder = int(opts.get("reorder", max(4 * kk, 250)))
    train = int(opts.get("training_sample_size", min(n, 250_000)))
    threads = int(opts.get("num_threads", _num_threads()))
    builder = scann_ops_pybind.builder(x, kk, "dot_product")
    if n >= 4 * num_leaves and num_leaves > 1:
        builder = builder.tree(num_leaves=num_leaves, num_leaves_to_search=leaves_to_search,
                               training_sample_size=train)
    if x.shape[1] >= 2 and n >= 1000:
        builder = builder.score_ah(2, anisotropic_quantization_threshold=0.2,
                                   training_sample_size=train).reorder(reorder)
    else:
        builder = builder.score_brute_force()
    builder = builder.set_n_training_threads(threads)
    searcher = builder.build()
    searcher.set_num_threads(threads)
    info = {"num_leaves": num_leaves, "num_leaves_to_search": leaves_to_search,
            "reorder": reorder}
    return searcher, info


def _drop_self(idx, k):
    """Rows of ``k + 1`` results -> ``k`` results without the query itself."""
    n = idx.shape[0]
    is_self = idx == np.arange(n)[:, None]
    # drop the self entry if present, else the last entry
    drop = np.where(is_self.any(axis=1), is_self.argmax(axis=1), idx.shape[1] - 1)
    keep = np.ones(idx.shape, dtype=bool)
    keep[np.arange(n), drop] = False
    out = idx[keep].reshape(n, idx.shape[1] - 1)[:, :k]
    if (out < 0).any():  # ScaNN pads with -1 if it found fewer results (tiny leaves)
        bad = np.nonzero((out < 0).any(axis=1))[0]
        raise RuntimeError(f"ScaNN returned fewer than K neighbours for {bad.size} rows; "
                           "increase `num_leaves_to_search` in scann_options.")
    return out
