"""Random walk with restart (RWR) on a proximity graph (Yang et al., KDD 2023, Alg. 3).

Alg. 3: start at the seed ``u``; at each step, with probability ``alpha`` go back to ``u``, else
move to a uniformly chosen out-neighbour; collect distinct nodes in order of first visit until
``B`` are collected.

Vectorised simulation (same distribution as the sequential walk)
---------------------------------------------------------------
The walk is a sequence of independent *excursions* from the seed: each excursion makes
``L ~ Geometric`` moves (``P(L = l) = (1 - alpha)^l alpha``, ``l >= 0``) and then restarts.
We draw the lengths of many excursions at once and advance all of them together, one numpy
gather per step depth; concatenating their node sequences in excursion order and keeping first
occurrences gives exactly the sequential walk's first-visit order.  An excursion still running
at the round's depth cap is continued in the next round from its last node (the remaining
length of a geometric variable is again geometric), and excursions after it are discarded,
so the order stays exact.  Cost: ``O(max excursion length)`` numpy calls per round, i.e. a few
tens for ``alpha = 0.2``; ``alpha = 0`` degenerates to one long path (one call per step).

Compiled walk (the default when numba is installed)
--------------------------------------------------
``engine="compiled"`` runs the literal sequential Alg. 3 in a numba-compiled loop, with the
uniform draws made beforehand by the caller's ``np.random.Generator`` (one uniform ``x`` per
move: restart if ``x < alpha``, else neighbour slot ``floor((x - alpha) / (1 - alpha) * K)``,
which is uniform on ``0..K-1`` given no restart).  First visits are marked in a per-thread
``[N]`` stamp array, so no per-walk clearing; it is about 4x faster than the vectorised
excursions below (timings in docs/benchmarks/scale.md). ``engine="numpy"`` keeps the
dependency-free path, and ``"auto"`` picks the compiled one when numba imports.

Termination: if a round ends short of ``B`` nodes, a bounded BFS from the seed checks that at
least ``B`` nodes are reachable (``ValueError`` otherwise); a walk that still has not found
``B`` nodes after ``max_steps`` moves raises ``ValueError`` (restart probability too high to
escape the seed's neighbourhood).

Example
-------
>>> import numpy as np
>>> from keras_hardneg.sampling import ProximityGraph, random_walk_with_restart
>>> emb = np.random.default_rng(0).normal(size=(2000, 16))
>>> g = ProximityGraph.build(emb, num_candidates=200, num_neighbors=20, seed=0)
>>> b = random_walk_with_restart(g.neighbors, seed_node=0, restart_prob=0.2, batch_size=256,
...                              rng=np.random.default_rng(0))
>>> b.shape, len(set(b.tolist())), int(b[0])
((256,), 256, 0)
"""

from __future__ import annotations

import math
import threading

import numpy as np

try:  # the compiled walk is optional: without numba, the vectorised numpy walk runs
    import numba
except ImportError:  # pragma: no cover - numba is a dependency of the package
    numba = None

__all__ = ["ENGINES", "random_walk_with_restart", "reachable_count", "reachable_nodes",
           "python_random_walk_with_restart"]


def _check_neighbors(neighbors):
    nb = np.asarray(neighbors)
    if nb.ndim != 2 or nb.shape[1] < 1:
        raise ValueError(f"`neighbors` must be an int array [N, K] with K >= 1, got shape "
                         f"{nb.shape}.")
    if not np.issubdtype(nb.dtype, np.integer):
        raise ValueError(f"`neighbors` must be an integer array, got dtype {nb.dtype}.")
    return nb


def _validate(nb, seed_node, restart_prob, batch_size, check_values=False):
    n = nb.shape[0]
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
            or batch_size < 2:
        raise ValueError(f"`batch_size` must be an integer >= 2, got {batch_size!r}.")
    if batch_size > n:
        raise ValueError(f"`batch_size` ({batch_size}) exceeds the number of nodes N={n}.")
    try:
        a = float(restart_prob)
    except (TypeError, ValueError):
        raise ValueError(f"`restart_prob` must be a float in [0, 1), got {restart_prob!r}.")
    if not (0.0 <= a < 1.0):
        raise ValueError(f"`restart_prob` must be in [0, 1), got {restart_prob!r}.")
    if isinstance(seed_node, bool) or not isinstance(seed_node, (int, np.integer)) \
            or not (0 <= seed_node < n):
        raise ValueError(f"`seed_node` must be an integer in [0, {n}), got {seed_node!r}.")
    if check_values and nb.size and (nb.min() < 0 or nb.max() >= n):
        raise ValueError("`neighbors` entries must be node ids in [0, N).")
    return a


_local = threading.local()
_BIG = np.iinfo(np.int32).max


def _first_occurrences(seq, n):
    """Distinct entries of ``seq`` (ids in [0, n)) in order of first occurrence.  Uses a
    per-thread scratch array of size ``n`` (``np.minimum.at`` + gather, ~2x faster than
    ``np.unique(return_index=True)`` at the walk's sizes); the scratch is reset after use."""
    sc = getattr(_local, "scratch", None)
    if sc is None or sc.size != n:
        sc = np.full(n, _BIG, dtype=np.int32)
        _local.scratch = sc
    pos = np.arange(seq.size, dtype=np.int32)
    np.minimum.at(sc, seq, pos)
    first = sc[seq] == pos
    sc[seq] = _BIG
    return seq[first]


def reachable_nodes(neighbors, seed_node, limit):
    """Nodes reachable from ``seed_node`` (itself first), BFS order by level, at most ``limit``
    of them.  Bounded BFS, vectorised per level."""
    nb = np.asarray(neighbors)
    frontier = np.array([seed_node], dtype=np.int64)
    order = [frontier]
    visited = frontier
    count = 1
    while frontier.size and count < limit:
        nxt = np.unique(nb[frontier].ravel()).astype(np.int64)
        nxt = nxt[~np.isin(nxt, visited, assume_unique=True)]
        visited = np.union1d(visited, nxt)
        order.append(nxt)
        count += nxt.size
        frontier = nxt
    return np.concatenate(order)[:limit]


def reachable_count(neighbors, seed_node, limit):
    """Number of nodes reachable from ``seed_node`` (itself included), counting stops at
    ``limit``."""
    return int(reachable_nodes(neighbors, seed_node, limit).size)


def _walk_kernel(nb, seed, alpha, out, got, v, u, mark, stamp):
    """Sequential Alg. 3 from node ``v`` with ``got`` nodes already in ``out``, consuming the
    uniforms ``u`` (one per move); nodes whose ``mark`` equals ``stamp`` were visited.
    Returns ``(got, v, moves_used)``: stops when ``out`` is full or ``u`` is used up, or
    with ``moves_used = -1`` when a neighbour id is outside ``[0, N)`` (compiled code has no
    bounds checks: the id is checked before it is used as an index)."""
    n, k = nb.shape
    b = out.shape[0]
    scale = k / (1.0 - alpha)
    i = 0
    while True:
        if mark[v] != stamp:
            mark[v] = stamp
            out[got] = v
            got += 1
            if got == b:
                break
        if i == u.shape[0]:
            break
        x = u[i]
        i += 1
        if x < alpha:
            v = seed
        else:
            j = int((x - alpha) * scale)
            if j >= k:
                j = k - 1
            v = nb[v, j]
            if v < 0 or v >= n:
                return got, v, -1
    return got, v, i


_compiled_kernel = (numba.njit(cache=True, nogil=True)(_walk_kernel) if numba is not None
                    else None)
ENGINES = ("auto", "compiled", "numpy")


def _marks(n):
    """Per-thread ``[n]`` int32 stamp array and a fresh stamp for one walk."""
    mark = getattr(_local, "mark", None)
    if mark is None or mark.size != n or _local.stamp >= np.iinfo(np.int32).max - 1:
        mark = np.zeros(n, dtype=np.int32)
        _local.mark, _local.stamp = mark, 0
    _local.stamp += 1
    return mark, _local.stamp


def _compiled_walk(nb, seed_node, alpha, batch_size, rng, max_steps, kernel):
    out = np.empty(batch_size, dtype=np.int64)
    mark, stamp = _marks(nb.shape[0])
    got, v, total, checked = 0, seed_node, 0, False
    moves = int(1.4 * batch_size) + 16  # enough for most walks at alpha <= 0.3 in one call
    while True:
        u = rng.random(moves)
        got, v, used = kernel(nb, seed_node, alpha, out, got, v, u, mark, stamp)
        if used < 0:
            raise ValueError(f"`neighbors` entries must be node ids in [0, N={nb.shape[0]}); "
                             f"found {int(v)}.")
        total += used
        if got == batch_size:
            return out
        if not checked:
            checked = True
            _check_reachable(nb, seed_node, batch_size)
        if total >= max_steps:
            _too_many_moves(seed_node, got, batch_size, total, alpha)
        moves = min(2 * moves, max(max_steps - total, 1))


def _check_reachable(nb, seed_node, batch_size):
    r = reachable_count(nb, seed_node, batch_size)
    if r < batch_size:
        raise ValueError(
            f"Only {r} nodes are reachable from seed_node={seed_node}, fewer than "
            f"batch_size={batch_size}: the seed lies in a small component of the graph "
            "(increase num_neighbors / num_candidates or reduce batch_size).")


def _too_many_moves(seed_node, got, batch_size, total, alpha):
    raise ValueError(
        f"Random walk from seed_node={seed_node} found only {got} of batch_size="
        f"{batch_size} distinct nodes in {total} moves; restart_prob={alpha} is too high "
        "for this graph.")


def random_walk_with_restart(neighbors: np.ndarray, seed_node: int, restart_prob: float,
                             batch_size: int, rng: np.random.Generator | int | None = None, *,
                             max_steps: int | None = None, engine: str = "auto") -> np.ndarray:
    """Sample one mini-batch by random walk with restart (paper Alg. 3).

    Args:
        neighbors: int array ``[N, K]`` (e.g. ``ProximityGraph.neighbors``); row ``i`` lists the
            out-neighbours of node ``i``; a neighbour is chosen uniformly among the ``K``.
        seed_node: start node ``u`` in ``[0, N)``; always ``batch[0]``.
        restart_prob: ``alpha`` in ``[0, 1)``.
        batch_size: ``B >= 2`` distinct nodes to collect.
        rng: ``np.random.Generator`` (or int seed / None).
        max_steps: bound on simulated moves (default ``max(10**6, 2000 * B)``).
        engine: ``"auto"`` (compiled when numba is installed, else numpy), ``"compiled"``
            (sequential walk compiled by numba) or ``"numpy"`` (vectorised excursions).
            Both engines draw from the same distribution, not the same stream.

    Returns:
        int64 array ``[batch_size]`` of distinct nodes in order of first visit.

    Raises:
        ValueError: invalid arguments, fewer than ``B`` nodes reachable from the seed, or no
            ``B`` distinct nodes found within ``max_steps`` moves.
    """
    nb = _check_neighbors(neighbors)
    alpha = _validate(nb, seed_node, restart_prob, batch_size)
    if not isinstance(rng, np.random.Generator):
        rng = np.random.default_rng(rng)
    seed_node = int(seed_node)
    if max_steps is None:
        max_steps = max(10 ** 6, 2000 * batch_size)
    if engine not in ENGINES:
        raise ValueError(f"`engine` must be one of {ENGINES}, got {engine!r}.")
    if engine == "compiled" and _compiled_kernel is None:
        raise ValueError("`engine='compiled'` needs numba (pip install numba); use "
                         "engine='numpy' or 'auto'.")
    if engine != "numpy" and _compiled_kernel is not None:
        return _compiled_walk(nb, seed_node, alpha, batch_size, rng, max_steps,
                              _compiled_kernel)
    return _numpy_walk(nb, seed_node, alpha, batch_size, rng, max_steps)


def _numpy_walk(nb, seed_node, alpha, batch_size, rng, max_steps):
    """The vectorised excursions (module docstring): rounds of excursions until ``batch_size``
    distinct nodes are visited; the reachability and ``max_steps`` checks between rounds."""
    n, k = nb.shape
    flat = nb.ravel()
    mean_len = (1.0 - alpha) / alpha if alpha > 0 else math.inf
    target = int(1.25 * batch_size) + 8  # moves simulated in the first round
    rounds = 0
    parts = [np.array([seed_node], dtype=np.int64)]
    cont = None  # node from which an interrupted excursion continues
    total = 0
    checked = False
    got = 1
    while True:
        lengths, interrupted = _excursion_lengths(rng, alpha, mean_len, target, cont)
        seq, cont = _run_excursions(flat, k, seed_node, lengths, interrupted, cont, rng)
        if seq is not None:
            parts.append(seq)
        total += int(lengths.sum()) + lengths.shape[0]
        allv = np.concatenate(parts) if len(parts) > 1 else parts[0]
        distinct = _first_occurrences(allv, n)
        got = distinct.size
        if got >= batch_size:
            return distinct[:batch_size]
        parts = [distinct]  # compact the history to the distinct nodes in first-visit order
        rounds += 1
        if not checked and rounds >= 2:
            checked = True
            _check_reachable(nb, seed_node, batch_size)
        if total >= max_steps:
            _too_many_moves(seed_node, got, batch_size, total, alpha)
        # next round: aim at the missing nodes given the observed discovery rate
        rate = max(got / max(total, 1), 1e-3)
        target = int(min(max(1.5 * (batch_size - got) / rate, 32), 50 * batch_size))


def _excursion_lengths(rng, alpha, mean_len, target, cont):
    """One round's excursion lengths (moves each, int64 ``[e]``, about ``target`` moves in
    all) and whether the last one is interrupted at the round's depth cap (it then continues
    next round). ``cont``: the node an interrupted excursion of the last round continues from,
    or ``None``."""
    if math.isinf(mean_len):
        e = 1
        depth_cap = target
    else:
        e = max(1, int(math.ceil(target / max(mean_len, 1e-9))))
        # the longest of e geometric lengths is ~ mean * log(e); cap a bit above that
        depth_cap = max(16, int(math.ceil(3.0 * (mean_len + 1) * (1 + math.log(e)))))
    if math.isinf(mean_len):
        lengths = np.full(e, depth_cap, dtype=np.int64)
    else:
        lengths = rng.geometric(alpha, size=e).astype(np.int64) - 1
    if cont is not None:
        lengths[0] += 1  # remaining length of an interrupted excursion is >= 1 (memoryless)
    over = np.nonzero(lengths > depth_cap)[0]
    if over.size:  # truncate at the first over-long excursion; it continues next round
        j = int(over[0])
        lengths = lengths[: j + 1]
        lengths[j] = depth_cap
        return lengths, True
    return lengths, math.isinf(mean_len)


def _run_excursions(flat, k, seed_node, lengths, interrupted, cont, rng):
    """Advances all excursions of a round together (one gather per depth); returns their
    visited nodes, excursion-major then depth order (``None`` when no move was made), and
    the node the interrupted last excursion continues from next round (else ``None``)."""
    e = lengths.shape[0]
    d = int(lengths.max()) if e else 0
    if d <= 0:
        return None, None
    # longest excursions first: the active ones at depth t are a prefix, so each depth
    # is one gather over a shrinking prefix and only sum(lengths) random slots are drawn
    order = np.argsort(-lengths, kind="stable")
    ls = lengths[order]
    active = e - np.cumsum(np.bincount(ls, minlength=d + 1))[:d]
    offs = np.zeros(d + 1, dtype=np.int64)
    np.cumsum(active, out=offs[1:])
    slots = (rng.random(int(offs[-1])) * k).astype(np.intp)  # uniform neighbour slot
    cur = np.full(e, seed_node, dtype=np.int64)
    if cont is not None:
        cur[int(np.nonzero(order == 0)[0][0])] = cont
    path = np.empty((d, e), dtype=np.int64)
    for t in range(d):  # one gather per depth for all running excursions
        a = int(active[t])
        cur = flat[cur[:a] * k + slots[offs[t]:offs[t + 1]]]
        path[t, :a] = cur
    inv = np.empty(e, dtype=np.intp)
    inv[order] = np.arange(e)
    path = path[:, inv]  # back to excursion order
    valid = np.arange(d)[:, None] < lengths[None, :]
    seq = path.T[valid.T]  # excursion-major, then depth order
    return seq, (int(path[lengths[-1] - 1, e - 1]) if interrupted else None)


def python_random_walk_with_restart(neighbors, seed_node, restart_prob, batch_size, rng):
    """Literal, sequential Alg. 3 (reference for tests and benchmarks; no guard)."""
    nb = np.asarray(neighbors)
    k = nb.shape[1]
    out, seen = [], set()
    v = int(seed_node)
    while len(out) < batch_size:
        if v not in seen:
            seen.add(v)
            out.append(v)
        if rng.random() < restart_prob:
            v = int(seed_node)
        else:
            v = int(nb[v, int(rng.integers(k))])
    return np.array(out, dtype=np.int64)
