"""FusedBatchNormalization on every backend (this module runs under TensorFlow and JAX): the
same variables as keras.layers.BatchNormalization, in the same order, and the same function
(the fused TensorFlow kernel on TensorFlow, Keras's own math elsewhere)."""

import keras
import numpy as np
import pytest

from keras_hardneg.encoders import FusedBatchNormalization

pytestmark = pytest.mark.backends


def test_same_weights_outputs_and_moving_statistics_as_keras_batch_norm():
    rng = np.random.default_rng(0)
    shape = (4, 5, 5, 3)
    ref = keras.layers.BatchNormalization(momentum=0.9, epsilon=1e-5)
    fused = FusedBatchNormalization(momentum=0.9, epsilon=1e-5)
    ref.build(shape)
    fused.build(shape)
    assert [(w.name, tuple(w.shape)) for w in fused.weights] == \
        [(w.name, tuple(w.shape)) for w in ref.weights]
    weights = [rng.normal(size=v.shape).astype("float32") for v in ref.weights]
    weights[-1] = np.abs(weights[-1]) + 0.1  # moving variance
    ref.set_weights(weights)
    fused.set_weights(weights)
    x = rng.normal(size=shape).astype("float32")
    for training in (True, False):
        np.testing.assert_allclose(keras.ops.convert_to_numpy(fused(x, training=training)),
                                   keras.ops.convert_to_numpy(ref(x, training=training)),
                                   rtol=1e-4, atol=1e-5)
    for a, b in zip(fused.get_weights(), ref.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
