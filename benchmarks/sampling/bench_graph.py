"""BatchSampler benchmarks: ImageNet-scale proximity graph, GEMM-peak fraction, ScaNN kNN graph,
random-walk and pipeline throughput, shared-vs-per-node candidate statistics.

    python3 benchmarks/sampling/bench_graph.py [--repeats 3] [--skip-scann] [--n 1281167]

Prints a summary and writes ``benchmarks/results/sampling.json``.  Data: a 1000-class Gaussian
mixture in d = 128 (clustered like real embeddings; the top-k fallback rate and ScaNN recall
depend on the distribution).  The machine may be shared: wall times are reported for every
repeat together with process CPU time and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

from keras_hardneg.sampling import (BatchSampler, ProximityGraph, UniformSampler,  # noqa: E402
                                    batch_statistics, random_walk_with_restart)
from keras_hardneg.sampling import graph as G  # noqa: E402
from keras_hardneg.sampling.walk import python_random_walk_with_restart  # noqa: E402


def loadavg():
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def log(*a):
    print(*a, flush=True)


def gemm_peak(repeats=10):
    """Best-of fp32 GEMM rate (NumPy/OpenBLAS, all threads) on 2048^3 and on the build's block
    shape [256,128]x[128,1001]."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2048, 2048), dtype=np.float32)
    b = rng.standard_normal((2048, 2048), dtype=np.float32)
    a @ b
    best = 0.0
    for _ in range(repeats):
        t = time.perf_counter()
        a @ b
        best = max(best, 2 * 2048 ** 3 / (time.perf_counter() - t))
    q = rng.standard_normal((256, 128), dtype=np.float32)
    c = rng.standard_normal((1001, 128), dtype=np.float32)
    out = np.empty((256, 1001), np.float32)
    blk = 0.0
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(200):
            np.matmul(q, c.T, out=out)
        blk = max(blk, 200 * 2 * 256 * 1001 * 128 / (time.perf_counter() - t))
    return best / 1e9, blk / 1e9


def make_data(n, d, classes=1000, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((classes, d), dtype=np.float32)
    y = rng.integers(0, classes, n)
    x = centers[y]
    x += 1.5 * rng.standard_normal((n, d), dtype=np.float32)
    return x, y


def stage_breakdown(x, m, k, blocks=300):
    """Single-thread CPU time per stage of the block kernel (ms / block of 256)."""
    from threadpoolctl import threadpool_limits
    rng = np.random.default_rng(1)
    n, d = x.shape
    p = m + 1
    pools = G._draw_pools(rng, n, p, blocks)
    cand = np.empty((p, d), np.float32)
    s = np.empty((256, p), np.float32)
    keys = np.empty((256, p), np.int32)
    cols = np.arange(p, dtype=np.int32)
    bits = int(np.ceil(np.log2(p)))
    lm = np.int32((1 << bits) - 1)
    kth = p - k
    acc = {}

    def tick(name, t0):
        t1 = time.process_time()
        acc[name] = acc.get(name, 0.0) + t1 - t0
        return t1

    with threadpool_limits(1, user_api="blas"):
        for i in range(blocks):
            a = i * 256
            t = time.process_time()
            np.take(x, pools[i], axis=0, out=cand)
            t = tick("gather_pool", t)
            np.matmul(x[a:a + 256], cand.T, out=s)
            t = tick("gemm", t)
            np.bitwise_and(s.view(np.int32), ~lm, out=keys)
            keys |= cols
            t = tick("pack_keys", t)
            keys.partition(kth, axis=1)
            t = tick("partition", t)
            cut = keys[:, kth] >> bits
            below = keys[:, :kth].max(axis=1) >> bits
            np.nonzero((below == cut) | (keys[:, kth] < 0))
            t = tick("ambiguity_check", t)
            idx = (keys[:, kth:] & lm).astype(np.intp)
            v = np.take(s.reshape(-1), idx + (np.arange(256) * p)[:, None])
            key = (v.view(np.int32).astype(np.int64) << 32) | idx
            key.sort(axis=1)
            idx = (key[:, ::-1] & 0xFFFFFFFF).astype(np.intp)
            t = tick("sort_topk", t)
            pools[i][idx]
            tick("map_ids", t)
    return {k_: v / blocks * 1e3 for k_, v in acc.items()}


def plain_numpy_rate(x, m, k, blocks=200):
    """Reference 'plain NumPy' per-block pipeline (GEMM + argpartition + sort), 1 thread CPU
    time per block of 256."""
    from threadpoolctl import threadpool_limits
    rng = np.random.default_rng(2)
    n = x.shape[0]
    with threadpool_limits(1, user_api="blas"):
        t = time.process_time()
        for i in range(blocks):
            pool = rng.choice(n, m, replace=False)
            s = x[i * 256:(i + 1) * 256] @ x[pool].T
            idx = np.argpartition(s, m - k, axis=1)[:, m - k:]
            v = np.take_along_axis(s, idx, axis=1)
            idx = np.take_along_axis(idx, np.argsort(-v, axis=1), axis=1)
            pool[idx]
        return (time.process_time() - t) / blocks * 1e3


def bench_build(x, m, k, repeats, block_size=256, sort_neighbors=False):
    n, d = x.shape
    runs = []
    g = None
    for r in range(repeats):
        la = loadavg()
        c0 = time.process_time()
        t0 = time.perf_counter()
        g = ProximityGraph.build(x, m, k, backend="brute", seed=r, block_size=block_size,
                                 sort_neighbors=sort_neighbors)
        wall = time.perf_counter() - t0
        cpu = time.process_time() - c0
        runs.append({"wall_s": wall, "cpu_s": cpu, "loadavg_before": la})
        log(f"  build M={m} K={k} block={block_size} sort={sort_neighbors}: {wall:.2f} s wall, "
            f"{cpu:.2f} s CPU "
            f"(load {la})")
    return g, runs


def exact_topk(xn, rows, k, chunk=64):
    """Exact top-k neighbours (self excluded) of ``rows``, chunked to bound memory."""
    n = xn.shape[0]
    out = np.empty((len(rows), k), dtype=np.int64)
    for a in range(0, len(rows), chunk):
        r = rows[a:a + chunk]
        s = xn[r] @ xn.T
        s[np.arange(len(r)), r] = -np.inf
        out[a:a + len(r)] = np.argpartition(s, n - k, axis=1)[:, n - k:]
    return out


def scann_knn(x, k, sample_rows=1000, timed_queries=20000, leaves=(25, 100, None)):
    """ScaNN kNN graph at full N: index build on all rows (timed), then the search of
    ``timed_queries`` rows per setting (timed, extrapolated to all N queries) and recall@k of
    ``sample_rows`` random rows against exact brute force (self excluded)."""
    n = x.shape[0]
    xn = G.normalize_embeddings(x)
    t0 = time.perf_counter()
    c0 = time.process_time()
    searcher, info = G._scann_searcher(xn, k, {})
    build = time.perf_counter() - t0
    build_cpu = time.process_time() - c0
    log(f"  ScaNN index build: {build:.1f} s wall ({build_cpu:.1f} s CPU), {info}")
    rows = np.random.default_rng(0).choice(n, sample_rows, replace=False)
    exact = exact_topk(xn, rows, k)
    out = {"index_build_wall_s": build, "index_build_cpu_s": build_cpu, "settings": info,
           "k": k, "sample_rows": sample_rows, "timed_queries": timed_queries, "search": []}
    q = xn[:timed_queries]
    for lv in leaves:
        lv = lv or info["num_leaves_to_search"]
        t = time.perf_counter()
        searcher.search_batched_parallel(q, final_num_neighbors=k + 1, leaves_to_search=lv,
                                         batch_size=256)
        dt = time.perf_counter() - t
        idx, _ = searcher.search_batched(xn[rows], final_num_neighbors=k + 1,
                                         leaves_to_search=lv)
        got = G._drop_self(np.asarray(idx, dtype=np.int64), k)
        rec = float(np.mean([len(set(a) & set(b)) / k for a, b in
                             zip(got.tolist(), exact.tolist())]))
        est = build + dt * n / timed_queries
        out["search"].append({"leaves_to_search": lv, "search_s_for_timed_queries": dt,
                              "extrapolated_full_graph_s": est, "recall_at_k": rec})
        log(f"  leaves_to_search={lv}: {dt:.1f} s for {timed_queries} queries -> full kNN "
            f"graph ~{est:.0f} s; recall@{k} {rec:.3f}")
    return out


def scann_small(n=100_000, d=128, k=100):
    """Complete ProximityGraph.build(backend='scann') at N=100k (measured, not extrapolated)."""
    x, _ = make_data(n, d, classes=100, seed=3)
    t = time.perf_counter()
    g = ProximityGraph.build(x, n, k, backend="scann")
    wall = time.perf_counter() - t
    xn = G.normalize_embeddings(x)
    rows = np.random.default_rng(0).choice(n, 500, replace=False)
    ex = exact_topk(xn, rows, k)
    rec = float(np.mean([len(set(a) & set(b)) / k for a, b in
                         zip(g.neighbors[rows].tolist(), ex.tolist())]))
    log(f"  ScaNN kNN graph N={n} K={k}: {wall:.1f} s, recall@{k} {rec:.3f} ({g.info})")
    return {"N": n, "K": k, "wall_s": wall, "recall_at_k": rec, "settings": g.info}


def bench_walks(nb, batch_size=512, alphas=(0.2, 0.1, 0.05, 0.0), walks=300, py_walks=100):
    """Median time of one walk per engine (compiled, numpy), interleaved walk by walk, and of
    the literal Python loop."""
    rng = np.random.default_rng(0)
    n = nb.shape[0]
    seeds = rng.integers(0, n, walks)
    engines = ("compiled", "numpy")
    out = {}
    for a in alphas:
        for engine in engines:  # warm-up (and numba compilation)
            random_walk_with_restart(nb, int(seeds[0]), a, batch_size, rng, engine=engine)
        ts = {engine: [] for engine in engines}
        for i, s in enumerate(seeds):
            for engine in (engines if i % 2 else engines[::-1]):
                t = time.perf_counter()
                random_walk_with_restart(nb, int(s), a, batch_size, rng, engine=engine)
                ts[engine].append(time.perf_counter() - t)
        tp = []
        for s in seeds[:py_walks]:
            t = time.perf_counter()
            python_random_walk_with_restart(nb, int(s), a, batch_size, rng)
            tp.append(time.perf_counter() - t)
        out[str(a)] = {"compiled_median_ms": float(np.median(ts["compiled"]) * 1e3),
                       "compiled_p90_ms": float(np.percentile(ts["compiled"], 90) * 1e3),
                       "vectorised_median_ms": float(np.median(ts["numpy"]) * 1e3),
                       "vectorised_p90_ms": float(np.percentile(ts["numpy"], 90) * 1e3),
                       "python_median_ms": float(np.median(tp) * 1e3)}
        log(f"  walk B={batch_size} alpha={a}: compiled {np.median(ts['compiled'])*1e3:.3f} ms "
            f"(p90 {np.percentile(ts['compiled'], 90)*1e3:.3f}), numpy "
            f"{np.median(ts['numpy'])*1e3:.3f} ms (p90 {np.percentile(ts['numpy'], 90)*1e3:.3f}), "
            f"python {np.median(tp)*1e3:.3f} ms")
    return out


def bench_pipeline(nb, batch_size=512, steps=200):
    """BatchSampler.next_batch rate on the big graph, and make_dataset on CIFAR-size arrays."""
    s = BatchSampler(nb, batch_size, restart_prob=0.2, seed=0)
    s.next_batch()
    t = time.perf_counter()
    for _ in range(steps):
        s.next_batch()
    sampler_ms = (time.perf_counter() - t) / steps * 1e3
    from keras_hardneg.sampling import make_dataset
    n = 50_000
    imgs = np.random.default_rng(0).integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)
    labels = np.random.default_rng(0).integers(0, 10, n)
    x = imgs.reshape(n, -1)[:, :64].astype(np.float32)
    bs = BatchSampler(x, batch_size, num_candidates=500, num_neighbors=100, seed=0)
    ds = make_dataset(bs, imgs, labels=labels)
    it = iter(ds)
    for _ in range(5):
        next(it)
    t = time.perf_counter()
    for _ in range(steps):
        next(it)
    ds_ms = (time.perf_counter() - t) / steps * 1e3
    log(f"  BatchSampler.next_batch (N={nb.shape[0]}, B={batch_size}): {sampler_ms:.3f} ms; "
        f"make_dataset CIFAR-size in-memory: {ds_ms:.2f} ms/batch")
    return {"sampler_next_batch_ms": sampler_ms, "make_dataset_cifar_ms_per_batch": ds_ms,
            "batch_size": batch_size}


def shared_vs_per_node(n=20000, d=32, classes=100, m=1000, k=100, batch=256):
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(classes, d))
    y = rng.integers(0, classes, n)
    x = (centers[y] + 1.0 * rng.normal(size=(n, d))).astype(np.float32)
    xn = G.normalize_embeddings(x)
    res = {}
    for bsz in (1, 256):
        g = ProximityGraph.build(x, m, k, block_size=bsz, seed=1)
        indeg = np.bincount(g.neighbors.ravel(), minlength=n)
        s = BatchSampler(g, batch, restart_prob=0.2, seed=0)
        st = batch_statistics((s.next_batch() for _ in range(300)), x, y)
        s2 = BatchSampler(g, batch, restart_prob=0.2, seed=0)
        ep = sum(1 for _ in s2.epoch())
        res[f"block_{bsz}"] = {
            "neighbour_cosine": float(np.einsum("nd,nkd->nk", xn, xn[g.neighbors]).mean()),
            "batch_mean_cosine": st["mean_cosine"],
            "batch_false_negative_fraction": st["false_negative_fraction"],
            "in_degree_std": float(indeg.std()), "in_degree_zero_fraction":
                float((indeg == 0).mean()), "coverage_epoch_batches": ep,
            "nominal_steps_per_epoch": s.steps_per_epoch}
        log(f"  block_size={bsz}: {res[f'block_{bsz}']}")
    u = UniformSampler(n, batch, seed=0)
    res["uniform"] = batch_statistics((u.next_batch() for _ in range(300)), x, y)
    log(f"  uniform: {res['uniform']}")
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_281_167)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--m", type=int, default=1000)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-scann", action="store_true")
    ap.add_argument("--parts", default="all",
                    help="comma list of build,walk,pipeline,shared,scann (default all); results "
                         "are merged into an existing JSON")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "results",
                                                  "sampling.json"))
    args = ap.parse_args()
    parts = set(args.parts.split(",")) if args.parts != "all" else {
        "build", "walk", "pipeline", "shared", "scann"}
    if args.skip_scann:
        parts.discard("scann")
    res = {}
    if args.parts != "all" and os.path.exists(args.out):
        with open(args.out) as f:
            res = json.load(f)
    res.pop("command", None)
    res.setdefault("commands", []).append(" ".join(["python3"] + sys.argv))
    res["machine"] = {"cpus": len(os.sched_getaffinity(0)), "python": platform.python_version(),
                      "numpy": np.__version__, "loadavg_start": loadavg()}
    x = g = None
    if parts & {"build", "walk", "pipeline", "scann"}:
        log(f"data N={args.n} d={args.d} ...")
        x, y = make_data(args.n, args.d)
    if "build" in parts or "walk" in parts or "pipeline" in parts:
        log("GEMM peak ...")
        peak, blk = gemm_peak()
        res["gemm_peak_gflops"] = peak
        res["gemm_block_shape_gflops"] = blk
        log(f"  fp32 GEMM 2048^3: {peak:.1f} GFLOP/s; block shape: {blk:.1f} GFLOP/s")
    if "build" in parts:
        xn = G.normalize_embeddings(x)
        log("stage breakdown (1 thread) ...")
        res["stage_ms_per_block_1thread"] = stage_breakdown(xn, args.m, args.k)
        res["plain_numpy_ms_per_block_1thread"] = plain_numpy_rate(xn, args.m, args.k)
        del xn
        log(f"  {res['stage_ms_per_block_1thread']}; plain numpy "
            f"{res['plain_numpy_ms_per_block_1thread']:.3f} ms/block")
        log("proximity graph build ...")
        g, runs = bench_build(x, args.m, args.k, args.repeats)
        flops = 2.0 * args.n * (args.m + 1) * args.d
        best = min(r["wall_s"] for r in runs)
        res["build"] = {"N": args.n, "d": args.d, "M": args.m, "K": args.k, "runs": runs,
                        "best_wall_s": best, "median_wall_s": float(np.median(
                            [r["wall_s"] for r in runs])),
                        "gemm_flops": flops,
                        "achieved_gemm_gflops_best": flops / best / 1e9,
                        "fraction_of_gemm_peak_best": flops / best / 1e9 / peak,
                        "fraction_of_nominal_200_gflops": flops / best / 1e9 / 200.0,
                        "cpu_s_best": min(r["cpu_s"] for r in runs)}
        log(f"  best {best:.2f} s -> GEMM part at {flops / best / 1e9:.1f} GFLOP/s = "
            f"{flops / best / 1e9 / peak:.1%} of measured peak")
        _, sruns = bench_build(x, args.m, args.k, 1, sort_neighbors=True)
        res["build_sorted_neighbors"] = sruns
    if "walk" in parts or "pipeline" in parts:
        if g is None:
            g = ProximityGraph.build(x, args.m, args.k, seed=0)
        if "walk" in parts:
            log("walks ...")
            res["walk"] = bench_walks(g.neighbors)
        if "pipeline" in parts:
            log("pipeline ...")
            res["pipeline"] = bench_pipeline(g.neighbors)
    g = None
    if "shared" in parts:
        log("shared pools vs per-node candidates (N=20000) ...")
        res["shared_vs_per_node"] = shared_vs_per_node()
    if "scann" in parts:
        log("ScaNN kNN graph ...")
        res["scann_knn_full_n"] = scann_knn(x, args.k)
        res["scann_knn_100k"] = scann_small()
    res["machine"]["loadavg_end"] = loadavg()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=2, default=float)
    log(f"wrote {os.path.abspath(args.out)}")


if __name__ == "__main__":
    main()
