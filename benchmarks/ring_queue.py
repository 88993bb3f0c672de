"""Ring's band selection cost against NT-Xent, loss alone (forward + backward to the
queries), in-batch (B = 256) and against MoCo queues, interleaved in one process.

    python benchmarks/ring_queue.py --output benchmarks/results/ring_queue.json

Compares Ring's two selectors: ``top_k`` over the upper cut (forced with a huge
``topk_limit``) and the radix-select thresholds used for large cuts by default.
"""

import argparse
import json
import statistics
import time

import tensorflow as tf

from keras_hardneg import losses


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--queue-sizes", default="4096,65536")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--output", default="benchmarks/results/ring_queue.json")
    args = p.parse_args()

    def ring(lower, upper, topk):
        loss = losses.RingContrastiveLoss(0.07, lower, upper)
        if topk:
            loss.topk_limit = 10 ** 9
        else:
            loss.topk_limit = loss.topk_fraction = 0
        return loss

    configs = {
        "nt_xent": lambda: losses.NTXentLoss(0.07),
        "ring 5-50, top_k": lambda: ring(5, 50, True),
        "ring 5-50, thresholds": lambda: ring(5, 50, False),
        "ring 1-10, top_k": lambda: ring(1, 10, True),
        "ring 1-10, thresholds": lambda: ring(1, 10, False),
    }
    rng = tf.random.Generator.from_seed(0)
    q = tf.Variable(rng.normal([args.batch, args.dim]))
    k = rng.normal([args.batch, args.dim])
    results = {}
    for setting in ["in-batch"] + [int(s) for s in args.queue_sizes.split(",")]:
        queue = None if setting == "in-batch" else rng.normal([setting, args.dim])
        fns = {}
        for name, make in configs.items():
            loss = make()

            @tf.function
            def step(loss=loss):
                with tf.GradientTape() as tape:
                    value = loss(q, k) if queue is None else loss.call_with_negatives(q, k, queue)
                return tape.gradient(value, q)

            fns[name] = step
        for fn in fns.values():
            fn()  # trace + warm-up
        times = {name: [] for name in fns}
        for _ in range(args.reps):  # round-robin
            for name, fn in fns.items():
                times[name].append(timed(fn))
        base = statistics.median(times["nt_xent"])
        results[str(setting)] = {name: {"median_s": statistics.median(t),
                                        "ratio_to_nt_xent": statistics.median(t) / base}
                                 for name, t in times.items()}
        for name, r in results[str(setting)].items():
            print(f"{str(setting):9s} {name:24s} {r['median_s'] * 1000:9.1f} ms  x{r['ratio_to_nt_xent']:.2f}",
                  flush=True)
    with open(args.output, "w") as f:
        json.dump({"command": "python benchmarks/ring_queue.py", "args": vars(args),
                   "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
