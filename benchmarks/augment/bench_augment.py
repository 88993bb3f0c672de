"""Where does SimCLR augmentation run fastest on this CPU? (CIFAR-size, batch 256, two views)

Modes (each draws two views of every image with keras_hardneg's SimCLRAugmentation):
  graph          -- ``tf.function(aug.two_views)`` on a [256, 32, 32, 3] batch, as inside a
                    model's ``train_step``.
  data_batched   -- ``tf.data``: ``.batch(256).map(two_views, num_parallel_calls=AUTOTUNE)``.
  data_unbatched -- ``tf.data``: per-image ``.map(two views, num_parallel_calls=AUTOTUNE)``
                    then ``.batch(256)``.
  jax_jit        -- ``KERAS_BACKEND=jax`` only: ``jax.jit`` of ``aug.stateless_call`` (two
                    views, seed state threaded through), as inside Keras's JAX train step.
The TF modes run under the TensorFlow backend (the default); ``--modes jax_jit`` needs
``KERAS_BACKEND=jax``.
Reports images/s (= pairs/s: each image gives one pair of views), median over repeats.

Usage:
    python3 benchmarks/augment/bench_augment.py --batches 20 --repeats 3 \
        --output benchmarks/results/augment.json
"""

import argparse
import json
import os
import platform
import statistics
import sys
import time

import keras
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from keras_hardneg.augment import simclr_augmentation  # noqa: E402


def _time_dataset(ds, batches):
    it = iter(ds)
    next(it)                                   # warm-up: trace + first batch
    t0 = time.perf_counter()
    for _ in range(batches):
        v1, _ = next(it)
    v1.numpy()
    return time.perf_counter() - t0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--size", type=int, default=32)
    p.add_argument("--batches", type=int, default=20)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--version", default="v1")
    p.add_argument("--blur-prob", type=float, default=None)
    p.add_argument("--modes", default="graph,data_batched,data_unbatched")
    p.add_argument("--output", default="benchmarks/results/augment.json")
    args = p.parse_args()

    aug = simclr_augmentation(args.size, version=args.version, seed=0, blur_prob=args.blur_prob)
    n = args.batch * (args.batches + 1)
    images = np.random.default_rng(0).random((n, args.size, args.size, 3)).astype("float32")
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf
        auto = tf.data.AUTOTUNE
        base = tf.data.Dataset.from_tensor_slices(images).repeat()

    def jax_jit():
        import jax

        def step(state, x):
            out1, state = aug.stateless_call([], state, x, training=True, view=1)
            out2, state = aug.stateless_call([], state, x, training=True, view=2)
            return out1, out2, state

        f = jax.jit(step)
        state = [v.value for v in aug.non_trainable_variables]
        batch = jax.numpy.asarray(images[: args.batch])
        v1, _, state = f(state, batch)
        v1.block_until_ready()
        t0 = time.perf_counter()
        for _ in range(args.batches):
            v1, _, state = f(state, batch)
        v1.block_until_ready()
        return time.perf_counter() - t0

    def graph_mode():
        f = tf.function(lambda x: aug.two_views(x, training=True))
        batch = tf.constant(images[: args.batch])
        f(batch)[0].numpy()
        t0 = time.perf_counter()
        for _ in range(args.batches):
            v1, _ = f(batch)
        v1.numpy()
        return time.perf_counter() - t0

    def data_batched():
        ds = base.batch(args.batch, drop_remainder=True).map(
            lambda x: aug.two_views(x, training=True), num_parallel_calls=auto).prefetch(auto)
        return _time_dataset(ds, args.batches)

    def data_unbatched():
        ds = base.map(lambda x: (aug(x, training=True, view=1), aug(x, training=True, view=2)),
                      num_parallel_calls=auto).batch(args.batch, drop_remainder=True
                                                     ).prefetch(auto)
        return _time_dataset(ds, args.batches)

    modes = {"graph": graph_mode, "data_batched": data_batched, "data_unbatched": data_unbatched,
             "jax_jit": jax_jit}
    results = []
    for name in args.modes.split(","):
        secs = [modes[name]() for _ in range(args.repeats)]
        med = statistics.median(secs)
        res = {"mode": name, "seconds": secs, "median_seconds": med,
               "images_per_second": args.batch * args.batches / med,
               "ms_per_batch_two_views": 1000 * med / args.batches}
        print(f"{name:15s} {res['images_per_second']:8.0f} images/s "
              f"({res['ms_per_batch_two_views']:.0f} ms per batch of {args.batch}, two views)",
              flush=True)
        results.append(res)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump({"machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
                   "backend": keras.backend.backend(),
                   "command": " ".join(["python3"] + sys.argv), "batch": args.batch,
                   "image_size": args.size, "version": args.version,
                   "blur_prob": aug.blur_prob, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
