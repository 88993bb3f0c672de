"""Random-access data at ImageNet scale (issue 19, item 4): memory, feed rate, graph refresh.

With the ``synthetic`` dataset (N JPEGs decoded on every read, content a function of the
index; default N = 1,281,167, ImageNet-1k's training set) this runs, through the run layer's
own builders (:func:`keras_hardneg.run.load_data`, :func:`~keras_hardneg.run.make_train_feed`,
:func:`~keras_hardneg.run.build_model`, then ``fit`` with the feed's callbacks, as
:func:`keras_hardneg.run.train` does):

1. the feed rate per core, in a child process limited to one thread (TensorFlow intra/inter
   op threads = 1) and timed in CPU seconds of that process: decode only (what the host does
   when the augmentation runs in the step, as in the library's SimCLR), and decode + the
   recipe's view maker (two SimCLR views) run on the host;
2. BatchSampler over all N (its first graph: a random graph, see
   ``keras_hardneg.sampling.random_graph``), the feed, and ``--steps`` training steps with the
   GraphRefreshCallback rebuilding the graph from the model's ``[N, d]`` embedding bank every
   ``--refresh-every`` steps; a callback stops ``fit`` after ``--steps``;
3. one more graph build from a *full* ``[N, d]`` bank (random unit rows: every row seen, the
   worst case of a refresh; the bank in step 2 is mostly unseen rows);
4. resident memory (``/proc/self/status`` VmRSS, and VmHWM for the peak) after each phase.

Usage (the figures in docs/benchmarks/scale.md):

    nice -n 5 python benchmarks/scale/random_access.py --out benchmarks/results/scale/random_access.json

``--num-images 100000`` etc. for a quicker look. Writes one JSON file with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

_GIB = 1024 ** 3


def _proc_status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return None


def rss():
    """(current RSS, peak RSS so far) in bytes."""
    return _proc_status("VmRSS"), _proc_status("VmHWM")


def _recipe(args):
    return {
        "data": {"name": "synthetic", "num_images": args.num_images,
                 "test_images": args.test_images, "image_size": args.image_size,
                 **({"stored_size": args.stored_size} if args.stored_size else {}),
                 "num_classes": 1000},
        "encoder": {"name": "small_convnet", "width": args.width},
        "framework": {"name": "simclr"},
        "loss": {"name": "nt_xent"},
        "sampler": {"name": "batchsampler", "num_candidates": args.num_candidates,
                    "num_neighbors": args.num_neighbors, "refresh_every": args.refresh_every},
        "augmentation": {"name": "simclr", "strength": 0.5, "crop_scale": [0.2, 1.0]},
        "batch_size": args.batch_size,
        "epochs": 1,
        "projection_dims": [args.embedding_dim * 2, args.embedding_dim],
        "evaluation": {"monitor_every": 0, "linear_probe": False},
        "seed": 0,
    }


# ----------------------------------------------------------------------- feed rate (child)
def measure_feed(args):
    """Decode (+ augment) rate of one thread, in CPU seconds of this process."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import numpy as np

    from keras_hardneg.data.decode import to_unit_float
    from keras_hardneg.data.synthetic import SyntheticImages
    from keras_hardneg.run import build_view_maker

    out = {}
    rng = np.random.default_rng(0)
    for stored, size in args.feed_sizes:
        src = SyntheticImages(args.num_images, size, stored_size=stored)
        idx = rng.integers(0, len(src), args.feed_images)
        src.prepare()  # encode the JPEG bank first (a fixed cost, not per read)
        cpu, wall = time.process_time(), time.perf_counter()
        batches = [to_unit_float(src.images(idx[i:i + 128])) for i in range(0, len(idx), 128)]
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        row = {"stored_size": stored, "image_size": size, "images": int(len(idx)),
               "jpeg_bytes_mean": float(np.mean([len(src.jpeg(int(i))) for i in idx[:256]])),
               "decode_images_per_cpu_second": len(idx) / cpu,
               "decode_images_per_wall_second": len(idx) / wall}
        views = build_view_maker(_recipe(args), (size, size, 3))
        make = tf.function(lambda x: views(x, training=True))  # compiled, as in a step
        make(tf.constant(batches[0]))  # trace / warm up
        cpu, wall = time.process_time(), time.perf_counter()
        for b in batches:
            v1, v2 = make(tf.constant(b))
            _ = v1.numpy(), v2.numpy()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        row["augment_views_per_cpu_second"] = 2 * len(idx) / cpu
        row["augment_views_per_wall_second"] = 2 * len(idx) / wall
        out[f"{stored}->{size}"] = row
    return out


# ----------------------------------------------------------------------- run (parent)
def measure_run(args):
    import keras
    import numpy as np

    from keras_hardneg import run
    from keras_hardneg.sampling import ProximityGraph

    figures = {"rss": {}}

    def mark(name):
        cur, peak = rss()
        figures["rss"][name] = {"rss_gib": cur / _GIB, "peak_gib": peak / _GIB}
        print(f"[rss] {name}: {cur / _GIB:.2f} GiB (peak {peak / _GIB:.2f})", flush=True)

    recipe = run.load_recipe(_recipe(args))
    mark("imports")
    t = time.perf_counter()
    (x_train, y_train), (x_test, _), desc = run.load_data(recipe)
    figures["load_data_seconds"] = time.perf_counter() - t
    figures["data"] = desc
    mark("load_data")
    x_train.prepare()  # the JPEG bank: fixed size, independent of N

    keras.utils.set_random_seed(recipe["seed"])
    t = time.perf_counter()
    feed = run.make_train_feed(recipe, x_train, y_train)
    figures["make_train_feed_seconds"] = time.perf_counter() - t  # random first graph + feed
    figures["steps_per_epoch"] = feed.steps_per_epoch
    mark("feed")

    t = time.perf_counter()
    feed.sampler.next_batch()
    draws = 200
    t = time.perf_counter()
    for _ in range(draws):
        feed.sampler.next_batch()
    figures["sampler_batches_per_second_random_graph"] = draws / (time.perf_counter() - t)

    t = time.perf_counter()
    model = run.build_model(recipe, x_train=x_train)
    figures["build_model_seconds"] = time.perf_counter() - t
    mark("model")

    class Stop(keras.callbacks.Callback):
        def __init__(self, steps):
            super().__init__()
            self.steps, self.times = steps, []

        def on_train_batch_end(self, batch, logs=None):
            self.times.append(time.perf_counter())
            if batch + 1 >= self.steps:
                self.model.stop_training = True

    stop = Stop(args.steps)
    t = time.perf_counter()
    model.fit(feed.dataset, epochs=1, steps_per_epoch=feed.steps_per_epoch, shuffle=False,
              callbacks=list(feed.callbacks) + [stop], verbose=0)
    figures["fit_seconds"] = time.perf_counter() - t
    figures["steps"] = len(stop.times)
    gaps = np.diff(stop.times)
    refresh = feed.callbacks[0]
    figures["refreshes_in_fit"] = refresh.refreshes
    figures["median_step_seconds"] = float(np.median(gaps)) if len(gaps) else None
    figures["sampler_batches_per_second_refreshed_graph"] = None
    t = time.perf_counter()
    for _ in range(draws):
        feed.sampler.next_batch()
    figures["sampler_batches_per_second_refreshed_graph"] = draws / (time.perf_counter() - t)
    mark("fit")

    # A refresh from a full bank: every row seen (unit rows), as late in an epoch.
    n, d = len(x_train), args.embedding_dim
    bank = np.random.default_rng(1).standard_normal((n, d), dtype=np.float32)
    bank /= np.linalg.norm(bank, axis=1, keepdims=True)
    mark("full_bank")
    t = time.perf_counter()
    graph = ProximityGraph.build(bank, args.num_candidates, args.num_neighbors, seed=0)
    figures["full_bank_refresh_seconds"] = time.perf_counter() - t
    feed.sampler.update_graph(graph.neighbors)
    mark("full_bank_refresh")
    figures["neighbors_gib"] = graph.neighbors.nbytes / _GIB
    figures["bank_gib"] = bank.nbytes / _GIB
    return figures


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-images", type=int, default=1_281_167)
    p.add_argument("--test-images", type=int, default=10_000)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--stored-size", type=int, default=None)
    p.add_argument("--width", type=int, default=16, help="small_convnet width")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--refresh-every", type=int, default=10)
    p.add_argument("--num-candidates", type=int, default=1000)
    p.add_argument("--num-neighbors", type=int, default=100)
    p.add_argument("--embedding-dim", type=int, default=128)
    p.add_argument("--feed-images", type=int, default=2048)
    p.add_argument("--feed-sizes", default="32:32,64:64,256:64",
                   help="stored:read sizes of the feed-rate measurement")
    p.add_argument("--skip-feed", action="store_true")
    p.add_argument("--skip-run", action="store_true")
    p.add_argument("--feed-child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    args.feed_sizes = [tuple(int(v) for v in s.split(":")) for s in args.feed_sizes.split(",")]

    if args.feed_child:
        print(json.dumps(measure_feed(args)))
        return
    result = {"args": {k: v for k, v in vars(args).items() if k != "feed_child"},
              "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                          "cpu": _cpu_name(), "loadavg_start": os.getloadavg()},
              "command": " ".join([os.path.basename(sys.executable)] + sys.argv)}
    if not args.skip_feed:
        child = subprocess.run(
            [sys.executable, __file__, "--feed-child", *(argv or sys.argv[1:])],
            capture_output=True, text=True, timeout=3600,
            env={**os.environ, "OMP_NUM_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1",
                 "TF_NUM_INTEROP_THREADS": "1"})
        if child.returncode:
            raise SystemExit(f"feed child failed:\n{child.stderr[-3000:]}")
        result["feed"] = json.loads(child.stdout.strip().splitlines()[-1])
        print(json.dumps(result["feed"], indent=1), flush=True)
    if not args.skip_run:
        result["run"] = measure_run(args)
    result["machine"]["loadavg_end"] = os.getloadavg()
    text = json.dumps(result, indent=1, default=str)
    print(text)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(text + "\n")


def _cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    main()
