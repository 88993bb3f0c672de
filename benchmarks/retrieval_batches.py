"""Duplicate-free batches of SciFact's training tuples: what packing leaves out, and how hard
the in-batch negatives are in uniform and in BatchSampler walk order.

    nice -n 10 python benchmarks/retrieval_batches.py

Needs the zero-shot all-MiniLM-L6-v2 embeddings of the SciFact corpus and train queries in
the cache that ``benchmarks/retrieval_zero_shot.py --mine train`` fills (default
``/tmp/khn_retrieval_cache``; nothing is encoded here). Tuples: the shared protocol's mined
recipe (``num_negatives=1``, ``relative_margin=0.05``, ``sampling_strategy="top"``,
``range_max=50``) and the in-batch recipe (the qrels pairs, ``K = 0``); ``B = 32``.
Per order, over ``--epochs`` epochs: tuples placed / left out / repeated per epoch, tuples
carried, extra packings, packing time, and the in-batch negatives' hardness: for each query
the cosine of the most similar document of the *other* tuples of its batch (mean over
queries, and the share of queries for which it beats the query's own mined negative).
The walk is BatchSampler's default (``K = 100`` neighbours, ``restart_prob=0.2``) and, for
``--num-neighbors``, sparser graphs. Writes ``benchmarks/results/retrieval/batches_scifact_train.json``.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "retrieval")
SCIFACT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..",
                       "shared", "data", "retrieval", "scifact")


class _Cached:
    """Stands for the encoder when every batch is in the cache (it is never called)."""

    output_shape = (None, 384)

    def __call__(self, *args, **kwargs):
        raise SystemExit("an embedding is missing from the cache: run "
                         "benchmarks/retrieval_zero_shot.py --mine train first")


def _embeddings(texts, tokenizer, cache, part):
    from retrieval_zero_shot import encode

    folders = glob.glob(os.path.join(cache, f"scifact_{part}_*"))
    if len(folders) != 1:
        raise SystemExit(f"no single cache folder scifact_{part}_* under {cache}: run "
                         "benchmarks/retrieval_zero_shot.py --mine train first")
    emb, _ = encode(texts, _Cached(), tokenizer, 256, 32, part, folders[0])
    return emb / np.linalg.norm(emb, axis=1, keepdims=True)


def _hardness(batches, tuples, q_emb, d_emb):
    """(mean over queries of the best other-tuple document cosine in its batch, share of
    queries whose best in-batch negative beats their own mined negative)."""
    q, p, n = tuples
    best, beats = [], []
    for b in batches:
        docs = np.concatenate([p[b][:, None], n[b]], axis=1).ravel()  # tuple-major
        owner = np.repeat(np.arange(len(b)), 1 + n.shape[1])
        scores = q_emb[q[b]] @ d_emb[docs].T
        scores[owner[None, :] == np.arange(len(b))[:, None]] = -np.inf
        top = scores.max(axis=1)
        best.extend(top.tolist())
        if n.shape[1]:
            own = np.einsum("bd,bd->b", q_emb[q[b]], d_emb[n[b, 0]])
            beats.extend((top > own).tolist())
    return float(np.mean(best)), (float(np.mean(beats)) if beats else None)


def _measure(make, tuples, q_emb, d_emb, epochs):
    rows = []
    for _ in range(epochs):
        t0 = time.perf_counter()
        batches = make.epoch_batches()
        seconds = time.perf_counter() - t0
        hard, beats = _hardness(batches, tuples, q_emb, d_emb)
        rows.append({**make.last_epoch, "seconds": seconds, "in_batch_best_cosine": hard,
                     "in_batch_beats_mined": beats})
    keys = rows[0].keys()
    return {k: (float(np.mean([r[k] for r in rows])) if rows[0][k] is not None else None)
            for k in keys}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=SCIFACT)
    parser.add_argument("--cache", default="/tmp/khn_retrieval_cache")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--num-neighbors", type=int, nargs="*", default=[10, 3],
                        help="also the walk on positives with these graph K (default 100)")
    args = parser.parse_args(argv)

    from keras_hardneg.data import pretrained_tokenizer
    from keras_hardneg.data.retrieval import load_beir
    from keras_hardneg.sampling import (TupleBatches, TupleBatchSampler,
                                        mine_hard_negatives)
    from retrieval_zero_shot import minilm_folder

    split = load_beir(args.data, "train")
    tokenizer = pretrained_tokenizer(minilm_folder())
    d_emb = _embeddings(split.corpus.documents(), tokenizer, args.cache, "corpus")
    q_emb = _embeddings(list(split.queries.texts), tokenizer, args.cache, "queries_train")
    mined = mine_hard_negatives(q_emb, d_emb, split.positives(), num_negatives=1,
                                relative_margin=0.05, sampling_strategy="top", range_max=50)
    pairs = split.pairs()
    recipes = {"mined_k1": (mined.query, mined.positive, mined.negatives),
               "pairs_k0": (pairs[:, 0], pairs[:, 1])}
    result = {"data": "scifact train", "batch_size": args.batch_size, "epochs": args.epochs,
              "mined_tuples": len(mined), "queries_without_tuple":
              mined.summary.short + mined.summary.without_positive, "pairs": len(pairs)}
    b = args.batch_size
    for name, tuples in recipes.items():
        arrays = TupleBatches(tuples, b).tuples
        orders = {
            "uniform": TupleBatches(tuples, b, seed=0),
            "walk_positives": TupleBatchSampler(tuples, b, embeddings=d_emb, seed=0),
            "walk_queries": TupleBatchSampler(tuples, b, embeddings=q_emb, on="queries",
                                              seed=0),
        }
        for k in args.num_neighbors:
            orders[f"walk_positives_k{k}"] = TupleBatchSampler(
                tuples, b, embeddings=d_emb, num_neighbors=k, seed=0)
        result[name] = {"tuples": len(arrays[0]), "steps_per_epoch": orders["uniform"]
                        .steps_per_epoch}
        for order, make in orders.items():
            result[name][order] = _measure(make, arrays, q_emb, d_emb, args.epochs)
            print(name, order, json.dumps(result[name][order]), flush=True)
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "batches_scifact_train.json"), "w") as f:
        json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main()
