"""Old vs new loss code, interleaved in one process (issue 15: "no slower on TF").

The loss-alone part of ``benchmarks/loss_overhead.py`` run for two versions of
``keras_hardneg.losses`` side by side: a copy of the old checkout's ``losses/`` package is
imported under another name (its registrations are disabled), and every repetition times
every (loss, version) pair once, in a shuffled order, so that load from other users of the
machine hits both versions alike. Forward + backward under ``tf.function``, ``[B, 128]``
embeddings (UnReMix gets ``[B, 512]`` head features in-batch), queue keys without gradient.

Usage::

    python3 benchmarks/loss_backend_ab.py --old /path/to/old/checkout \\
        [--settings in_batch,queue_4096] [--repetitions 25] [--batch 256]

Prints the medians and ``new/old`` per loss and setting; ``--output`` writes them as JSON.
"""

import argparse
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time

import numpy as np

LOSSES = {
    "nt_xent": ("NTXentLoss", dict(temperature=0.5)),
    "debiased": ("DebiasedContrastiveLoss", dict(temperature=0.5, tau_plus=0.1)),
    "hard_b1": ("HardNegativeContrastiveLoss", dict(temperature=0.5, tau_plus=0.1, beta=1.0)),
    "ring": ("RingContrastiveLoss", dict(temperature=0.5)),
    "unremix": ("UnReMixContrastiveLoss", dict(temperature=0.5, tau_plus=0.1, beta=1.0)),
}


def import_old(checkout):
    """The old checkout's ``keras_hardneg/losses`` as the package ``_old_losses``."""
    root = tempfile.mkdtemp(prefix="old_losses_")
    dst = os.path.join(root, "_old_losses")
    shutil.copytree(os.path.join(checkout, "keras_hardneg", "losses"), dst)
    with open(os.path.join(dst, "_noregistry.py"), "w") as f:
        f.write("class _R:\n    def register(self, *a, **k):\n        return lambda c: c\n\n"
                "LOSSES = _R()\n")
    for name in os.listdir(dst):
        if name.endswith(".py"):
            path = os.path.join(dst, name)
            with open(path) as f:
                text = f.read()
            text = text.replace("from keras_hardneg.registry import LOSSES",
                                "from _old_losses._noregistry import LOSSES")
            text = re.sub(r"keras_hardneg\.losses", "_old_losses", text)
            text = text.replace('package="keras_hardneg"', 'package="keras_hardneg_old"')
            with open(path, "w") as f:
                f.write(text)
    sys.path.insert(0, root)
    import _old_losses

    return _old_losses


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--old", required=True, help="checkout of the old version (repo root)")
    p.add_argument("--settings", default="in_batch,queue_4096")
    p.add_argument("--repetitions", type=int, default=25)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--output", default=None)
    args = p.parse_args(argv)
    import tensorflow as tf

    from keras_hardneg import losses as new

    old = import_old(args.old)
    b, d, m = args.batch, 128, 512
    rng = np.random.default_rng(0)
    z1, z2 = (tf.Variable(rng.normal(size=(b, d)).astype("float32")) for _ in range(2))
    f1, f2 = (tf.Variable(rng.normal(size=(b, m)).astype("float32")) for _ in range(2))

    def make(module, key, setting):
        cls, kwargs = LOSSES[key]
        loss = getattr(module, cls)(**kwargs)
        feats = loss.needs_features
        if setting == "in_batch":
            @tf.function
            def fb():
                with tf.GradientTape() as tape:
                    a = {"embeddings": z1, "features": f1} if feats else z1
                    c = {"embeddings": z2, "features": f2} if feats else z2
                    value = loss(a, c)
                g = tape.gradient(value, [z1, z2])
                return value + tf.reduce_sum(g[0]) + tf.reduce_sum(g[1])
            return fb
        queue = tf.constant(rng.normal(size=(int(setting.split("_")[1]), d)).astype("float32"))

        @tf.function
        def fq():
            with tf.GradientTape() as tape:
                value = loss.call_with_negatives(z1, tf.stop_gradient(z2), queue)
            return value + tf.reduce_sum(tape.gradient(value, [z1])[0])
        return fq

    results = {"command": "python3 benchmarks/loss_backend_ab.py " + " ".join(
        sys.argv[1:] if argv is None else argv), "load_average_at_start": os.getloadavg()}
    for setting in args.settings.split(","):
        fns = {}
        for key in LOSSES:
            for tag, module in (("old", old), ("new", new)):
                fn = make(module, key, setting)
                fn(), fn()  # trace and warm up
                fns[(key, tag)] = fn
        samples = {k: [] for k in fns}
        order, shuffle = list(fns), random.Random(0)
        for _ in range(args.repetitions):
            shuffle.shuffle(order)
            for k in order:
                start = time.perf_counter()
                float(fns[k]())
                samples[k].append(time.perf_counter() - start)
        results[setting] = {}
        print(setting, flush=True)
        for key in LOSSES:
            o, n = np.median(samples[(key, "old")]), np.median(samples[(key, "new")])
            results[setting][key] = {"old_median_seconds": float(o),
                                     "new_median_seconds": float(n), "new_over_old": float(n / o)}
            print(f"  {key:9s} old {o * 1e3:9.2f} ms  new {n * 1e3:9.2f} ms  new/old {n / o:.3f}",
                  flush=True)
    results["load_average_at_end"] = os.getloadavg()
    if args.output:
        with open(args.output, "w") as f:
            json.dump(results, f, indent=1)
    return results


if __name__ == "__main__":
    main()
