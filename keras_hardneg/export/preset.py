"""The Keras-native encoder artifact: a preset folder that loads as a trainable ``keras.Model``
under every backend, without TensorFlow.

The layout follows keras-hub's presets (a ``config.json`` with the model's Keras config and
its weights beside it):

============================  =========================================================
file                          what it holds
============================  =========================================================
``config.json``               ``keras.saving.serialize_keras_object(encoder)``
``model.weights.h5``          every variable, BN moving statistics included, in Keras's
                              ``.weights.h5`` layout (``encoder.load_weights`` reads it);
                              float32, or float16 storage (``weights_dtype="float16"``:
                              half the size, cast back to float32 when loaded)
``metadata.json``             ``format``, versions, ``modality``, the input (image shape,
                              graph feature width or token length), ``output_dim``,
                              ``weights_dtype``, ``parameter_count``, file SHA-256s
``model_card.json``           the :class:`~keras_hardneg.export.ModelCard` (optional)
``assets/tokenizer.json``     a text encoder's tokenizer: the Hugging Face ``tokenizers``
                              file (``tokenizers.Tokenizer.from_file`` reads it), and
                              ``assets/keras_hardneg_tokenizer.json`` beside it
                              (``[CLS]``/``[SEP]``, id offset: read with
                              ``keras_hardneg.data.load_tokenizer(".../tokenizer.json")``;
                              presets written before hold one file of both there)
============================  =========================================================

Inputs and outputs are those of the encoder: images ``[B, H, W, 3]`` float32 in ``[0, 1]``
-> features ``[B, F]``; graphs: the padded graph batch (``nodes``, ``edges``,
``node_graph``, ``node_mask``, ``edge_mask``, ``graph_mask``); text: token ids ``[B, L]``
int32 (0 = padding). A run writes ``RUN/preset/``, an export ``DIR/preset/`` inside the
SavedModel folder, a zoo entry ``models/ENTRY/preset/``; :func:`load_preset` takes any of
these folders. Writing is atomic (a temporary folder renamed into place) and never replaces
a folder that is not a preset.

Example:

>>> import os, tempfile, numpy as np, keras
>>> from keras_hardneg.encoders import small_convnet
>>> enc = small_convnet(input_shape=(8, 8, 3), width=4)
>>> d = save_preset(enc, os.path.join(tempfile.mkdtemp(), "p"))
>>> again = load_preset(d)
>>> x = np.random.rand(2, 8, 8, 3).astype("float32")
>>> bool(np.allclose(keras.ops.convert_to_numpy(again(x)), keras.ops.convert_to_numpy(enc(x)), atol=1e-6))
True
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import tempfile
from typing import Any

import keras
import numpy as np

from keras_hardneg._io import atomic_replace_dir, sha256_file
from keras_hardneg.modalities import DEFAULT_MODALITY, MODALITIES, get_modality

__all__ = ["PRESET_FORMAT", "PresetError", "save_preset", "load_preset", "read_preset_metadata",
           "find_preset", "is_preset", "example_input", "image_contract",
           "uses_keras_hub"]

PRESET_FORMAT = "keras_hardneg.preset/1"
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.weights.h5"
METADATA_FILE = "metadata.json"
CARD_FILE = "model_card.json"
ASSETS_DIR = "assets"
TOKENIZER_ASSET = "tokenizer.json"
#: The folder name a preset has inside a run, an export or a zoo entry.
PRESET_DIR = "preset"
WEIGHTS_DTYPES = ("float32", "float16")


class PresetError(ValueError):
    """A folder is not a (complete, intact) keras-hardneg preset."""


def is_preset(path: str) -> bool:
    """Whether ``path`` is a preset folder (has ``metadata.json`` of this format)."""
    meta = os.path.join(path, METADATA_FILE)
    if not os.path.isfile(meta):
        return False
    try:
        with open(meta) as f:
            return json.load(f).get("format") == PRESET_FORMAT
    except (OSError, ValueError):
        return False


def find_preset(path: str) -> str:
    """The preset folder of ``path``: ``path`` itself, or its ``preset/`` (a run directory,
    an export folder, a zoo entry). Raises :class:`PresetError` naming what was looked for."""
    path = os.path.abspath(os.fspath(path))
    if not os.path.exists(path):
        raise PresetError(f"`preset` {path!r}: no such folder.")
    for candidate in (path, os.path.join(path, PRESET_DIR)):
        if is_preset(candidate):
            return candidate
    if os.path.isfile(os.path.join(path, "recipe.json")) and not os.path.isdir(
            os.path.join(path, PRESET_DIR)):
        raise PresetError(f"`preset` {path!r} has a recipe but no preset/: it was not trained "
                          "(or trained before presets existed: `keras-hardneg export` it).")
    raise PresetError(f"`preset` {path!r} is not a keras-hardneg preset (no {METADATA_FILE} "
                      f"of format {PRESET_FORMAT!r} in it or in its {PRESET_DIR}/).")


def _to_float16(path: str) -> float:
    """Rewrites a ``.weights.h5`` file with its float32 arrays as float16 (a new file: HDF5
    does not give back the space of deleted datasets); returns the largest relative
    rounding error of a tensor (``max |x16 - x| / max |x|``). Raises :class:`PresetError` if
    a value is not finite or exceeds float16's range."""
    import h5py

    worst = 0.0
    limit = float(np.finfo(np.float16).max)
    tmp = path + ".f16"

    def copy(src, dst):
        nonlocal worst
        for k, v in src.attrs.items():
            dst.attrs[k] = v
        for name, item in src.items():
            if isinstance(item, h5py.Group):
                copy(item, dst.create_group(name))
                continue
            value = item[()]
            if item.dtype == np.float32:
                if not np.all(np.isfinite(value)):
                    raise PresetError(f"weight {item.name} is not finite; no preset written.")
                peak = float(np.abs(value).max(initial=0.0))
                if peak > limit:
                    raise PresetError(f"weight {item.name} exceeds float16's range (max |x| = "
                                      f"{peak:.3g}): use weights_dtype='float32'.")
                half = value.astype(np.float16)
                if peak > 0:
                    worst = max(worst, float(np.abs(half.astype(np.float32) - value).max()
                                             / peak))
                value = half
            ds = dst.create_dataset(name, data=value)
            for k, a in item.attrs.items():
                ds.attrs[k] = a

    try:
        with h5py.File(path, "r") as src, h5py.File(tmp, "w") as dst:
            copy(src, dst)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return worst


def save_preset(encoder: keras.Model, preset_dir: str, *, modality: str = DEFAULT_MODALITY,
                input_spec: dict[str, Any] | None = None, model_card: Any = None,
                assets: dict[str, str] | None = None, weights_dtype: str = "float32",
                overwrite: bool = False) -> str:
    """Writes ``encoder`` as a preset folder (see the module docstring); returns its path.

    Args:
        encoder: a built Keras model whose classes are registered (every keras-hardneg
            encoder is), mapping the modality's inputs to features ``[B, F]``.
        preset_dir: the folder to create (its parent is created).
        modality: ``"image"``, ``"graph"`` or ``"text"`` (recorded; :mod:`keras_hardneg.zoo`
            and the TF Hub export use it).
        input_spec: what the input is: images ``{"input_shape": [H, W, 3]}`` (default: the
            encoder's), graphs ``{"feature_dim": F}``, text ``{"max_length": L}``.
        model_card: a :class:`~keras_hardneg.export.ModelCard` or dict, stored as
            ``model_card.json``.
        assets: ``{file name: path}`` copied into ``assets/`` (a text encoder's
            ``tokenizer.json``).
        weights_dtype: ``"float32"`` or ``"float16"`` (storage only; loads as float32).
        overwrite: replace an existing preset (never a folder that is not one).

    Raises:
        ValueError: a bad ``modality`` or ``weights_dtype``; ``FileExistsError`` if
            ``preset_dir`` exists (not ``overwrite``, or not a preset).

    Example:

    >>> import os, tempfile, keras_hardneg as khn
    >>> enc = khn.encoders.small_convnet(input_shape=(8, 8, 3), width=4)
    >>> preset = khn.export.save_preset(enc, os.path.join(tempfile.mkdtemp(), "tiny"),
    ...                                 weights_dtype="float16")
    >>> sorted(os.listdir(preset))
    ['config.json', 'metadata.json', 'model.weights.h5']
    """
    if modality not in MODALITIES.names():
        raise ValueError(f"`modality` must be one of {tuple(MODALITIES.names())}; "
                         f"got {modality!r}.")
    kind = get_modality(modality)
    if weights_dtype not in WEIGHTS_DTYPES:
        raise ValueError(f"`weights_dtype` must be one of {WEIGHTS_DTYPES}; "
                         f"got {weights_dtype!r}.")
    if not isinstance(encoder, keras.Model) or not encoder.built:
        raise ValueError(f"`encoder` must be a built keras.Model; got {type(encoder).__name__}.")
    preset_dir = _check_preset_dir(preset_dir, overwrite)
    spec = dict(input_spec or {})
    for key, value in kind.default_preset_spec(encoder).items():
        spec.setdefault(key, value)
    tmp = _shared_temp_dir(os.path.dirname(preset_dir))
    try:
        files, rounding = _write_model(encoder, tmp, weights_dtype)
        written = _write_assets(assets, tmp, files)
        if model_card is not None:
            card = model_card.to_dict() if hasattr(model_card, "to_dict") else dict(model_card)
            # What the preset itself knows and the card may not: its assets, its text length.
            if written:
                card["assets"] = sorted(written)
            kind.complete_preset_card(card, spec)
            with open(os.path.join(tmp, CARD_FILE), "w") as f:
                json.dump(card, f, indent=1, default=str)
        metadata = _metadata(encoder, modality, spec, weights_dtype, rounding, files)
        with open(os.path.join(tmp, METADATA_FILE), "w") as f:
            json.dump(metadata, f, indent=1)
        atomic_replace_dir(tmp, preset_dir, overwrite=True, old_prefix=".preset-old-")
    finally:
        if os.path.isdir(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
    return preset_dir


def _check_preset_dir(preset_dir: str, overwrite: bool) -> str:
    """``preset_dir`` as an absolute path; refuses an existing folder that is not a preset,
    or a preset without ``overwrite``."""
    preset_dir = os.path.abspath(os.fspath(preset_dir))
    if os.path.exists(preset_dir):
        if not is_preset(preset_dir):
            raise FileExistsError(f"{preset_dir} exists and is not a keras-hardneg preset; "
                                  "not touched (choose another folder).")
        if not overwrite:
            raise FileExistsError(f"{preset_dir} already holds a preset: pass overwrite=True "
                                  "to replace it.")
    return preset_dir


def _shared_temp_dir(parent: str) -> str:
    """A new temporary folder in ``parent`` (created), with the umask's permissions:
    ``mkdtemp`` makes it private, a preset is for sharing."""
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".preset-", dir=parent)
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(tmp, 0o777 & ~mask)
    return tmp


def _write_model(encoder: keras.Model, folder: str,
                 weights_dtype: str) -> tuple[dict[str, str], float]:
    """Writes the config and the weights (as ``weights_dtype``) into ``folder``; returns
    ``({file: SHA-256}, largest relative float16 rounding error or 0.0)``."""
    config = keras.saving.serialize_keras_object(encoder)
    with open(os.path.join(folder, CONFIG_FILE), "w") as f:
        json.dump(config, f, indent=1)
    weights = os.path.join(folder, WEIGHTS_FILE)
    encoder.save_weights(weights)
    rounding = _to_float16(weights) if weights_dtype == "float16" else 0.0
    files = {CONFIG_FILE: sha256_file(os.path.join(folder, CONFIG_FILE)),
             WEIGHTS_FILE: sha256_file(weights)}
    return files, rounding


def _write_assets(assets: dict[str, str] | None, folder: str, files: dict[str, str]) -> list:
    """Copies ``assets`` into ``folder/assets/`` (a saved tokenizer as its two files), adds
    their SHA-256s to ``files``; returns the names written."""
    written = []
    for name, source in (assets or {}).items():
        os.makedirs(os.path.join(folder, ASSETS_DIR), exist_ok=True)
        names = None
        if name == TOKENIZER_ASSET:
            # A saved SentenceTokenizer (either layout): the Hugging Face file under its
            # standard name, keras-hardneg's settings beside it. Another file is copied.
            from keras_hardneg.data.tokenizer import tokenizer_data, write_tokenizer_assets

            try:
                tokenizer_data(source)
                names = write_tokenizer_assets(source, os.path.join(folder, ASSETS_DIR))
            except ValueError:
                names = None
        if names is None:
            shutil.copyfile(source, os.path.join(folder, ASSETS_DIR, name))
            names = [name]
        for written_name in names:
            files[f"{ASSETS_DIR}/{written_name}"] = sha256_file(
                os.path.join(folder, ASSETS_DIR, written_name))
        written += names
    return written


def _metadata(encoder: keras.Model, modality: str, spec: dict[str, Any], weights_dtype: str,
              rounding: float, files: dict[str, str]) -> dict[str, Any]:
    """The content of ``metadata.json`` (module docstring)."""
    from keras_hardneg import __version__

    output = encoder.output_shape
    return {
        "format": PRESET_FORMAT,
        "keras_version": keras.__version__,
        "keras_hardneg_version": __version__,
        "backend": keras.backend.backend(),
        "modality": modality,
        "input": spec,
        "output_dim": int(output[-1]) if isinstance(output, tuple) else None,
        "weights_dtype": weights_dtype,
        "max_relative_rounding_error": rounding,
        "parameter_count": int(encoder.count_params()),
        "files": files,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def read_preset_metadata(path: str) -> dict[str, Any]:
    """The ``metadata.json`` of the preset of ``path`` (see :func:`find_preset`), with
    ``"path"`` (the preset folder) added."""
    preset = find_preset(path)
    with open(os.path.join(preset, METADATA_FILE)) as f:
        meta = json.load(f)
    meta["path"] = preset
    return meta


def load_preset(path: str, *, trainable: bool = True, verify: bool = True) -> keras.Model:
    """The encoder of a preset as a ``keras.Model`` of the current backend (TensorFlow not
    needed), float32 variables, BN statistics restored, ``trainable`` as asked.

    Args:
        path: a preset folder, or a run / export / zoo entry folder holding ``preset/``.
        trainable: ``False`` freezes every layer (inference; BN still in inference mode
            when called with ``training=False``).
        verify: check the files' SHA-256 against ``metadata.json``.

    Returns:
        ``keras.Model``; ``model.preset_metadata`` holds the metadata (``modality``,
        ``input``, ``path``, ...).

    Raises:
        PresetError: not a preset, a file missing or damaged, or weights that do not fit the
            config.

    Example:

    >>> import os, tempfile, numpy as np, keras_hardneg as khn
    >>> enc = khn.encoders.small_convnet(input_shape=(8, 8, 3), width=4)
    >>> preset = khn.export.save_preset(enc, os.path.join(tempfile.mkdtemp(), "tiny"))
    >>> model = khn.export.load_preset(preset, trainable=False)     # any backend
    >>> model.preset_metadata["modality"], tuple(model(np.zeros((2, 8, 8, 3))).shape)
    ('image', (2, 16))
    """
    import keras_hardneg  # noqa: F401  (registers every serializable class)

    if not isinstance(trainable, bool):
        raise ValueError(f"`trainable` must be True or False; got {trainable!r}.")
    meta = read_preset_metadata(path)
    preset = meta["path"]
    for name, digest in meta.get("files", {}).items():
        file = os.path.join(preset, name)
        if not os.path.isfile(file):
            raise PresetError(f"preset {preset}: {name} is missing.")
        if verify and sha256_file(file) != digest:
            raise PresetError(f"preset {preset}: {name} is damaged (SHA-256 differs from "
                              f"{METADATA_FILE}).")
    with open(os.path.join(preset, CONFIG_FILE)) as f:
        config = json.load(f)
    try:
        model = keras.saving.deserialize_keras_object(config)
    except Exception as e:  # noqa: BLE001 -- one line naming the cause
        raise PresetError(f"preset {preset}: cannot rebuild the encoder from {CONFIG_FILE} "
                          f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
                          ) from None
    if not model.built:
        _build(model, meta)
    try:
        model.load_weights(os.path.join(preset, WEIGHTS_FILE))
    except Exception as e:  # noqa: BLE001
        raise PresetError(f"preset {preset}: {WEIGHTS_FILE} does not fit the encoder "
                          f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
                          ) from None
    model.trainable = bool(trainable)
    model.preset_metadata = meta
    return model


def image_contract(path: str) -> str | None:
    """What images the image encoder of the preset of ``path`` takes, in one sentence
    (:func:`keras_hardneg.encoders.normalization.input_contract` of its
    ``ImageNormalization``'s ``input_range``; a config saved before the option reads as
    ``"auto"``), read from ``config.json`` without building the model. ``None`` for an
    encoder without that layer (every graph or text encoder)."""
    from keras_hardneg.encoders.normalization import input_contract

    meta = read_preset_metadata(path)
    with open(os.path.join(meta["path"], CONFIG_FILE)) as f:
        config = json.load(f)
    todo = [config]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            if node.get("class_name") == "ImageNormalization" and isinstance(
                    node.get("config"), dict):
                return input_contract(node["config"].get("input_range", "auto"))
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)
    return None


def uses_keras_hub(path: str) -> bool:
    """Whether the encoder of the preset of ``path`` is built from keras-hub classes (a
    pretrained BERT): loading it imports keras-hub, which imports TensorFlow whenever
    TensorFlow is installed, also under ``KERAS_BACKEND=jax`` (keras-hub's own import;
    the encoder then runs on JAX all the same)."""
    meta = read_preset_metadata(path)
    with open(os.path.join(meta["path"], CONFIG_FILE)) as f:
        return '"keras_hub' in f.read()


def example_input(modality: str, input_spec: dict[str, Any], *, seed: int = 0) -> Any:
    """A small random input of ``modality`` as ``input_spec`` describes it (what
    :func:`save_preset` records under ``"input"``): images ``[3, H, W, C]`` float32 in
    ``[0, 1]``; text token ids ``[3, L]`` int32 (the second half padding); graphs a padded
    batch of two graphs (5 nodes, 3 edges). For building a subclassed encoder and for
    comparing two encoders' features."""
    return get_modality(modality).example_input(input_spec, seed=seed)


def _build(model: keras.Model, meta: dict[str, Any]) -> None:
    """Builds a subclassed encoder (graph, text) by calling it once on an example input."""
    model(example_input(meta.get("modality", DEFAULT_MODALITY), meta.get("input", {})))
