"""Where does a BatchSampler epoch's extra time go?  An ablation at the r18 grid's settings.

The question: the r18 quality grid's BatchSampler runs took 1.07-1.09x the epoch time of
the same loss with uniform batches (seed-paired medians).  The answer (docs/benchmarks.md,
"What a BatchSampler step costs"): no part costs measurable time per step; the epoch ratio
came from 40 vs 39 steps per epoch and the machine's ±10 % fit-to-fit noise.

BatchSampler differs from uniform training in
three places, and this script switches them on one at a time, each as one continuous
``fit`` (the way the grid trains), so each step's cost can be pinned on one of them:

  A  ``uniform``        the grid's uniform feed: ``from_tensor_slices`` + shuffle + batch,
                        model without an embedding bank.
  B  ``uniform+bank``   the same batches carrying ``"index"``, model with
                        ``memory_bank_size=N`` (the bank write in every train step).
  C  ``sampler+bank``   BatchSampler batches through ``make_dataset`` (``from_generator``
                        over in-memory arrays), bank, no graph refresh.
  D  ``sampler+bank+refresh``  C plus ``GraphRefreshCallback`` (the grid's BatchSampler run).

Every variant starts from the same initial weights.  The variants run in the order
A B C D, then again D C B A, so a slow drift of the machine cancels in the pair means.
Per-step times are the gaps between consecutive ``on_train_batch_end`` calls (the data
wait is inside the step: Keras pulls the next element in its train function); the first
epoch of each fit (tracing) is excluded.  It also times each feed alone (elements per second
with no training), to see whether the input pipeline could ever starve the step.

    python benchmarks/sampling/bs_overhead.py --epochs 3 --output benchmarks/results/bs_overhead_r18.json
"""

import argparse
import gc
import json
import os
import time

import keras
import numpy as np
import tensorflow as tf

from keras_hardneg import run as runlib
from keras_hardneg.run import load_recipe

HERE = os.path.dirname(os.path.abspath(__file__))
VARIANTS = ("uniform", "uniform+bank", "sampler+bank", "sampler+bank+refresh")


class StepClock(keras.callbacks.Callback):
    """Wall-clock time of every training step, grouped by epoch."""

    def __init__(self):
        super().__init__()
        self.epochs = []

    def on_epoch_begin(self, epoch, logs=None):
        self.epochs.append([])
        self._last = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        now = time.perf_counter()
        self.epochs[-1].append(now - self._last)
        self._last = now


def _feed(variant, recipe, sampler_recipe, train):
    """(dataset, steps, callbacks, bank size) of one variant."""
    x, y = train
    n, b = len(x), recipe["batch_size"]
    if variant.startswith("uniform"):
        if variant == "uniform":
            ds, steps, cbs, _ = runlib.make_train_feed(recipe, x, y)
            return ds, steps, cbs, None
        feats = {"images": x.astype("float32"), "index": np.arange(n, dtype="int64")}
        ds = tf.data.Dataset.from_tensor_slices((feats, y))
        ds = ds.shuffle(n, seed=recipe["seed"], reshuffle_each_iteration=True)
        ds = ds.batch(b, drop_remainder=True).prefetch(tf.data.AUTOTUNE).repeat()
        return ds, n // b, [], n
    ds, steps, cbs, _ = runlib.make_train_feed(sampler_recipe, x, y)
    return ds, steps, (cbs if variant.endswith("refresh") else []), n


def _feed_rate(ds, steps):
    it = iter(ds)
    next(it)
    t0 = time.perf_counter()
    for _ in range(steps):
        next(it)
    return steps / (time.perf_counter() - t0)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--per-class", type=int, default=1000)
    p.add_argument("--epochs", type=int, default=3, help="epochs per fit (the first is not timed)")
    p.add_argument("--grid-result", default=os.path.join(
        HERE, "..", "results", "quality_r18", "simclr-nt_xent-batchsampler-s0.json"),
        help="a stored r18 grid result whose recipe is used")
    p.add_argument("--output", default=os.path.join(HERE, "..", "results", "bs_overhead_r18.json"))
    args = p.parse_args()
    if args.epochs < 2:
        p.error("--epochs must be >= 2 (the first epoch of each fit holds tracing)")

    # The grid's own recipe (NT-Xent, BatchSampler, seed 0), with only the epochs changed.
    with open(args.grid_result) as f:
        base = json.load(f)["recipe"]
    base = {**base, "epochs": args.epochs, "name": "bs_overhead",
            "evaluation": {**base["evaluation"], "monitor_every": 0, "linear_probe": False}}
    base["data"] = {**base["data"], "limit_per_class": args.per_class, "test_limit_per_class": 10}
    uniform = {**base, "sampler": {"name": "uniform"}}
    keras.config.set_dtype_policy(base["precision"])
    recipe = load_recipe(uniform)
    train, _, desc = runlib.load_data(recipe)
    sampler_recipe = load_recipe(base)

    out = {"command": "python benchmarks/sampling/bs_overhead.py " + " ".join(
        f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k != "output"),
        "data": desc, "variants": {v: {"step_seconds": [], "epoch_seconds": []} for v in VARIANTS}}
    for variant in VARIANTS:
        ds, steps, _, _ = _feed(variant, recipe, sampler_recipe, train)
        out["variants"][variant]["feed_elements_per_second"] = _feed_rate(ds, 2 * steps)
        print(f"feed {variant:22s} {out['variants'][variant]['feed_elements_per_second']:6.1f} "
              "elements/s", flush=True)
    for variant in VARIANTS + VARIANTS[::-1]:
        # A fresh graph for every fit: in a first run without this, the same variant ran
        # 6-37 % slower in the second pass than in the first (process ageing; with it, 7-11 %).
        keras.backend.clear_session()  # also resets the dtype policy: set it again
        keras.config.set_dtype_policy(base["precision"])
        gc.collect()
        ds, steps, cbs, bank = _feed(variant, recipe, sampler_recipe, train)
        # build_model seeds itself: every variant starts from the same weights; the
        # BatchSampler recipe gives the model its [N, d] embedding bank.
        model = runlib.build_model(load_recipe(base) if bank else recipe,
                                     train[0].shape[1:], num_examples=len(train[0]))
        clock = StepClock()
        model.fit(ds, epochs=args.epochs, steps_per_epoch=steps, callbacks=cbs + [clock],
                  verbose=0)
        rec = out["variants"][variant]
        timed = [s for e in clock.epochs[1:] for s in e]
        rec["step_seconds"].append(timed)
        rec["epoch_seconds"].append([sum(e) for e in clock.epochs])
        print(f"fit  {variant:22s} epochs {' '.join(f'{sum(e):5.1f}' for e in clock.epochs)} s"
              f"  median step {np.median(timed) * 1000:6.1f} ms", flush=True)
    ref = np.median([s for run in out["variants"]["uniform"]["step_seconds"] for s in run])
    for variant, rec in out["variants"].items():
        steps_all = [s for run in rec["step_seconds"] for s in run]
        rec["median_step_seconds"] = float(np.median(steps_all))
        rec["p90_step_seconds"] = float(np.percentile(steps_all, 90))
        rec["median_step_vs_uniform"] = float(np.median(steps_all) / ref)
        print(f"{variant:22s} median step {rec['median_step_seconds'] * 1000:6.1f} ms "
              f"({rec['median_step_vs_uniform']:.3f}x)  p90 {rec['p90_step_seconds'] * 1000:6.1f} ms")
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
