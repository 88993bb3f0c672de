"""One JAX worker of ``test_multi_process.py``:
``python multi_process_child.py COORDINATOR NUM_PROCESSES PROCESS_ID OUT_DIR MODE``
(``KERAS_BACKEND=jax``, set by the parent before JAX is imported).

Joins the ``jax_multi_process`` distribution, then runs each part of ``MODE`` (parts joined
by ``+``, e.g. ``equality+train``). ``train``: see :func:`run_train`. ``equality``: with
NT-Xent, trains SimCLR on a small convnet with batch norm for 3 steps, feeding only this
process's contiguous block of each of the 3 global batches. Process 0 then trains the same model from
the same weights on the global batches in this process alone, with no distribution (the
reference). Writes ``OUT_DIR/worker{ID}.npz``: per loss, the per-step losses and the final
weights of the distributed run (and of the reference, on process 0)."""

import os
import sys
import time

T0 = time.perf_counter()
os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_hardneg as khn  # noqa: E402
from keras_hardneg.registry import ConfigError  # noqa: E402
from keras_hardneg.run.distribution import build_distribution  # noqa: E402
import keras_hardneg.run.distribution.multi_process  # noqa: E402,F401  (registers the entry)

GLOBAL_BATCH, STEPS = 8, 3
# Every loss of the family shares the cross-process gather (losses/core.py): one suffices.
LOSSES = {"nt_xent": lambda: khn.losses.NTXentLoss(temperature=0.5)}


def global_data():
    """The same STEPS global batches in every process."""
    rng = np.random.default_rng(0)
    v1 = rng.uniform(size=(GLOBAL_BATCH * STEPS, 8, 8, 3)).astype("float32")
    v2 = np.clip(v1 + 0.1 * rng.normal(size=v1.shape), 0, 1).astype("float32")
    return {"view1": v1, "view2": v2}, rng.integers(0, 3, GLOBAL_BATCH * STEPS)


def local_block(x, y, rows):
    """This process's rows of every global batch, in batch order."""
    idx = np.concatenate([np.arange(GLOBAL_BATCH)[rows] + b * GLOBAL_BATCH
                          for b in range(STEPS)])
    return {k: v[idx] for k, v in x.items()}, y[idx]


def build(loss):
    keras.utils.set_random_seed(0)
    encoder = khn.encoders.small_convnet(input_shape=(8, 8, 3), width=4)  # batch norm
    model = khn.models.SimCLR(encoder, projection_dims=(16, 8))
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss=LOSSES[loss]())
    return model


class StepLosses(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        self.losses = []

    def on_train_batch_end(self, batch, logs=None):
        self.losses.append(float(logs["loss"]))  # running mean over the epoch's steps


def train(model, x, y, batch_size):
    record = StepLosses()
    model.fit(x, y, batch_size=batch_size, epochs=1, shuffle=False, verbose=0,
              callbacks=[record])
    return np.array(record.losses), model.get_weights()


def row_order(dist, local):
    """Keras's JAX trainer makes a global batch from each process's rows with
    ``jax.make_array_from_process_local_data`` under the distribution's data layout; this does
    the same with ``local`` and returns ``(sum_i i * global[i], len(global))`` (the sum is
    order-sensitive: it tells whether process p's block sits at rows p * len(local) on)."""
    import jax

    layout = dist.keras_distribution.get_data_layout(local.shape).backend_layout
    global_array = jax.make_array_from_process_local_data(layout, local)
    weighted = jax.jit(lambda a: (a * jax.numpy.arange(a.shape[0])).sum(),
                       out_shardings=jax.sharding.NamedSharding(layout.mesh,
                                                                jax.sharding.PartitionSpec()))
    return float(np.asarray(weighted(global_array))), int(global_array.shape[0])


def log(what):
    print(f"{time.perf_counter() - T0:6.1f}s {what}", file=sys.stderr, flush=True)


def equality(dist, out_dir):
    """The 3-step equality check (module docstring): writes ``worker{ID}.npz``."""
    process_id = dist.place.index
    out = {}
    rows = dist.place.local_rows(GLOBAL_BATCH)
    ids = np.arange(GLOBAL_BATCH, dtype="float32")
    out["row_order"], out["row_order_rows"] = row_order(dist, ids[rows])
    out["row_order_expected"] = float((ids * ids).sum())
    x, y = global_data()
    lx, ly = local_block(x, y, rows)
    for loss in LOSSES:
        with dist.scope():
            model = build(loss)
            start = model.get_weights()
            paths = [v.path for v in model.weights]
            out[f"{loss}/trainable"] = np.array([paths.index(v.path)
                                                 for v in model.trainable_variables])
            out[f"{loss}/devices"] = np.array(
                len(model.trainable_variables[0].value.sharding.device_set))
            losses, after = train(model, lx, ly, rows.stop - rows.start)
        log(f"{loss}: distributed fit")
        out[f"{loss}/losses"] = losses
        for i, w in enumerate(after):
            out[f"{loss}/w{i}"] = w
        if process_id == 0:  # the reference: one process, no distribution, global batches
            reference = build(loss)
            reference.set_weights(start)
            ref_losses, ref_after = train(reference, x, y, GLOBAL_BATCH)
            out[f"{loss}/ref_losses"] = ref_losses
            for i, (w, s) in enumerate(zip(ref_after, start)):
                out[f"{loss}/ref{i}"] = w
                out[f"{loss}/start{i}"] = s
            log(f"{loss}: reference fit")
    np.savez(os.path.join(out_dir, f"worker{process_id}.npz"), **out)


def run_train(dist, out_dir):
    """``keras_hardneg.run.train`` of a tiny digits recipe under the distribution, with
    uniform batches and with BatchSampler (a graph refresh every epoch: the sharded walk,
    the step clock, the bank gathered across processes, the graph checksum compared); the
    chief then runs the same recipes in one process. Writes ``train{ID}.json`` (loss
    histories per sampler)."""
    import json

    from keras_hardneg.data.digits import load_digits
    from keras_hardneg.run import train as run_train

    (x, y), (xt, yt) = load_digits(test_fraction=0.2, seed=0)
    data = ((x[:32], y[:32]), (xt[:16], yt[:16]), "digits subset")
    out = {}
    for sampler in ({"name": "uniform"},
                    {"name": "batchsampler", "num_candidates": 8, "num_neighbors": 4,
                     "refresh_every": 2}):
        name = sampler["name"]
        recipe = {"name": "jax_mp", "epochs": 2, "batch_size": 16, "seed": 0,
                  "projection_dims": [16, 8], "encoder": {"name": "small_convnet", "width": 4},
                  "optimizer": {"name": "sgd", "learning_rate": 0.05},
                  "schedule": {"name": "constant"}, "sampler": sampler,
                  "evaluation": {"monitor_every": 0, "linear_probe": False, "knn_k": 5}}
        result = run_train(recipe, os.path.join(out_dir, f"run_{name}"), verbose=0,
                           export=False, data=data, distribution=dist)
        log(f"run.train {name}: distributed")
        out[name] = {"loss": result["history"]["loss"],
                     "chief_results": "knn_accuracy" in result}
        if dist.place.is_chief:
            single = run_train(recipe, os.path.join(out_dir, f"single_{name}"), verbose=0,
                               export=False, data=data)
            out[name]["single_loss"] = single["history"]["loss"]
            log(f"run.train {name}: one process")
    with open(os.path.join(out_dir, f"train{dist.place.index}.json"), "w") as f:
        json.dump(out, f)


def main(coordinator, num_processes, process_id, out_dir, mode):
    log("imported")
    # A seed set first (as every model below does anyway) spares the distribution's seed
    # broadcast, a cross-process compile that cost ~10 s on 2 loaded cores.
    keras.utils.set_random_seed(0)
    dist = build_distribution({"name": "jax_multi_process", "coordinator_address": coordinator,
                               "num_processes": num_processes, "process_id": process_id,
                               "initialization_timeout": 60})
    assert dist.place.num_workers == num_processes and dist.place.index == process_id
    log("initialized")
    if "equality" in mode.split("+"):  # the resume-point check: agree, then disagree
        dist.same_on_every_worker("a test value", 7)
        try:
            dist.same_on_every_worker("a test value", process_id)
            disagreement = ""
        except ConfigError as err:
            disagreement = str(err)
        with open(os.path.join(out_dir, f"disagree{process_id}.txt"), "w") as f:
            f.write(disagreement)
        log("same_on_every_worker")
    for part in mode.split("+"):  # e.g. "equality+train": both, in one pair of processes
        {"equality": equality, "train": run_train}[part](dist, out_dir)
    print(f"worker {process_id} done: {dist.describe()}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5])
