"""Is a proximity graph bit-identical when separate processes build it from the same
embeddings? (What several workers of one run do: docs/notes/sampling_workers.md.)

Each build runs in a fresh process (``python graph_determinism.py --child ...``); the parent
compares every graph with the first one: identical bytes, and the fraction of rows whose
neighbour set differs.

    python benchmarks/sampling/graph_determinism.py            # brute and ScaNN, N = 20000
"""

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile

import numpy as np


def embeddings(n, d=32, clusters=50):
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(clusters, d)) * 2
    return (centers[rng.integers(0, clusters, n)] + rng.normal(size=(n, d))).astype("float32")


def child(backend, threads, n, m, k, path):
    from keras_hardneg.sampling import ProximityGraph

    x = embeddings(n)
    if backend == "scann":
        g = ProximityGraph.build(x, n - 1, k, backend="scann", seed=3,
                                 scann_options={"num_threads": threads})
    else:
        g = ProximityGraph.build(x, m, k, backend="brute", seed=3, num_threads=threads)
    np.save(path, g.neighbors)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", nargs=6)
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--k", type=int, default=20)
    args = ap.parse_args()
    if args.child:
        b, t, n, m, k, path = args.child
        return child(b, int(t), int(n), int(m), int(k), path)
    n, k = args.n, args.k
    cases = [("brute", m, t) for m in (1000, n - 1) for t in (1, 2, 1)]
    cases += [("scann", n - 1, t) for t in (1, 1, 2)]
    with tempfile.TemporaryDirectory() as tmp:
        first = {}
        for i, (backend, m, threads) in enumerate(cases):
            path = os.path.join(tmp, f"{i}.npy")
            subprocess.run([sys.executable, __file__, "--child", backend, str(threads), str(n),
                            str(m), str(k), path], check=True, stderr=subprocess.DEVNULL,
                           timeout=900)
            nb = np.load(path)
            ref = first.setdefault((backend, m), nb)
            rows = float((np.sort(nb, 1) != np.sort(ref, 1)).any(axis=1).mean())
            digest = hashlib.sha256(nb.tobytes()).hexdigest()[:12]
            print(f"{backend:5s} N={n} M={m} K={k} threads={threads}: sha256 {digest}, "
                  f"rows differing from the first build: {rows:.4f}")


if __name__ == "__main__":
    main()
