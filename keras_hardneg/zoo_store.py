"""Where the zoo's files come from: the index shipped in the package, a URL, and the cache.

:mod:`keras_hardneg.zoo` resolves an entry name in this order: ``zoo=`` or
``$KERAS_HARDNEG_ZOO`` (a folder, or a ``https://``, ``http://`` or ``file://`` URL), then
the ``models/`` folder beside the package (a clone), then this cache. This module holds the
parts that need no folder of entries:

* the **index** ``keras_hardneg/zoo_index.json`` (package data, so every install has it),
  written from the repository's ``models/`` by ``python models/make_index.py``. One record
  per entry: ``status`` (``"weights"`` or ``"recipe"``), ``modality``, ``input`` (the
  preset's input contract), ``output_dim``, ``parameter_count``, ``weights_dtype``,
  ``figures``, ``trained_on``, the figures over seeds, baseline and NT-Xent twin of
  :mod:`keras_hardneg.zoo_figures` (``metrics``, ``weights_seed``, ``baseline``,
  ``twin``, ``twinned_by``, ``setting``), or ``why_no_weights`` for a recipe, and ``files``:
  ``{relative path: {"size": bytes, "sha256": hex}}`` -- the files a fetch brings
  (``preset/**``, ``recipe.json``, ``trained_recipe.json``, ``results.json``, ``history.json``,
  ``model_card.md``; not the SavedModel ``encoder/``, which ``zoo export`` rebuilds);
* the **cache** ``$KERAS_HOME/keras_hardneg/zoo/NAME/`` (``~/.keras`` without
  ``KERAS_HOME``): an entry fetched from a URL, file by file with Keras's own
  ``keras.utils.get_file``, each file checked against the index's SHA-256. The files land
  in a temporary folder beside the cache entry, which is renamed into place only when
  every file is verified: a mismatch or a failed request raises one :class:`ZooError` and
  leaves nothing behind. A cached entry whose files all match the index is used as it is
  (no request, offline too); one that does not is fetched again.

URLs name the zoo's root: entry ``NAME``'s file ``preset/config.json`` is fetched from
``URL/NAME/preset/config.json`` -- the layout of ``models/`` and of the folder
``keras-hardneg zoo publish`` writes.

Example:

>>> from keras_hardneg import zoo_store
>>> record = zoo_store.read_index()["graphcl-ntxent-mutag"]     # doctest: +SKIP
>>> record["modality"], sorted(record["files"])[:2]             # doctest: +SKIP
('graph', ['model_card.md', 'preset/config.json'])
"""

from __future__ import annotations

import glob
import json
import os
import posixpath
import shutil
import sys
import tempfile
import urllib.parse
from typing import Any

from keras_hardneg import zoo_figures
from keras_hardneg._io import atomic_replace_dir, sha256_file
from keras_hardneg.registry import DATASETS, DEFAULT_MODALITY

__all__ = ["INDEX_FORMAT", "INDEX_PATH", "RECORD_FILE", "ZooError", "read_index",
           "write_index", "build_index", "entry_record", "entry_files", "figures_text",
           "why_no_weights", "is_url", "cache_root", "cached_entry", "cache_state",
           "fetch_entry", "verify_files", "missing_packages"]

INDEX_FORMAT = "keras_hardneg.zoo_index/1"
#: The index shipped with the package (package data).
INDEX_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zoo_index.json")
#: Written into a cached or published entry: the index record it was checked against.
RECORD_FILE = "zoo_record.json"
RECORD_FORMAT = "keras_hardneg.zoo_record/1"
#: Top-level files of an entry that a fetch brings (when present), besides ``preset/**``.
ENTRY_FILES = ("recipe.json", "trained_recipe.json", "results.json", "history.json",
               "model_card.md")
PRESET_DIR = "preset"
URL_SCHEMES = ("http", "https", "file")


class ZooError(ValueError):
    """An unknown or untrained zoo entry, no zoo to take it from, or a failed fetch."""


# ------------------------------------------------------------------------------ index
def _read_json(path: str) -> Any:
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return json.load(f)


def entry_files(folder: str) -> list[str]:
    """The files of entry ``folder`` a fetch brings, as sorted ``/``-separated relative
    paths: every file under ``preset/`` (none starting with ``.``) and those of
    :data:`ENTRY_FILES` that exist."""
    out = [name for name in ENTRY_FILES if os.path.isfile(os.path.join(folder, name))]
    preset = os.path.join(folder, PRESET_DIR)
    for root, dirs, files in os.walk(preset):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            if not name.startswith("."):
                rel = os.path.relpath(os.path.join(root, name), folder)
                out.append(rel.replace(os.sep, "/"))
    return sorted(out)


def figures_text(results: dict[str, Any] | None) -> str:
    """An entry's figures in one line, whatever its modality ("-" without results)."""
    res = results or {}
    if "svm_accuracy" in res:
        return f"SVM {res['svm_accuracy']:.3f} ± {res['svm_accuracy_std']:.3f} (10-fold)"
    if isinstance(res.get("sts"), dict):
        out = f"STS avg {res['sts']['avg']:.1f}"
        if isinstance(res.get("senteval"), dict):
            out += f", SentEval avg {res['senteval']['avg']:.1f}"
        return out
    if "knn_accuracy" in res:
        probe = (f", probe {res['linear_probe_accuracy']:.3f}"
                 if "linear_probe_accuracy" in res else "")
        return f"kNN {res['knn_accuracy']:.3f}{probe}"
    return "-"


def _modality(recipe: dict[str, Any]) -> str:
    """The modality of the data ``recipe`` names: its dataset's registered ``modality`` tag."""
    data = (recipe or {}).get("data", {}).get("name")
    if data not in DATASETS:
        return DEFAULT_MODALITY
    return DATASETS.get(data).tags.get("modality", DEFAULT_MODALITY)


#: tfds datasets that tfds cannot fetch itself (their licence asks for a manual download).
MANUAL_TFDS = ("imagenet2012",)


def why_no_weights(recipe: dict[str, Any]) -> str:
    """Why a recipe-only entry has no weights, from its recipe: ``"needs a GPU"`` (a
    ResNet-50, or a width-64 ResNet for 100 epochs or more), ``"data: a manual download"``
    (a tfds dataset tfds cannot fetch itself, e.g. ImageNet), both, or ``"not trained yet"``
    (sized for a CPU; its data is fetched by name)."""
    enc, data = recipe.get("encoder", {}), recipe.get("data", {})
    name = str(enc.get("name", ""))
    reasons = []
    if name == "resnet50" or (name.startswith("resnet") and int(enc.get("width") or 64) >= 64
                              and int(recipe.get("epochs") or 0) >= 100):
        reasons.append("needs a GPU")
    if data.get("name") == "tfds" and data.get("dataset") in MANUAL_TFDS:
        reasons.append(f"data: a manual download (tfds {data.get('dataset')})")
    return "; ".join(reasons) or "not trained yet (CPU-sized)"


def _trained_on(results: dict[str, Any]) -> str:
    hardware = str(results.get("hardware", ""))
    if "gpu" in hardware.lower():
        return "GPU: " + hardware.split(";")[0].split(" x ")[-1].split(" (")[0]
    return "CPU"


def entry_record(folder: str, *, hashes: bool = True) -> dict[str, Any]:
    """The index record of the entry in ``folder`` (see the module docstring); ``hashes=False``
    leaves the SHA-256s out (sizes only: cheap, for listing a folder)."""
    from keras_hardneg.export.preset import is_preset

    recipe = (_read_json(os.path.join(folder, "trained_recipe.json"))
              or _read_json(os.path.join(folder, "recipe.json")) or {})
    results = _read_json(os.path.join(folder, "results.json")) or {}
    preset = os.path.join(folder, PRESET_DIR)
    if is_preset(preset):
        meta = _read_json(os.path.join(preset, "metadata.json"))
        from keras_hardneg.export.preset import uses_keras_hub

        record = {"status": "weights", "modality": meta.get("modality", "image"),
                  "input": meta.get("input", {}), "output_dim": meta.get("output_dim"),
                  "parameter_count": meta.get("parameter_count"),
                  "weights_dtype": meta.get("weights_dtype"),
                  "figures": figures_text(results), "trained_on": _trained_on(results),
                  "needs": ["keras_hub"] if uses_keras_hub(preset) else []}
        record.update(zoo_figures.index_fields(results, recipe))  # seeds, baseline, twin
    else:
        record = {"status": "recipe", "modality": _modality(recipe),
                  "why_no_weights": why_no_weights(recipe)}
    files = {}
    for rel in entry_files(folder):
        path = os.path.join(folder, *rel.split("/"))
        files[rel] = {"size": os.path.getsize(path)}
        if hashes:
            files[rel]["sha256"] = sha256_file(path)
    record["files"] = files
    return record


def build_index(root: str) -> dict[str, Any]:
    """The index of the zoo folder ``root``: ``{"format", "entries": {name: record}}`` for
    every subfolder holding ``recipe.json`` or a preset."""
    from keras_hardneg.export.preset import is_preset

    entries = {}
    for name in sorted(os.listdir(root)):
        folder = os.path.join(root, name)
        if os.path.isfile(os.path.join(folder, "recipe.json")) or is_preset(
                os.path.join(folder, PRESET_DIR)):
            entries[name] = entry_record(folder)
    return {"format": INDEX_FORMAT, "entries": zoo_figures.link_twins(entries)}


def write_index(index: dict[str, Any], path: str = INDEX_PATH) -> str:
    """Writes ``index`` as JSON (sorted keys, one level per line: reviewable diffs)."""
    with open(path, "w") as f:
        json.dump(index, f, indent=1, sort_keys=True, ensure_ascii=False)
        f.write("\n")
    return path


def read_index(path: str = INDEX_PATH) -> dict[str, dict[str, Any]]:
    """``{entry name: record}`` of the index at ``path`` (default: the shipped one)."""
    index = _read_json(path)
    if not isinstance(index, dict) or index.get("format") != INDEX_FORMAT:
        raise ZooError(f"the zoo index {path} is missing or not of format {INDEX_FORMAT!r} "
                       "(reinstall keras-hardneg; in a clone: python models/make_index.py).")
    return index["entries"]


# ------------------------------------------------------------------------------ cache
def is_url(text: str | None) -> bool:
    """Whether ``text`` is a URL the zoo fetches from (``http``, ``https``, ``file``)."""
    return isinstance(text, str) and urllib.parse.urlsplit(text).scheme in URL_SCHEMES


def cache_root() -> str:
    """``$KERAS_HOME/keras_hardneg/zoo`` (``~/.keras/keras_hardneg/zoo`` without
    ``KERAS_HOME``), read at each call."""
    base = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    return os.path.join(base, "keras_hardneg", "zoo")


#: ``{(path, size, mtime_ns, ctime_ns, inode): sha256}`` of the files hashed in this process:
#: a file unchanged since (any write moves its ctime) is not read again by ``zoo.list()``.
_HASHES: dict[tuple, str] = {}


def _sha256_once(path: str) -> str:
    st = os.stat(path)
    key = (os.path.realpath(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    if key not in _HASHES:
        _HASHES[key] = sha256_file(path)
    return _HASHES[key]


def verify_files(folder: str, files: dict[str, dict[str, Any]]) -> list[str]:
    """What in ``folder`` differs from ``files`` (``{relative path: {"size", "sha256"}}``):
    one line per missing, resized or changed file; ``[]`` when all match."""
    problems = []
    for rel, want in files.items():
        path = os.path.join(folder, *rel.split("/"))
        if not os.path.isfile(path):
            problems.append(f"{rel} is missing")
        elif os.path.getsize(path) != want["size"]:
            problems.append(f"{rel} has {os.path.getsize(path)} bytes, not {want['size']}")
        elif "sha256" in want and _sha256_once(path) != want["sha256"]:
            problems.append(f"{rel}: SHA-256 differs")
    return problems


#: Optional packages an entry may need (the index record's ``needs``) -> how to get them.
PACKAGES = {"keras_hub": "keras-hub, the [pretrained] extra: pip install "
                         "'keras-hardneg[pretrained]'"}


def missing_packages(record: dict[str, Any]) -> list[str]:
    """What of ``record["needs"]`` is not installed, as :data:`PACKAGES` says it."""
    import importlib.util

    return [PACKAGES.get(m, m) for m in record.get("needs", [])
            if importlib.util.find_spec(m) is None]


def cache_state(name: str, record: dict[str, Any]) -> tuple[str | None, str | None]:
    """``(folder, None)`` when the cache holds exactly what ``record`` lists (checked by
    SHA-256); ``(None, None)`` when it holds nothing of entry ``name``; ``(None, what is
    wrong)`` when it holds a damaged or outdated copy."""
    folder = os.path.join(cache_root(), name)
    if not os.path.isdir(folder):
        return None, None
    stamp = _read_json(os.path.join(folder, RECORD_FILE))
    if not isinstance(stamp, dict):
        return None, f"{RECORD_FILE} is missing (an interrupted or foreign copy)"
    if stamp.get("record", {}).get("files") != record["files"]:
        return None, "it was fetched for another version of the zoo index"
    problems = verify_files(folder, record["files"])
    return (None, problems[0]) if problems else (folder, None)


def cached_entry(name: str, record: dict[str, Any]) -> str | None:
    """The cache folder of entry ``name`` if it holds exactly what ``record`` lists
    (checked by SHA-256), else ``None``."""
    return cache_state(name, record)[0]


def _origin(base_url: str, name: str, rel: str) -> str:
    return "/".join([base_url.rstrip("/"), urllib.parse.quote(name), urllib.parse.quote(rel)])


def fetch_entry(name: str, record: dict[str, Any], base_url: str) -> str:
    """Fetches entry ``name``'s files from ``base_url`` (``URL/NAME/FILE``) into the cache,
    each checked against ``record``'s SHA-256; returns the cache folder.

    One fetch of an entry at a time (a lock beside it: the processes of a multi-worker run
    that all call ``zoo.load`` fetch it once, the others wait and take that copy). Files
    land in a temporary folder renamed into place when all are verified: a process killed
    half-way leaves no entry (its temporary folder is removed by the next fetch), a failed
    fetch leaves none either. Written to a file or a pipe, one plain line per entry.

    Raises:
        ZooError: a file that cannot be fetched or does not match (nothing is cached then).
    """
    from keras_hardneg.data import fetch

    if not is_url(base_url):
        raise ZooError(f"`zoo` {base_url!r} is not a URL ({', '.join(URL_SCHEMES)}).")
    root = cache_root()
    final = os.path.join(root, name)
    os.makedirs(root, exist_ok=True)
    with fetch.locked(final):
        if cached_entry(name, record):  # another process fetched it while this one waited
            return final
        fetch.remove_orphans(root, name)  # what killed fetches left
        for stale in glob.glob(os.path.join(root, f".stale-{glob.escape(name)}-*")):
            shutil.rmtree(stale, ignore_errors=True)
        size = sum(f["size"] for f in record["files"].values())
        if not (hasattr(sys.stdout, "isatty") and sys.stdout.isatty()):
            print(f"fetching zoo entry {name} ({len(record['files'])} files, "
                  f"{fetch.size_text(size)}) from {base_url}", flush=True)
        tmp = fetch.temp_dir(root, name)
        try:
            for rel, want in sorted(record["files"].items()):
                origin = _origin(base_url, name, rel)
                subdir, fname = posixpath.split(rel)
                folder = os.path.join(tmp, *subdir.split("/")) if subdir else tmp
                os.makedirs(folder, exist_ok=True)
                try:
                    fetch.fetch_file(origin, folder, fname, sha256=want["sha256"],
                                     what=f"zoo entry {name!r}", announce=False)
                except fetch.FetchError as e:
                    if "SHA-256" in str(e):
                        raise ZooError(f"zoo entry {name!r}: {origin} does not match the "
                                       "SHA-256 of the zoo index shipped with keras-hardneg "
                                       "(the host's file differs from the indexed one); "
                                       "nothing was cached.") from None
                    raise ZooError(str(e)) from None
            problems = verify_files(tmp, record["files"])
            if problems:  # fetch_file checked each; this guards the whole set (sizes, names)
                raise ZooError(f"zoo entry {name!r} from {base_url}: {problems[0]}; nothing "
                               "was cached.")
            with open(os.path.join(tmp, RECORD_FILE), "w") as f:
                json.dump({"format": RECORD_FORMAT, "name": name, "source": base_url,
                           "record": record}, f, indent=1, sort_keys=True)
            # A damaged or outdated copy is replaced whole.
            atomic_replace_dir(tmp, final, overwrite=True, old_prefix=".stale-")
        finally:
            if os.path.isdir(tmp):
                shutil.rmtree(tmp, ignore_errors=True)
    return final
