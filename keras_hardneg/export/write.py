"""``export_encoder``: a Keras 3 encoder -> a reusable TF2 SavedModel plus model card,
written atomically."""

from __future__ import annotations

import datetime
import os
import shutil
import uuid

import keras

from keras_hardneg.data._tf import require_tensorflow_backend

require_tensorflow_backend("keras_hardneg.export (SavedModel export and loading)")

import tensorflow as tf  # noqa: E402  (after the backend check)

from keras_hardneg._io import atomic_replace_dir, fsync_tree
from keras_hardneg.export.inspection import find_device_strings
from keras_hardneg.export.model_card import MODEL_CARD_JSON, MODEL_CARD_MD, ModelCard
from keras_hardneg.export.saved_object import SERVING_INPUT, ReusableEncoder

__all__ = ["export_encoder"]

_TMP_PREFIX = ".khn-export-tmp-"
_OLD_PREFIX = ".khn-export-old-"


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

    module = ReusableEncoder(encoder, spec)
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
        try:
            atomic_replace_dir(tmp_dir, export_dir, overwrite=overwrite,
                               old_prefix=_OLD_PREFIX)
        except FileExistsError as e:  # export_dir appeared or is not a directory
            raise FileExistsError(f"export_encoder: {e}") from None
    finally:
        if os.path.lexists(tmp_dir):
            shutil.rmtree(tmp_dir, ignore_errors=True)
    return card
