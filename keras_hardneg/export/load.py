"""Loading an export: its model card, and the encoder as a fine-tunable Keras 3 layer."""

from __future__ import annotations

import os

import keras

from keras_hardneg.data._tf import require_tensorflow_backend

require_tensorflow_backend("keras_hardneg.export (SavedModel export and loading)")

import tensorflow as tf  # noqa: E402  (after the backend check)

from keras_hardneg.export.inspection import parse_saved_model_pb
from keras_hardneg.export.model_card import ModelCard, load_model_card

__all__ = ["SavedModelEncoder", "load_encoder", "load_model_card"]


def _check_dir(export_dir):
    """Cheap checks before TensorFlow touches the directory. Returns an absolute path."""
    export_dir = os.path.abspath(os.fspath(export_dir))
    if not os.path.exists(export_dir):
        raise FileNotFoundError(f"{export_dir}: no such directory")
    if not os.path.isdir(export_dir):
        raise ValueError(f"{export_dir}: is not a directory")
    if not os.path.isfile(os.path.join(export_dir, "saved_model.pb")):
        raise FileNotFoundError(f"{export_dir}: no saved_model.pb in this directory; "
                                "it is not a SavedModel")
    return export_dir


def _first_line(e):
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"


def _restore(export_dir):
    """Validated ``tf.saved_model.load``: (restored object, ModelCard)."""
    export_dir = _check_dir(export_dir)
    parse_saved_model_pb(export_dir)
    card = load_model_card(export_dir)
    try:
        obj = tf.saved_model.load(export_dir)
    except Exception as e:  # noqa: BLE001 - TF raises many types; report one line
        raise ValueError(f"{export_dir}: TensorFlow could not load this SavedModel "
                         f"({_first_line(e)})") from None
    from tensorflow.python.util import tf_inspect  # what hub.KerasLayer inspects too

    problems = [f"no attribute {a!r}" for a in
                ("variables", "trainable_variables", "regularization_losses")
                if not hasattr(obj, a)]
    modes = set()
    if not callable(obj) or not hasattr(obj, "__call__"):
        problems.insert(0, "not callable (no __call__)")
    else:
        spec = tf_inspect.getfullargspec(obj.__call__)
        if "training" in spec.args or "training" in spec.kwonlyargs:
            position = spec.args.index("training") if "training" in spec.args else None
            for cf in getattr(obj.__call__, "concrete_functions", []):
                args, kwargs = cf.structured_input_signature
                if "training" in kwargs:
                    modes.add(kwargs["training"])
                elif position is not None and len(args) > position:
                    modes.add(args[position])
        if modes != {True, False}:
            found = sorted(modes) if modes else "no training argument"
            problems.insert(0, "__call__ is not traced for training=True and "
                               f"training=False (found {found})")
    if problems:
        raise ValueError(f"{export_dir}: not a reusable SavedModel encoder: "
                         + "; ".join(problems))
    return obj, card


class _RestoredRegularization:
    """``variable.regularizer`` returning the sum of a SavedModel's regularization losses."""

    def __init__(self, loss_fns):
        self._loss_fns = list(loss_fns)

    def __call__(self, _variable):
        return tf.add_n([tf.cast(fn(), tf.float32) for fn in self._loss_fns])


@keras.saving.register_keras_serializable(package="keras_hardneg")
class SavedModelEncoder(keras.layers.Layer):
    """Keras 3 layer around an exported encoder: images ``[B, H, W, 3]`` -> ``[B, F]``.

    Calls the restored ``__call__(images, training=...)``: ``training=True`` only if
    the layer is trainable and called in training mode (like BatchNormalization and
    ``hub.KerasLayer``), in which case batch-norm moving statistics update. The
    SavedModel's variables are this layer's weights (trainable ones trainable, BN
    moving statistics non-trainable), so ``model.fit`` fine-tunes them. The saved
    regularization losses appear in ``layer.losses`` (and the training loss) while the
    layer is trainable.

    Example::

        enc = SavedModelEncoder("/tmp/enc")            # or load_encoder("/tmp/enc")
        inp = keras.Input((16, 16, 3))
        model = keras.Model(inp, keras.layers.Dense(10)(enc(inp)))
    """

    def __init__(self, export_dir, trainable=True, **kwargs):
        super().__init__(trainable=trainable, **kwargs)
        obj, card = _restore(export_dir)
        self.export_dir = os.fspath(export_dir)
        self.model_card = card
        self.output_dim = card.output_dim
        self._restored = obj
        trainable_ids = {id(v) for v in obj.trainable_variables}
        first_trainable = None
        for v in obj.variables:
            kv = keras.Variable(
                initializer=v,  # wraps the restored tf.Variable itself (no copy)
                trainable=id(v) in trainable_ids,
                dtype=v.dtype,
                shape=v.shape,
                name=v.name.split(":")[0].replace("/", "_"),
            )
            self._track_variable(kv)
            if first_trainable is None and id(v) in trainable_ids:
                first_trainable = kv
        if first_trainable is not None and len(obj.regularization_losses):
            # Keras 3 computes `layer.losses` from `variable.regularizer` of trainable
            # weights; the SavedModel's losses are not tied to variables, so their sum
            # rides on one weight (counted only while the layer is trainable).
            first_trainable.regularizer = _RestoredRegularization(obj.regularization_losses)
        self.built = True

    def call(self, inputs, training=None):
        inputs = tf.cast(inputs, tf.float32)
        if not self.trainable or training is None:
            training = False
        if tf.is_tensor(training):
            return tf.cond(training,
                           lambda: self._restored(inputs, training=True),
                           lambda: self._restored(inputs, training=False))
        return self._restored(inputs, training=bool(training))

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.output_dim)

    def get_config(self):
        config = super().get_config()
        config["export_dir"] = self.export_dir
        return config


def load_encoder(export_dir, *, trainable=True, name=None) -> SavedModelEncoder:
    """Loads an export as a Keras 3 layer (see :class:`SavedModelEncoder`).

    Raises ``FileNotFoundError`` (missing directory or ``saved_model.pb``) or
    ``ValueError`` (corrupt file, not written by :func:`export_encoder`, missing
    ``__call__(images, training)``), each naming the directory.

    Example::

        encoder = load_encoder("/tmp/enc")
        encoder(np.zeros((2, 16, 16, 3), "float32")).shape   # (2, F)
    """
    return SavedModelEncoder(export_dir, trainable=trainable, name=name)
