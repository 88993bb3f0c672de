"""Loss overhead benchmark (issue 2): what each contrastive loss costs on top of NT-Xent.

Two measurements, each interleaved round-robin (every repetition times every
configuration once, in a freshly shuffled order) in one process, so that load from
other users of the machine hits all configurations alike. We report medians and
the ratio of each median to NT-Xent's.

1. ``step``: one full SimCLR training step (augmentation, encoder + projection
   head forward/backward on both views, the loss, Adam update, metrics) on the same
   fixed batch of 32x32 CIFAR-10 images, same encoder and seed for every loss.
2. ``loss``: the loss alone, forward + backward, on ``[B, 128]`` embeddings:
   in-batch (SimCLR) and against a queue of 4096 / 65536 keys (MoCo). UnReMix gets
   ``[B, 512]`` head features too (what the SimCLR model feeds it).

Usage::

    python3 benchmarks/loss_overhead.py                  # full (a few minutes)
    python3 benchmarks/loss_overhead.py --quick          # smoke run
    python3 benchmarks/loss_overhead.py --skip-step      # the loss alone only

To compare two versions of the library, run this script twice with ``PYTHONPATH`` set to
each checkout (``PYTHONPATH=/path/to/old python3 benchmarks/loss_overhead.py ...``),
alternating, with the same arguments; the JSON records which ``keras_hardneg`` was timed.

Writes ``benchmarks/results/loss_overhead.json`` (or ``--output``).
"""

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DEFAULT_DATA = os.path.normpath(os.path.join(REPO, "..", "shared", "data", "cifar10-jpg"))

LOSSES = {
    "nt_xent": {"name": "nt_xent", "temperature": 0.5},
    "debiased": {"name": "debiased", "temperature": 0.5, "tau_plus": 0.1},
    "hard_b0.5": {"name": "hard", "temperature": 0.5, "tau_plus": 0.1, "beta": 0.5},
    "hard_b1": {"name": "hard", "temperature": 0.5, "tau_plus": 0.1, "beta": 1.0},
    "ring": {"name": "ring", "temperature": 0.5},
    "unremix": {"name": "unremix", "temperature": 0.5, "tau_plus": 0.1, "beta": 1.0},
}
#: Issue 2's goal: full-step median within this factor of NT-Xent's.
GOALS = {"debiased": 1.05, "hard_b0.5": 1.05, "hard_b1": 1.05, "ring": 1.05, "unremix": 1.15}


def machine():
    model = ""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        model = next((ln.split(":", 1)[1].strip() for ln in out.splitlines()
                      if ln.startswith("Model name")), "")
    except OSError:
        pass
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    return {"cpus": os.cpu_count(), "cpu_model": model, "platform": platform.platform(),
            "python": sys.version.split()[0], "load_average_at_start": load}


def _summary(samples, base):
    wall = [s[0] for s in samples]
    cpu = [s[1] for s in samples]
    out = {"median_seconds": float(np.median(wall)),
           "q25_seconds": float(np.percentile(wall, 25)),
           "q75_seconds": float(np.percentile(wall, 75)),
           "median_cpu_seconds": float(np.median(cpu)),
           "repetitions": len(wall)}
    if base is not None:
        out["ratio_to_nt_xent"] = out["median_seconds"] / base["median_seconds"]
        out["cpu_ratio_to_nt_xent"] = out["median_cpu_seconds"] / base["median_cpu_seconds"]
    return out


def _round_robin(fns, repetitions, seed, inner=1):
    """``{name: [(wall, cpu), ...]}``: each repetition times each fn once (``inner`` calls)."""
    rng = random.Random(seed)
    names = list(fns)
    samples = {n: [] for n in names}
    for _ in range(repetitions):
        rng.shuffle(names)
        for n in names:
            w, c = time.perf_counter(), time.process_time()
            for _ in range(inner):
                fns[n]()
            samples[n].append(((time.perf_counter() - w) / inner, (time.process_time() - c) / inner))
    return samples


def bench_step(images, labels, encoder, batch, repetitions, warmup, seed):
    import tensorflow as tf

    from keras_hardneg import run as runlib

    fns, models = {}, {}
    x = tf.constant(images[:batch])
    y = tf.constant(labels[:batch])
    for key, loss in LOSSES.items():
        recipe = runlib.load_recipe({
            "encoder": encoder, "batch_size": batch, "loss": loss, "seed": seed,
            "projection_dims": [512, 128], "optimizer": {"name": "adam", "learning_rate": 1e-3},
            "schedule": {"name": "constant"}})
        model = runlib.build_model(recipe, images.shape[1:], num_examples=len(images))
        step = tf.function(model.train_step)

        def run(step=step):
            out = step((x, y))
            float(out["loss"])  # wait for the result
        for _ in range(warmup):
            run()
        fns[key], models[key] = run, model
    samples = _round_robin(fns, repetitions, seed)
    base = _summary(samples["nt_xent"], None)
    return {k: _summary(v, base) for k, v in samples.items()}


def bench_loss(batch, dim, feature_dim, queue_sizes, repetitions, warmup, seed, inner):
    """Forward+backward of each loss; big queues (> 8192) get half the repetitions and
    one call per timing (Ring's percentile sort over 65536 keys takes seconds)."""
    import tensorflow as tf

    from keras_hardneg import losses

    rng = np.random.default_rng(seed)
    z1 = tf.Variable(rng.normal(size=(batch, dim)).astype("float32"))
    z2 = tf.Variable(rng.normal(size=(batch, dim)).astype("float32"))
    f1 = tf.Variable(rng.normal(size=(batch, feature_dim)).astype("float32"))
    f2 = tf.Variable(rng.normal(size=(batch, feature_dim)).astype("float32"))
    queues = {k: tf.constant(rng.normal(size=(k, dim)).astype("float32")) for k in queue_sizes}
    results = {}
    for setting in ["in_batch"] + [f"queue_{k}" for k in queue_sizes]:
        fns = {}
        for key, spec in LOSSES.items():
            spec = dict(spec)
            loss = losses.get(spec.pop("name"), **spec)
            feats = loss.needs_features

            if setting == "in_batch":
                @tf.function
                def fb(loss=loss, feats=feats):
                    with tf.GradientTape() as tape:
                        a = {"embeddings": z1, "features": f1} if feats else z1
                        b = {"embeddings": z2, "features": f2} if feats else z2
                        value = loss(a, b)
                    g = tape.gradient(value, [z1, z2])
                    return value + tf.reduce_sum(g[0]) + tf.reduce_sum(g[1])
            else:
                queue = queues[int(setting.split("_")[1])]

                @tf.function
                def fb(loss=loss, queue=queue):
                    # MoCo: the queue holds keys only (no features); keys get no gradient.
                    with tf.GradientTape() as tape:
                        value = loss.call_with_negatives(z1, tf.stop_gradient(z2), queue)
                    g = tape.gradient(value, [z1])
                    return value + tf.reduce_sum(g[0])

            def run(fb=fb):
                float(fb())
            for _ in range(warmup if setting == "in_batch" else 1):
                run()
            fns[key] = run
        big = setting != "in_batch" and int(setting.split("_")[1]) > 8192
        samples = _round_robin(fns, max(repetitions // 2, 3) if big else repetitions, seed,
                               inner=1 if big else inner)
        base = _summary(samples["nt_xent"], None)
        results[setting] = {k: _summary(v, base) for k, v in samples.items()}
    return results


def load_batch(data_dir, batch, quick):
    if quick or not os.path.isdir(os.path.join(data_dir, "train")):
        rng = np.random.default_rng(0)
        return (rng.random((batch, 32, 32, 3)).astype("float32"),
                rng.integers(0, 10, batch).astype("int64"), "random pixels")
    from keras_hardneg import data

    per_class = -(-batch // 10)
    x, y = data.load_image_folder_arrays(os.path.join(data_dir, "train"), image_size=(32, 32),
                                         limit_per_class=per_class, validate="none")
    order = np.random.default_rng(0).permutation(len(x))[:batch]
    return x[order], y[order].astype("int64"), f"CIFAR-10 JPEG train ({batch} images)"


def table(result):
    """Markdown table of a result dict (used by docs)."""
    lines = ["| loss | full step median (s) | step ratio | step CPU ratio | goal | loss alone in-batch ratio |"
             + "".join(f" queue {k} ratio |" for k in result["config"]["queue_sizes"]),
             "|---|---|---|---|---|---|" + "---|" * len(result["config"]["queue_sizes"])]
    for key in LOSSES:
        s = result["step"][key]
        goal = GOALS.get(key)
        ok = "" if goal is None else (f"<= {goal:.2f} " + ("met" if s.get("ratio_to_nt_xent", 1) <= goal
                                                           else "**missed**"))
        row = (f"| {key} | {s['median_seconds']:.3f} | {s.get('ratio_to_nt_xent', 1.0):.3f} | "
               f"{s.get('cpu_ratio_to_nt_xent', 1.0):.3f} | {ok} | "
               f"{result['loss']['in_batch'][key].get('ratio_to_nt_xent', 1.0):.2f} |")
        for k in result["config"]["queue_sizes"]:
            row += f" {result['loss'][f'queue_{k}'][key].get('ratio_to_nt_xent', 1.0):.2f} |"
        lines.append(row)
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="smoke run: few repetitions, random pixels")
    p.add_argument("--skip-step", action="store_true", help="time the loss alone only")
    p.add_argument("--inner", type=int, default=None,
                   help="calls per timing of the loss alone (default 5, 1 with --quick)")
    p.add_argument("--encoder", default="small_convnet", choices=["small_convnet", "resnet18_cifar"])
    p.add_argument("--width", type=int, default=32)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--step-repetitions", type=int, default=20)
    p.add_argument("--loss-repetitions", type=int, default=20)
    p.add_argument("--queue-sizes", default="4096,65536")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-dir", default=DEFAULT_DATA)
    p.add_argument("--output", default=os.path.join(HERE, "results", "loss_overhead.json"))
    args = p.parse_args(argv)
    if args.quick:
        args.step_repetitions, args.loss_repetitions = 3, 3
    queue_sizes = [int(q) for q in args.queue_sizes.split(",") if q]
    import tensorflow as tf

    tf.random.set_seed(args.seed)
    command = "python3 " + " ".join([os.path.relpath(os.path.abspath(__file__), REPO)]
                                    + (sys.argv[1:] if argv is None else list(argv)))
    info = machine()
    x, y, desc = load_batch(args.data_dir, args.batch, args.quick)
    encoder = {"name": args.encoder, "width": args.width}
    start = time.perf_counter()
    step = {}
    if not args.skip_step:
        print(f"full step: {encoder}, batch {args.batch}, {args.step_repetitions} rounds",
              flush=True)
        step = bench_step(x, y, encoder, args.batch, args.step_repetitions, 2, args.seed)
    for k, v in step.items():
        print(f"  {k:10s} median {v['median_seconds']:.3f}s ratio {v.get('ratio_to_nt_xent', 1):.3f}",
              flush=True)
    print("loss alone", flush=True)
    loss = bench_loss(args.batch, 128, 512, queue_sizes, args.loss_repetitions, 3, args.seed,
                      inner=args.inner or (1 if args.quick else 5))
    for setting, res in loss.items():
        print(f"  {setting}: " + ", ".join(
            f"{k} {v['median_seconds'] * 1e3:.2f}ms x{v.get('ratio_to_nt_xent', 1):.2f}"
            for k, v in res.items()), flush=True)
    import keras_hardneg

    result = {
        "command": command, "machine": info,
        "keras_hardneg": os.path.dirname(os.path.abspath(keras_hardneg.__file__)),
        "load_average_at_end": os.getloadavg(),
        "seconds": time.perf_counter() - start,
        "config": {"encoder": encoder, "batch": args.batch, "image_size": 32,
                   "projection_dims": [512, 128], "optimizer": "adam 1e-3", "data": desc,
                   "step_repetitions": args.step_repetitions,
                   "loss_repetitions": args.loss_repetitions, "queue_sizes": queue_sizes,
                   "embedding_dim": 128, "feature_dim": 512, "quick": args.quick,
                   "losses": LOSSES, "goals": GOALS, "tensorflow": tf.__version__},
        "step": step, "loss": loss,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    tmp = args.output + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=1)
    os.replace(tmp, args.output)
    if step:
        print(table(result))
    return result


if __name__ == "__main__":
    main()
