"""Datasets a recipe can name (:data:`keras_hardneg.registry.DATASETS`), and the
``--dataset`` string of the CLI and the tuner, parsed in one place.

Every source is called as ``source(seed, **config)`` and returns
``((x_train, y_train), (x_test, y_test), description)``: images float32
``[n, H, W, 3]`` in ``[0, 1]``, labels int64 ``[n]``, and one line saying what was loaded;
or, for data read by index (:mod:`keras_hardneg.data.random_access`: the ``synthetic``
dataset, an image folder or a tfds dataset with ``access="random"``, or ``"auto"`` when the
arrays would exceed :data:`ARRAY_BUDGET_BYTES`), a
:class:`~keras_hardneg.data.random_access.RandomAccessImages` in place of each images array
and ``None`` in place of its labels (the source carries them).

Example:
>>> spec = dataset_spec("digits")
>>> spec
{'name': 'digits'}
>>> (x, y), (xt, yt), desc = DATASETS.build("digits", 0)
>>> x.shape
(1437, 8, 8, 3)
>>> dataset_spec("synthetic:5000")["num_images"]
5000
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from keras_hardneg.registry import DATASETS, ConfigError, Param

__all__ = ["dataset_spec", "load_dataset", "class_names", "digits", "cifar10", "cifar100", "image_folder", "tfds", "synthetic",
           "ARRAY_BUDGET_BYTES"]

Splits = tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray], str]

_IMAGE_SIZE = Param(int, low=8, help="resize images to this side (>= 8)")
_TEST_FRACTION = Param(float, low=0.0, high=1.0, low_inclusive=False, high_inclusive=False,
                       help="fraction held out as the test split when there is none, in (0, 1)")
_LIMIT = Param(int, low=1, help="use at most this many images per class")
_ACCESS = Param(str, choices=("auto", "arrays", "random"),
                help="arrays in memory, random access by index (memory flat in N), or auto: "
                     "random access when the float32 arrays would exceed 2 GiB")

#: ``access="auto"`` reads by index when the float32 training arrays would exceed this.
ARRAY_BUDGET_BYTES = 2 * 1024 ** 3
#: ``data.labels`` of an image folder.
LABELS = ("auto", "folders", "none")


def _random(access: str, num_images: int, image_size: int | None) -> bool:
    if access != "auto":
        return access == "random"
    side = image_size or 32
    return num_images * side * side * 3 * 4 > ARRAY_BUDGET_BYTES


@DATASETS.register("digits", modality="image", params={"image_size": _IMAGE_SIZE,
                                                        "test_fraction": _TEST_FRACTION})
def digits(seed: int, image_size: int | None = None, test_fraction: float = 0.2) -> Splits:
    """scikit-learn's digits (embedded, no download): 8x8 grayscale as RGB."""
    from keras_hardneg.data.digits import load_digits

    train, test = load_digits(test_fraction=test_fraction, seed=seed, image_size=image_size)
    desc = ("scikit-learn digits (embedded), 8x8 grayscale as RGB" if not image_size else
            f"scikit-learn digits (embedded), resized to {image_size}x{image_size}")
    return train, test, desc


_DATA_DIR = Param("path", help="cache folder of fetched data (default ~/.keras/datasets, "
                                "Keras's)")


def _cifar(name: str):
    title = "CIFAR-10" if name == "cifar10" else "CIFAR-100"

    @DATASETS.register(
        name, modality="image",
        help=f"{title} as keras.datasets gets it (fetched once into ~/.keras/datasets)",
        params={"image_size": _IMAGE_SIZE, "limit_per_class": _LIMIT,
                "test_limit_per_class": _LIMIT, "data_dir": _DATA_DIR})
    def source(seed: int, image_size: int | None = None, limit_per_class: int | None = None,
               test_limit_per_class: int | None = None, data_dir: str | None = None) -> Splits:
        from keras_hardneg.data.public import load_cifar

        train, test = load_cifar(name, data_dir, limit_per_class=limit_per_class,
                                 test_limit_per_class=test_limit_per_class,
                                 image_size=image_size, dtype="float32")
        side = image_size or 32
        desc = (f"{title} ({len(train[0])} train / {len(test[0])} test images"
                f"{', limited' if limit_per_class else ''}, {side}x{side}; fetched once into "
                f"the Keras cache)")
        return train, test, desc

    source.__name__ = source.__qualname__ = name
    source.__doc__ = (f"{title} the way ``keras.datasets.{name}`` gets it (fetched once into "
                      "``~/.keras/datasets``; :func:`keras_hardneg.data.public.load_cifar`), "
                      "float32 in ``[0, 1]``; ``seed`` is unused (the papers' split).")
    return source


cifar10 = _cifar("cifar10")
cifar100 = _cifar("cifar100")


@DATASETS.register(
    "image_folder", modality="image",
    params={"train": Param("path", help="folder of class subfolders, or a flat folder of "
                                        "unlabeled images (required)"),
            "test": Param("path", help="test folder (default: split off train)"),
            "labels": Param(str, choices=LABELS,
                            help="folders: class subfolders give the labels; none: unlabeled "
                                 "images (no evaluation); auto: none when train holds no "
                                 "subfolder"),
            "image_size": _IMAGE_SIZE, "limit_per_class": _LIMIT,
            "test_limit_per_class": _LIMIT, "test_fraction": _TEST_FRACTION,
            "on_error": Param(str, choices=("skip", "raise"),
                              help="undecodable files: skip (counted) or raise"),
            "access": _ACCESS},
    check=lambda c: None if c["train"] else "'train' (an image folder) is required")
def image_folder(seed: int, train: str | None = None, test: str | None = None,
                 image_size: int = 32, limit_per_class: int | None = None,
                 test_limit_per_class: int | None = None, test_fraction: float = 0.2,
                 on_error: str = "skip", access: str = "auto", labels: str = "auto") -> Splits:
    """``root/<class>/<image>`` folders (JPEG, PNG, ...), decoded and resized to arrays, or
    read by path (:class:`~keras_hardneg.data.random_access.ImageFiles`). A folder of
    unlabeled images (``labels`` ``"none"``, or ``"auto"`` and no subfolder in ``train``)
    gives ``((images, None), None, description)``: the run trains without evaluation."""
    from keras_hardneg.data.image_folder import load_image_folder_arrays

    size = (image_size, image_size)
    if labels == "none" or (labels == "auto" and _flat_folder(train)):
        return _unlabeled_folder(train, test, size, access, on_error, seed, test_fraction,
                                 test_limit_per_class or limit_per_class, limit_per_class)
    if labels == "folders" and _flat_folder(train):
        raise ConfigError(f"data.labels = 'folders' but {train!r} has no class subfolders; "
                          "for a folder of unlabeled images use data.labels 'none' or 'auto'.")
    if access != "arrays":
        files = _image_folder_files(train, limit_per_class, on_error)
        if _random(access, len(files[0]), image_size):
            return _image_folder_random(files, test, seed, size, test_limit_per_class or
                                        limit_per_class, test_fraction, on_error, train)
    train_arrays = load_image_folder_arrays(train, image_size=size, on_error=on_error,
                                            limit_per_class=limit_per_class)
    if test:
        test_arrays = load_image_folder_arrays(
            test, image_size=size, on_error=on_error,
            limit_per_class=test_limit_per_class or limit_per_class)
    else:
        order = np.random.default_rng(seed).permutation(len(train_arrays[0]))
        cut = int(len(order) * (1 - test_fraction))
        test_arrays = (train_arrays[0][order[cut:]], train_arrays[1][order[cut:]])
        train_arrays = (train_arrays[0][order[:cut]], train_arrays[1][order[:cut]])
    desc = (f"image folder {train} ({len(train_arrays[0])} images"
            f"{', limited' if limit_per_class else ''}){_grey_note(train_arrays[0])}")
    return train_arrays, test_arrays, desc


def _grey_note(images: np.ndarray) -> str:
    """``"; N grayscale images, their one channel repeated as R, G and B"`` when some
    images have three equal channels (a grayscale file decoded to RGB), else ``""``."""
    if not isinstance(images, np.ndarray) or images.ndim != 4 or images.shape[-1] != 3 \
            or not len(images):
        return ""
    grey = ((images[..., 0] == images[..., 1]) & (images[..., 1] == images[..., 2])).reshape(
        len(images), -1).all(axis=1)
    count = int(grey.sum())
    if not count:
        return ""
    which = "all" if count == len(images) else f"{count} of {len(images)}"
    return f"; {which} grayscale, their one channel repeated as R, G and B"


@DATASETS.register(
    "tfds", modality="image",
    params={"dataset": Param(str, help="a TensorFlow Datasets name (required)"),
            "data_dir": Param("path", help="tfds data directory (default: $TFDS_DATA_DIR, "
                                            "else ~/tensorflow_datasets)"),
            "download": Param(bool, help="fetch and prepare the dataset when it is not "
                                         "prepared in data_dir, as tfds.load does"),
            "image_size": _IMAGE_SIZE,
            "train_split": Param(str, help="split used for training"),
            "test_split": Param(str, help="split used for evaluation"),
            "access": _ACCESS},
    check=lambda c: None if c["dataset"] else "'dataset' (a tfds name) is required")
def tfds(seed: int, dataset: str | None = None, data_dir: str | None = None,
         image_size: int | None = None, train_split: str = "train",
         test_split: str = "test", access: str = "auto", download: bool = True) -> Splits:
    """A prepared TensorFlow Datasets dataset: read by index (``tfds.data_source``) when it
    was prepared as ``array_record`` and ``access`` asks for it, else materialised as arrays
    (CIFAR/STL sized; from TFRecord files through ``tf.data``, from array_record files
    through the index reader, since tfds streams only TFRecord)."""
    from keras_hardneg.data.tfds_loader import tfds_dataset, tfds_random_access

    size = None if image_size is None else (image_size, image_size)
    train = tfds_random_access(dataset, train_split, data_dir, size,  # None: TFRecord files
                               download=download)
    if train is not None:
        test = tfds_random_access(dataset, test_split, data_dir, size)
        if _random(access, len(train), train.image_shape[0]):
            return ((train, None), (test, None),
                    f"tfds {dataset} ({len(train)} train images, read by index)")
        # tfds cannot stream array_record files (as_dataset): arrays come from the index reader.
        return (train.arrays(range(len(train))), test.arrays(range(len(test))),
                f"tfds {dataset} ({len(train)} train images)")
    if access == "random":
        raise ConfigError(
            f"data.access = 'random' needs tfds {dataset!r} prepared in the array_record "
            "file format (`tfds build --file_format=array_record`); it was prepared as "
            "TFRecord, which can only be streamed. Use access 'arrays' or 'auto'.")

    def arrays(split):
        ds = tfds_dataset(dataset, split=split, data_dir=data_dir,
                          image_size=None if image_size is None else (image_size, image_size),
                          batch_size=1024, shuffle=False)
        xs, ys = zip(*[(x.numpy(), y.numpy()) for x, y in ds])
        return np.concatenate(xs), np.concatenate(ys)

    train = arrays(train_split)
    return train, arrays(test_split), f"tfds {dataset} ({len(train[0])} train images)"


@DATASETS.register(
    "synthetic", modality="image",
    params={"num_images": Param(int, low=2, help="N training images (default: ImageNet's "
                                                 "1,281,167)"),
            "test_images": Param(int, low=1, help="test images (other content, same classes)"),
            "image_size": _IMAGE_SIZE,
            "stored_size": Param(int, low=8, help="side of the stored JPEGs (default: "
                                                  "image_size; else resized on each read)"),
            "num_classes": Param(int, low=1, help="labels are index mod num_classes"),
            "quality": Param(int, low=1, high=95, help="JPEG quality (1..95)")})
def synthetic(seed: int, num_images: int = 1_281_167, test_images: int = 10_000,
              image_size: int = 64, stored_size: int | None = None, num_classes: int = 1000,
              quality: int = 90) -> Splits:
    """``num_images`` synthetic JPEGs read by index, content a function of the index
    (:class:`~keras_hardneg.data.synthetic.SyntheticImages`; decoded on every read)."""
    from keras_hardneg.data.synthetic import SyntheticImages

    config = dict(image_size=image_size, stored_size=stored_size, num_classes=num_classes,
                  quality=quality, seed=seed)
    train = SyntheticImages(num_images, **config)
    test = SyntheticImages(test_images, offset=num_images, **config)
    desc = (f"synthetic JPEGs ({num_images} train / {test_images} test, {num_classes} classes, "
            f"stored {stored_size or image_size}px, read {image_size}px, decoded per read)")
    return (train, None), (test, None), desc


def _flat_folder(folder) -> bool:
    """Whether ``folder`` holds no (visible) subfolder: unlabeled images."""
    return os.path.isdir(folder) and not any(
        not e.startswith(".") and os.path.isdir(os.path.join(folder, e))
        for e in os.listdir(folder))


def _unlabeled_folder(train, test, size, access, on_error, seed, test_fraction,
                      test_limit, limit=None) -> Splits:
    """Unlabeled training images (at most ``limit``, in file-name order); ``test``, a
    labelled folder given separately, is what the run evaluates on (the run splits it into
    kNN / probe reference and queries)."""
    from keras_hardneg.data.image_folder import load_image_folder_arrays

    if access == "random":
        raise ConfigError("data.access = 'random' is not available for unlabeled images; "
                          "use 'arrays' or 'auto'.")
    if test and _flat_folder(test):
        raise ConfigError(
            f"data.test = {test!r} has no class subfolders: the evaluation needs labelled "
            "images (test/<class>/<image>); leave 'test' out to train without evaluation.")
    images = load_image_folder_arrays(train, image_size=size, labels=False, on_error=on_error,
                                      limit_per_class=limit)
    desc = (f"image folder {train} ({len(images)} unlabeled images{', limited' if limit else ''}"
            ", resized to "
            f"{size[0]}x{size[1]}){_grey_note(images)}")
    if not test:
        return (images, None), None, desc + "; no evaluation"
    labelled = load_image_folder_arrays(test, image_size=size, on_error=on_error,
                                        limit_per_class=test_limit)
    cut = int(len(labelled[0]) * (1 - test_fraction))
    desc += (f"; evaluated on the labelled folder {test} ({len(labelled[0])} images: {cut} "
             f"kNN/probe reference, {len(labelled[0]) - cut} queries)")
    return (images, None), labelled, desc


def _image_folder_files(folder, limit_per_class, on_error):
    from keras_hardneg.data.image_folder import scan_image_folder

    # Only the first and last bytes of each file are read (no decoding pass over N images).
    report = scan_image_folder(folder, on_error=on_error, limit_per_class=limit_per_class,
                               validate="header")
    return report.file_paths, report.labels


def _image_folder_random(files, test, seed, size, test_limit, test_fraction, on_error, train):
    from keras_hardneg.data.random_access import ImageFiles

    source = ImageFiles(files[0], files[1], size)
    if test:
        test_source = ImageFiles(*_image_folder_files(test, test_limit, on_error), size)
    else:
        order = np.random.default_rng(seed).permutation(len(source))
        cut = int(len(order) * (1 - test_fraction))
        test_source, source = source.subset(order[cut:]), source.subset(order[:cut])
    desc = f"image folder {train} ({len(source)} images, read by path)"
    return (source, None), (test_source, None), desc


def _is_tu_folder(path: str) -> bool:
    from keras_hardneg.data.graphs import is_tu_folder

    return is_tu_folder(path)


def _incomplete_tu_folder(path: str) -> str:
    """What a folder holding some TU files (``D_A.txt``, ``D_graph_indicator.txt``,
    ``D_graph_labels.txt``) lacks, naming the files; "" when it holds none of them."""
    from keras_hardneg.data.graphs import _REQUIRED_FILES

    parts = [f"_{part}.txt" for part in _REQUIRED_FILES]
    names = sorted({f[:-len(p)] for f in os.listdir(path) for p in parts if f.endswith(p)})
    if not names:
        return ""
    name = names[0]
    missing = [f"{name}{p}" for p in parts if not os.path.isfile(os.path.join(path, name + p))]
    return (f"it has no {', '.join(missing)} (a TU dataset needs "
            f"{', '.join(name + p for p in parts)}).")


_ALLOWED = ("'digits', 'cifar10', 'cifar100', 'tfds:NAME', 'tu:NAME' (e.g. tu:MUTAG), "
            "'beir:NAME' (e.g. beir:scifact), 'text:wiki1m', an image folder, a TU graph "
            "folder, a BEIR retrieval folder or a .txt file of sentences")


def _is_beir_folder(path: str) -> bool:
    """A BEIR retrieval folder: ``corpus.jsonl`` and ``qrels/`` inside."""
    return (os.path.isfile(os.path.join(path, "corpus.jsonl"))
            and os.path.isdir(os.path.join(path, "qrels")))


def dataset_spec(text: str, **overrides: Any) -> dict[str, Any]:
    """A recipe ``data`` section from a ``--dataset`` string.

    ``"digits"``, ``"cifar10"`` / ``"cifar100"`` (fetched once, as ``keras.datasets``),
    ``"tfds:NAME"``, ``"tu:NAME"`` (a TU graph set fetched once, e.g. ``"tu:MUTAG"``),
    ``"beir:NAME"`` (a BEIR retrieval set fetched once, e.g. ``"beir:scifact"``),
    ``"text:wiki1m"`` (SimCSE's Wikipedia sentences, fetched once), ``"synthetic"`` or
    ``"synthetic:N"`` (``N`` synthetic JPEGs read by index), a ``.txt`` file of sentences (one per line: the
    ``text_file`` dataset), a BEIR retrieval folder (``corpus.jsonl`` and ``qrels/``: the
    ``beir`` dataset), a folder in the TU graph format (recognised by its
    ``*_A.txt`` / ``*_graph_indicator.txt`` files: the ``tu`` dataset), or an image folder:
    with ``train/`` (and ``test/``) inside, or itself holding the class subfolders. ``overrides`` (e.g.
    ``image_size=32``) are added to the section and checked with it.

    Raises:
        ConfigError: the string is none of these, naming what is allowed.
    """
    if not isinstance(text, (str, os.PathLike)) or not os.fspath(text):
        raise ConfigError(f"dataset must be {_ALLOWED}; got {text!r}.")
    text = os.fspath(text)
    if text in DATASETS and text != "image_folder" and text != "tfds":
        spec = {"name": DATASETS.canonical(text)}
    elif text.startswith("synthetic:"):
        count = text[len("synthetic:"):].replace("_", "").replace(",", "")
        if not count.isdigit() or int(count) < 2:
            raise ConfigError(f"dataset {text!r}: 'synthetic:N' needs an image count N >= 2, "
                              "e.g. 'synthetic:1281167'.")
        spec = {"name": "synthetic", "num_images": int(count)}
    elif text.startswith("tu:"):
        if not text[len("tu:"):]:
            raise ConfigError("dataset 'tu:' needs a TU set name, e.g. 'tu:MUTAG'.")
        spec = {"name": "tu", "dataset": text[len("tu:"):]}
    elif text.startswith("beir:"):
        if not text[len("beir:"):]:
            raise ConfigError("dataset 'beir:' needs a BEIR set name, e.g. 'beir:scifact'.")
        spec = {"name": "beir", "dataset": text[len("beir:"):]}
    elif text.startswith("text:"):
        spec = {"name": "text_file", "corpus": text[len("text:"):]}
    elif text.startswith("tfds:"):
        if not text[len("tfds:"):]:
            raise ConfigError("dataset 'tfds:' needs a dataset name, e.g. 'tfds:cifar10'.")
        spec = {"name": "tfds", "dataset": text[len("tfds:"):]}
    elif os.path.isfile(text) and text.endswith(".txt"):
        spec = {"name": "text_file", "path": os.path.abspath(text)}
    elif os.path.isdir(text) and _is_beir_folder(text):
        spec = {"name": "beir", "path": os.path.abspath(text)}
    elif os.path.isdir(text) and _is_tu_folder(text):
        spec = {"name": "tu", "folder": os.path.abspath(text)}
    elif os.path.isdir(text) and _incomplete_tu_folder(text):
        raise ConfigError(f"dataset {text!r} looks like a TU graph folder but is incomplete: "
                          f"{_incomplete_tu_folder(text)}")
    elif os.path.isdir(text):
        path = os.path.abspath(text)
        if os.path.isdir(os.path.join(path, "train")):
            spec = {"name": "image_folder", "train": os.path.join(path, "train")}
            if os.path.isdir(os.path.join(path, "test")):
                spec["test"] = os.path.join(path, "test")
        else:
            spec = {"name": "image_folder", "train": path}
    else:
        raise ConfigError(f"dataset {text!r} is not {_ALLOWED} (no such file or folder).")
    spec.update({k: v for k, v in overrides.items() if v is not None})
    DATASETS.check(spec["name"], spec, where="recipe key", prefix="data.")
    return spec



def class_names(data: dict[str, Any]) -> list[str] | None:
    """The names of a recipe ``data`` section's classes, label ``i`` being ``names[i]``,
    where the data names them: CIFAR's (from the archive in the cache), an image folder's
    class subfolders, a TFDS ``ClassLabel``'s. ``None`` where the labels are the names
    (the digits) or nothing names them; nothing is fetched or decoded.

    Example:
    >>> import os, tempfile
    >>> root = tempfile.mkdtemp()
    >>> for name in ("dog", "cat", ".hidden"):
    ...     os.makedirs(os.path.join(root, name))
    >>> class_names({"name": "image_folder", "train": root}), class_names({"name": "digits"})
    (['cat', 'dog'], None)
    """
    name = data.get("name")
    if name in ("cifar10", "cifar100"):
        from keras_hardneg.data.public import cifar_class_names

        return cifar_class_names(name, data.get("data_dir"))
    if name == "image_folder" and data.get("train") and os.path.isdir(data["train"]) \
            and not _flat_folder(data["train"]):
        folder = data["train"]
        return sorted(e for e in os.listdir(folder)
                      if not e.startswith(".") and os.path.isdir(os.path.join(folder, e)))
    if name == "tfds" and data.get("dataset"):
        try:
            import tensorflow_datasets as tfds

            builder = tfds.builder(data["dataset"], data_dir=data.get("data_dir"))
            feature = builder.info.features[data.get("label_key") or "label"]
            return list(feature.names)
        except Exception:  # noqa: BLE001 -- not prepared, no ClassLabel: no names
            return None
    return None

def load_dataset(dataset: str = "digits", seed: int = 0, **keys: Any) -> Splits:
    """The splits of a ``--dataset`` string (:func:`dataset_spec`) with recipe keys
    ``keys`` (``image_size``, ``limit_per_class``, ``test_limit_per_class``, ...):
    ``((x_train, y_train), (x_test, y_test), description)`` as the dataset's source gives
    them (images float32 in ``[0, 1]``). What a script takes for ``--data``: a folder, or
    a name fetched once (``"cifar10"``, ``"tu:MUTAG"``, ...).

    Example:
    >>> (x, y), (xt, yt), desc = load_dataset("digits", image_size=16)
    >>> x.shape
    (1437, 16, 16, 3)
    """
    spec = dataset_spec(dataset, **keys)
    return DATASETS.build(spec.pop("name"), seed, **spec)
