"""The object a SavedModel export holds: the TF Hub "reusable SavedModel" interface.

``__call__(images, training=False)`` traced for both modes, ``variables``,
``trainable_variables``, ``regularization_losses``, and the ``serving_default``,
``serve`` and ``call_training`` endpoints. Images ``[B, H, W, 3]`` float32 in [0, 1] ->
features ``[B, F]`` float32.
"""

from __future__ import annotations

import tensorflow as tf

__all__ = ["ReusableEncoder", "SERVING_INPUT", "SERVING_OUTPUT"]

SERVING_INPUT = "images"
SERVING_OUTPUT = "features"


class ReusableEncoder(tf.__internal__.tracking.AutoTrackable):
    """The object that gets saved: the Reusable SavedModel interface around a Keras encoder.

    ``variables``, ``trainable_variables``: lists of ``tf.Variable`` (same order as
    ``encoder.variables``); ``regularization_losses``: list of argument-less
    ``tf.function``s; ``__call__(images, training=False)``.
    """

    def __init__(self, encoder, input_spec):
        super().__init__()
        # Keras 3 (TF backend) variables wrap a tf.Variable in `.value`; save those,
        # not the Keras objects, so that loaders need no Keras at all.
        tvars = [v.value for v in encoder.trainable_variables]
        tids = {id(v) for v in tvars}
        self.variables = [v.value for v in encoder.variables]
        self.trainable_variables = [v for v in self.variables if id(v) in tids]
        self.regularization_losses = _regularization_fns(encoder)
        # The Keras model itself is not an attribute (only reached through the
        # closure below), so the SavedModel holds plain TF objects only.

        def call(images, training=False):
            images = tf.cast(images, tf.float32)
            # Python bool -> one graph per mode. In training=True, Keras 3
            # BatchNormalization assigns its moving mean/variance inside the graph.
            return tf.cast(encoder(images, training=bool(training)), tf.float32)

        self.__call__ = tf.function(call)
        # Trace both modes now, so the SavedModel holds exactly these two.
        self.__call__.get_concrete_function(input_spec, training=False)
        self.__call__.get_concrete_function(input_spec, training=True)

        def serve(images):
            return {SERVING_OUTPUT: self.__call__(images, training=False)}

        self.serving_default = tf.function(serve, input_signature=[input_spec])
        # Tensor-in/tensor-out endpoints for Keras 3 `TFSMLayer`, whose default
        # call_endpoint is "serve"; "call_training" is its call_training_endpoint.
        self.serve = tf.function(lambda images: self.__call__(images, training=False),
                                 input_signature=[input_spec])
        self.call_training = tf.function(lambda images: self.__call__(images, training=True),
                                         input_signature=[input_spec])


def _regularization_fns(encoder):
    """One argument-less tf.function per regularized trainable variable (may be [])."""

    def make(variable, regularizer):
        # A closure (not default arguments: tf.function would treat those as inputs).
        def loss():
            return tf.cast(regularizer(variable.value), tf.float32)

        return tf.function(loss, input_signature=[])

    return [make(v, v.regularizer) for v in encoder.trainable_variables
            if getattr(v, "regularizer", None) is not None]
