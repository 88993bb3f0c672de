import time

import numpy as np
import pytest

from keras_hardneg.sampling import ProximityGraph, batch_statistics, BatchSampler
from keras_hardneg.sampling import graph as G

from .conftest import clustered


def _unit(x):
    x = np.asarray(x, np.float64)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _exact_knn_sims(x, k):
    xn = _unit(x)
    s = xn @ xn.T
    np.fill_diagonal(s, -np.inf)
    return -np.sort(-s, axis=1)[:, :k], s


def test_brute_knn_is_exact_top_k():
    x = np.random.default_rng(0).normal(size=(1500, 24))
    k = 12
    g = ProximityGraph.build(x, num_candidates=10 ** 9, num_neighbors=k, backend="brute",
                             sort_neighbors=True)
    assert g.num_candidates == 1499 and g.is_knn
    assert g.neighbors.shape == (1500, k) and g.neighbors.dtype == np.int32
    want, s = _exact_knn_sims(x, k)
    got = np.take_along_axis(s, g.neighbors.astype(int), axis=1)
    np.testing.assert_allclose(np.sort(got, 1), np.sort(want, 1), atol=1e-5)
    # sorted by decreasing similarity
    assert (np.diff(got, axis=1) <= 1e-5).all()


@pytest.mark.parametrize("case", ["normal", "negative", "ties"])
def test_packed_topk_kernel_is_exact(case):
    """The packed-int32 partition equals an exact top-K of each row's candidate pool,
    including rows that take the exact fallback (ties, non-positive K-th score)."""
    rng = np.random.default_rng(1)
    n, d, m, k = 3000, 8, 300, 40
    x = rng.normal(size=(n, d)).astype(np.float32)
    if case == "negative":  # most similarities negative: K-th score < 0 for many rows
        x[:1500] = np.abs(x[:1500])
        x[1500:] = -np.abs(x[1500:])
    if case == "ties":  # many duplicated embeddings -> exact ties
        x = x[rng.integers(0, 50, n)]
    xn = G.normalize_embeddings(x)
    kern = G._BlockKernel(xn, m, k, sort_neighbors=False)
    pools = G._draw_pools(rng, n, m + 1, 4)
    out = np.zeros((n, k), np.int32)
    for i in range(4):
        kern(i * 256, (i + 1) * 256, pools[i], out)
        pool = pools[i]
        s = xn[i * 256:(i + 1) * 256] @ xn[pool].T
        for r in range(256):
            node = i * 256 + r
            scores = s[r].copy()
            selfpos = np.nonzero(pool == node)[0]
            scores[selfpos[0] if selfpos.size else m] = -np.inf
            kth_val = np.sort(scores)[-k]
            got = (xn[node] @ xn[out[node]].T)
            assert node not in out[node]
            assert len(set(out[node].tolist())) == k
            assert set(out[node].tolist()) <= set(pool.tolist())
            assert got.min() >= kth_val - 1e-6
    if case != "normal":
        assert kern.fallback_rows > 0


def test_never_self_loop_and_no_duplicates():
    x = np.random.default_rng(2).normal(size=(700, 5))
    for m in (20, 300, 699):
        g = ProximityGraph.build(x, m, 10, seed=3)
        nb = g.neighbors
        assert not (nb == np.arange(700)[:, None]).any()
        assert all(len(set(r)) == 10 for r in nb.tolist())
        assert nb.min() >= 0 and nb.max() < 700


def test_neighbour_similarity_grows_with_num_candidates(data):
    x, _ = data
    xn = _unit(x)
    sims = []
    for m in (20, 100, 500, 1999):
        g = ProximityGraph.build(x, m, 10, seed=0)
        sims.append(np.einsum("nd,nkd->nk", xn, xn[g.neighbors]).mean())
    assert all(a < b for a, b in zip(sims, sims[1:])), sims


@pytest.mark.parametrize("kind", ["clustered", "gaussian"])
def test_scann_knn_recall(kind):
    pytest.importorskip("scann")
    if kind == "clustered":
        x = clustered(6000, 32, 50, 1.0, 4)[0]
    else:  # structureless data: the hardest case for partitioning, search more leaves
        x = np.random.default_rng(4).normal(size=(6000, 32)).astype(np.float32)
    k = 10
    opts = {"num_leaves_to_search": 40} if kind == "gaussian" else None
    g = ProximityGraph.build(x, 6000, k, backend="scann", scann_options=opts)
    assert g.backend == "scann" and g.neighbors.shape == (6000, k)
    assert not (g.neighbors == np.arange(6000)[:, None]).any()
    exact = ProximityGraph.build(x, 6000, k, backend="brute").neighbors
    rows = np.random.default_rng(0).choice(6000, 500, replace=False)
    recall = np.mean([len(set(a) & set(b)) / k for a, b in
                      zip(g.neighbors[rows].tolist(), exact[rows].tolist())])
    assert recall >= 0.9, recall


def test_auto_backend_rule():
    x = np.random.default_rng(0).normal(size=(300, 4))
    assert ProximityGraph.build(x, 50, 5).backend == "brute"
    assert ProximityGraph.build(x, 299, 5).backend == "brute"  # kNN but N <= 50000


def test_shared_pools_match_per_node_statistics():
    """Blocks of 256 nodes sharing a candidate pool give the same batch hardness and false
    negative rate (and neighbour similarity) as per-node candidate sets (Alg. 2 literally)."""
    x, y = clustered(n=6000, d=16, classes=30, noise=1.2, seed=5)
    xn = _unit(x)
    stats = {}
    for bs in (1, 256):
        g = ProximityGraph.build(x, 500, 50, block_size=bs, seed=1)
        s = BatchSampler(g, 128, restart_prob=0.2, seed=0)
        st = batch_statistics((s.next_batch() for _ in range(150)), x, y)
        st["nbr_sim"] = np.einsum("nd,nkd->nk", xn, xn[g.neighbors]).mean()
        stats[bs] = st
    a, b = stats[1], stats[256]
    assert abs(a["nbr_sim"] - b["nbr_sim"]) < 0.005
    assert abs(a["mean_cosine"] - b["mean_cosine"]) < 0.1 * a["mean_cosine"] + 0.01
    fa, fb = a["false_negative_fraction"], b["false_negative_fraction"]
    assert abs(fa - fb) < 0.15 * fa + 0.003


def test_balanced_pools():
    rng = np.random.default_rng(0)
    pools = G._draw_pools(rng, 10_000, 1001, 40)
    assert pools.shape == (40, 1001)
    assert all(len(set(p)) == 1001 for p in pools.tolist())
    counts = np.bincount(pools.ravel(), minlength=10_000)
    assert counts.max() - counts.min() <= 1


@pytest.mark.parametrize("kwargs,name", [
    (dict(num_candidates=10, num_neighbors=10), "num_neighbors"),
    (dict(num_candidates=10, num_neighbors=0), "num_neighbors"),
    (dict(num_candidates=0, num_neighbors=1), "num_candidates"),
    (dict(num_candidates=10, num_neighbors=2, backend="faiss"), "backend"),
    (dict(num_candidates=10, num_neighbors=2, block_size=512), "block_size"),
    (dict(num_candidates=10, num_neighbors=2, backend="scann"), "backend"),
])
def test_validation_names_parameter(kwargs, name):
    x = np.random.default_rng(0).normal(size=(100, 4))
    with pytest.raises(ValueError, match=name):
        ProximityGraph.build(x, **kwargs)


def test_validation_of_embeddings():
    with pytest.raises(ValueError, match="embeddings"):
        ProximityGraph.build(np.ones((1, 4)), 1, 1)  # N < 2
    with pytest.raises(ValueError, match="embeddings"):
        ProximityGraph.build(np.ones(10), 3, 1)  # rank 1
    x = np.random.default_rng(0).normal(size=(10, 3))
    x[3, 1] = np.nan
    with pytest.raises(ValueError, match="embeddings"):
        ProximityGraph.build(x, 5, 2)
    # num_candidates >= N means the kNN graph, clipped to N - 1
    g = ProximityGraph.build(np.random.default_rng(0).normal(size=(10, 3)), 50, 3)
    assert g.num_candidates == 9
    with pytest.raises(ValueError, match="num_neighbors"):
        ProximityGraph.build(np.random.default_rng(0).normal(size=(10, 3)), 50, 9)


def test_brute_build_is_fast_enough_small():
    x = np.random.default_rng(0).normal(size=(20_000, 32)).astype(np.float32)
    t = time.perf_counter()
    ProximityGraph.build(x, 1000, 100, seed=0)
    assert time.perf_counter() - t < 10
