"""Public datasets by name, fetched once from where their authors publish them and cached
(:mod:`keras_hardneg.data.fetch`: ``~/.keras/datasets``, ``$KERAS_HARDNEG_DATA_MIRROR``).

* **CIFAR-10 / CIFAR-100** (Krizhevsky 2009), the way Keras users get them: the "python
  version" archives from ``www.cs.toronto.edu/~kriz``, checked against the SHA-256 that
  ``keras.datasets.cifar10`` / ``cifar100`` publish, in Keras's own cache layout (a copy
  ``keras.datasets.cifar10.load_data()`` fetched is used without a request; one fetched
  here serves Keras too). :func:`load_cifar` -> uint8 ``[N, 32, 32, 3]`` and int64 labels.
* **TU graph sets** (Morris et al. 2020, *TUDataset*) from their public host
  ``www.chrsmrrs.com/graphkerneldatasets/NAME.zip`` (as PyTorch Geometric and DGL fetch
  them): :func:`tu_folder` -> a folder in the TU format. No SHA-256 is published for these
  files: the seven sets of the papers (:data:`TU_STATISTICS`) are checked by content --
  graph count, graphs per class and node count against the published statistics -- and a
  fetch records the archive's SHA-256 in the folder's stamp (``keras_hardneg_source.json``).
* **BEIR retrieval sets** (Thakur et al. 2021) from BEIR's public host
  (``public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/NAME.zip``, as the ``beir``
  package fetches them): :func:`beir_folder` -> a BEIR folder (``corpus.jsonl``,
  ``queries.jsonl``, ``qrels/SPLIT.tsv``) for the sets of :data:`BEIR_SETS` (SciFact,
  NFCorpus, ArguAna, FiQA, SCIDOCS, TREC-COVID, Touche-2020, Quora), the zip checked against
  the MD5 BEIR publishes, SciFact's files also by SHA-256 and its published counts.
* **SimCSE's Wikipedia sentences** (Gao et al. 2021, ``wiki1m_for_simcse.txt``, 10^6
  sentences, one per line) from the authors' Hugging Face dataset:
  :func:`sentence_corpus` -> the file's path (its SHA-256 recorded beside it at first fetch).

Without network, each says in one line what to give instead (a local folder or file, the
cache folder to fill, or a mirror).

Example:

>>> from keras_hardneg.data import public
>>> sorted(public.TU_STATISTICS)[:3]
['ENZYMES', 'IMDB-BINARY', 'IMDB-MULTI']
>>> public.TU_STATISTICS["MUTAG"]["graphs"]
188
>>> public.BEIR_SETS["scifact"]["md5"]
'5f7d1de60b170fc8027bb7898e2efca1'
>>> (x, y), (xt, yt) = public.load_cifar("cifar10")   # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import re
import shutil
import tarfile
import zipfile
import zlib
from typing import Any

import numpy as np

from keras_hardneg.data.fetch import (MIRROR_ENV, FetchError, data_home, download, fetch_file,
                                      fetch_folder, read_stamp, source_url)

__all__ = ["CIFAR", "TU_HOST", "TU_STATISTICS", "BEIR_HOST", "BEIR_SETS", "CORPORA",
           "load_cifar", "cifar_folder", "cifar_class_names", "tu_folder", "beir_folder",
           "is_beir_folder", "sentence_corpus", "offline_hint"]

# ------------------------------------------------------------------------------ CIFAR
#: name -> the archive, Keras's cache names and the SHA-256 keras.datasets publishes.
CIFAR = {
    "cifar10": {
        "url": "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
        "sha256": "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce",
        "keras_dir": "cifar-10-batches-py-target", "inner": "cifar-10-batches-py",
        "train": [f"data_batch_{i}" for i in range(1, 6)], "test": ["test_batch"],
        "label_key": "labels", "classes": 10, "title": "CIFAR-10",
        "meta": "batches.meta", "names_key": "label_names"},
    "cifar100": {
        "url": "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz",
        "sha256": "85cd44d02ba6437773c5bbd22e183051d648de2e7d6b014e1ef29b855ba677a7",
        "keras_dir": "cifar-100-python-target", "inner": "cifar-100-python",
        "train": ["train"], "test": ["test"], "label_key": "fine_labels", "classes": 100,
        "title": "CIFAR-100", "meta": "meta", "names_key": "fine_label_names"},
}


def offline_hint(what: str, local: str, cache: str, file_name: str) -> str:
    """The sentence every fetch error ends with: what to give without network (with
    ``$KERAS_HARDNEG_DATA_MIRROR`` set: that the mirror lacks the file, not to set it)."""
    mirror = os.environ.get(MIRROR_ENV)
    if mirror:
        where = (f"or put {file_name} in the mirror {MIRROR_ENV}={mirror} (it is fetched "
                 f"from there, not from its public host)")
    else:
        where = f"or set {MIRROR_ENV} to a URL or file:// folder holding {file_name}"
    return f"Without network: {local}, or put {what} in {cache} (the cache), {where}."


def _cifar_batches_dir(name: str, root: str) -> str | None:
    """The folder of ``name``'s batch files in ``root`` (Keras 3's layout, then Keras 2's)."""
    spec = CIFAR[name]
    for folder in (os.path.join(root, spec["keras_dir"], spec["inner"]),
                   os.path.join(root, spec["inner"])):
        if all(os.path.isfile(os.path.join(folder, f)) for f in spec["train"] + spec["test"]):
            return folder
    return None


def _checked_archive(path: str, spec: dict[str, Any]) -> str:
    """``path``, an archive a user put in the cache, if its SHA-256 is the published one."""
    digest = _sha256(path)
    if digest != spec["sha256"]:
        raise FetchError(f"{spec['title']}: {path} is not the published archive (SHA-256 "
                         f"{digest[:12]}..., published {spec['sha256'][:12]}...); remove it "
                         "or replace it with the archive from its host.")
    return path


def cifar_folder(name: str = "cifar10", data_dir: str | None = None) -> str:
    """The folder of ``name``'s python batch files (``cifar10`` or ``cifar100``) in the
    cache, fetched (163 / 161 MB, SHA-256 checked) and extracted when absent.

    Without network, either form in the cache (``data_dir``, default
    ``$KERAS_HOME/datasets``) serves: the archive as its host names it
    (``cifar-10-python.tar.gz``: its SHA-256 is checked, then it is extracted), or the
    extracted batch files in Keras's layout (``cifar-10-batches-py-target/
    cifar-10-batches-py/``, or ``cifar-10-batches-py/``: read as they are; each batch's
    images and labels are checked for shape and range when read, nothing more).

    Raises:
        FetchError: no network (says what to give instead), or the archive differs.
    """
    if name not in CIFAR:
        raise ValueError(f"`name` must be one of {', '.join(CIFAR)}; got {name!r}.")
    spec, root = CIFAR[name], data_home(data_dir)
    found = _cifar_batches_dir(name, root)
    if found:
        return found
    archive_name = spec["keras_dir"] + "_archive"  # Keras's name: one download for both
    file_name = spec["url"].rsplit("/", 1)[-1]

    def build(tmp: str) -> dict[str, Any]:
        placed = os.path.join(root, file_name)  # the archive as its host names it, put by hand
        try:
            archive = (_checked_archive(placed, spec) if os.path.isfile(placed) else
                       download(spec["url"], os.path.join(root, archive_name),
                                sha256=spec["sha256"], what=spec["title"]))
        except FetchError as e:
            if os.path.isfile(placed):
                raise
            raise FetchError(f"{e} " + offline_hint(
                spec["title"], "use an image folder (--dataset FOLDER, --data FOLDER in the "
                "examples)", root, file_name)) from None
        with tarfile.open(archive, "r:gz") as tar:
            _safe_extract(tar, tmp)
        if not all(os.path.isfile(os.path.join(tmp, spec["inner"], f))
                   for f in spec["train"] + spec["test"]):
            raise FetchError(f"{spec['title']}: {archive} holds no {spec['inner']}/ with "
                             f"{', '.join(spec['train'] + spec['test'])}.")
        return {"source": source_url(spec["url"]), "sha256": spec["sha256"],
                "check": "SHA-256 published by keras.datasets"}

    folder = fetch_folder(os.path.join(root, spec["keras_dir"]), build,
                          complete=lambda f: _cifar_batches_dir(name, root) is not None)
    return os.path.join(folder, spec["inner"])


def _safe_extract(tar: tarfile.TarFile, dest: str) -> None:
    """Extracts regular files and folders only, each inside ``dest``."""
    for member in tar.getmembers():
        target = os.path.realpath(os.path.join(dest, member.name))
        if not target.startswith(os.path.realpath(dest) + os.sep):
            raise FetchError(f"archive member {member.name!r} would land outside {dest}.")
        if member.isdir():
            os.makedirs(target, exist_ok=True)
        elif member.isfile():
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with tar.extractfile(member) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out)


class _ArraysOnly(pickle.Unpickler):
    """Unpickles the CIFAR batches' dicts of bytes, lists and NumPy arrays; nothing else."""

    _ALLOWED = {("numpy.core.multiarray", "_reconstruct"),
                ("numpy._core.multiarray", "_reconstruct"), ("numpy", "ndarray"),
                ("numpy", "dtype"), ("numpy.core.multiarray", "scalar"),
                ("numpy._core.multiarray", "scalar"), ("numpy.core.numeric", "_frombuffer"),
                ("numpy._core.numeric", "_frombuffer"),
                ("_codecs", "encode")}  # protocol-2 bytes written by Python 3: latin-1 text

    def find_class(self, module, name):
        if (module, name) in self._ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a CIFAR batch file")


def _read_batch(path: str, label_key: str, classes: int) -> tuple[np.ndarray, np.ndarray]:
    with open(path, "rb") as f:
        batch = _ArraysOnly(f, encoding="bytes").load()
    batch = {k.decode() if isinstance(k, bytes) else k: v for k, v in batch.items()}
    data = np.asarray(batch["data"], dtype=np.uint8)
    labels = np.asarray(batch[label_key], dtype=np.int64).reshape(-1)
    if data.ndim != 2 or data.shape[1] != 3 * 32 * 32 or len(data) != len(labels):
        raise ValueError(f"{path}: not a CIFAR batch (data {data.shape}, {len(labels)} labels).")
    if len(labels) and (labels.min() < 0 or labels.max() >= classes):
        raise ValueError(f"{path}: labels outside 0..{classes - 1}.")
    return data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1), labels


def _first_per_class(labels: np.ndarray, limit: int | None) -> np.ndarray:
    """Indices of the first ``limit`` items of each class, in order (all when ``None``)."""
    if limit is None:
        return np.arange(len(labels))
    keep = np.zeros(len(labels), bool)
    for c in np.unique(labels):
        keep[np.flatnonzero(labels == c)[:limit]] = True
    return np.flatnonzero(keep)


def load_cifar(name: str = "cifar10", data_dir: str | None = None, *,
               limit_per_class: int | None = None, test_limit_per_class: int | None = None,
               image_size: int | None = None, dtype: str = "uint8"
               ) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """``((x_train, y_train), (x_test, y_test))`` of CIFAR-10 or CIFAR-100 (fine labels),
    in the archive's order, as ``keras.datasets.cifar10.load_data()`` gives them (labels
    flat int64 ``[N]``), fetched once (:func:`cifar_folder`).

    Args:
        name: ``"cifar10"`` or ``"cifar100"``.
        data_dir: the cache folder (default ``~/.keras/datasets``, Keras's).
        limit_per_class, test_limit_per_class: the first N images of each class of the
            training / test split (``test_limit_per_class`` defaults to
            ``limit_per_class``).
        image_size: resize to this side (Pillow, bilinear; float32 only).
        dtype: ``"uint8"`` (0-255) or ``"float32"`` (in ``[0, 1]``).
    """
    spec = CIFAR[name] if name in CIFAR else None
    if spec is None:
        raise ValueError(f"`name` must be one of {', '.join(CIFAR)}; got {name!r}.")
    if dtype not in ("uint8", "float32"):
        raise ValueError(f"`dtype` must be 'uint8' or 'float32'; got {dtype!r}.")
    if image_size not in (None, 32) and dtype != "float32":
        raise ValueError("`image_size` other than 32 needs dtype='float32'.")
    folder = cifar_folder(name, data_dir)

    def split(files, limit):
        parts = [_read_batch(os.path.join(folder, f), spec["label_key"], spec["classes"])
                 for f in files]
        x, y = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
        keep = _first_per_class(y, limit)
        x, y = x[keep], y[keep]
        if dtype == "float32":
            from keras_hardneg.data.decode import resize_float_images, to_unit_float

            x = to_unit_float(x)
            if image_size not in (None, 32):
                x = resize_float_images(x, (int(image_size), int(image_size)))
        return x, y

    test_limit = limit_per_class if test_limit_per_class is None else test_limit_per_class
    return split(spec["train"], limit_per_class), split(spec["test"], test_limit)



def cifar_class_names(name: str = "cifar10", data_dir: str | None = None) -> list[str] | None:
    """The class names of ``name`` (label ``i`` is ``names[i]``: ``"airplane"``, ...), read
    from the archive's meta file in the cache; ``None`` when the cache does not hold the
    extracted batches (nothing is fetched)."""
    if name not in CIFAR:
        raise ValueError(f"`name` must be one of {', '.join(CIFAR)}; got {name!r}.")
    spec = CIFAR[name]
    folder = _cifar_batches_dir(name, data_home(data_dir))
    path = os.path.join(folder, spec["meta"]) if folder else None
    if not path or not os.path.isfile(path):
        return None
    try:
        with open(path, "rb") as f:
            meta = _ArraysOnly(f, encoding="bytes").load()
        meta = {k.decode() if isinstance(k, bytes) else k: v for k, v in meta.items()}
        names = [n.decode() if isinstance(n, bytes) else str(n) for n in meta[spec["names_key"]]]
    except (OSError, KeyError, AttributeError, pickle.UnpicklingError, EOFError):
        return None
    return names if len(names) == spec["classes"] else None

# ------------------------------------------------------------------------------ TU
#: The public host of the TU sets (``NAME.zip`` holding ``NAME/NAME_A.txt``, ...).
TU_HOST = "https://www.chrsmrrs.com/graphkerneldatasets"
#: Published statistics of the papers' seven sets (Morris et al. 2020; the node counts
#: are the published average nodes per graph times the graph count): a fetched set must
#: match them.
TU_STATISTICS = {
    "MUTAG": {"graphs": 188, "class_sizes": [63, 125], "nodes": 3371},
    "PTC_MR": {"graphs": 344, "class_sizes": [152, 192], "nodes": 4915},
    "PROTEINS": {"graphs": 1113, "class_sizes": [450, 663], "nodes": 43471},
    "ENZYMES": {"graphs": 600, "class_sizes": [100] * 6, "nodes": 19580},
    "NCI1": {"graphs": 4110, "class_sizes": [2053, 2057], "nodes": 122747},
    "IMDB-BINARY": {"graphs": 1000, "class_sizes": [500, 500], "nodes": 19773},
    "IMDB-MULTI": {"graphs": 1500, "class_sizes": [500, 500, 500], "nodes": 19502},
}
_TU_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_\-]*")


def _tu_counts(folder: str, name: str) -> dict[str, Any]:
    def lines(suffix):
        with open(os.path.join(folder, f"{name}_{suffix}.txt"), "rb") as f:
            return [line for line in f.read().splitlines() if line.strip()]

    labels = lines("graph_labels")
    _, sizes = np.unique(np.array([int(v) for v in labels]), return_counts=True)
    return {"graphs": len(labels), "class_sizes": sorted(int(s) for s in sizes),
            "nodes": len(lines("graph_indicator"))}


def _extract_tu_zip(path: str, name: str, folder: str, source: str) -> None:
    """The files of ``NAME/`` in the zip at ``path`` into ``folder`` (no ``__MACOSX/``, no
    nesting); a damaged or truncated archive raises :class:`FetchError` in one line."""
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                parts = info.filename.replace("\\", "/").split("/")
                if info.is_dir() or len(parts) != 2 or parts[0] != name or not parts[1] \
                        or parts[1].startswith("."):
                    continue
                with archive.open(info) as src, \
                        open(os.path.join(folder, parts[1]), "wb") as out:
                    shutil.copyfileobj(src, out)
    except (zipfile.BadZipFile, EOFError, zlib.error) as e:
        raise FetchError(f"TU {name}: {source} is not a complete zip archive ({e}); nothing "
                         "was cached. Fetch it again, or give the extracted folder.") from None


def tu_folder(name: str, data_dir: str | None = None) -> str:
    """The folder of TU set ``name`` (``MUTAG``, ``PROTEINS``, ...: the host's names) in the
    cache (``DATA_HOME/tudataset/NAME``), fetched from :data:`TU_HOST` when absent and
    checked (:data:`TU_STATISTICS` for the papers' sets). A complete TU folder put there by
    hand is used as it is.

    Raises:
        ValueError: ``name`` is not a TU set name.
        FetchError: no network (says what to give instead), or the content differs.
    """
    if not isinstance(name, str) or not _TU_NAME.fullmatch(name):
        raise ValueError(f"`dataset` must be a TU set name such as 'MUTAG' or 'IMDB-BINARY' "
                         f"(letters, digits, '_' and '-'); got {name!r}.")
    root = os.path.join(data_home(data_dir), "tudataset")
    url = f"{TU_HOST}/{name}.zip"

    def is_tu_folder(folder: str) -> bool:  # the files every TU set has (data.graphs reads)
        return all(os.path.isfile(os.path.join(folder, f"{name}_{part}.txt"))
                   for part in ("A", "graph_indicator", "graph_labels"))

    def build(tmp: str) -> dict[str, Any]:
        zip_dir = os.path.join(tmp, ".zip")
        os.makedirs(zip_dir)
        try:
            path = fetch_file(source_url(url), zip_dir, f"{name}.zip", what=f"TU {name}")
        except FetchError as e:
            raise FetchError(f"{e} " + offline_hint(
                f"a {name}/ folder", "give a TU folder (--dataset DIR in the CLI, --data DIR in "
                f"the examples) holding {name}_A.txt, "
                f"{name}_graph_indicator.txt, {name}_graph_labels.txt, ...", root,
                f"{name}.zip")) from None
        digest = _sha256(path)
        _extract_tu_zip(path, name, tmp, source_url(url))
        shutil.rmtree(zip_dir)
        if not is_tu_folder(tmp):
            raise FetchError(f"TU {name}: {source_url(url)} holds no {name}/{name}_A.txt, "
                             f"{name}_graph_indicator.txt and {name}_graph_labels.txt; "
                             "nothing was cached.")
        counts = _tu_counts(tmp, name)
        want = TU_STATISTICS.get(name)
        if want is not None and counts != want:
            raise FetchError(f"TU {name} from {source_url(url)} has {counts}, not the "
                             f"published {want}; nothing was cached.")
        return {"source": source_url(url), "sha256": digest, "counts": counts,
                "check": ("graphs, graphs per class and nodes equal the published statistics"
                          if want else "none published here: SHA-256 recorded at this fetch")}

    return fetch_folder(os.path.join(root, name), build, complete=is_tu_folder)


# ------------------------------------------------------------------------------ BEIR
#: BEIR's public host (Thakur et al. 2021): ``NAME.zip`` holds the folder ``NAME/`` with
#: ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/SPLIT.tsv``.
BEIR_HOST = "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets"
#: The public BEIR sets of modest size, by BEIR's name: ``md5`` is the zip's MD5 as the BEIR
#: README publishes it (github.com/beir-cellar/beir, README.md, "Available Datasets"; the
#: only hash BEIR publishes). Left out: the multi-GB sets (MS MARCO, NQ, HotpotQA, DBPedia,
#: FEVER, Climate-FEVER) and CQADupStack (its zip holds twelve BEIR folders, not one).
#: SciFact also has the SHA-256 of each extracted file and its published counts (5,183
#: documents; test 300 queries / 339 judgements; train 809 / 919), from the provenance record
#: of the copy this project measured with.
BEIR_SETS: dict[str, dict[str, Any]] = {
    "scifact": {
        "md5": "5f7d1de60b170fc8027bb7898e2efca1",
        "sha256": {
            "corpus.jsonl": "dec31c8182f3d744c7d2c09423756fd1d17cbef75808db13ba01cc0aab4d1ac6",
            "queries.jsonl": "8ff84a7c903f722981cd8d595c022660140c51867b27608a6d4910db86080313",
            "qrels/test.tsv": "68c0ac63f1c24b9e8ce497649694f09b2d0850bab7ec2b103cc66996f5f8b3a3",
            "qrels/train.tsv": "ac0902d9b1cb717df182aaff1306175877fdb8f55bb5c3e8597ad694fc8e539f"},
        "counts": {"documents": 5183, "splits": {"test": {"queries": 300, "judgements": 339},
                                                 "train": {"queries": 809, "judgements": 919}}}},
    "nfcorpus": {"md5": "a89dba18a62ef92f7d323ec890a0d38d"},
    "arguana": {"md5": "8ad3e3c2a5867cdced806d6503f29b99"},
    "fiqa": {"md5": "17918ed23cd04fb15047f73e6c3bd9d9"},
    "scidocs": {"md5": "38121350fc3a4d2f48850f6aff52e4a9"},
    "trec-covid": {"md5": "ce62140cb23feb9becf6270d0d1fe6d1"},
    "webis-touche2020": {"md5": "46f650ba5a527fc69e0a6521c5a23563"},
    "quora": {"md5": "18fb154900ba42a600f84b839c173167"},
}
_BEIR_SPLIT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_\-]*")


def is_beir_folder(folder: str) -> bool:
    """Whether ``folder`` holds a BEIR set: ``corpus.jsonl``, ``queries.jsonl`` and at least
    one ``qrels/SPLIT.tsv``."""
    qrels = os.path.join(folder, "qrels")
    return (os.path.isfile(os.path.join(folder, "corpus.jsonl"))
            and os.path.isfile(os.path.join(folder, "queries.jsonl"))
            and os.path.isdir(qrels) and any(f.endswith(".tsv") for f in os.listdir(qrels)))


def _beir_member(filename: str, name: str) -> str | None:
    """The path inside the set's folder (``corpus.jsonl``, ``qrels/test.tsv``) of zip entry
    ``filename`` when it is one of the files a BEIR folder is read from, else None."""
    parts = filename.replace("\\", "/").split("/")
    if parts[0] != name:
        return None
    rest = parts[1:]
    if rest in (["corpus.jsonl"], ["queries.jsonl"]):
        return rest[0]
    if len(rest) == 2 and rest[0] == "qrels" and rest[1].endswith(".tsv") \
            and _BEIR_SPLIT.fullmatch(rest[1][:-4]):
        return f"qrels/{rest[1]}"
    return None


def _extract_beir_zip(path: str, name: str, folder: str, source: str) -> list[str]:
    """``NAME/corpus.jsonl``, ``NAME/queries.jsonl`` and ``NAME/qrels/*.tsv`` of the zip at
    ``path`` into ``folder`` (nothing else: no other entry, no ``__MACOSX/``, no path out of
    the folder); returns their paths inside it. A damaged archive: :class:`FetchError`."""
    written = []
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                rel = None if info.is_dir() else _beir_member(info.filename, name)
                if rel is None or rel in written:
                    continue
                target = os.path.join(folder, *rel.split("/"))
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with archive.open(info) as src, open(target, "wb") as out:
                    shutil.copyfileobj(src, out)
                written.append(rel)
    except (zipfile.BadZipFile, EOFError, zlib.error) as e:
        raise FetchError(f"BEIR {name}: {source} is not a complete zip archive ({e}); nothing "
                         "was cached. Fetch it again, or give the extracted folder.") from None
    return sorted(written)


def _beir_counts(folder: str) -> dict[str, Any]:
    """Documents (lines of ``corpus.jsonl``) and, per qrels split, its judged queries and
    its judgements (rows after the header)."""
    with open(os.path.join(folder, "corpus.jsonl"), "rb") as f:
        documents = sum(1 for line in f if line.strip())
    splits = {}
    for split in sorted(f[:-4] for f in os.listdir(os.path.join(folder, "qrels"))
                        if f.endswith(".tsv")):
        with open(os.path.join(folder, "qrels", f"{split}.tsv"), "rb") as f:
            rows = [line.split(b"\t") for line in f.read().splitlines() if line.strip()]
        if rows and not rows[0][-1].strip().lstrip(b"-").isdigit():
            rows = rows[1:]  # the header (query-id, corpus-id, score)
        splits[split] = {"queries": len({r[0] for r in rows}), "judgements": len(rows)}
    return {"documents": documents, "splits": splits}


def _md5(path: str) -> str:
    digest = hashlib.md5(usedforsecurity=False)  # BEIR publishes MD5: an integrity check
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def beir_folder(name: str, data_dir: str | None = None) -> str:
    """The folder of BEIR set ``name`` (:data:`BEIR_SETS`: ``scifact``, ``nfcorpus``, ...) in
    the cache (``DATA_HOME/beir/NAME``: ``corpus.jsonl``, ``queries.jsonl``,
    ``qrels/SPLIT.tsv``), fetched from ``BEIR_HOST/NAME.zip`` when absent.

    A fetch is checked before anything is cached: the zip's MD5 against the one BEIR
    publishes, then (where :data:`BEIR_SETS` records them: SciFact) each extracted file's
    SHA-256 and the counts of documents, queries and judgements. Only the set's own files
    are extracted. The folder's stamp (``keras_hardneg_source.json``) records the source,
    the zip's MD5 and SHA-256, the files' SHA-256, the counts and the check made. Without
    network, ``NAME.zip`` put in ``DATA_HOME/beir/`` is checked and extracted the same way,
    and a complete BEIR folder put at ``DATA_HOME/beir/NAME`` is used as it is.

    Raises:
        ValueError: ``name`` is not in :data:`BEIR_SETS`.
        FetchError: no network (says what to give instead), or the archive or a file
            differs from the published one.
    """
    if not isinstance(name, str) or name not in BEIR_SETS:
        raise ValueError(f"`dataset` must be a BEIR set by name, one of "
                         f"{', '.join(BEIR_SETS)}; got {name!r}.")
    spec, root = BEIR_SETS[name], os.path.join(data_home(data_dir), "beir")
    url, file_name = f"{BEIR_HOST}/{name}.zip", f"{name}.zip"

    def build(tmp: str) -> dict[str, Any]:
        placed = os.path.join(root, file_name)  # the zip as its host names it, put by hand
        zip_dir = os.path.join(tmp, ".zip")
        os.makedirs(zip_dir)
        if os.path.isfile(placed):
            path, source = placed, placed
        else:
            source = source_url(url)
            try:
                path = fetch_file(source, zip_dir, file_name, what=f"BEIR {name}")
            except FetchError as e:
                raise FetchError(f"{e} " + offline_hint(
                    f"{file_name} or the extracted {name}/ folder", "give a BEIR folder "
                    "holding corpus.jsonl, queries.jsonl and qrels/ (`path` in a recipe's "
                    "data section, --dataset DIR in the CLI, --data DIR in the examples)",
                    root, file_name)) from None
        md5 = _md5(path)
        if md5 != spec["md5"]:
            raise FetchError(f"BEIR {name}: {source} does not match its published MD5 "
                             f"({spec['md5']}; got {md5}); nothing was cached"
                             + (". Remove it or replace it with the zip from BEIR's host."
                                if path == placed else "."))
        digest = _sha256(path)
        files = _extract_beir_zip(path, name, tmp, source)
        shutil.rmtree(zip_dir)
        return {"source": source, "md5": md5, "sha256": digest,
                **_checked_beir_files(name, tmp, files, source)}

    return fetch_folder(os.path.join(root, name), build, complete=is_beir_folder)


def _checked_beir_files(name: str, folder: str, files: list[str], source: str
                        ) -> dict[str, Any]:
    """The extracted set in ``folder`` checked (a BEIR folder; the SHA-256 and counts that
    :data:`BEIR_SETS` records for it): ``{"files", "counts", "check"}`` for the stamp."""
    spec = BEIR_SETS[name]
    if not is_beir_folder(folder):
        raise FetchError(f"BEIR {name}: {source} holds no {name}/corpus.jsonl, "
                         f"{name}/queries.jsonl and {name}/qrels/*.tsv; nothing was cached.")
    hashes = {rel: _sha256(os.path.join(folder, *rel.split("/"))) for rel in files}
    for rel, want in spec.get("sha256", {}).items():
        got = hashes.get(rel)
        if got != want:
            raise FetchError(f"BEIR {name}: {rel} from {source} "
                             + (f"has SHA-256 {got[:12]}..., not the recorded {want[:12]}..."
                                if got else "is missing") + "; nothing was cached.")
    counts = _beir_counts(folder)
    want_counts = spec.get("counts")
    if want_counts:
        got_counts = {"documents": counts["documents"],
                      "splits": {s: counts["splits"].get(s) for s in want_counts["splits"]}}
        if got_counts != want_counts:
            raise FetchError(f"BEIR {name} from {source} has {got_counts}, not the "
                             f"published {want_counts}; nothing was cached.")
    check = "zip MD5 as BEIR publishes it"
    if spec.get("sha256"):
        check += "; each file's SHA-256 as recorded"
    if want_counts:
        check += "; documents, queries and judgements equal the published counts"
    return {"files": hashes, "counts": counts, "check": check}


# ------------------------------------------------------------------------------ text
#: Sentence corpora by name: the file's public URL and what it is.
CORPORA = {
    "wiki1m": {"url": "https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/"
                      "resolve/main/wiki1m_for_simcse.txt",
               "title": "SimCSE's Wikipedia sentences (wiki1m_for_simcse.txt, 10^6 "
                        "sentences)"},
}


def sentence_corpus(name: str, data_dir: str | None = None) -> str:
    """The path of corpus ``name`` (:data:`CORPORA`) in the cache, fetched when absent; the
    SHA-256 of the first fetch is recorded beside it (``FILE.source.json``).

    Raises:
        ValueError: an unknown name; FetchError: no network (says what to give instead).
    """
    if name not in CORPORA:
        raise ValueError(f"`corpus` must be one of {', '.join(CORPORA)}; got {name!r}.")
    spec = CORPORA[name]
    file_name = spec["url"].rsplit("/", 1)[-1]
    root = data_home(data_dir)
    path = os.path.join(root, file_name)
    if os.path.isfile(path):
        return path
    try:
        download(spec["url"], path, what=spec["title"])
    except FetchError as e:
        raise FetchError(f"{e} " + offline_hint(
            file_name, "give a sentence file (--dataset FILE.txt in the CLI, --corpus FILE.txt "
            "in the examples; one sentence per line)",
            root, file_name)) from None
    record = path + ".source.json"
    if not os.path.isfile(record):
        with open(record, "w") as f:
            json.dump({"source": source_url(spec["url"]), "sha256": _sha256(path),
                       "bytes": os.path.getsize(path), "check": "none published: SHA-256 "
                       "recorded at the first fetch"}, f, indent=1, sort_keys=True)
    return path


def _sha256(path: str) -> str:
    from keras_hardneg._io import sha256_file

    return sha256_file(path)


def describe_cache(folder: str) -> str:
    """``"fetched from URL"`` for a folder this module placed, else ``"in FOLDER"``."""
    stamp = read_stamp(folder)
    return f"fetched from {stamp['source']}" if stamp and stamp.get("source") else \
        f"in {folder}"

