"""Run as ``python mirrored_check.py``: every loss under ``tf.distribute.MirroredStrategy``
over 2 logical CPUs against one device, printing ``RESULT {json}``.

1. The loss alone (no model), in a replica context: each replica reduces its half of the
   batch with ``sample_weight``; the replicas' values summed (what their gradients add up
   to) are compared with what Keras's rule gives: one device's value on the whole batch for
   ``"sum"`` and ``"sum_over_batch_size"`` (the latter scaled by ``1/R`` per replica), the
   mean of the replicas' weighted means for ``"mean_with_sample_weight"``.
2. SimCLR (gathered negatives) with each loss, ``sample_weight`` and a non-default
   reduction: one step under the strategy moves the weights as one device does."""

import json

import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_hardneg as khn  # noqa: E402

R, B, D, K = 2, 8, 8, 24
LOSSES = {
    "nt_xent": lambda **kw: khn.losses.NTXentLoss(temperature=0.5, **kw),
    "debiased": lambda **kw: khn.losses.DebiasedContrastiveLoss(temperature=0.5, tau_plus=0.1,
                                                                **kw),
    "hard": lambda **kw: khn.losses.HardNegativeContrastiveLoss(temperature=0.5, tau_plus=0.1,
                                                                beta=1.0, **kw),
    "ring": lambda **kw: khn.losses.RingContrastiveLoss(temperature=0.5, lower_percentile=5,
                                                        upper_percentile=60, **kw),
    "unremix": lambda **kw: khn.losses.UnReMixContrastiveLoss(temperature=0.5, beta=1.0, **kw),
}
# The framework check's reduction per loss (both non-default reductions are covered).
FRAMEWORK_REDUCTION = {"nt_xent": "sum", "debiased": "mean", "hard": "sum",
                       "ring": "sum_over_batch_size", "unremix": "sum"}

strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
rng = np.random.default_rng(0)
q, k = rng.normal(size=(2, B, D)).astype("float32")
queue = rng.normal(size=(K, D)).astype("float32")
w = rng.uniform(0.2, 2.0, size=B).astype("float32")
halves = [slice(0, B // R), slice(B // R, B)]


def per_replica(*arrays):
    """The arrays split along the batch, replica i getting part i."""
    return [strategy.experimental_distribute_values_from_function(
        lambda ctx, a=a: tf.constant(a[halves[ctx.replica_id_in_sync_group]])) for a in arrays]


def summed(fn, *arrays):
    values = strategy.run(tf.function(fn), args=tuple(per_replica(*arrays)))
    return float(strategy.reduce("SUM", values, axis=None))


out = {"loss": {}, "framework": {}}
for name, make in LOSSES.items():
    for reduction in ("sum_over_batch_size", "sum", "mean_with_sample_weight"):
        loss = make(reduction=reduction)
        queue_t = tf.constant(queue)
        mirrored_queue = summed(
            lambda a, b, sw, loss=loss: loss.call_with_negatives(a, b, queue_t, sample_weight=sw),
            q, k, w)
        mirrored_batch = summed(lambda a, b, sw, loss=loss: loss(a, b, sample_weight=sw), q, k, w)
        # Keras's rule: each replica reduces its own half (its in-batch pairs, and UnReMix's
        # pseudo-label pool, are the half's), a mean reduction scaled by 1/R.
        scale = 1.0 / R if reduction != "sum" else 1.0
        want_queue = sum(scale * float(loss.call_with_negatives(q[h], k[h], queue,
                                                                 sample_weight=w[h]))
                         for h in halves)
        want_batch = sum(scale * float(loss(q[h], k[h], sample_weight=w[h])) for h in halves)
        case = {"queue": [mirrored_queue, want_queue], "in_batch": [mirrored_batch, want_batch]}
        if reduction != "mean_with_sample_weight" and name != "unremix":
            # Per-anchor queue losses: the replicas add up to one device's whole batch.
            case["queue_one_device"] = [mirrored_queue, float(
                loss.call_with_negatives(q, k, queue, sample_weight=w))]
        if reduction == "mean_with_sample_weight":  # the mean of the replicas' weighted means
            per_anchor = [make(reduction=None).call_with_negatives(q[h], k[h], queue).numpy()
                          for h in halves]
            case["queue_weighted_means"] = [mirrored_queue, float(np.mean(
                [(p * w[h]).sum() / w[h].sum() for p, h in zip(per_anchor, halves)]))]
        out["loss"][f"{name}/{reduction}"] = case


def encoder():
    # BN-free, so one device and two replicas see the same function of the batch.
    return keras.Sequential([
        keras.Input((8, 8, 3)),
        keras.layers.Conv2D(4, 3, kernel_initializer=keras.initializers.GlorotUniform(seed=1)),
        keras.layers.ReLU(), keras.layers.GlobalAveragePooling2D(),
        keras.layers.Dense(16, kernel_initializer=keras.initializers.GlorotUniform(seed=2))])


def simclr(name):
    keras.utils.set_random_seed(0)
    model = khn.models.SimCLR(encoder(), projection_dims=(16, 8))
    model.compile(optimizer=keras.optimizers.SGD(0.1),
                  loss=LOSSES[name](reduction=FRAMEWORK_REDUCTION[name]))
    return model


v1 = rng.uniform(size=(B, 8, 8, 3)).astype("float32")
v2 = np.clip(v1 + 0.1 * rng.normal(size=v1.shape), 0, 1).astype("float32")
labels = rng.integers(0, 3, B)
data = tf.data.Dataset.from_tensor_slices(({"view1": v1, "view2": v2}, labels, w)).batch(B)
for name in LOSSES:
    single = simclr(name)
    start = single.get_weights()
    single.fit(data, epochs=1, verbose=0)
    with strategy.scope():
        mirrored = simclr(name)
    mirrored.set_weights(start)
    mirrored.fit(data, epochs=1, verbose=0)
    names = [v.path for v in single.weights]
    trained = [names.index(v.path) for v in single.trainable_variables]
    after_s, after_m = single.get_weights(), mirrored.get_weights()
    # Per trained variable: |update(mirrored) - update(single)| / |update(single)|.
    relative = [float(np.linalg.norm(after_m[i] - after_s[i])
                      / np.linalg.norm(after_s[i] - start[i]))
                for i in trained if np.linalg.norm(after_s[i] - start[i]) > 1e-4]
    out["framework"][f"{name}/{FRAMEWORK_REDUCTION[name]}"] = {
        "moved": len(relative), "max_relative_update_diff": max(relative)}
print("RESULT " + json.dumps(out))
