"""Training throughput of a SimCLR-like step on this machine.

Step: two views ``[B, 32, 32, 3]`` -> ``resnet18_cifar(width)`` on the concatenated 2B batch
-> projection Dense(512)-ReLU-Dense(128) -> NT-Xent (written inline, temperature 0.5) -> Adam.
Views are random tensors (augmentation is measured separately in bench_augment.py).
Reports pairs/s (= B / step time) for fp32 vs ``mixed_bfloat16``, with and without XLA
``jit_compile``. Each configuration runs in its own subprocess (the mixed-precision policy
and the thread settings are process-global).

Usage:
    python3 benchmarks/augment/bench_step.py --width 64 --batch 256 --steps 4 --warmup 2 \
        --configs fp32,bf16,fp32_jit,bf16_jit --output benchmarks/results/step.json
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

CONFIGS = {
    "fp32": ("float32", False),
    "bf16": ("mixed_bfloat16", False),
    "fp32_jit": ("float32", True),
    "bf16_jit": ("mixed_bfloat16", True),
}


def run_one(args):
    import numpy as np
    import tensorflow as tf

    if args.intra_threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.intra_threads)
    if args.inter_threads:
        tf.config.threading.set_inter_op_parallelism_threads(args.inter_threads)
    import keras

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
    from keras_hardneg.encoders import resnet, resnet18_cifar

    if args.bn == "keras":  # the unfused Keras layer, for comparison
        resnet.FusedBatchNormalization = keras.layers.BatchNormalization

    policy, jit = CONFIGS[args.config]
    keras.mixed_precision.set_global_policy(policy)
    keras.utils.set_random_seed(0)
    if args.model == "simclr":
        return run_fit(args, policy, jit)
    encoder = resnet18_cifar(width=args.width, input_shape=(args.size, args.size, 3))
    head = keras.Sequential([keras.layers.Dense(512, activation="relu"),
                             keras.layers.Dense(128)])
    head.build((None, encoder.output_shape[-1]))
    optimizer = keras.optimizers.Adam(1e-3)
    variables = encoder.trainable_variables + head.trainable_variables
    optimizer.build(variables)
    temperature = 0.5
    b = args.batch

    def nt_xent(z):
        z = tf.math.l2_normalize(tf.cast(z, tf.float32), axis=1)
        logits = tf.matmul(z, z, transpose_b=True) / temperature
        logits = logits - 1e9 * tf.eye(2 * b)
        labels = tf.concat([tf.range(b, 2 * b), tf.range(0, b)], axis=0)
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))

    @tf.function(jit_compile=jit)
    def step(v1, v2):
        with tf.GradientTape() as tape:
            h = encoder(tf.concat([v1, v2], axis=0), training=True)
            loss = nt_xent(head(h, training=True))
        grads = tape.gradient(loss, variables)
        optimizer.apply(grads, variables)
        return loss

    rng = np.random.default_rng(0)
    v1 = tf.constant(rng.random((b, args.size, args.size, 3), dtype=np.float32))
    v2 = tf.constant(rng.random((b, args.size, args.size, 3), dtype=np.float32))
    t0 = time.perf_counter()
    for _ in range(args.warmup):
        step(v1, v2).numpy()
    warmup_s = time.perf_counter() - t0
    times, cpu = [], []
    for _ in range(args.steps):
        t0, c0 = time.perf_counter(), time.process_time()
        loss = float(step(v1, v2).numpy())
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    med = statistics.median(times)
    cpu_med = statistics.median(cpu)
    ncpu = len(os.sched_getaffinity(0))
    return {
        "config": args.config, "policy": policy, "jit_compile": jit, "width": args.width,
        "batch": b, "image_size": args.size, "warmup_steps": args.warmup,
        "warmup_seconds": warmup_s, "step_seconds": times, "median_step_seconds": med,
        "pairs_per_second": b / med, "images_per_second": 2 * b / med, "final_loss": loss,
        # CPU seconds of this process per step: less sensitive to other users of the machine.
        # pairs/s if this process had all cores to itself = b / (cpu / cores).
        "cpu_seconds_per_step": cpu, "median_cpu_seconds": cpu_med, "cores": ncpu,
        "pairs_per_second_if_idle_estimate": b / (cpu_med / ncpu),
        "batch_norm": args.bn, "intra_threads": args.intra_threads, "inter_threads": args.inter_threads,
        "onednn": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "default(on)"),
    }


def run_fit(args, policy, jit):
    """The library's own SimCLR through ``model.fit()``: images in, the SimCLR augmentation
    inside the model (where the frameworks place it), NT-Xent, LARS. Under ``jit_compile``
    the views are made in tf.data instead (XLA has no kernel for the crop)."""
    import numpy as np
    import keras
    import tensorflow as tf

    import keras_hardneg as khn

    b = args.batch
    encoder = khn.encoders.resnet18_cifar(width=args.width, input_shape=(args.size, args.size, 3))
    aug = khn.augment.simclr_augmentation(image_size=args.size, seed=0)
    model = khn.models.SimCLR(encoder, projection_dims=(512, 128),
                              augmentation=None if jit else aug)
    model.compile(optimizer=khn.optimizers.LARS(0.3), jit_compile=jit,
                  loss=khn.losses.NTXentLoss(temperature=0.5))
    steps = args.warmup + args.steps
    images = np.random.default_rng(0).integers(0, 256, (steps * b, args.size, args.size, 3),
                                               dtype=np.uint8)

    class Timer(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            self.t0, self.c0 = time.perf_counter(), time.process_time()

        def on_train_batch_end(self, batch, logs=None):
            times.append(time.perf_counter() - self.t0)
            cpu.append(time.process_time() - self.c0)

    times, cpu = [], []
    t0 = time.perf_counter()
    ds = tf.data.Dataset.from_tensor_slices(images).batch(b).map(
        lambda x: tf.cast(x, tf.float32) / 255.0)
    if jit:
        ds = ds.map(lambda x: dict(zip(("view1", "view2"),
                                       khn.augment.two_views(aug)(x, training=True))))
    history = model.fit(ds.prefetch(2), epochs=1, verbose=0, callbacks=[Timer()])
    warmup_s = sum(times[:args.warmup])
    times, cpu = times[args.warmup:], cpu[args.warmup:]
    med, cpu_med = statistics.median(times), statistics.median(cpu)
    ncpu = len(os.sched_getaffinity(0))
    return {
        "config": args.config, "model": "simclr_fit", "policy": policy, "jit_compile": jit,
        "width": args.width, "batch": b, "image_size": args.size, "warmup_steps": args.warmup,
        "warmup_seconds": warmup_s, "step_seconds": times, "median_step_seconds": med,
        "pairs_per_second": b / med, "images_per_second": 2 * b / med,
        "final_loss": float(history.history["loss"][-1]),
        "cpu_seconds_per_step": cpu, "median_cpu_seconds": cpu_med, "cores": ncpu,
        "pairs_per_second_if_idle_estimate": b / (cpu_med / ncpu),
        "batch_norm": "fused", "optimizer": "LARS",
        "augmentation": "tf.data (views fed)" if jit else "in the model",
        "total_seconds": time.perf_counter() - t0,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--size", type=int, default=32)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--configs", default="fp32,bf16,fp32_jit,bf16_jit")
    p.add_argument("--model", choices=["step", "simclr"], default="step",
                   help="'step': the bare step above; 'simclr': khn.models.SimCLR.fit() with "
                        "its in-model augmentation")
    p.add_argument("--bn", choices=["fused", "keras"], default="fused",
                   help="encoder batch norm: our fused layer (default) or keras.layers'")
    p.add_argument("--intra-threads", type=int, default=0)
    p.add_argument("--inter-threads", type=int, default=0)
    p.add_argument("--output", default="benchmarks/results/step.json")
    p.add_argument("--append", action="store_true", help="append to an existing output list")
    p.add_argument("--config", help=argparse.SUPPRESS)  # internal: run one config
    args = p.parse_args()
    if args.config:
        print("RESULT " + json.dumps(run_one(args)), flush=True)
        return
    results = []
    if args.append and os.path.exists(args.output):
        with open(args.output) as f:
            results = json.load(f)["results"]
    for name in args.configs.split(","):
        if name not in CONFIGS:
            raise ValueError(f"--configs: unknown config {name!r}; choose from {list(CONFIGS)}")
        cmd = [sys.executable, __file__, "--config", name, "--width", str(args.width),
               "--batch", str(args.batch), "--size", str(args.size), "--steps", str(args.steps),
               "--warmup", str(args.warmup), "--bn", args.bn, "--model", args.model, "--intra-threads", str(args.intra_threads),
               "--inter-threads", str(args.inter_threads)]
        out = subprocess.run(cmd, capture_output=True, text=True)
        lines = [l for l in out.stdout.splitlines() if l.startswith("RESULT ")]
        if not lines:
            sys.stderr.write(out.stderr[-3000:])
            raise SystemExit(f"config {name} failed")
        res = json.loads(lines[-1][7:])
        res["command"] = " ".join(["python3"] + sys.argv)
        print(f"{name:9s} median step {res['median_step_seconds']:.2f}s "
              f"-> {res['pairs_per_second']:.1f} pairs/s (warm-up {res['warmup_seconds']:.0f}s); "
              f"CPU {res.get('median_cpu_seconds', float('nan')):.1f}s/step -> "
              f"{res.get('pairs_per_second_if_idle_estimate', float('nan')):.1f} pairs/s if idle",
              flush=True)
        results.append(res)
        _write(args, results)   # after every config, so partial runs keep their numbers


def _write(args, results):
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump({"machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
                   "command": " ".join(["python3"] + sys.argv), "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
