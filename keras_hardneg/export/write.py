"""``export_encoder``: a Keras 3 encoder (images, graphs or text) -> a reusable TF2
SavedModel plus model card (and assets), written atomically."""

from __future__ import annotations

import datetime
import os
import shutil
import uuid
from typing import Any

import keras

from keras_hardneg.data._tf import require_tensorflow_backend

require_tensorflow_backend("keras_hardneg.export (SavedModel export and loading)")

import tensorflow as tf  # noqa: E402  (after the backend check)

from keras_hardneg._io import atomic_replace_dir, fsync_tree
from keras_hardneg.export.inspection import find_device_strings
from keras_hardneg.export.model_card import (
    MODEL_CARD_JSON,
    MODEL_CARD_MD,
    TOKENIZER_ASSET,
    ModelCard,
)
from keras_hardneg.export.saved_object import ReusableEncoder
from keras_hardneg.modalities.signatures import normalize_input_signature
from keras_hardneg.modalities import DEFAULT_MODALITY, get_modality

__all__ = ["export_encoder", "check_replaceable"]

# What an exported encoder's folder holds: TensorFlow's SavedModel files, the model card,
# and the Keras preset a run writes beside them (``preset/``).
_EXPORT_ENTRIES = frozenset({"saved_model.pb", "variables", "assets", "fingerprint.pb",
                             "model_card.json", "model_card.md", "preset"})

_TMP_PREFIX = ".khn-export-tmp-"
_OLD_PREFIX = ".khn-export-old-"


def _resolve_signature(encoder, input_shape, input_signature, prefer=None):
    """(modality object, {name: (full shape, dtype)}, traced spec: one TensorSpec for a
    one-tensor input, else a dict of them by name). ``prefer``: the modality the model card
    names, asked first (retrieval and text both read token ids)."""
    if input_signature is None:
        modality, signature = get_modality(DEFAULT_MODALITY), None  # input_shape: images
    else:
        if input_shape is not None:
            raise ValueError("export_encoder: pass input_shape (images) or input_signature, "
                             "not both")
        name, signature = normalize_input_signature(input_signature, prefer=prefer)
        modality = get_modality(name)
    signature = modality.resolve_signature(encoder, signature, input_shape)
    specs = {name: tf.TensorSpec(shape, dtype, name=name)
             for name, (shape, dtype) in signature.items()}
    spec = next(iter(specs.values())) if len(specs) == 1 else specs
    return modality, signature, spec


def _declared_output_dim(encoder):
    try:
        shape = encoder.output_shape
    except (AttributeError, ValueError, TypeError, RuntimeError):
        return None
    if isinstance(shape, tuple) and len(shape) == 2 and isinstance(shape[1], int):
        return shape[1]
    return None


def _stage_assets(assets, staging_dir):
    """Copies ``assets`` ({file name: path}) into ``staging_dir``; returns {name: staged path}."""
    if assets is None:
        return {}
    if not isinstance(assets, dict):
        raise TypeError("export_encoder: assets must be a dict {file name: path} or None, "
                        f"got {type(assets).__name__}")
    staged = {}
    for name, path in assets.items():
        if (not isinstance(name, str) or not name or name.startswith(".")
                or "/" in name or "\\" in name or name.strip() != name):
            raise ValueError(f"export_encoder: assets key {name!r} must be a plain file name "
                             "(no '/', not starting with '.'), e.g. 'tokenizer.json'")
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"export_encoder: assets[{name!r}]: no such file {path}")
        os.makedirs(staging_dir, exist_ok=True)
        if name == TOKENIZER_ASSET:
            _check_tokenizer_file(path)
            # The Hugging Face file under its standard name, our settings beside it.
            from keras_hardneg.data.tokenizer import write_tokenizer_assets

            for written in write_tokenizer_assets(path, staging_dir):
                staged[written] = os.path.join(staging_dir, written)
            continue
        staged[name] = os.path.join(staging_dir, name)
        shutil.copyfile(path, staged[name])
    return staged


def _check_tokenizer_file(path):
    """A text export's tokenizer must be a saved ``keras_hardneg.data.SentenceTokenizer``
    (loaded here when the ``tokenizers`` package is installed, so a bad file fails early)."""
    from keras_hardneg.data.tokenizer import TOKENIZER_SETTINGS, tokenizer_data

    try:
        tokenizer_data(path)
    except ValueError as e:
        raise ValueError(f"export_encoder: assets[{TOKENIZER_ASSET!r}] = {path} is not a "
                         "saved keras_hardneg SentenceTokenizer (SentenceTokenizer.save, or a "
                         f"Hugging Face tokenizer.json with {TOKENIZER_SETTINGS} beside it); "
                         f"embed_sentences could not encode strings as in training ({e})"
                         ) from None
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        return  # the format looks right; load_encoder(...).embed_sentences needs the package
    from keras_hardneg.data.tokenizer import load_tokenizer

    load_tokenizer(path)  # ValueError naming the file if it does not load


def _make_card(model_card, modality, signature, output_dim, asset_names, encoder):
    if model_card is None:
        card = ModelCard(modality=modality.name)
    elif isinstance(model_card, ModelCard):
        card = ModelCard.from_dict(model_card.to_dict())  # copy; caller's stays untouched
    elif isinstance(model_card, dict):
        card = ModelCard(**{"modality": modality.name, **model_card})
    else:
        raise TypeError("export_encoder: model_card must be a ModelCard, a dict or None, "
                        f"got {type(model_card).__name__}")
    if card.modality != modality.name:
        raise ValueError(f"export_encoder: model_card.modality={card.modality!r} but the "
                         f"exported input is {modality.input_description}; pass "
                         f"ModelCard(modality={modality.name!r}, ...)")
    if card.output_dim is not None and card.output_dim != output_dim:
        raise ValueError(f"export_encoder: model_card.output_dim={card.output_dim} but the "
                         f"encoder outputs {output_dim} features")
    modality.fill_card(card, signature, asset_names, encoder)
    from keras_hardneg.data.tokenizer import TOKENIZER_SETTINGS

    if card.assets and TOKENIZER_SETTINGS in asset_names and \
            TOKENIZER_SETTINGS not in card.assets:
        card.assets = [*card.assets, TOKENIZER_SETTINGS]  # a card of the one-file layout
    if card.assets and sorted(card.assets) != sorted(asset_names):
        raise ValueError(f"export_encoder: model_card.assets={card.assets} but the export "
                         f"ships {sorted(asset_names)}")
    card.assets = list(asset_names)
    import keras_hardneg

    card.output_dim = int(output_dim)
    card.library_version = getattr(keras_hardneg, "__version__", None)
    card.tensorflow_version = tf.__version__
    card.keras_version = keras.__version__
    if card.created is None:
        card.created = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return card.validate()


def check_replaceable(export_dir: str) -> None:
    """Refuses to replace ``export_dir`` unless it is an encoder this package exported
    (``saved_model.pb`` and ``model_card.json``, nothing else besides the SavedModel's
    files) or an empty folder: ``overwrite`` never deletes a user's files.

    Raises:
        FileExistsError: one line naming the folder and what in it is not an export's.
    """
    export_dir = os.fspath(export_dir)
    if not os.path.isdir(export_dir) or os.path.islink(export_dir):
        raise FileExistsError(f"{export_dir} exists and is not a folder; refusing to replace "
                              "it (choose another output).")
    entries = set(os.listdir(export_dir))
    if not entries:
        return
    foreign = sorted(entries - _EXPORT_ENTRIES)
    if foreign or not {"saved_model.pb", MODEL_CARD_JSON} <= entries:
        what = (f"it holds {foreign[0]!r}" + (f" and {len(foreign) - 1} more" if
                                              len(foreign) > 1 else "")
                if foreign else "it has no saved_model.pb + model_card.json")
        raise FileExistsError(f"{export_dir} is not an encoder exported by keras-hardneg "
                              f"({what}); refusing to replace it: choose another output "
                              "folder, or empty or remove this one yourself.")


def export_encoder(encoder: keras.Model, export_dir: str | os.PathLike, *,
                   input_shape: tuple | None = None, input_signature: Any = None,
                   assets: dict[str, str] | None = None,
                   model_card: ModelCard | dict | None = None,
                   overwrite: bool = False) -> ModelCard:
    """Writes ``encoder`` as a reusable TF2 SavedModel plus a model card, atomically.

    Args:
        encoder: built Keras 3 model (TensorFlow backend) mapping one of (modality)

            - images ``[B, H, W, 3]`` float32 in [0, 1] (the default);
            - a graph batch, the dict of ``nodes [N, F]``, ``edges [E, 2]``,
              ``node_graph [N]``, ``node_mask [N]``, ``edge_mask [E]``, ``graph_mask [B]``
              (``input_signature=graph_input_signature(F)``);
            - token ids ``[B, L]`` int32, 0 = padding
              (``input_signature=text_input_signature(L)``)

            to features ``[B, F]``. May contain BatchNormalization, Dropout and kernel
            regularizers. An unbuilt graph / text encoder is built by calling it once on
            a one-graph / one-sentence input.
        export_dir: directory to create. Its parent must exist.
        input_shape: images: ``(H, W, 3)``; defaults to ``encoder.input_shape[1:]``.
            ``H``/``W`` may be ``None`` if the encoder accepts any size.
        input_signature: graph or text input instead of images (see
            ``keras_hardneg.modalities.signatures``): a dict ``{name: (full shape, dtype)}`` of
            the six graph tensors with ``N``, ``E``, ``B`` as ``None``, or ``((L,), "int32")``
            for token ids (``L`` may be ``None``: then the encoder's fixed length is used if
            it has one). Not together with ``input_shape``.
        assets: ``{file name: path}`` of files copied into ``export_dir/assets/`` (and
            tracked as ``tf.saved_model.Asset``, reachable as ``obj.assets[name]`` after
            ``tf.saved_model.load``). A text encoder's tokenizer goes in as
            ``{"tokenizer.json": path}`` (a saved ``SentenceTokenizer``, either layout),
            written as the Hugging Face ``assets/tokenizer.json`` with
            ``assets/keras_hardneg_tokenizer.json`` beside it, which
            :meth:`SavedModelEncoder.embed_sentences` uses.
        model_card: :class:`ModelCard`, dict of its fields, or ``None``. Its
            ``modality`` must match the input (a dict or ``None`` gets it filled in).
            Shape / signature, ``max_length`` (text, from a fixed ``L``), assets, output
            dim, versions and creation time are filled in.
        overwrite: replace an existing ``export_dir`` (atomic swap) if it is an export of
            this package or empty (:func:`check_replaceable`); otherwise raise
            ``FileExistsError``.

    Returns:
        The :class:`ModelCard` that was written.

    The directory holds ``saved_model.pb``, ``variables/``, ``assets/``,
    ``model_card.json`` and ``model_card.md``. Nothing in it is pinned to a device
    (checked before commit). It is built in ``.khn-export-tmp-*`` next to ``export_dir``
    and renamed into place, so a crash never leaves a half-written ``export_dir`` or
    damages a previous one (after a hard kill, a stale temp dir may remain; it is safe
    to delete).

    Example:

    >>> import os, tempfile, keras_hardneg as khn
    >>> enc = khn.encoders.small_convnet(input_shape=(8, 8, 3), width=4)   # [B, 8, 8, 3] -> [B, 16]
    >>> export_dir = os.path.join(tempfile.mkdtemp(), "enc")
    >>> card = khn.export.export_encoder(enc, export_dir,
    ...                                  model_card=khn.export.ModelCard(name="tiny"))
    >>> card.output_dim, card.modality
    (16, 'image')
    >>> sorted(os.listdir(export_dir))
    ['assets', 'fingerprint.pb', 'model_card.json', 'model_card.md', 'saved_model.pb', 'variables']

    Graph and text encoders take an input signature instead of an image shape:

    .. code-block:: python

        export_encoder(gin, "gin_export", input_signature=graph_input_signature(7),
                       model_card=ModelCard(name="gin", modality="graph"))
        export_encoder(text_encoder, "text_export", input_signature=text_input_signature(32),
                       assets={"tokenizer.json": "tokenizer.json"},
                       model_card=ModelCard(name="simcse", modality="text"))
    """
    export_dir, parent, base = _check_target(encoder, export_dir, overwrite)
    prefer = (model_card.modality if isinstance(model_card, ModelCard)
              else model_card.get("modality") if isinstance(model_card, dict) else None)
    modality, signature, spec = _resolve_signature(encoder, input_shape, input_signature,
                                                   prefer)
    if not encoder.built:
        modality.build_encoder(encoder, signature)
    tmp_dir = os.path.join(parent, f"{_TMP_PREFIX}{base}-{uuid.uuid4().hex[:8]}")
    staging_dir = os.path.join(parent, f"{_TMP_PREFIX}{base}-assets-{uuid.uuid4().hex[:8]}")
    try:
        staged = _stage_assets(assets, staging_dir)
        module = ReusableEncoder(encoder, spec, assets=staged)
        card = _make_card(model_card, modality, signature,
                          _traced_output_dim(module, spec, encoder), list(staged), encoder)
        _write_saved_model(module, card, tmp_dir)
        _commit(tmp_dir, export_dir, overwrite)
    finally:
        _remove_temporaries(tmp_dir, staging_dir)
    return card


def _commit(tmp_dir, export_dir, overwrite):
    """Renames the finished ``tmp_dir`` into place as ``export_dir`` (atomic swap)."""
    try:
        atomic_replace_dir(tmp_dir, export_dir, overwrite=overwrite, old_prefix=_OLD_PREFIX)
    except FileExistsError as e:  # export_dir appeared or is not a directory
        raise FileExistsError(f"export_encoder: {e}") from None


def _remove_temporaries(*paths):
    """Deletes what is left of the temporary folders (after a failure, or the staging)."""
    for path in paths:
        if os.path.lexists(path):
            shutil.rmtree(path, ignore_errors=True)


def _check_target(encoder, export_dir, overwrite):
    """``(absolute export_dir, its parent, its base name)``; refuses an encoder that is not a
    ``keras.Model``, a backend other than TensorFlow, a missing parent, or an existing
    ``export_dir`` without ``overwrite`` (or not replaceable: :func:`check_replaceable`)."""
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
    if os.path.lexists(export_dir):
        check_replaceable(export_dir)
    return export_dir, parent, base


def _traced_output_dim(module, spec, encoder):
    """``F`` of the traced encoder's ``[B, F]`` output; refuses another rank, an unknown
    ``F``, or one that disagrees with ``encoder.output_shape``."""
    out_shape = module.__call__.get_concrete_function(spec, training=False).output_shapes
    if out_shape.rank != 2 or out_shape[1] is None:
        raise ValueError(f"export_encoder: encoder must output [B, F] with known F, "
                         f"got shape {out_shape}")
    declared = _declared_output_dim(encoder)
    if declared is not None and declared != out_shape[1]:
        raise ValueError(f"export_encoder: encoder.output_shape says F={declared} but "
                         f"the traced encoder outputs {out_shape}")
    return int(out_shape[1])


def _write_saved_model(module, card, tmp_dir):
    """Saves ``module`` as a SavedModel in ``tmp_dir`` (no device pinned, checked) with the
    model card beside it, synced to disk."""
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
