"""One TensorFlow worker of the multi-worker tests (tests/run/test_multi_worker.py).

    python multi_worker_child.py WORKERS INDEX [--equality OUT_DIR] [--train RUN_DIR]
                                 [--die-at-epoch E]

``WORKERS`` is ``host:port,host:port`` (worker 0 = chief), ``INDEX`` this worker's index.

``--equality``: under the ``tf_multi_worker`` distribution, SimCLR on a BN-free encoder
trains ``STEPS`` steps with ``fit`` on the same global batches, this worker feeding its
block of each, with NT-Xent; so does MoCo v2 (NT-Xent, a queue of every worker's keys);
writes the per-step losses and every weight (MoCo's queue and
pointer too) to ``OUT_DIR/w<INDEX>_<case>.npz``. The chief then trains the same model from the
same seed on the global batches in one replica (outside the strategy) and writes
``OUT_DIR/ref_<case>.npz`` (with the initial weights).

``--train`` (after ``--equality`` when both are given, in the same processes):
``keras_hardneg.run.train`` on a small digits recipe with BatchSampler batches (graph
refreshes every 2 steps), with ``distribution="tf_multi_worker"``; writes ``RUN_DIR/worker<INDEX>.json`` (what the backup
restored: the initial epoch and a digest of the weights at the start; the epochs run).
``--die-at-epoch E``: SIGKILLs itself when epoch ``E`` begins (it has finished its save of
the first ``E`` epochs, so nothing keeps the chief from committing its own).
"""

import hashlib
import json
import os
import signal
import sys
import time

_START = time.perf_counter()
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

STEPS, BATCH = 3, 8
CASES = ("nt_xent", "moco_v2")


def views():
    import numpy as np

    rng = np.random.default_rng(0)
    v1 = rng.uniform(size=(STEPS * BATCH, 8, 8, 3)).astype("float32")
    v2 = np.clip(v1 + 0.1 * rng.normal(size=v1.shape), 0, 1).astype("float32")
    y = rng.integers(0, 3, STEPS * BATCH)
    return v1, v2, y


def batches(rows=slice(None)):
    """The STEPS global batches (``rows`` of each), one dataset element per step."""
    import tensorflow as tf

    v1, v2, y = views()
    shape = lambda a: a.reshape((STEPS, BATCH) + a.shape[1:])[:, rows]  # noqa: E731
    return tf.data.Dataset.from_tensor_slices(
        ({"view1": shape(v1), "view2": shape(v2)}, shape(y)))


def model(case):
    """SimCLR with the loss ``case`` ("nt_xent", "hard"), or MoCo v2 (NT-Xent)."""
    import keras

    import keras_hardneg as khn

    keras.utils.set_random_seed(0)
    init = keras.initializers.GlorotUniform
    encoder = keras.Sequential([  # no batch norm: one replica and many see the same function
        keras.Input((8, 8, 3)),
        keras.layers.Conv2D(4, 3, kernel_initializer=init(seed=1)),
        keras.layers.ReLU(),
        keras.layers.GlobalAveragePooling2D(),
        keras.layers.Dense(16, kernel_initializer=init(seed=2)),
    ])
    if case == "moco_v2":  # the queue takes the keys of every worker
        m = khn.models.MoCo(encoder, projection_dims=(16, 8), queue_size=16, momentum=0.9,
                            version="v2")
        loss = "nt_xent"
    else:
        m = khn.models.SimCLR(encoder, projection_dims=(16, 8))
        loss = case
    m.compile(optimizer=keras.optimizers.SGD(0.1), loss=khn.losses.get(loss))
    return m


def fit_steps(m, dataset):
    """Fits one epoch of STEPS steps; the loss Keras logs after each step."""
    import keras

    losses = []
    log = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: losses.append(float(logs["loss"])))
    m.fit(dataset, epochs=1, steps_per_epoch=STEPS, verbose=0, callbacks=[log])
    return losses


def save(path, losses, weights, start=()):
    import numpy as np

    np.savez(path, losses=np.asarray(losses), **{f"w{i}": w for i, w in enumerate(weights)},
             **{f"start{i}": w for i, w in enumerate(start)})


def equality(dist, out_dir):
    rows = dist.place.local_rows(BATCH)
    for case in CASES:
        with dist.scope():
            m = model(case)
            losses = fit_steps(m, dist.distribute_dataset(batches(rows)))
        save(os.path.join(out_dir, f"w{dist.place.index}_{case}.npz"), losses, m.get_weights())
    if dist.place.is_chief:  # the reference: one replica on the global batches
        for case in CASES:
            m = model(case)
            start = m.get_weights()
            losses = fit_steps(m, batches())
            save(os.path.join(out_dir, f"ref_{case}.npz"), losses, m.get_weights(), start)


def recipe():
    return {"name": "mw", "epochs": 2, "batch_size": 16, "seed": 0,
            "projection_dims": [16, 8],
            "encoder": {"name": "small_convnet", "width": 4},
            "optimizer": {"name": "sgd", "learning_rate": 0.05},
            "schedule": {"name": "constant"},
            # BatchSampler: the shared walk, the step-clocked graph refresh from the
            # gathered bank, the graph checksum compared across workers, its resume.
            "sampler": {"name": "batchsampler", "num_candidates": 16, "num_neighbors": 4,
                        "refresh_every": 2},
            "evaluation": {"monitor_every": 0, "linear_probe": False, "knn_k": 5}}


def train(dist, run_dir, die_at):
    import keras

    from keras_hardneg.data.digits import load_digits
    from keras_hardneg.run import train as run_train

    (x, y), (xt, yt) = load_digits(test_fraction=0.2, seed=0)
    data = ((x[:64], y[:64]), (xt[:32], yt[:32]), "digits subset")
    seen = {}

    class Probe(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):  # after the backup's restore
            seen["initial_epoch"] = int(self.model._initial_epoch or 0)
            digest = hashlib.sha256()
            for w in self.model.get_weights():
                digest.update(w.tobytes())
            seen["weights_at_begin"] = digest.hexdigest()

        def on_epoch_begin(self, epoch, logs=None):
            if die_at is not None and epoch == die_at:
                os.kill(os.getpid(), signal.SIGKILL)

    result = run_train(recipe(), run_dir, verbose=0, export=False, data=data,
                       extra_callbacks=[Probe()], distribution=dist)
    seen.update(epochs_run=result["epochs_run"], trained_now=result["epochs_trained_now"],
                loss=result["history"]["loss"])
    with open(os.path.join(run_dir, f"worker{dist.place.index}.json"), "w") as f:
        json.dump(seen, f)


def mark(what):
    """Prints the seconds since this process started (the phases' times in the logs)."""
    print(f"TIME {what} {time.perf_counter() - _START:.1f}", flush=True)


def main(argv):
    workers, index = argv[:2]
    opt = {k: argv[argv.index(k) + 1] for k in ("--equality", "--train", "--die-at-epoch")
           if k in argv}
    from keras_hardneg.run.distribution import multi_worker  # noqa: F401  (registers the entry)
    from keras_hardneg.run.distribution import build_distribution

    # Before anything else runs a TensorFlow operation.
    dist = build_distribution({"name": "tf_multi_worker", "workers": workers,
                               "task_index": int(index)})
    mark("strategy")
    if "--equality" in opt:
        equality(dist, opt["--equality"])
        mark("equality")
    if "--train" in opt:
        die_at = int(opt["--die-at-epoch"]) if "--die-at-epoch" in opt else None
        train(dist, opt["--train"], die_at)
        mark("train")
    print("DONE", index, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
