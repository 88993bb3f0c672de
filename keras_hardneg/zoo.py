"""The model zoo: pretrained encoders as trainable Keras models, by name.

A zoo is a folder of entries (this repository's ``models/``): ``ENTRY/recipe.json`` (what
was or would be trained), and for an entry with weights ``ENTRY/preset/`` (the Keras preset
of :mod:`keras_hardneg.export.preset`: ``config.json`` + ``model.weights.h5``),
``ENTRY/results.json`` (its figures) and a model card. The folder is, in order:
``zoo_dir=``, the ``KERAS_HARDNEG_ZOO`` environment variable, the ``models/`` folder beside
the installed package (a clone or ``pip install -e``).

* :func:`list` -- the entries that have weights;
* :func:`load` -- an entry's encoder as a ``keras.Model`` under the current backend (TF or
  JAX, no TensorFlow needed), trainable by default: images ``[B, H, W, 3]`` float32 in
  ``[0, 1]`` -> features ``[B, F]``; graphs the padded graph batch; text token ids
  ``[B, L]`` int32 (the tokenizer in ``preset/assets/tokenizer.json``);
* :func:`show` -- an entry's metadata, figures and recipe;
* :func:`export` -- the TF Hub SavedModel of an entry (TensorFlow backend), written from the
  preset, with the preset inside it.

The command line has the same: ``keras-hardneg zoo list|show NAME|export NAME DIR``.

Example (in a clone of the repository):

>>> import keras_hardneg as khn
>>> names = khn.zoo.list()                      # doctest: +SKIP
>>> encoder = khn.zoo.load(names[0])            # doctest: +SKIP
"""

from __future__ import annotations

import builtins
import json
import os
from typing import Any

import keras

from keras_hardneg.export.preset import (PRESET_DIR, TOKENIZER_ASSET, PresetError,
                                         find_preset, is_preset, load_preset,
                                         read_preset_metadata)

__all__ = ["ZOO_ENV", "ZooError", "zoo_dir", "list", "entries", "show", "load", "export"]

ZOO_ENV = "KERAS_HARDNEG_ZOO"


class ZooError(ValueError):
    """An unknown or untrained zoo entry, or no zoo folder."""


def zoo_dir(path: str | None = None) -> str:
    """The zoo folder: ``path``, else ``$KERAS_HARDNEG_ZOO``, else ``models/`` beside the
    package. Raises :class:`ZooError` when none exists."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for candidate, what in ((path, "`zoo_dir`"), (os.environ.get(ZOO_ENV), f"${ZOO_ENV}"),
                            (os.path.join(here, "models"), "the repository's models/")):
        if candidate:
            if os.path.isdir(candidate):
                return os.path.abspath(candidate)
            if what != "the repository's models/":
                raise ZooError(f"{what} {candidate!r}: no such folder.")
    raise ZooError(f"no zoo folder: pass zoo_dir= or set {ZOO_ENV} to a folder of entries "
                   "(the repository's models/).")


def entries(zoo: str | None = None) -> dict[str, bool]:
    """``{entry: has weights}`` for every entry (a folder with ``recipe.json`` or a preset)."""
    root = zoo_dir(zoo)
    out = {}
    for name in sorted(os.listdir(root)):
        folder = os.path.join(root, name)
        trained = is_preset(os.path.join(folder, PRESET_DIR))
        if trained or os.path.isfile(os.path.join(folder, "recipe.json")):
            out[name] = trained
    return out


def list(zoo: str | None = None) -> builtins.list[str]:  # noqa: A001 -- the zoo API's name
    """The names of the entries that have weights (loadable with :func:`load`), sorted."""
    return [name for name, trained in entries(zoo).items() if trained]


def _entry(name: str, zoo: str | None) -> str:
    if not isinstance(name, str) or not name:
        raise ZooError(f"`name` must be an entry name (a string); got {name!r}.")
    known = entries(zoo)
    if name not in known:
        close = [n for n in known if name in n or n in name][:5]
        hint = f" Close: {', '.join(close)}." if close else ""
        raise ZooError(f"`name` {name!r} is not a zoo entry.{hint} Entries with weights: "
                       f"{', '.join(n for n, t in known.items() if t) or 'none'}.")
    folder = os.path.join(zoo_dir(zoo), name)
    if not known[name]:
        raise ZooError(f"zoo entry {name!r} has a recipe but no trained weights yet (train it: "
                       f"keras-hardneg train --recipe {os.path.join(folder, 'recipe.json')} "
                       "--output RUN).")
    return folder


def _read_json(path: str) -> Any:
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return json.load(f)


def show(name: str, zoo: str | None = None) -> dict[str, Any]:
    """What an entry is: ``{"name", "path", "preset": metadata, "results": results.json,
    "recipe": the recipe trained}`` (``trained_recipe.json`` where the training changed the
    entry's ``recipe.json``, e.g. the GPU plan)."""
    folder = _entry(name, zoo)
    recipe = (_read_json(os.path.join(folder, "trained_recipe.json"))
              or _read_json(os.path.join(folder, "recipe.json")))
    return {"name": name, "path": folder,
            "preset": read_preset_metadata(os.path.join(folder, PRESET_DIR)),
            "results": _read_json(os.path.join(folder, "results.json")), "recipe": recipe}


def load(name: str, trainable: bool = True, zoo: str | None = None) -> keras.Model:
    """Entry ``name``'s encoder as a ``keras.Model`` of the current backend (see the module
    docstring for inputs and outputs), its weights and BN statistics restored.

    Args:
        name: an entry of :func:`list`.
        trainable: ``False`` freezes it (a fixed feature extractor).
        zoo: the zoo folder (default: see :func:`zoo_dir`).

    Raises:
        ZooError: unknown entry, or an entry without weights (says how to train it).
        PresetError: a damaged preset.
    """
    return load_preset(os.path.join(_entry(name, zoo), PRESET_DIR), trainable=trainable)


def export(name: str, directory: str, *, overwrite: bool = False,
           zoo: str | None = None) -> str:
    """Writes entry ``name`` as a TF Hub SavedModel (``hub.load(directory)``) with its model
    card, and its preset in ``directory/preset/``; needs the TensorFlow backend. Returns
    ``directory``.

    Raises:
        ZooError: unknown or untrained entry; ``FileExistsError``: ``directory`` exists
        (without ``overwrite``).
    """
    import shutil

    from keras_hardneg import export as exporting

    preset = find_preset(os.path.join(_entry(name, zoo), PRESET_DIR))
    meta = read_preset_metadata(preset)
    model = load_preset(preset, trainable=False)
    card_path = os.path.join(preset, "model_card.json")
    card = exporting.ModelCard.from_dict(_read_json(card_path)) if os.path.isfile(
        card_path) else None
    spec = meta.get("input", {})
    if meta["modality"] == "graph":
        kwargs = {"input_signature": exporting.graph_input_signature(int(spec["feature_dim"]))}
    elif meta["modality"] == "text":
        kwargs = {"input_signature": exporting.text_input_signature(int(spec["max_length"]))}
        tokenizer = os.path.join(preset, "assets", TOKENIZER_ASSET)
        if os.path.isfile(tokenizer):
            kwargs["assets"] = {TOKENIZER_ASSET: tokenizer}
    else:
        kwargs = {"input_shape": tuple(spec["input_shape"])}
    directory = os.path.abspath(directory)
    exporting.export_encoder(model, directory, model_card=card, overwrite=overwrite, **kwargs)
    shutil.copytree(preset, os.path.join(directory, PRESET_DIR))
    return directory


__all__ += ["PresetError"]
