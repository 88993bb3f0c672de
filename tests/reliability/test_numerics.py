"""Numerics: the guard stops a broken run before a checkpoint is overwritten; mixed precision
trains every loss without a non-finite value."""

import json
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_hardneg as khn
from tests.reliability.mixed_precision_matrix import train_steps


def _views(n, seed=0):
    rng = np.random.default_rng(seed)
    v1 = rng.uniform(size=(n, 8, 8, 3)).astype("float32")
    v2 = np.clip(v1 + 0.1 * rng.normal(size=v1.shape), 0, 1).astype("float32")
    return {"view1": v1, "view2": v2}


@keras.saving.register_keras_serializable(package="tests_reliability")
class NaNGradientIfMarked(keras.layers.Layer):
    """``features`` unchanged forward; NaN gradient into the encoder for a batch whose images
    hold a pixel > 1.5 (the loss stays finite)."""

    def call(self, inputs):
        images, features = inputs
        bad = tf.reduce_max(images) > 1.5

        @tf.custom_gradient
        def f(x):
            def grad(dy):
                return tf.where(bad, dy * float("nan"), dy)

            return tf.identity(x), grad

        return f(features)


def _model(framework, nan_gradient_layer=False):
    keras.utils.set_random_seed(0)
    enc = khn.encoders.small_convnet(input_shape=(8, 8, 3), width=4)
    if nan_gradient_layer:
        inp = keras.Input((8, 8, 3))
        enc = keras.Model(inp, NaNGradientIfMarked()([inp, enc(inp)]))
    if framework == "simclr":
        model = khn.models.SimCLR(enc, projection_dims=(16, 8))
    else:
        model = khn.models.MoCo(enc, projection_dims=(16, 8), queue_size=32, momentum=0.9)
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  loss=khn.losses.HardNegativeContrastiveLoss())
    return model


class _Record(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.after = {}

    def on_train_batch_end(self, batch, logs=None):
        self.after[batch] = [w.numpy().copy() for w in self.model.weights]


@pytest.mark.parametrize("framework", ["simclr", "moco"])
def test_nan_batch_stops_before_checkpoint_overwrite(tmp_path, framework):
    """Guard first, a batch-level checkpoint after it, NaN pixels in batch 3: the run stops
    with a report naming the step, the broken terms and the inputs, and the committed
    checkpoint is the state after batch 2 (it was not rewritten for batch 3)."""
    model = _model(framework)
    x = _views(5 * 8)
    x["view1"][3 * 8 + 2, 1, 1, 0] = np.nan
    record = _Record()
    backup = khn.callbacks.AtomicBackupAndRestore(str(tmp_path / "b"), save_freq=1)
    with pytest.raises(khn.callbacks.NonFiniteError) as err:
        model.fit(x, batch_size=8, epochs=1, shuffle=False, verbose=0,
                  callbacks=[record, backup])
    msg = str(err.value)
    # In a compiled step TF fuses batch norm + ReLU (oneDNN), whose ReLU maps NaN to 0: the
    # forward pass can stay finite while the batch statistics, hence the gradients, are NaN.
    # The report names what actually broke (loss, gradients or projections).
    assert "epoch 0, batch 3" in msg
    assert re.search(r"non-finite (loss|gradients|projection)", msg), msg
    assert "1 non-finite input values" in msg
    assert 3 not in record.after  # no later callback saw the broken batch
    meta = json.load(open(tmp_path / "b" / "training_metadata.json"))
    assert meta["batch"] == 2
    fresh = _model(framework)
    fresh.load_weights(str(tmp_path / "b" / meta["weights"]))
    for v, saved, pre in zip(fresh.weights, [w.numpy() for w in fresh.weights], record.after[2]):
        if "health" not in v.path:
            np.testing.assert_array_equal(saved, pre, err_msg=v.path)


def test_nan_gradient_with_finite_loss_is_named():
    """A finite loss with a NaN gradient: the report says 'gradients' and the update is
    skipped (weights as after the previous batch)."""
    model = _model("simclr", nan_gradient_layer=True)
    x = _views(3 * 8)
    x["view1"][2 * 8, 0, 0, 0] = 2.0  # marks batch 2
    record = _Record()
    with pytest.raises(khn.callbacks.NonFiniteError, match=r"batch 2.*non-finite gradients\."):
        model.fit(x, batch_size=8, epochs=1, shuffle=False, verbose=0, callbacks=[record])
    for v, pre in zip(model.weights, record.after[1]):
        if "health" not in v.path:
            np.testing.assert_array_equal(v.numpy(), pre, err_msg=v.path)


def test_guard_without_raise_stops_training():
    model = _model("simclr")
    x = _views(4 * 8)
    x["view2"][8:16] = np.inf
    guard = khn.callbacks.NonFiniteGuard(raise_error=False)
    hist = model.fit(x, batch_size=8, epochs=3, shuffle=False, verbose=0, callbacks=[guard])
    assert len(hist.history["loss"]) == 1 and "batch 1" in guard.report


# Reduced matrix in the suite; the full one (5 losses x 2 policies x 200 steps) is
# tests/reliability/mixed_precision_matrix.py, result in docs/reliability.md.
@pytest.mark.parametrize("loss,policy,steps", [
    ("hard", "mixed_float16", 200),
    ("unremix", "mixed_bfloat16", 200),
    ("nt_xent", "mixed_bfloat16", 30),
    ("debiased", "mixed_float16", 30),
    ("ring", "mixed_bfloat16", 30),
])
def test_mixed_precision_trains_without_nonfinite(loss, policy, steps):
    r = train_steps(loss, policy, steps)
    assert r["steps"] == steps
    assert r["nonfinite_steps"] == 0
    assert r["losses_finite"] and r["weights_finite"]
    assert keras.config.dtype_policy().name == "float32"
