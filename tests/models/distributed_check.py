"""Run as ``python distributed_check.py KIND TMPDIR`` (one framework per process: TF
collectives of two strategies in one process interfere): trains a framework for a few steps
on one device, then replays every step under MirroredStrategy over 2 logical CPUs *from the
same state* (all weights: encoders, heads, key branch, queue, pointer) on the same batch, and
prints the per-step differences as JSON.

Each step is compared from an identical starting state because comparing free-running
trajectories measures the training dynamics, not the distribution: float32 round-off
(~1e-6 from a different reduction order) grows about tenfold per step at these learning
rates, exactly as it does for a single-device run whose initial weights are perturbed by
3e-7 (measured; see docs/notes/frameworks.md)."""

import json
import sys

import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import keras  # noqa: E402

keras.utils.set_random_seed(0)  # the heads' initial weights too: a deterministic check
import numpy as np  # noqa: E402

import check_frameworks  # noqa: E402  (beside this script)

STEPS, BATCH = 3, 8


def encoder():
    # BN-free, so one device and two replicas see the same function of the batch.
    return keras.Sequential([
        keras.Input((8, 8, 3)),
        keras.layers.Conv2D(4, 3, kernel_initializer=keras.initializers.GlorotUniform(seed=1)),
        keras.layers.ReLU(),
        keras.layers.GlobalAveragePooling2D(),
        keras.layers.Dense(16, kernel_initializer=keras.initializers.GlorotUniform(seed=2)),
    ])


def build(kind):
    return check_frameworks.build(kind, encoder())


def data():
    rng = np.random.default_rng(0)
    v1 = rng.uniform(size=(STEPS * BATCH, 8, 8, 3)).astype("float32")
    v2 = np.clip(v1 + 0.1 * rng.normal(size=v1.shape), 0, 1).astype("float32")
    y = rng.integers(0, 3, STEPS * BATCH)
    return tf.data.Dataset.from_tensor_slices(({"view1": v1, "view2": v2}, y)).batch(
        BATCH, drop_remainder=True)


def single_device(kind):
    """Trains STEPS steps on one device; the state before and after every step."""
    model = build(kind)
    before, after, losses = [], [], []
    for step in range(STEPS):  # one step per call, so every step's loss is seen
        before.append(model.get_weights())
        h = model.fit(data().skip(step).take(1), epochs=1, verbose=0)
        losses.append(h.history["loss"][0])
        after.append(model.get_weights())
    return before, after, losses


def mirrored_replay(kind, before):
    """Each step again under MirroredStrategy, starting from the single-device state."""
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        model = build(kind)
    after, losses = [], []
    for step, state in enumerate(before):
        model.set_weights(state)
        h = model.fit(data().skip(step).take(1), epochs=1, verbose=0)
        losses.append(h.history["loss"][0])
        after.append(model.get_weights())
    return after, losses, model


def update_diff(start, single, mirrored):
    """Per variable that moved: |update(mirrored) - update(single)| / |update(single)|
    (a bias feeding batch norm has a zero gradient in exact arithmetic, so it is skipped)."""
    return max(float(np.linalg.norm(m - s) / np.linalg.norm(s - b))
               for b, s, m in zip(start, single, mirrored)
               if np.issubdtype(s.dtype, np.floating) and np.linalg.norm(s - b) > 1e-3)


out = {}
for kind in sys.argv[1:2]:
    before, after_single, loss_single = single_device(kind)
    after_mirrored, loss_mirrored, mirrored_model = mirrored_replay(kind, before)
    names = [v.path for v in mirrored_model.weights]
    trained = [names.index(v.path) for v in mirrored_model.trainable_variables]
    out[kind] = {
        "loss_single": loss_single,
        "loss_mirrored": loss_mirrored,
        "relative_update_diff": [update_diff(b, s, m) for b, s, m in
                                 zip(before, after_single, after_mirrored)],
        # Over the weights trained by gradient (not counters or the health record).
        "max_weight_change": max(float(np.max(np.abs(after_single[-1][i] - before[0][i])))
                                 for i in trained),
        "max_weight_diff": max(float(np.max(np.abs(s.astype("float64") - m)))
                               for step in range(STEPS)
                               for s, m in zip(after_single[step], after_mirrored[step])),
    }
    if kind.startswith("moco_v2"):
        q = names.index(mirrored_model.queue.path)
        p = names.index(mirrored_model.queue_pointer.path)
        out[kind]["queue_diff"] = max(
            float(np.max(np.abs(s[q] - m[q]))) for s, m in zip(after_single, after_mirrored))
        out[kind]["pointers"] = [[int(s[p]), int(m[p])]
                                 for s, m in zip(after_single, after_mirrored)]
print("RESULT " + json.dumps(out))
