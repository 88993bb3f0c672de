"""Batch normalization that runs as one fused kernel on TensorFlow.

Keras 3's :class:`keras.layers.BatchNormalization` computes the batch moments, then
``(x - mean) * rsqrt(var + eps) * gamma + beta``, as separate element-wise ops, and under
``mixed_bfloat16`` it first casts the whole activation to float32 and back. On a CPU those
passes over ``[B, H, W, C]`` activations (and their gradients) cost more than the
convolutions around them. :class:`FusedBatchNormalization` computes exactly the same function
with TensorFlow's ``FusedBatchNormV3`` kernel (forward and gradient each one oneDNN op,
statistics accumulated in float32 whatever the input precision).

Same layer, same weights, same config: it is a subclass of
:class:`keras.layers.BatchNormalization` and falls back to it whenever the fused kernel does
not apply (another backend, input rank other than 4, ``axis`` not the last one,
``synchronized=True``, ``renorm``, a mask, or a frozen layer in training). The moving
variance is updated with the *biased* batch variance, as Keras does (the fused kernel
returns the unbiased one; it is rescaled by ``(n - 1) / n``).

Example:

>>> import numpy as np
>>> bn = FusedBatchNormalization(momentum=0.9, epsilon=1e-5)
>>> x = np.random.default_rng(0).normal(size=(4, 5, 5, 3)).astype("float32")
>>> y = bn(x, training=True)
>>> bool(np.allclose(np.asarray(y).mean(axis=(0, 1, 2)), 0.0, atol=1e-5))
True
"""

import keras

__all__ = ["FusedBatchNormalization"]


@keras.saving.register_keras_serializable(package="keras_hardneg")
class FusedBatchNormalization(keras.layers.BatchNormalization):
    """:class:`keras.layers.BatchNormalization` computed by one fused TensorFlow kernel.

    Inputs ``[B, H, W, C]`` (channels last), any float dtype; outputs in the layer's compute
    dtype. Arguments and weights are those of :class:`keras.layers.BatchNormalization`.
    """

    def _fusable(self, inputs, mask):
        axis = self.axis if isinstance(self.axis, int) else None
        return (mask is None and len(inputs.shape) == 4 and axis in (-1, 3)
                and not self.synchronized and not self.renorm
                and keras.backend.standardize_dtype(inputs.dtype)
                in ("float32", "bfloat16", "float16"))

    def call(self, inputs, training=None, mask=None):
        # Other backends compute Keras's own batch norm: the same weights, so a
        # .weights.h5 file loads across backends.
        if keras.backend.backend() != "tensorflow":
            return super().call(inputs, training=training, mask=mask)
        import tensorflow as tf

        inputs = tf.convert_to_tensor(inputs)
        if not self._fusable(inputs, mask):
            return super().call(inputs, training=training, mask=mask)
        channels = inputs.shape[-1]
        gamma = (tf.cast(self.gamma, tf.float32) if self.scale
                 else tf.ones([channels], tf.float32))
        beta = (tf.cast(self.beta, tf.float32) if self.center
                else tf.zeros([channels], tf.float32))
        if training and self.trainable:
            y, mean, unbiased_var, *_ = tf.raw_ops.FusedBatchNormV3(
                x=inputs, scale=gamma, offset=beta,
                mean=tf.zeros([0], tf.float32), variance=tf.zeros([0], tf.float32),
                epsilon=self.epsilon, data_format="NHWC", is_training=True)
            count = tf.cast(tf.reduce_prod(tf.shape(inputs)[:3]), tf.float32)
            variance = unbiased_var * (count - 1.0) / tf.maximum(count, 1.0)
            m = self.momentum
            self.moving_mean.assign(
                tf.cast(self.moving_mean, tf.float32) * m + tf.stop_gradient(mean) * (1.0 - m))
            self.moving_variance.assign(
                tf.cast(self.moving_variance, tf.float32) * m
                + tf.stop_gradient(variance) * (1.0 - m))
        else:
            y, *_ = tf.raw_ops.FusedBatchNormV3(
                x=inputs, scale=gamma, offset=beta,
                mean=tf.cast(self.moving_mean, tf.float32),
                variance=tf.cast(self.moving_variance, tf.float32),
                epsilon=self.epsilon, data_format="NHWC", is_training=False)
        return tf.cast(y, self.compute_dtype)
