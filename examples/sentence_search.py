"""
Title: Sentence search with a zoo sentence encoder and a ScaNN index
Shows: the zoo's sentence encoder (`simcse-minilm-ntxent-wiki`: all-MiniLM-L6-v2 after one
    epoch of unsupervised SimCSE; without the `[pretrained]` extra, the small Transformer
    `quickthought-ntxent-wiki`) embeds Wikipedia sentences (SimCSE's wiki1m, fetched
    once, or your own text files); a
    ScaNN index (tree + asymmetric hashing + exact re-ranking) answers nearest-neighbour
    queries; the top 5 of a few queries are printed, and the index's recall@10 is measured
    against exact (brute-force) search over the same embeddings.
Run time: 2 min 30 s (CPU 1 min 46 s) with the defaults (MiniLM, 4,000 sentences) on 2 CPU
    cores shared with another job's benchmarks; `--smoke` (tiny data) is what the test suite
    runs. Needs `tokenizers` (the [text] extra); MiniLM also needs `keras_hub` (the
    [pretrained] extra).

    python examples/sentence_search.py
    python examples/sentence_search.py --sentences 40000 --entry quickthought-ntxent-wiki
    python examples/sentence_search.py --corpus my_sentences.txt
    python examples/sentence_search.py --smoke
"""

import argparse
import importlib.util
import os
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # no C++ start-up log lines
import keras_hardneg as khn

HERE = os.path.dirname(os.path.abspath(__file__))
# In a clone the zoo is models/ beside examples/ (else $KERAS_HARDNEG_ZOO, or the cache).
CLONE_ZOO = os.path.join(HERE, "..", "models")
QUERIES = ["The city is the capital of the province.",
           "He played football for the national team.",
           "The album was released by a record label.",
           "The river flows into the sea."]

parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
parser.add_argument("--corpus", nargs="+", default=["wiki1m"],
                    help="text files, one sentence per line (default: wiki1m, SimCSE's "
                         "Wikipedia sentences, fetched once into ~/.keras/datasets)")
parser.add_argument("--entry", default=None, help="zoo entry (default: MiniLM if keras_hub "
                    "is installed, else quickthought-ntxent-wiki)")
parser.add_argument("--sentences", type=int, default=4000, help="how many to index")
parser.add_argument("--max-length", type=int, default=32, help="tokens per sentence")
parser.add_argument("--smoke", action="store_true", help="tiny settings: checks the example runs")
args = parser.parse_args()
if args.smoke:
    args.sentences = 300
    args.entry = args.entry or "quickthought-ntxent-wiki"
if args.sentences < 20:
    parser.error("--sentences must be >= 20")
if importlib.util.find_spec("tokenizers") is None:  # scann comes with keras-hardneg itself
    parser.exit(2, f"{parser.prog}: error: this example needs `tokenizers`: "
                   "pip install \"keras-hardneg[text]\" (in a clone: pip install -e \".[text]\")\n")
if args.entry is None:
    args.entry = ("simcse-minilm-ntxent-wiki" if importlib.util.find_spec("keras_hub")
                  else "quickthought-ntxent-wiki")
start_all = time.perf_counter()

"""
## The corpus

Sentences are read in file order (the first file first), deduplicated, and kept if they
have 5 to 60 words. `wiki1m` names SimCSE's million Wikipedia sentences
(`khn.data.public.sentence_corpus`: fetched once from the authors' Hugging Face dataset).
"""

with khn.data.fetch.exit_on_fetch_error(parser.prog):  # one line, not a traceback
    files = [khn.data.public.sentence_corpus(p) if p == "wiki1m" else p for p in args.corpus]
sentences, seen = [], set()
for path in files:
    with open(path, encoding="utf-8") as f:
        for line in f:
            s = line.strip()
            if 5 <= len(s.split()) <= 60 and s not in seen:
                seen.add(s)
                sentences.append(s)
            if len(sentences) == args.sentences:
                break
    if len(sentences) == args.sentences:
        break
print(f"{len(sentences)} sentences from {', '.join(os.path.basename(p) for p in files)}")

"""
## The encoder and its tokenizer

`khn.zoo.load` gives a `keras.Model` from token ids `[B, L]` to sentence embeddings; the
tokenizer that made its ids ships in the preset's `assets/`.
"""

from keras_hardneg.export.preset import TOKENIZER_ASSET  # noqa: E402

zoo = (CLONE_ZOO if khn.zoo.is_zoo_folder(CLONE_ZOO) and not os.environ.get(khn.zoo.ZOO_ENV)
       else None)
encoder = khn.zoo.load(args.entry, zoo=zoo)
tokenizer = khn.data.load_tokenizer(
    os.path.join(encoder.preset_metadata["path"], "assets", TOKENIZER_ASSET))


def embed(texts, batch_size=128):
    out = [np.asarray(encoder.predict(tokenizer.encode(texts[i:i + batch_size],
                                                       args.max_length), verbose=0))
           for i in range(0, len(texts), batch_size)]
    x = np.concatenate(out).astype("float32")
    return x / np.linalg.norm(x, axis=1, keepdims=True)  # cosine = dot product


t0 = time.perf_counter()
db = embed(sentences)
print(f"{args.entry}: {db.shape[1]}-d embeddings of {len(db)} sentences in "
      f"{time.perf_counter() - t0:.1f} s")

"""
## The ScaNN index

Partition the unit vectors into about sqrt(N) leaves, score candidates with asymmetric
hashing (2 dimensions per block), re-rank the best 100 exactly; a query searches a tenth
of the leaves.
"""

from scann import scann_ops_pybind  # noqa: E402  (imports TensorFlow)

leaves = max(2, int(np.sqrt(len(db))))
searcher = (scann_ops_pybind.builder(db, 10, "dot_product")
            .tree(num_leaves=leaves, num_leaves_to_search=max(1, leaves // 10),
                  training_sample_size=len(db))
            .score_ah(2, anisotropic_quantization_threshold=0.2)
            .reorder(100)
            .build())

"""
## Queries

The top 5 of a few queries (not in the corpus), then recall@10 of the index against
exact search, with 200 corpus sentences as queries (each query's own sentence excluded).
"""

queries = embed(QUERIES)
found, scores = searcher.search_batched(queries, final_num_neighbors=5)
for query, ids, sims in zip(QUERIES, found, scores):
    print(f"\nQ: {query}")
    for i, s in zip(ids, sims):
        print(f"  {s:.3f}  {sentences[i][:100]}")

probe = np.random.default_rng(0).choice(len(db), size=min(200, len(db)), replace=False)
approx, _ = searcher.search_batched(db[probe], final_num_neighbors=11)
sims = db[probe] @ db.T
sims[np.arange(len(probe)), probe] = -np.inf
exact = np.argsort(-sims, axis=1)[:, :10]
recall = np.mean([len(set(a[a != p][:10]) & set(e)) / 10
                  for a, e, p in zip(np.asarray(approx), exact, probe)])
print(f"\nRESULT ScaNN recall@10 {recall:.3f} against exact search over {len(db)} "
      f"sentences ({args.entry}, {time.perf_counter() - start_all:.0f} s)")
