"""FusedBatchNormalization computes what keras.layers.BatchNormalization computes."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_hardneg.encoders import FusedBatchNormalization, resnet18_cifar, small_convnet


def _pair(shape, dtype="float32", seed=0, **kwargs):
    rng = np.random.default_rng(seed)
    ref = keras.layers.BatchNormalization(momentum=0.9, epsilon=1e-5, dtype=dtype, **kwargs)
    fused = FusedBatchNormalization(momentum=0.9, epsilon=1e-5, dtype=dtype, **kwargs)
    ref.build(shape)
    fused.build(shape)
    weights = [rng.normal(size=v.shape).astype("float32") for v in ref.weights]
    weights[-1] = np.abs(weights[-1]) + 0.1  # moving variance
    ref.set_weights(weights)
    fused.set_weights(weights)
    return ref, fused


def _run(layer, x, training):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x, training=training)
        # A loss that is not invariant to the normalisation (unlike sum(y)).
        loss = tf.reduce_sum(tf.cast(y, tf.float32) * tf.sin(3.0 * x))
    grads = tape.gradient(loss, [x] + layer.trainable_variables)
    return y, grads, [v.numpy() for v in layer.non_trainable_variables]


@pytest.mark.parametrize("shape", [(8, 6, 6, 5), (2, 1, 1, 3), (1, 3, 4, 2), (16, 2, 2, 7)])
@pytest.mark.parametrize("training", [True, False])
def test_equals_keras_batch_norm_float32(shape, training):
    x = tf.constant(np.random.default_rng(1).normal(size=shape).astype("float32") * 3 + 1)
    ref, fused = _pair(shape)
    y_ref, g_ref, s_ref = _run(ref, x, training)
    y, g, s = _run(fused, x, training)
    np.testing.assert_allclose(y, y_ref, rtol=1e-5, atol=1e-5)
    for a, b in zip(g, g_ref):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
    # Moving statistics: biased batch variance, as Keras (the fused kernel's is unbiased).
    for a, b in zip(s, s_ref):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_mixed_bfloat16_matches_within_bfloat16_precision():
    shape = (8, 6, 6, 5)
    x = tf.constant(np.random.default_rng(2).normal(size=shape).astype("float32"))
    ref, fused = _pair(shape, dtype="mixed_bfloat16")
    y_ref, g_ref, s_ref = _run(ref, x, True)
    y, g, s = _run(fused, x, True)
    assert y.dtype == tf.bfloat16 and fused.moving_mean.dtype == "float32"
    np.testing.assert_allclose(np.float32(y), np.float32(y_ref), atol=3e-2)
    for a, b in zip(g[1:], g_ref[1:]):   # gamma, beta: float32 variables
        np.testing.assert_allclose(a, b, rtol=2e-2, atol=2e-2)
    for a, b in zip(s, s_ref):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kwargs", [{"center": False}, {"scale": False},
                                    {"center": False, "scale": False}])
def test_without_center_or_scale(kwargs):
    shape = (4, 3, 3, 6)
    x = tf.constant(np.random.default_rng(3).normal(size=shape).astype("float32"))
    ref, fused = _pair(shape, **kwargs)
    np.testing.assert_allclose(fused(x, training=True), ref(x, training=True), atol=1e-5)
    np.testing.assert_allclose(fused(x, training=False), ref(x, training=False), atol=1e-5)


def test_frozen_layer_uses_moving_statistics_in_training():
    shape = (4, 3, 3, 2)
    x = tf.constant(np.random.default_rng(4).normal(size=shape).astype("float32"))
    ref, fused = _pair(shape)
    ref.trainable = fused.trainable = False
    before = [v.numpy() for v in fused.non_trainable_variables]
    np.testing.assert_allclose(fused(x, training=True), ref(x, training=True), atol=1e-5)
    for a, b in zip(before, fused.non_trainable_variables):
        np.testing.assert_array_equal(a, b.numpy())


@pytest.mark.parametrize("shape,kwargs", [((5, 4), {}), ((2, 3, 3, 4), {"axis": 1}),
                                          ((2, 3, 3, 4), {"renorm": True})])
def test_falls_back_to_keras_where_the_kernel_does_not_apply(shape, kwargs):
    x = tf.constant(np.random.default_rng(5).normal(size=shape).astype("float32"))
    ref, fused = _pair(shape, **kwargs)
    np.testing.assert_allclose(fused(x, training=True), ref(x, training=True), atol=1e-5)
    for a, b in zip(fused.non_trainable_variables, ref.non_trainable_variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-6)


def test_inside_a_compiled_graph_and_jit():
    shape = (4, 5, 5, 3)
    x = tf.constant(np.random.default_rng(6).normal(size=shape).astype("float32"))
    ref, fused = _pair(shape)
    eager = np.asarray(fused(x, training=False))
    for jit in (False, True):
        np.testing.assert_allclose(tf.function(lambda t: fused(t, training=False),
                                               jit_compile=jit)(x), eager, atol=1e-5)


def test_serialization_round_trip(tmp_path):
    layer = FusedBatchNormalization(momentum=0.8, epsilon=1e-4, name="bn")
    clone = keras.layers.deserialize(keras.layers.serialize(layer))
    assert type(clone) is FusedBatchNormalization
    assert clone.get_config() == layer.get_config()
    model = small_convnet(input_shape=(8, 8, 3), width=4)
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    x = np.random.default_rng(7).uniform(size=(2, 8, 8, 3)).astype("float32")
    np.testing.assert_allclose(loaded(x), model(x), atol=1e-6)


def test_encoders_use_the_fused_layer_unless_synchronized():
    enc = resnet18_cifar(width=2, input_shape=(8, 8, 3))
    bns = [l for l in enc.layers if isinstance(l, keras.layers.BatchNormalization)]
    assert bns and all(isinstance(l, FusedBatchNormalization) for l in bns)
    synced = resnet18_cifar(width=2, input_shape=(8, 8, 3), sync_batchnorm=True)
    assert all(l.synchronized for l in synced.layers
               if isinstance(l, keras.layers.BatchNormalization))
