"""Export a Keras 3 encoder as a reusable TF2 SavedModel ("TF Hub format"), and load it back.

The exported directory works with:

- ``tensorflow_hub.load(dir)`` / ``tf.saved_model.load(dir)``:
  ``obj(images, training=False) -> features``; ``obj.variables``,
  ``obj.trainable_variables``, ``obj.regularization_losses``;
- ``obj.signatures["serving_default"](images=...)["features"]`` (TF Serving,
  ``keras.layers.TFSMLayer(dir, call_endpoint="serving_default")``);
- ``keras.layers.TFSMLayer(dir)`` (endpoint ``serve``: tensor in, tensor out), with
  ``call_training_endpoint="call_training"`` for training mode;
- ``hub.KerasLayer(dir, trainable=True)`` under tf_keras (fine-tuning, with batch-norm
  moving statistics updated in training mode);
- :func:`load_encoder` under Keras 3 (fine-tunable ``keras.layers.Layer``).

Shapes: images ``[B, H, W, 3]`` float32 in [0, 1] -> features ``[B, F]`` float32.

Example::

    import keras, numpy as np
    from keras_hardneg.export import export_encoder, load_encoder, ModelCard
    inp = keras.Input((16, 16, 3))
    x = keras.layers.Conv2D(8, 3)(inp)
    x = keras.layers.BatchNormalization()(x)
    out = keras.layers.GlobalAveragePooling2D()(keras.layers.ReLU()(x))
    enc = keras.Model(inp, out)
    export_encoder(enc, "/tmp/enc", model_card=ModelCard(name="tiny"), overwrite=True)
    layer = load_encoder("/tmp/enc")
    feats = layer(np.zeros((2, 16, 16, 3), "float32"))     # [2, 8]
"""

from __future__ import annotations

import ctypes
import ctypes.util
import datetime
import os
import shutil
import uuid

import keras
import tensorflow as tf

from keras_hardneg._io import fsync_dir, fsync_tree
from keras_hardneg.export.model_card import (
    MODEL_CARD_JSON,
    MODEL_CARD_MD,
    ModelCard,
)

__all__ = [
    "export_encoder",
    "load_encoder",
    "load_model_card",
    "SavedModelEncoder",
    "find_device_strings",
]

SERVING_INPUT = "images"
SERVING_OUTPUT = "features"
_TMP_PREFIX = ".khn-export-tmp-"
_OLD_PREFIX = ".khn-export-old-"


# ---------------------------------------------------------------------------- export
class _ReusableEncoder(tf.__internal__.tracking.AutoTrackable):
    """The object that gets saved: the Reusable SavedModel interface.

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


def _resolve_input_shape(encoder, input_shape):
    """Returns (H, W, 3) with ints or None for the traced input signature."""
    model_shape = None
    try:
        model_shape = tuple(encoder.input_shape)[1:]
    except (AttributeError, ValueError, TypeError):
        pass  # e.g. an unbuilt subclassed model
    if isinstance(model_shape, tuple) and model_shape and isinstance(model_shape[0], tuple):
        raise ValueError("export_encoder: encoder must take a single image input, "
                         f"got input_shape={encoder.input_shape}")
    shape = tuple(input_shape) if input_shape is not None else model_shape
    if shape is None:
        raise ValueError("export_encoder: cannot infer the input shape of the encoder; "
                         "pass input_shape=(H, W, 3).")
    if len(shape) != 3 or shape[2] != 3:
        raise ValueError(f"export_encoder: input shape must be (H, W, 3), got {shape}")
    if model_shape is not None and input_shape is not None:
        for given, have in zip(shape, model_shape):
            if have is not None and given != have:
                raise ValueError(f"export_encoder: input_shape={shape} does not match the "
                                 f"encoder's input shape {model_shape}")
    return tuple(None if d is None else int(d) for d in shape)


def find_device_strings(export_dir) -> list[str]:
    """Device placements in the model's computation (``[]`` = device-agnostic).

    Checks every node of every function reachable from the saved objects
    (``__call__`` in both modes, ``serving_default``, ``regularization_losses``) and
    the saved variables. Not checked: TensorFlow's own checkpoint save/restore
    functions for the TF1 ``saver_def`` (``__inference__traced_save/restore_*``),
    which TF always places on the host CPU; they only do file I/O.

    Example: ``assert find_device_strings(d) == []``.
    """
    sm = _parse_saved_model_pb(os.fspath(export_dir))
    found = []
    for mg in sm.meta_graphs:
        library = {f.signature.name: f for f in mg.graph_def.library.function}
        todo = list(mg.object_graph_def.concrete_functions.keys())
        seen = set()
        while todo:
            name = todo.pop()
            if name in seen or name not in library:
                continue
            seen.add(name)
            for node in library[name].node_def:
                if node.device:
                    found.append(f"{name}/{node.name}: {node.device}")
                for attr in node.attr.values():
                    if attr.HasField("func"):
                        todo.append(attr.func.name)
                    todo.extend(f.name for f in attr.list.func)
        for obj in mg.object_graph_def.nodes:
            if obj.WhichOneof("kind") == "variable" and obj.variable.device:
                found.append(f"variable {obj.variable.name}: {obj.variable.device}")
    return found


def _exchange(a, b) -> bool:
    """Atomically swaps two paths with Linux renameat2(RENAME_EXCHANGE); False if unsupported."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                          ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    rc = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange)
    return rc == 0


def _commit(tmp_dir, export_dir, overwrite):
    """Moves the finished ``tmp_dir`` to ``export_dir`` atomically."""
    if not os.path.lexists(export_dir):
        try:
            os.rename(tmp_dir, export_dir)  # atomic; fails if a non-empty dir appeared
            return
        except OSError:
            if not os.path.lexists(export_dir):
                raise
    if not overwrite:
        raise FileExistsError(f"export_encoder: {export_dir} already exists; "
                              "pass overwrite=True to replace it.")
    if not os.path.isdir(export_dir) or os.path.islink(export_dir):
        raise FileExistsError(f"export_encoder: {export_dir} exists and is not a directory; "
                              "refusing to replace it.")
    if _exchange(tmp_dir, export_dir):
        shutil.rmtree(tmp_dir)  # now holds the previous export
        return
    # Fallback (non-Linux): two renames. If killed in between, the previous export is
    # intact under the `.khn-export-old-*` name and the new one under `.khn-export-tmp-*`.
    parent, base = os.path.split(export_dir)
    old = os.path.join(parent, f"{_OLD_PREFIX}{base}-{uuid.uuid4().hex[:8]}")
    os.rename(export_dir, old)
    try:
        os.rename(tmp_dir, export_dir)
    except BaseException:
        os.rename(old, export_dir)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _make_card(model_card, input_shape, output_dim):
    if model_card is None:
        card = ModelCard()
    elif isinstance(model_card, ModelCard):
        card = ModelCard.from_dict(model_card.to_dict())  # copy; caller's stays untouched
    elif isinstance(model_card, dict):
        card = ModelCard(**model_card)
    else:
        raise TypeError("export_encoder: model_card must be a ModelCard, a dict or None, "
                        f"got {type(model_card).__name__}")
    if card.input_shape is not None and tuple(card.input_shape) != tuple(input_shape):
        raise ValueError(f"export_encoder: model_card.input_shape={card.input_shape} but the "
                         f"exported input shape is {input_shape}")
    if card.output_dim is not None and card.output_dim != output_dim:
        raise ValueError(f"export_encoder: model_card.output_dim={card.output_dim} but the "
                         f"encoder outputs {output_dim} features")
    import keras_hardneg

    card.input_shape = tuple(input_shape)
    card.output_dim = int(output_dim)
    card.library_version = getattr(keras_hardneg, "__version__", None)
    card.tensorflow_version = tf.__version__
    card.keras_version = keras.__version__
    if card.created is None:
        card.created = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return card.validate()


def export_encoder(encoder, export_dir, *, input_shape=None, model_card=None, overwrite=False):
    """Writes ``encoder`` as a reusable TF2 SavedModel plus a model card, atomically.

    Args:
        encoder: built Keras 3 model (TensorFlow backend), images ``[B, H, W, 3]``
            float32 in [0, 1] -> features ``[B, F]``. May contain BatchNormalization,
            Dropout and kernel regularizers.
        export_dir: directory to create. Its parent must exist.
        input_shape: ``(H, W, 3)``; defaults to ``encoder.input_shape[1:]``. ``H``/``W``
            may be ``None`` if the encoder accepts any size.
        model_card: :class:`ModelCard`, dict of its fields, or ``None``. Shape, output
            dim, versions and creation time are filled in.
        overwrite: replace an existing ``export_dir`` (atomic swap); otherwise raise
            ``FileExistsError``.

    Returns:
        The :class:`ModelCard` that was written.

    The directory holds ``saved_model.pb``, ``variables/``, ``model_card.json`` and
    ``model_card.md``. Nothing in it is pinned to a device (checked before commit). It
    is built in ``.khn-export-tmp-*`` next to ``export_dir`` and renamed into place,
    so a crash never leaves a half-written ``export_dir`` or damages a previous one
    (after a hard kill, a stale temp dir may remain; it is safe to delete).

    Example::

        card = export_encoder(enc, "/tmp/enc", model_card=ModelCard(name="r18"))
        card.output_dim        # F
    """
    if not isinstance(encoder, keras.Model):
        raise TypeError(f"export_encoder: encoder must be a keras.Model, "
                        f"got {type(encoder).__name__}")
    if keras.backend.backend() != "tensorflow":
        raise RuntimeError("export_encoder needs the TensorFlow Keras backend, "
                           f"not {keras.backend.backend()!r}")
    export_dir = os.path.abspath(os.fspath(export_dir))
    parent, base = os.path.split(export_dir)
    if not os.path.isdir(parent):
        raise FileNotFoundError(f"export_encoder: parent directory {parent} does not exist")
    if os.path.lexists(export_dir) and not overwrite:
        raise FileExistsError(f"export_encoder: {export_dir} already exists; "
                              "pass overwrite=True to replace it.")
    shape = _resolve_input_shape(encoder, input_shape)
    if not encoder.built:
        encoder.build((None,) + shape)
    spec = tf.TensorSpec((None,) + shape, tf.float32, name=SERVING_INPUT)

    module = _ReusableEncoder(encoder, spec)
    out_shape = module.__call__.get_concrete_function(spec, training=False).output_shapes
    if out_shape.rank != 2 or out_shape[1] is None:
        raise ValueError(f"export_encoder: encoder must output [B, F] with known F, "
                         f"got shape {out_shape}")
    card = _make_card(model_card, shape, int(out_shape[1]))

    tmp_dir = os.path.join(parent, f"{_TMP_PREFIX}{base}-{uuid.uuid4().hex[:8]}")
    try:
        options = tf.saved_model.SaveOptions(
            experimental_io_device=None,
            experimental_variable_policy=tf.saved_model.experimental.VariablePolicy.NONE,
        )
        tf.saved_model.save(module, tmp_dir,
                            signatures={"serving_default": module.serving_default},
                            options=options)
        pinned = find_device_strings(tmp_dir)
        if pinned:
            raise RuntimeError("export_encoder: the traced graph is pinned to devices "
                               f"({pinned[:3]}...); do not export under a device scope.")
        with open(os.path.join(tmp_dir, MODEL_CARD_JSON), "w", encoding="utf-8") as f:
            f.write(card.to_json())
        with open(os.path.join(tmp_dir, MODEL_CARD_MD), "w", encoding="utf-8") as f:
            f.write(card.to_markdown())
        fsync_tree(tmp_dir)
        _commit(tmp_dir, export_dir, overwrite)
        fsync_dir(parent)
    finally:
        if os.path.lexists(tmp_dir):
            shutil.rmtree(tmp_dir, ignore_errors=True)
    return card


# ---------------------------------------------------------------------------- load
def _parse_saved_model_pb(export_dir):
    from tensorflow.core.protobuf import saved_model_pb2
    from google.protobuf.message import DecodeError

    pb = os.path.join(export_dir, "saved_model.pb")
    sm = saved_model_pb2.SavedModel()
    try:
        with open(pb, "rb") as f:
            sm.ParseFromString(f.read())
    except DecodeError as e:
        raise ValueError(f"{export_dir}: saved_model.pb is corrupt ({e})") from None
    if not sm.meta_graphs:
        raise ValueError(f"{export_dir}: saved_model.pb is corrupt (no meta graph)")
    return sm


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


def load_model_card(export_dir) -> ModelCard:
    """Reads ``export_dir/model_card.json``; ``FileNotFoundError``/``ValueError`` if missing/bad.

    Example: ``load_model_card("/tmp/enc").output_dim``.
    """
    export_dir = os.path.abspath(os.fspath(export_dir))
    if not os.path.isdir(export_dir):
        raise FileNotFoundError(f"{export_dir}: no such directory")
    path = os.path.join(export_dir, MODEL_CARD_JSON)
    if not os.path.isfile(path):
        raise ValueError(f"{export_dir}: no {MODEL_CARD_JSON}; this SavedModel was not "
                         "written by keras_hardneg.export.export_encoder")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        return ModelCard.from_json(text)
    except ValueError as e:
        raise ValueError(f"{export_dir}: bad {MODEL_CARD_JSON}: {e}") from None


def _first_line(e):
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"


def _restore(export_dir):
    """Validated ``tf.saved_model.load``: (restored object, ModelCard)."""
    export_dir = _check_dir(export_dir)
    _parse_saved_model_pb(export_dir)
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
