"""Run as ``python jax_data_parallel_check.py KIND [KIND ...]`` with ``KERAS_BACKEND=jax`` and
``XLA_FLAGS=--xla_force_host_platform_device_count=2`` (set before JAX is imported): trains
one step of a framework on one device, then the same step from the same weights under
``keras.distribution.DataParallel`` over the 2 CPU devices, and prints the losses and the
largest weight difference as JSON, one object per KIND (one process for all: each start
costs the imports and JAX's start-up again).

Keras's JAX trainer compiles one step over the *global* batch, sharded across the devices,
so in-batch negatives (and batch norm's statistics) are those of the global batch with no
explicit all-gather: the two runs compute the same function up to reduction order."""

import json
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")

import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_hardneg as khn  # noqa: E402
import check_frameworks  # noqa: E402  (beside this script)

BATCH = 8


def build(kind):
    keras.utils.set_random_seed(0)
    return check_frameworks.build(kind, khn.encoders.small_convnet(input_shape=(8, 8, 3),
                                                                   width=4))  # with batch norm


def data():
    rng = np.random.default_rng(0)
    v1 = rng.uniform(size=(BATCH, 8, 8, 3)).astype("float32")
    v2 = np.clip(v1 + 0.1 * rng.normal(size=v1.shape), 0, 1).astype("float32")
    return {"view1": v1, "view2": v2}, rng.integers(0, 3, BATCH)


def one_step(model, start):
    model.set_weights(start)
    x, y = data()
    history = model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    return history.history["loss"][0], model.get_weights()


def check(kind):
    keras.distribution.set_distribution(None)
    single = build(kind)
    start = single.get_weights()
    loss_single, after_single = one_step(single, start)

    keras.distribution.set_distribution(keras.distribution.DataParallel(devices=jax.devices()))
    parallel = build(kind)
    loss_parallel, after_parallel = one_step(parallel, start)
    devices = len(parallel.trainable_variables[0].value.sharding.device_set)
    names = [v.path for v in parallel.weights]
    trained = [names.index(v.path) for v in parallel.trainable_variables]
    return {
        "devices": devices,
        "loss_single": float(loss_single),
        "loss_parallel": float(loss_parallel),
        "moved": sum(bool(np.any(after_single[i] != start[i])) for i in trained),
        "max_weight_change": max(float(np.max(np.abs(after_single[i] - start[i])))
                                 for i in trained),
        "max_weight_diff": max(float(np.max(np.abs(s.astype("float64") - p)))
                               for s, p in zip(after_single, after_parallel)
                               if np.issubdtype(s.dtype, np.floating)),
    }


assert keras.backend.backend() == "jax" and len(jax.devices()) == 2, jax.devices()
print("RESULT " + json.dumps({kind: check(kind) for kind in sys.argv[1:]}))
