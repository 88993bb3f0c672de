"""Uniform vs kNN vs BatchSampler batches for SimCLR on CIFAR-10 JPEG (issue 8).

Same data slice, same initial weights, same loss; the three samplers train side by side,
one epoch each in turn (the order rotates every epoch), so their step rates are compared
under the same machine load. Graph refreshes are inside the timed epochs. Reports steps/s
(epochs after the first, which holds tracing), the ratio to uniform, the final weighted kNN
accuracy and the mean false-negative rate of the batches (same-class share of each anchor's
in-batch negatives), and writes JSON.

    python benchmarks/sampling/cifar_samplers.py --per-class 500 --epochs 4 \
        --output benchmarks/results/cifar_samplers.json

At the quality grid's r18 settings (uniform vs BatchSampler only):

    python benchmarks/sampling/cifar_samplers.py --per-class 1000 --width 16 --epochs 5 \
        --refresh-every 19 --precision mixed_bfloat16 --projection-dims 512,128 \
        --samplers uniform,batchsampler --output benchmarks/results/cifar_samplers_r18.json

Note: the GraphRefreshCallback's step counter restarts with every `fit` call here (one per
epoch), so the restart-probability schedule restarts each epoch: a cost benchmark, not a
faithful long run.
"""

import argparse
import json
import os
import time

import keras
import numpy as np

from keras_hardneg import run as runlib
from keras_hardneg.run import load_recipe

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "data", "cifar10-jpg"))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--per-class", type=int, default=500)
    p.add_argument("--test-per-class", type=int, default=200)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--width", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--refresh-every", type=int, default=10)
    p.add_argument("--projection-dims", default="128,64")
    p.add_argument("--precision", default="float32",
                   choices=("float32", "mixed_bfloat16", "mixed_float16"))
    p.add_argument("--samplers", default="uniform,knn,batchsampler",
                   help="comma-separated subset of uniform, knn, batchsampler")
    p.add_argument("--output", default=os.path.join(HERE, "..", "results", "cifar_samplers.json"))
    args = p.parse_args()

    base = {
        "encoder": {"name": "resnet18_cifar", "width": args.width},
        "projection_dims": [int(v) for v in args.projection_dims.split(",")],
        "loss": {"name": "hard", "temperature": 0.5, "tau_plus": 0.1, "beta": 1.0},
        "data": {"name": "image_folder", "train": f"{DATA}/train", "test": f"{DATA}/test",
                 "image_size": 32, "limit_per_class": args.per_class,
                 "test_limit_per_class": args.test_per_class},
        "batch_size": args.batch_size, "epochs": args.epochs, "seed": 0,
        "precision": args.precision,
        "schedule": {"name": "constant"},
        "evaluation": {"monitor_every": 0, "linear_probe": False, "knn_k": 200,
                       "knn_temperature": 0.1},
    }
    samplers = {
        "uniform": {"name": "uniform"},
        "knn": {"name": "knn", "num_candidates": 500, "num_neighbors": 100,
                "refresh_every": args.refresh_every},
        "batchsampler": {"name": "batchsampler", "num_candidates": 500, "num_neighbors": 100,
                         "refresh_every": args.refresh_every, "restart_prob": [0.2, 0.05]},
    }
    wanted = args.samplers.split(",")
    unknown = sorted(set(wanted) - set(samplers))
    if unknown or "uniform" not in wanted:
        p.error(f"--samplers: unknown {unknown}; choose from {sorted(samplers)} and keep "
                "'uniform' (the reference)")
    samplers = {k: v for k, v in samplers.items() if k in wanted}
    keras.config.set_dtype_policy(args.precision)  # build_model leaves the policy to the caller
    recipe0 = load_recipe(base)
    train, test, desc = runlib.load_data(recipe0)
    runs = {}
    for name, spec in samplers.items():
        recipe = load_recipe({**base, "sampler": spec})
        keras.utils.set_random_seed(0)
        ds, steps, cbs, sampler = runlib.make_train_feed(recipe, *train)
        model = runlib.build_model(recipe, train[0].shape[1:], num_examples=len(train[0]))
        runs[name] = {"model": model, "ds": ds, "steps": steps, "cbs": cbs, "seconds": [],
                      "fn": [], "cos": [], "sampler": sampler}
    steps = runs["uniform"]["steps"]
    names = list(runs)
    for epoch in range(args.epochs):
        order = names[epoch % len(names):] + names[:epoch % len(names)]
        for name in order:
            r = runs[name]
            start = time.perf_counter()
            h = r["model"].fit(r["ds"], initial_epoch=epoch, epochs=epoch + 1, steps_per_epoch=steps,
                               callbacks=r["cbs"], verbose=0, shuffle=False)
            r["seconds"].append(time.perf_counter() - start)
            r["fn"].append(float(h.history["false_negative_rate"][-1]))
            r["cos"].append(float(h.history["negative_cosine"][-1]))
            print(f"epoch {epoch} {name:12s} {r['seconds'][-1]:7.1f} s  "
                  f"FN {r['fn'][-1]:.3f}  neg cos {r['cos'][-1]:.3f}", flush=True)
    out = {"command": "python benchmarks/sampling/cifar_samplers.py " + " ".join(
        f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k != "output"),
        "data": desc, "steps_per_epoch": steps, "samplers": {}}
    for name, r in runs.items():
        timed = r["seconds"][1:] or r["seconds"]
        acc = runlib.evaluate_encoder(r["model"].encoder, train, test, linear_probe=False)
        # The sampler's own costs, from the run: graph rebuilds timed by the refresh callback
        # (reading the embedding bank + build + hand-over), and one epoch of batches drawn
        # after training (the walks; uniform: a permutation slice).
        refreshes = [x["seconds"] for cb in r["cbs"] for x in getattr(cb, "refreshes", [])
                     if x and x.get("seconds") is not None]
        sampler_cost = None
        if r["sampler"] is not None and hasattr(r["sampler"], "next_batch"):
            t0 = time.perf_counter()
            for _ in range(steps):
                r["sampler"].next_batch()
            sampler_cost = (time.perf_counter() - t0) / steps
        out["samplers"][name] = {
            "graph_refresh_seconds": refreshes,
            "next_batch_seconds": sampler_cost,
            "epoch_seconds": r["seconds"],
            "steps_per_second": steps * len(timed) / sum(timed),
            "false_negative_rate_per_epoch": r["fn"],
            "mean_negative_cosine_per_epoch": r["cos"],
            "knn_accuracy": acc["knn_accuracy"],
        }
    uni = out["samplers"]["uniform"]["steps_per_second"]
    for name, r in out["samplers"].items():
        r["steps_per_second_vs_uniform"] = r["steps_per_second"] / uni
        print(f"{name:12s} steps/s {r['steps_per_second']:.3f} ({r['steps_per_second_vs_uniform']:.3f}x)"
              f"  kNN {r['knn_accuracy']:.4f}  FN {np.mean(r['false_negative_rate_per_epoch']):.3f}")
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
