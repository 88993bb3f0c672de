"""The model zoo: pretrained encoders as trainable Keras models, by name.

A zoo is a folder of entries (this repository's ``models/``): ``ENTRY/recipe.json`` (what
was or would be trained), and for an entry with weights ``ENTRY/preset/`` (the Keras preset
of :mod:`keras_hardneg.export.preset`: ``config.json`` + ``model.weights.h5``),
``ENTRY/results.json`` (its figures) and a model card. An entry name resolves, in order:

1. ``zoo=`` or the ``KERAS_HARDNEG_ZOO`` environment variable: a folder of entries, or a
   URL (``https://``, ``http://``, ``file://``) of one, laid out as ``URL/NAME/preset/...``;
   an entry from a URL is fetched once into the cache and taken from there afterwards;
2. the ``models/`` folder beside the installed package (a clone, ``pip install -e``);
3. the cache ``$KERAS_HOME/keras_hardneg/zoo/NAME/`` (``~/.keras/...``): entries fetched
   before, usable offline.

Every install holds the zoo's index (:mod:`keras_hardneg.zoo_store`: each entry's input,
figures, files and their SHA-256s), so ``pip install keras-hardneg`` plus
``KERAS_HARDNEG_ZOO=URL`` is enough: each fetched file is checked against the index, a
mismatch is refused in one line and nothing half-written is cached.

* :func:`list` -- the entries with weights that :func:`load` can give now (local, cached, or
  to fetch from a URL); :func:`catalog` -- every entry with where it is;
* :func:`load` -- an entry's encoder as a ``keras.Model`` under the current backend (TF or
  JAX, no TensorFlow needed), trainable by default: images ``[B, H, W, 3]``, float in
  ``[0, 1]`` or 0-255 pixels (uint8 or float, as Keras's image loaders give them; see
  :mod:`keras_hardneg.encoders.normalization`) -> features ``[B, F]``; graphs the padded graph batch; text token ids
  ``[B, L]`` int32 (the tokenizer in ``preset/assets/tokenizer.json``);
* :func:`show` -- an entry's metadata, figures and recipe;
* :func:`compare` -- two entries' figures side by side (over seeds, with the difference);
* :func:`export` -- the TF Hub SavedModel of an entry (TensorFlow backend), written from the
  preset, with the preset inside it;
* :func:`publish` -- the folder a maintainer uploads to host an entry (served as a zoo URL).

The command line has the same: ``keras-hardneg zoo list [--all]|show NAME|compare A B|export
NAME DIR|publish NAME DIR``.

Example (in a clone of the repository, or with ``KERAS_HARDNEG_ZOO`` set):

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

from keras_hardneg import zoo_figures, zoo_store
from keras_hardneg._io import atomic_replace_dir
from keras_hardneg.export.preset import (PRESET_DIR, PresetError, find_preset, is_preset,
                                         load_preset, read_preset_metadata)
from keras_hardneg.modalities import get_modality
from keras_hardneg.zoo_store import ZooError

__all__ = ["ZOO_ENV", "ZooError", "zoo_source", "zoo_dir", "is_zoo_folder", "list",
           "entries", "catalog", "show", "entry_folder", "load", "export", "publish",
           "compare"]

#: The environment variable naming where the zoo is hosted (a URL or a folder); ``zoo=``
#: arguments take precedence.
ZOO_ENV = "KERAS_HARDNEG_ZOO"


def _beside_package() -> str:
    """``models/`` beside the package folder (our zoo in a clone or ``pip install -e``; in
    a site-packages install, possibly another distribution's ``models`` package)."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "models")


def is_zoo_folder(path: str | None) -> bool:
    """Whether ``path`` is keras-hardneg's zoo: a folder holding at least one entry of the
    index shipped with the package (a subfolder of that name with ``recipe.json`` or a
    preset). ``models/`` of a clone is; another package's ``models`` folder is not."""
    if not path or not os.path.isdir(path):
        return False
    try:
        index = zoo_store.read_index()
    except ZooError:
        return False
    return any(os.path.isfile(os.path.join(path, name, "recipe.json"))
               or is_preset(os.path.join(path, name, PRESET_DIR))
               for name in index if os.path.isdir(os.path.join(path, name)))


def zoo_source(zoo: str | None = None) -> tuple[str, str | None]:
    """Where entries come from: ``("folder", path)``, ``("url", url)`` or ``("cache", None)``
    (no zoo given and no ``models/`` beside the package: the cache and the shipped index).

    ``zoo`` (else ``$KERAS_HARDNEG_ZOO``) is a folder of entries or a URL; a value that is
    neither raises :class:`ZooError`."""
    for given, what in ((zoo, "`zoo`"), (os.environ.get(ZOO_ENV), f"${ZOO_ENV}")):
        if given:
            given = os.fspath(given)
            if zoo_store.is_url(given):
                return "url", given
            if os.path.isdir(given):
                return "folder", os.path.abspath(given)
            raise ZooError(f"{what} {given!r}: no such folder, and not a URL "
                           f"({', '.join(s + '://' for s in zoo_store.URL_SCHEMES)}).")
    beside = _beside_package()
    return ("folder", beside) if is_zoo_folder(beside) else ("cache", None)


def zoo_dir(path: str | None = None) -> str:
    """The zoo folder: ``path``, else ``$KERAS_HARDNEG_ZOO``, else ``models/`` beside the
    package. Raises :class:`ZooError` when the zoo is a URL or the cache (no folder)."""
    kind, where = zoo_source(path)
    if kind != "folder":
        raise ZooError(f"no zoo folder: the zoo is {where or 'the cache ' + zoo_store.cache_root()}"
                       f" (pass zoo= or set {ZOO_ENV} to a folder of entries).")
    return where


def entries(zoo: str | None = None) -> dict[str, bool]:
    """``{entry: has weights}`` for every entry: of the zoo folder (a subfolder with
    ``recipe.json`` or a preset), else of the shipped index."""
    kind, root = zoo_source(zoo)
    if kind != "folder":
        return {name: record["status"] == "weights"
                for name, record in zoo_store.read_index().items()}
    out = {}
    for name in sorted(os.listdir(root)):
        folder = os.path.join(root, name)
        trained = is_preset(os.path.join(folder, PRESET_DIR))
        if trained or os.path.isfile(os.path.join(folder, "recipe.json")):
            out[name] = trained
    return out


def list(zoo: str | None = None,  # noqa: A001 -- the zoo API's name
         available: bool = False) -> builtins.list[str]:
    """The names of the zoo's entries with weights, sorted: those of the zoo folder, else
    every entry of the index shipped with the package (what ``keras-hardneg zoo list``
    shows).

    Args:
        zoo: a zoo folder or URL (default ``$KERAS_HARDNEG_ZOO``, ``models/`` in a clone).
        available: only those :func:`load` gives now: with a URL, all of them (fetched at
            first load); with neither folder nor URL, those intact in the cache (the others
            need a zoo to fetch them from).
    """
    kind, _ = zoo_source(zoo)
    names = [name for name, trained in entries(zoo).items() if trained]
    if available and kind == "cache":
        index = zoo_store.read_index()
        names = [name for name in names if zoo_store.cached_entry(name, index[name])]
    return names


def _entry(name: str, zoo: str | None) -> str:
    """The folder of entry ``name`` with weights: in the zoo folder, or in the cache
    (fetched from the zoo URL when it is not there, or not intact)."""
    if not isinstance(name, str) or not name:
        raise ZooError(f"`name` must be an entry name (a string); got {name!r}.")
    kind, where = zoo_source(zoo)
    known = entries(zoo)
    _known_name(name, known)
    if kind != "folder":
        return _remote_entry(name, kind, where, known[name])
    folder = os.path.join(where, name)
    if not known[name]:
        raise ZooError(f"zoo entry {name!r} has a recipe but no trained weights yet (train it: "
                       f"keras-hardneg train --recipe {os.path.join(folder, 'recipe.json')} "
                       "--output RUN).")
    from keras_hardneg.export.preset import uses_keras_hub

    _check_packages(name, {"needs": ["keras_hub"] if uses_keras_hub(
        os.path.join(folder, PRESET_DIR)) else []})
    return folder


def _known_name(name: str, known: dict[str, bool]) -> None:
    """Raises :class:`ZooError` for a name that is no entry, with the closest names."""
    if name in known:
        return
    import difflib

    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    close += [n for n in known if (name in n or n in name) and n not in close]
    hint = f" Did you mean {', '.join(close[:5])}?" if close else ""
    raise ZooError(f"`name` {name!r} is not a zoo entry.{hint} Entries with weights: "
                   f"{', '.join(n for n, t in known.items() if t) or 'none'}.")


def _check_packages(name: str, record: dict[str, Any]) -> None:
    """Raises :class:`ZooError` before anything is fetched or built when entry ``name``
    needs a package that is not installed."""
    missing = zoo_store.missing_packages(record)
    if missing:
        raise ZooError(f"zoo entry {name!r} needs {'; '.join(missing)} (nothing was fetched "
                       "or loaded).")


def _remote_entry(name: str, kind: str, url: str | None, trained: bool) -> str:
    """Entry ``name`` of the index: its intact cache folder, else fetched from ``url``."""
    if not trained:
        raise ZooError(f"zoo entry {name!r} has a recipe but no trained weights yet (train it "
                       f"from a clone: keras-hardneg train --recipe models/{name}/recipe.json "
                       f"--output RUN).")
    record = zoo_store.read_index()[name]
    _check_packages(name, record)
    cached, damage = zoo_store.cache_state(name, record)
    if cached:
        return cached
    if kind == "url":
        return zoo_store.fetch_entry(name, record, url)
    folder = os.path.join(zoo_store.cache_root(), name)
    where = (f"set {ZOO_ENV} (or pass zoo=) to a URL or folder of the zoo (a copy of the "
             "repository's models/, or a folder written by `keras-hardneg zoo publish`)")
    if damage:
        raise ZooError(f"the cached copy of zoo entry {name!r} in {folder} is damaged "
                       f"({damage}): {where} to fetch it again (it replaces the damaged "
                       "copy), or delete that folder.")
    raise ZooError(f"zoo entry {name!r} is not in the cache ({folder}) and no zoo is set to "
                   f"fetch it from: {where}.")


def _read_json(path: str) -> Any:
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return json.load(f)


def show(name: str, zoo: str | None = None) -> dict[str, Any]:
    """What an entry is: ``{"name", "path", "where", "preset": metadata, "results":
    results.json, "recipe": the recipe trained, "figures": one line}`` (``trained_recipe.json``
    where the training changed the entry's ``recipe.json``, e.g. the GPU plan).

    Nothing is fetched: an entry neither in a zoo folder nor in the cache is shown from the
    index shipped with the package (``path``, ``results`` and ``recipe`` are then ``None``;
    ``preset`` holds the index's modality, input, features, parameters and weights dtype)."""
    if not isinstance(name, str) or not name:
        raise ZooError(f"`name` must be an entry name (a string); got {name!r}.")
    kind, where = zoo_source(zoo)
    known = entries(zoo)
    _known_name(name, known)
    if not known[name]:
        raise ZooError(f"zoo entry {name!r} has a recipe but no trained weights yet.")
    if kind == "folder":
        folder = os.path.join(where, name)
        place = "local"
    else:
        folder = zoo_store.cached_entry(name, zoo_store.read_index()[name])
        place = "cached" if folder else ("fetch" if kind == "url" else "unavailable")
    if folder is None:
        record = zoo_store.read_index()[name]
        meta = {k: record.get(k) for k in ("modality", "input", "output_dim",
                                           "parameter_count", "weights_dtype")}
        meta.update(path=None, needs=record.get("needs", []))
        return {"name": name, "path": None, "where": place, "preset": meta, "results": None,
                "recipe": None, "figures": record.get("figures", "-"),
                "size": sum(f["size"] for f in record["files"].values())}
    recipe = (_read_json(os.path.join(folder, "trained_recipe.json"))
              or _read_json(os.path.join(folder, "recipe.json")))
    results = _read_json(os.path.join(folder, "results.json"))
    meta = read_preset_metadata(os.path.join(folder, PRESET_DIR))
    return {"name": name, "path": folder, "where": place, "preset": meta,
            "results": results, "recipe": recipe,
            "figures": zoo_store.figures_text(results, meta.get("modality"))}


def entry_folder(name: str, zoo: str | None = None) -> str:
    """The folder of entry ``name`` with weights (``preset/``, ``recipe.json``,
    ``results.json``, ...): in the zoo folder, or in the cache (fetched first from a zoo URL
    when it is not there). What ``keras-hardneg evaluate NAME`` evaluates.

    Raises:
        ZooError: as :func:`load`.
    """
    return _entry(name, zoo)


def load(name: str, trainable: bool = True, zoo: str | None = None) -> keras.Model:
    """Entry ``name``'s encoder as a ``keras.Model`` of the current backend (see the module
    docstring for inputs and outputs), its weights and BN statistics restored.

    Args:
        name: an entry of :func:`list`.
        trainable: ``False`` freezes it (a fixed feature extractor).
        zoo: a zoo folder or URL (default: see :func:`zoo_source`).

    Raises:
        ZooError: unknown entry, or an entry without weights (says how to train it).
        PresetError: a damaged preset.

    Example:

    An entry of the published zoo, by name (weights from a clone's ``models/``, the cache,
    or fetched once from ``KERAS_HARDNEG_ZOO``; not run here, it needs them):

    >>> encoder = khn.zoo.load("simclr-hard-cifar10-r18w8-cpu")   # doctest: +SKIP

    Any folder of entries is a zoo, each entry a folder holding a ``preset/``:

    >>> import os, tempfile, numpy as np, keras_hardneg as khn
    >>> my_zoo = tempfile.mkdtemp()
    >>> enc = khn.encoders.small_convnet(input_shape=(8, 8, 3), width=4)
    >>> _ = khn.export.save_preset(enc, os.path.join(my_zoo, "tiny", "preset"))
    >>> model = khn.zoo.load("tiny", trainable=False, zoo=my_zoo)
    >>> tuple(model(np.zeros((2, 8, 8, 3), "float32")).shape)
    (2, 16)
    """
    return load_preset(os.path.join(_entry(name, zoo), PRESET_DIR), trainable=trainable)


def export(name: str, directory: str, *, overwrite: bool = False,
           zoo: str | None = None) -> str:
    """Writes entry ``name`` as a TF Hub SavedModel (``hub.load(directory)``) with its model
    card, and its preset in ``directory/preset/``; needs the TensorFlow backend. Returns
    ``directory``.

    Raises:
        ZooError: unknown or untrained entry.
        FileExistsError: ``directory`` exists (without ``overwrite``).
    """
    import shutil

    from keras_hardneg import export as exporting

    preset = find_preset(os.path.join(_entry(name, zoo), PRESET_DIR))
    meta = read_preset_metadata(preset)
    model = load_preset(preset, trainable=False)
    card_path = os.path.join(preset, "model_card.json")
    card = exporting.ModelCard.from_dict(_read_json(card_path)) if os.path.isfile(
        card_path) else None
    modality = get_modality(meta["modality"])
    kwargs = modality.export_arguments(meta.get("input", {}),
                                       modality.run_assets(os.path.join(preset, "assets")))
    directory = os.path.abspath(directory)
    exporting.export_encoder(model, directory, model_card=card, overwrite=overwrite, **kwargs)
    shutil.copytree(preset, os.path.join(directory, PRESET_DIR))
    return directory


def catalog(zoo: str | None = None) -> builtins.list[dict[str, Any]]:
    """Every entry with where it is: its index record (see :mod:`keras_hardneg.zoo_store`;
    for a zoo folder, read from the folder, sizes without hashes) without ``files``, plus
    ``name``, ``size`` (bytes a fetch brings) and ``where``: ``"local"`` (in the zoo
    folder), ``"cached"``, ``"fetch"`` (fetched from the zoo URL at first load),
    ``"unavailable"`` (in the index, but no zoo URL or folder is set), ``"damaged"`` (a
    copy whose files differ from the index: fetched again from a zoo URL), or ``"recipe"`` (no
    weights)."""
    kind, where = zoo_source(zoo)
    if kind == "folder":
        loadable = set(list(zoo))
        records = zoo_figures.link_twins({
            name: zoo_store.entry_record(os.path.join(where, name), hashes=False)
            for name in entries(zoo)})
    else:
        records = zoo_store.read_index()
    out = []
    for name, record in records.items():
        if record["status"] != "weights":
            place = "recipe"
        elif kind == "folder":
            place = "local" if name in loadable else "damaged"
        else:
            cached, damage = zoo_store.cache_state(name, record)
            place = ("cached" if cached else "damaged" if damage else
                     "fetch" if kind == "url" else "unavailable")
        row = {k: v for k, v in record.items() if k != "files"}
        row.update(name=name, where=place,
                   size=sum(f["size"] for f in record["files"].values()))
        out.append(row)
    return out


def compare(a: str, b: str, zoo: str | None = None) -> dict[str, Any]:
    """Entries ``a`` and ``b`` side by side, from the index (nothing is fetched): what tells
    them apart (framework, loss, sampler), each figure as mean ± std over seeds with the
    difference and whether it is inside the seeds' spread, the per-seed values, and the
    figures before training (:func:`keras_hardneg.zoo_figures.compare_records`).

    Raises:
        ZooError: an unknown entry, or one without weights.
    """
    rows = {row["name"]: row for row in catalog(zoo)}
    for given, flag in ((a, "a"), (b, "b")):
        if given not in rows:
            raise ZooError(f"`{flag}` {given!r} is not a zoo entry (keras-hardneg zoo list).")
        if rows[given]["status"] != "weights":
            raise ZooError(f"`{flag}` {given!r} has a recipe but no weights: nothing to "
                           "compare.")
    return zoo_figures.compare_records(rows[a], rows[b])


def _linked_record(name: str, record: dict[str, Any], zoo: str | None) -> dict[str, Any]:
    """``record`` with its ``twin`` and ``twinned_by`` (:mod:`keras_hardneg.zoo_figures`),
    linked against the zoo's other entries as the index links them."""
    kind, where = zoo_source(zoo)
    if kind == "folder":
        others = {n: zoo_store.entry_record(os.path.join(where, n), hashes=False)
                  for n in entries(zoo)}
    else:
        others = zoo_store.read_index()
    others[name] = record
    return zoo_figures.link_twins(others)[name]


#: What ``publish`` writes beside an entry's files (the index record, for the maintainer).
PUBLISHED_FORMAT = "keras_hardneg.zoo_published/1"


def _published(path: str) -> bool:
    """Whether ``path`` is an entry folder written by :func:`publish`."""
    stamp = _read_json(os.path.join(path, zoo_store.RECORD_FILE)) if os.path.isdir(
        path) else None
    return isinstance(stamp, dict) and stamp.get("format") == PUBLISHED_FORMAT


def publish(name: str, directory: str, *, overwrite: bool = False,
            zoo: str | None = None) -> str:
    """Writes entry ``name`` into ``directory/name/`` as a model hub hosts it: the files a
    fetch brings (``preset/`` -- config, weights, metadata, card, assets --, ``recipe.json``,
    ``results.json``, ``model_card.md``) and ``zoo_record.json`` (its index record, hashes
    included). Upload ``directory``'s content to any static host (or serve it) and
    ``KERAS_HARDNEG_ZOO=URL`` fetches the entry from there; an entry new to the zoo also
    needs its record in ``keras_hardneg/zoo_index.json`` (``python models/make_index.py`` in
    a clone). Returns ``directory/name``.

    ``directory`` may be new, empty, or hold only entries published before; anything else
    in it is refused and left untouched. Writing is atomic.

    Raises:
        ZooError: unknown or untrained entry.
        FileExistsError: ``directory`` holds other files, or already this entry (without
            ``overwrite``).
    """
    import shutil
    import tempfile

    folder = _entry(name, zoo)
    directory = os.path.abspath(os.fspath(directory))
    target = os.path.join(directory, name)
    if os.path.exists(directory):
        if not os.path.isdir(directory):
            raise FileExistsError(f"{directory} is a file; not touched (give a folder).")
        foreign = sorted(f for f in os.listdir(directory) if not f.startswith(".publish-")
                         and not _published(os.path.join(directory, f)))
        if foreign:
            raise FileExistsError(f"{directory} holds files keras-hardneg did not publish "
                                  f"({', '.join(foreign[:3])}); not touched (give a new or "
                                  "empty folder).")
        if os.path.exists(target) and not overwrite:
            raise FileExistsError(f"{target} is already published: pass overwrite=True "
                                  "(--overwrite) to replace it.")
    record = _linked_record(name, zoo_store.entry_record(folder), zoo)
    os.makedirs(directory, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".publish-{name}-", dir=directory)
    try:
        for rel in record["files"]:
            dest = os.path.join(tmp, *rel.split("/"))
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copyfile(os.path.join(folder, *rel.split("/")), dest)
        problems = zoo_store.verify_files(tmp, record["files"])
        if problems:
            raise ZooError(f"publish {name!r}: {problems[0]} after copying; nothing written.")
        with open(os.path.join(tmp, zoo_store.RECORD_FILE), "w") as f:
            json.dump({"format": PUBLISHED_FORMAT, "name": name, "record": record}, f,
                      indent=1, sort_keys=True)
        atomic_replace_dir(tmp, target, overwrite=True, old_prefix=".publish-old-")
    finally:
        if os.path.isdir(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
    return target


__all__ += ["PresetError"]
