"""The object a SavedModel export holds: the TF Hub "reusable SavedModel" interface.

``__call__(inputs, training=False)`` traced for both modes, ``variables``,
``trainable_variables``, ``regularization_losses``, the ``serving_default``, ``serve`` and
``call_training`` endpoints, and ``assets`` (``{file name: tf.saved_model.Asset}``,
possibly empty). ``inputs`` is, per modality (see ``keras_hardneg.modalities.signatures``):

- image: ``images`` float32 ``[B, H, W, 3]`` in [0, 1] (``__call__`` also takes uint8
  0-255 pixels, divided by 255; a keras-hardneg encoder also reads float 0-255 pixels,
  see ``keras_hardneg.encoders.normalization``);
- text: ``token_ids`` int32 ``[B, L]``;
- graph: a dict of the six graph-batch tensors (``nodes``, ``edges``, ``node_graph``,
  ``node_mask``, ``edge_mask``, ``graph_mask``), ``B`` = length of ``graph_mask``.

The output is features ``[B, F]`` float32. ``serving_default`` takes the input tensors
by name (``images=``, ``token_ids=``, or the six graph names) and returns
``{"features": [B, F]}``; ``serve`` / ``call_training`` take ``inputs`` as one argument
(a tensor, or the graph dict) and return the features tensor.
"""

from __future__ import annotations

import keyword
import types

import tensorflow as tf

__all__ = ["ReusableEncoder", "SERVING_INPUT", "SERVING_OUTPUT", "fine_tunable_variables"]

SERVING_INPUT = "images"
SERVING_OUTPUT = "features"


class ReusableEncoder(tf.__internal__.tracking.AutoTrackable):
    """The object that gets saved: the Reusable SavedModel interface around a Keras encoder.

    ``variables``, ``trainable_variables``: lists of ``tf.Variable`` (same order as
    ``encoder.variables``); ``regularization_losses``: list of argument-less
    ``tf.function``s; ``__call__(inputs, training=False)``; ``assets``.

    Args:
        encoder: the Keras 3 model (TensorFlow backend).
        input_spec: a named ``tf.TensorSpec`` (images, token ids) or a dict of them
            (graph batch), the batch / node / edge axes ``None``.
        assets: ``{file name: path}`` of files to ship in ``assets/`` (the path's base
            name must be the file name), or ``None``.
    """

    def __init__(self, encoder, input_spec, assets=None):
        super().__init__()
        # Keras 3 (TF backend) variables wrap a tf.Variable in `.value`; save those,
        # not the Keras objects, so that loaders need no Keras at all.
        tvars = [v.value for v in fine_tunable_variables(encoder)]
        tids = {id(v) for v in tvars}
        self.variables = [v.value for v in encoder.variables]
        self.trainable_variables = [v for v in self.variables if id(v) in tids]
        self.regularization_losses = _regularization_fns(encoder)
        self.assets = {name: tf.saved_model.Asset(path)
                       for name, path in (assets or {}).items()}
        # The Keras model itself is not an attribute (only reached through the
        # closure below), so the SavedModel holds plain TF objects only.

        def body(inputs, training):
            if isinstance(inputs, tf.Tensor) and inputs.dtype == tf.uint8:
                # uint8 images are 0-255 pixels: [0, 1] as the export's contract says.
                inputs = tf.cast(inputs, tf.float32) / 255.0
            # No-op casts for exact matches; the traced signatures fix the dtypes.
            inputs = tf.nest.map_structure(lambda x, s: tf.cast(x, s.dtype), inputs,
                                           input_spec)
            # Python bool -> one graph per mode. In training=True, Keras 3
            # BatchNormalization assigns its moving mean/variance inside the graph.
            return tf.cast(encoder(inputs, training=bool(training)), tf.float32)

        # The argument is named after the input (`images`, `token_ids`; `inputs` for
        # the graph dict), so keyword calls such as obj(images=x) keep working.
        arg = input_spec.name if isinstance(input_spec, tf.TensorSpec) else "inputs"
        self.__call__ = tf.function(_named(arg, body, training_arg=True))
        # Trace both modes now, so the SavedModel holds exactly these two.
        infer = self.__call__.get_concrete_function(input_spec, training=False)
        train = self.__call__.get_concrete_function(input_spec, training=True)
        if arg == SERVING_INPUT:  # images: uint8 pixels too (obj(uint8_images))
            pixels = tf.TensorSpec(input_spec.shape, tf.uint8, name=input_spec.name)
            self.__call__.get_concrete_function(pixels, training=False)
            self.__call__.get_concrete_function(pixels, training=True)

        # The endpoints call these concrete functions (calling the tf.function again
        # would trace a third graph when the argument's placeholder names differ).
        # Signature input names are the TensorSpec names (the graph dict's keys).
        self.serving_default = tf.function(
            _named(arg, lambda x: {SERVING_OUTPUT: infer(x, training=False)}),
            input_signature=[input_spec])
        # Tensor-in/tensor-out endpoints for Keras 3 `TFSMLayer`, whose default
        # call_endpoint is "serve"; "call_training" is its call_training_endpoint.
        self.serve = tf.function(_named(arg, lambda x: infer(x, training=False)),
                                 input_signature=[input_spec])
        self.call_training = tf.function(_named(arg, lambda x: train(x, training=True)),
                                         input_signature=[input_spec])

def fine_tunable_variables(encoder):
    """The variables fine-tuning trains: ``encoder.trainable_variables``, or, for a frozen
    encoder (``encoder.trainable`` False, e.g. ``zoo.load(name, trainable=False)``), the
    ones that train once it is unfrozen (never BN moving statistics). An export is
    fine-tunable whatever the encoder's state when exported; freezing is the loader's
    choice (``hub.KerasLayer(dir, trainable=False)``). A partly frozen encoder keeps the
    layers frozen that its user froze. The encoder is left as it was.
    """
    if encoder.trainable:
        return list(encoder.trainable_variables)
    layers = list(encoder._flatten_layers(include_self=True))  # parents before children
    layer_states = [(layer, layer.trainable) for layer in layers]
    variable_states = [(v, v.trainable) for v in encoder.variables]
    try:
        encoder.trainable = True
        return list(encoder.trainable_variables)
    finally:
        for layer, state in layer_states:  # a parent's setter resets its children: in order
            layer.trainable = state
        for variable, state in variable_states:
            variable.trainable = state


def _named(arg, fn, training_arg=False):
    """``fn`` as a function whose first argument is called ``arg`` (tf.function and
    tensorflow_hub read argument names): the input's name (``images``, ``token_ids``, a
    modality's own), or ``inputs`` for a dict of tensors."""
    if not arg.isidentifier() or keyword.iskeyword(arg):
        raise ValueError(f"export_encoder: the input name {arg!r} must be a Python "
                         "identifier (it names the SavedModel's argument)")
    template = ((lambda inputs, training=False: fn(inputs, training)) if training_arg
                else (lambda inputs: fn(inputs)))
    code = template.__code__
    code = code.replace(co_varnames=(arg,) + code.co_varnames[1:])
    return types.FunctionType(code, template.__globals__, template.__name__,
                              template.__defaults__, template.__closure__)


def _regularization_fns(encoder):
    """One argument-less tf.function per regularized trainable variable (may be [])."""

    def make(variable, regularizer):
        # A closure (not default arguments: tf.function would treat those as inputs).
        def loss():
            return tf.cast(regularizer(variable.value), tf.float32)

        return tf.function(loss, input_signature=[])

    return [make(v, v.regularizer) for v in encoder.trainable_variables
            if getattr(v, "regularizer", None) is not None]
