"""Run as ``python distributed_check.py KIND TMPDIR`` (one framework per process: TF collectives of two strategies in one
process interfere): trains a framework on one device and under MirroredStrategy over 2
logical CPUs (same data, same initial weights) and prints the differences as JSON."""

import json
import sys

import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_hardneg as khn  # noqa: E402

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
    enc = encoder()
    if kind == "simclr":
        model = khn.models.SimCLR(enc, projection_dims=(16, 8))
        loss = khn.losses.HardNegativeContrastiveLoss(temperature=0.5, tau_plus=0.1, beta=1.0)
    elif kind == "moco_v2":
        model = khn.models.MoCo(enc, projection_dims=(16, 8), queue_size=16, momentum=0.9,
                                version="v2")
        loss = khn.losses.NTXentLoss(temperature=0.2)
    else:
        model = khn.models.MoCo(enc, projection_dims=(16, 8), momentum=0.9, version="v3",
                                predictor_dims=(16, 8))
        loss = khn.losses.DebiasedContrastiveLoss(temperature=0.2, tau_plus=0.1)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss=loss)
    return model


def data():
    rng = np.random.default_rng(0)
    v1 = rng.uniform(size=(STEPS * BATCH, 8, 8, 3)).astype("float32")
    v2 = np.clip(v1 + 0.1 * rng.normal(size=v1.shape), 0, 1).astype("float32")
    y = rng.integers(0, 3, STEPS * BATCH)
    return tf.data.Dataset.from_tensor_slices(({"view1": v1, "view2": v2}, y)).batch(
        BATCH, drop_remainder=True)


def run(kind, strategy):
    with strategy.scope():
        model = build(kind)
        init_path = f"{sys.argv[2]}/init_{kind}.weights.h5"
        if isinstance(strategy, tf.distribute.MirroredStrategy):
            model.load_weights(init_path)
        else:
            model.save_weights(init_path)
    init_weights = [np.asarray(w) for w in model.get_weights()]
    losses = []
    for _ in range(STEPS):  # one step per call, so every step's loss is seen
        h = model.fit(data().skip(len(losses)).take(1), epochs=1, verbose=0)
        losses.append(h.history["loss"][0])
    weights = [np.asarray(w) for w in model.get_weights()]
    extra = {}
    if kind == "moco_v2":
        extra["queue"] = np.asarray(model.queue.value)
        extra["pointer"] = int(np.asarray(model.queue_pointer.value))
    return losses, weights, extra, init_weights


out = {}
for kind in sys.argv[1:2]:
    single = run(kind, tf.distribute.get_strategy())
    mirrored = run(kind, tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))
    out[kind] = {
        "loss_single": single[0],
        "loss_mirrored": mirrored[0],
        "max_weight_diff": max(float(np.max(np.abs(a - b))) for a, b in zip(single[1], mirrored[1])),
        "max_weight_change": max(float(np.max(np.abs(a - c))) for a, c in zip(single[1], single[3])),
        # Per variable: |update(mirrored) - update(single)| / |update(single)|, for variables
        # that moved (a bias feeding batch norm has a zero gradient in exact arithmetic).
        "relative_update_diff": max(
            float(np.linalg.norm(a - b) / np.linalg.norm(a - c))
            for a, b, c in zip(single[1], mirrored[1], single[3]) if np.linalg.norm(a - c) > 1e-3),
        "queue_diff": (float(np.max(np.abs(single[2]["queue"] - mirrored[2]["queue"])))
                       if "queue" in single[2] else 0.0),
        "pointers": [single[2].get("pointer"), mirrored[2].get("pointer")],
    }
print("RESULT " + json.dumps(out))
