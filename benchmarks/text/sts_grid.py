"""The sentence benchmark grid of issue 17: unsupervised SimCSE-style training of the
library's small Transformer with the loss family and BatchSampler, evaluated on STS12-16,
STS-B and SICK-R (Spearman x 100, SimCSE's "all" setting) and SentEval.

Training corpus: the Wikipedia sentences of ``../shared/data/text`` (``corpus/
wiki1m_prefix.txt`` then ``corpus/extra/{gensim_wiki,wikisplit,gap_wiki}.txt``, in that
order, the first ``--sentences`` of them), written once to
``benchmarks/work/text/wiki_corpus.txt``. No evaluation set's sentences are in it (the
corpus README: the 4 exact matches were removed). Tokenizer: byte-level BPE trained on that
file (the ``text_file`` default), encoder trained from scratch.

Grid: {NT-Xent (SimCSE), debiased, hard, UnReMix, Ring} x {uniform, BatchSampler (M=1000,
K=500 as the paper's SimCSE setting)} x seeds 0-2, plus baselines per seed: the average of
the encoder's initial token embeddings, and the untrained encoder.

Each run goes through ``keras_hardneg.run.train`` (the path of ``keras-hardneg train
--dataset FILE.txt``) and writes ``benchmarks/results/text/<run-id>.json``; finished runs
are skipped (resumable; lock files let two workers share the grid).

Usage::

    python benchmarks/text/sts_grid.py                 # the grid
    python benchmarks/text/sts_grid.py --baselines     # the two baselines
    python benchmarks/text/sts_grid.py --list
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))
from grid import list_grid, run_grid, write_result  # noqa: E402  (the grids' shared loop)

TEXT = os.path.normpath(os.path.join(REPO, "..", "shared", "data", "text"))
RESULTS = os.path.join(REPO, "benchmarks", "results", "text")
WORK = os.path.join(REPO, "benchmarks", "work", "text")
CORPUS_FILES = ("corpus/wiki1m_prefix.txt", "corpus/extra/gensim_wiki.txt",
                "corpus/extra/wikisplit.txt", "corpus/extra/gap_wiki.txt")

# SimCSE's temperature 0.05 for every loss; tau_plus 0.1 (HCL's default class prior).
LOSSES = {
    "nt_xent": {"name": "nt_xent", "temperature": 0.05},
    "debiased": {"name": "debiased", "temperature": 0.05, "tau_plus": 0.1},
    "hard": {"name": "hard", "temperature": 0.05, "tau_plus": 0.1, "beta": 1.0},
    "unremix": {"name": "unremix", "temperature": 0.05, "tau_plus": 0.1},
    "ring": {"name": "ring", "temperature": 0.05},
}
SAMPLERS = {
    "uniform": {"name": "uniform"},
    "batchsampler": {"name": "batchsampler", "num_candidates": 1000, "num_neighbors": 500},
}


def corpus(num_sentences: int) -> str:
    """Writes (once) and returns the training corpus file of ``num_sentences`` lines."""
    path = os.path.join(WORK, f"wiki_corpus_{num_sentences}.txt")
    if os.path.exists(path):
        return path
    os.makedirs(WORK, exist_ok=True)
    lines = []
    for name in CORPUS_FILES:
        with open(os.path.join(TEXT, name), encoding="utf-8") as f:
            lines += [line.strip() for line in f if line.strip()]
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("\n".join(lines[:num_sentences]) + "\n")
    os.replace(tmp, path)
    return path


def base_recipe(args, seed: int) -> dict:
    recipe = {
        "data": {"name": "text_file", "path": corpus(args.sentences)},
        "evaluation": {"benchmark_dir": TEXT, "senteval": True},
        "epochs": args.epochs,
        "seed": seed,
    }
    if args.rezero:
        recipe["encoder"] = {"name": "transformer", "rezero": True}
    if args.views == "quick_thought":
        recipe["augmentation"] = {"name": "quick_thought"}
        recipe["data"]["pairs"] = "adjacent"
    return recipe


def variant(args) -> str:
    """The run-id prefix of the encoder start and views (``simcse`` = the default recipe)."""
    name = "simcse" if args.views == "simcse" else "qt"
    return name + ("_rezero" if args.rezero else "")


def grid(args) -> list[tuple[str, dict]]:
    runs = []
    for seed in args.seeds:  # seed-major: a grid cut short still covers every cell
        for loss in args.losses:
            for sampler in args.samplers:
                rid = f"{variant(args)}__{loss}__{sampler}__s{seed}"
                recipe = base_recipe(args, seed)
                recipe.update(name=rid, loss=dict(LOSSES[loss]), sampler=dict(SAMPLERS[sampler]))
                if sampler == "batchsampler":
                    # The graph is built once an epoch, as in the paper (SimCSE: one epoch,
                    # one graph).
                    recipe["sampler"]["refresh_every"] = args.sentences // 64
                runs.append((rid, recipe))
    return runs


def run_one(rid: str, recipe: dict) -> dict:
    from keras_hardneg import run

    start = time.perf_counter()
    out = run.train(recipe, os.path.join(WORK, rid), verbose=0, export=False)
    return {"id": rid, "recipe": run.load_recipe(recipe), "sts": out.get("sts"),
            "senteval": out.get("senteval"), "final_loss": out["history"]["loss"][-1],
            "epochs_run": out["epochs_run"], "train_seconds": out["seconds"],
            "total_seconds": time.perf_counter() - start}


def baselines(args, seed: int) -> dict:
    """STS/SentEval of the initial token embeddings averaged, and of the untrained encoder."""
    import keras
    from keras_hardneg import run
    from keras_hardneg.encoders.text_transformer import mean_embedding_encoder
    from keras_hardneg.modalities.text import evaluate_sentences, sentence_embedder

    recipe = run.load_recipe(base_recipe(args, seed))
    (x, _), _, _ = run.load_data(recipe)
    model = run.build_model(recipe, x_train=x)
    length = x.shape[-1]
    out = {}
    for name, encoder in (("initial_token_average", mean_embedding_encoder(model.encoder)),
                          ("untrained_encoder", model.encoder)):
        start = time.perf_counter()
        embed = sentence_embedder(encoder, x.tokenizer, length)
        out[name] = evaluate_sentences(embed, TEXT, senteval=True, seed=seed)
        out[name]["seconds"] = time.perf_counter() - start
    keras.backend.clear_session()
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sentences", type=int, default=11914,
                   help="training sentences (the first N of the Wikipedia corpus)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--losses", nargs="*", default=list(LOSSES))
    p.add_argument("--samplers", nargs="*", default=list(SAMPLERS))
    p.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    p.add_argument("--views", choices=("simcse", "quick_thought"), default="simcse",
                   help="dropout views (SimCSE) or adjacent sentences (quick-thought)")
    p.add_argument("--rezero", action="store_true",
                   help="ReZero encoder: starts as the bag-of-tokens baseline")
    p.add_argument("--baselines", action="store_true")
    p.add_argument("--reverse", action="store_true")
    p.add_argument("--list", action="store_true")
    args = p.parse_args(argv)
    if not os.path.isdir(TEXT):
        print(f"no text data at {TEXT}", file=sys.stderr)
        return 2
    os.makedirs(RESULTS, exist_ok=True)
    os.makedirs(WORK, exist_ok=True)
    if args.baselines:
        for seed in args.seeds:
            target = os.path.join(RESULTS, f"baselines_{variant(args)}__s{seed}.json")
            if not os.path.exists(target):
                write_result(target, baselines(args, seed))
                print(f"baselines seed {seed} written", flush=True)
        return 0
    runs = grid(args)
    if args.reverse:
        runs = runs[::-1]
    if args.list:
        list_grid(runs, RESULTS)
        return 0
    return run_grid(runs, RESULTS, WORK, run_one, lambda r: (
        f"{r['id']}: STS avg {r['sts']['avg']:.2f} ({r['total_seconds']:.0f} s)"))


if __name__ == "__main__":
    sys.exit(main())
