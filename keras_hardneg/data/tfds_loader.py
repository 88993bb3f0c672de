"""TensorFlow Datasets (``tfds``) image datasets in the library's element format.

TensorFlow-only by nature (TFDS reads through ``tf.data``): TensorFlow is imported when a
function here is called, not when the module is imported, and a machine without it gets a
:class:`~keras_hardneg.data._tf.TensorFlowRequiredError` naming the function.

The dataset must already be prepared in ``data_dir`` (``download=False`` by default, since
training machines are often offline); the error says how to prepare it otherwise.
"""

from __future__ import annotations

import os

from keras_hardneg.data._checks import check_batch_size, check_image_size
from keras_hardneg.data._tf import require_tensorflow

__all__ = ["tfds_dataset", "tfds_random_access", "to_rgb_float"]

_SHUFFLE_BUFFER = 10_000


def to_rgb_float(image):
    """``[..., H, W, C]`` image (uint8/uint16/float, C in 1..4) -> float32 RGB in ``[0, 1]``.

    Integer images are scaled by their dtype's maximum; 1 channel is replicated, 2
    (grey+alpha) keeps grey, 4 (RGBA) drops alpha. Float images are assumed in ``[0, 1]``.
    """
    tf = require_tensorflow("to_rgb_float (a TensorFlow op for tf.data maps)")
    image = tf.convert_to_tensor(image)
    channels = image.shape[-1]
    if channels is None:
        raise ValueError("Images need a known channel dimension; got shape "
                         f"{image.shape}.")
    image = tf.image.convert_image_dtype(image, tf.float32)
    if channels == 1:
        image = tf.concat([image] * 3, axis=-1)
    elif channels == 2:
        image = tf.concat([image[..., :1]] * 3, axis=-1)
    elif channels == 4:
        image = image[..., :3]
    elif channels != 3:
        raise ValueError(f"Images must have 1 to 4 channels; got {channels}.")
    return image


def _data_dir_text(data_dir):
    """The data_dir tfds reads, said with where it comes from."""
    if data_dir:
        return repr(os.fspath(data_dir))
    if os.environ.get("TFDS_DATA_DIR"):
        return f"{os.environ['TFDS_DATA_DIR']!r} ($TFDS_DATA_DIR)"
    from tensorflow_datasets.core import constants

    return f"{constants.DATA_DIR!r} (tfds's default; set $TFDS_DATA_DIR or data_dir)"


def _prepare_help(name, data_dir):
    return (
        f"Dataset {name!r} is not prepared in data_dir {_data_dir_text(data_dir)}. With "
        f"network, let it be fetched and prepared there (download=True; the recipe key "
        f"data.download, on by default for `keras-hardneg train`); without, prepare it "
        f"elsewhere with `tfds build {name} --data_dir=DIR`, copy DIR here and pass it "
        "(--data-dir DIR, recipe key data.data_dir)."
    )


def _prepared_builder(tfds, name, data_dir, download):
    """The TFDS builder of ``name``, prepared (or a ValueError saying how to prepare it)."""
    try:
        builder = tfds.builder(name, data_dir=data_dir)
    except tfds.core.registered.DatasetNotFoundError as err:
        raise ValueError(
            f"`name` {name!r} is not a known TFDS dataset and is not prepared in data_dir "
            f"{data_dir!r}: {str(err).splitlines()[0]}"
        ) from err
    if not builder.is_prepared():
        if not download:
            raise ValueError(_prepare_help(name, data_dir))
        _download_and_prepare(builder, name, data_dir)
    return builder


#: Where tfds looks first for a prepared copy (its GCS bucket); reachable means online.
#: Tests point it at a closed loopback port.
NETWORK_PROBE = ("storage.googleapis.com", 443)
PROBE_SECONDS = 5.0


def _offline_reason() -> str | None:
    """Why the network looks unreachable (one TCP connection to :data:`NETWORK_PROBE`,
    :data:`PROBE_SECONDS` at most), or None. Behind a proxy (``HTTPS_PROXY`` /
    ``HTTP_PROXY`` set) nothing is probed: tfds's own fetch decides."""
    import socket

    if any(os.environ.get(k) for k in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY",
                                       "http_proxy")):
        return None
    try:
        socket.create_connection(NETWORK_PROBE, timeout=PROBE_SECONDS).close()
    except OSError as err:
        return f"{NETWORK_PROBE[0]}:{NETWORK_PROBE[1]} unreachable: {err}"
    return None


def _download_and_prepare(builder, name, data_dir):
    """``builder.download_and_prepare()``, failing in one line: at once when the network is
    unreachable (tfds would retry each file for minutes), and after a failed attempt the
    temporary and incomplete folders it left in the data dir are removed."""
    help_text = (f"Without network, prepare it elsewhere with `tfds build {name} "
                 "--data_dir=DIR`, copy DIR here and pass it (--data-dir DIR, recipe key "
                 "data.data_dir).")
    offline = _offline_reason()
    if offline:
        raise ValueError(f"tfds {name!r} is not prepared in data_dir "
                         f"{_data_dir_text(data_dir)} and cannot be fetched ({offline}). "
                         + help_text)
    root = os.fspath(builder.data_dir_root) if hasattr(builder, "data_dir_root") else None
    before = _temporaries(root)
    try:
        builder.download_and_prepare()
    except Exception as err:  # noqa: BLE001 -- offline, manual download, ...: one line
        _remove_temporaries(root, before)
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(
            f"tfds {name!r} could not be fetched and prepared in data_dir "
            f"{_data_dir_text(data_dir)} ({type(err).__name__}: {first[:300]}). "
            + help_text) from None


def _temporaries(root):
    """Paths under ``root`` (two levels) of tfds's temporary and incomplete folders."""
    import glob

    if not root or not os.path.isdir(root):
        return set()
    found = set()
    for pattern in ("*.tmp.*", "*/*.tmp.*", "*incomplete*", "*/*incomplete*",
                    "downloads/*.tmp.*", "downloads/extracted/*.tmp.*"):
        found.update(glob.glob(os.path.join(root, pattern)))
    return found


def _remove_temporaries(root, before):
    """Removes what a failed prepare left (temporaries not there before it)."""
    import shutil

    for path in sorted(_temporaries(root) - before, reverse=True):
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.lexists(path):
            os.remove(path)


def tfds_dataset(
    name: str,
    split: str = "train",
    data_dir: str | os.PathLike | None = None,
    image_size: int | tuple[int, int] | None = None,
    batch_size: int = 256,
    shuffle: bool = True,
    seed: int = 0,
    with_labels: bool = True,
    image_key: str = "image",
    label_key: str = "label",
    download: bool = False,
    drop_remainder: bool = False,
):
    """A batched ``tf.data.Dataset`` from a prepared TFDS dataset.

    Args:
        name: TFDS name, optionally with config/version (``"cifar10"``,
            ``"mnist:3.*.*"``). A name not registered in this Python process is read
            from ``data_dir`` if prepared there.
        split: TFDS split string (``"train"``, ``"test[:10%]"``, ...).
        data_dir: TFDS data directory; ``None`` uses TFDS's default.
        image_size: ``None`` keeps the stored size (must then be the same for every
            image); an int or ``(height, width)`` resizes (bilinear, antialiased).
        batch_size: ``>= 1``.
        shuffle: shuffle files and examples (buffer 10,000), reproducibly given ``seed``.
        seed: integer seed.
        with_labels: yield ``(images, labels)`` if true, else images only.
        image_key, label_key: feature names of the image and the label.
        download: if true, download and prepare the dataset when missing.
        drop_remainder: drop the last partial batch.

    Returns:
        ``tf.data.Dataset`` of ``(images float32 [B, H, W, 3] in [0, 1], labels int64 [B])``
        (or images only); attribute ``class_names`` (list of str, or ``None`` when the
        label is not a ``ClassLabel``) and ``info`` (``tfds.core.DatasetInfo``).

    Raises:
        ValueError: naming the parameter for an unknown ``name``, an unprepared dataset
            (with how to prepare it), an unknown ``split``/``image_key``/``label_key``,
            an empty split, an invalid ``batch_size``/``image_size``.

    Example:
        Needs CIFAR-10 prepared in ``data_dir`` (not run by the doctests):

        >>> ds = tfds_dataset("cifar10", split="test", data_dir="/data/tfds",
        ...                   batch_size=8)  # doctest: +SKIP
        >>> images, labels = next(iter(ds))  # doctest: +SKIP
        >>> images.shape, labels.shape  # doctest: +SKIP
        (TensorShape([8, 32, 32, 3]), TensorShape([8]))
    """
    tf = require_tensorflow(f"tfds_dataset({name!r}) (TensorFlow Datasets)")
    import tensorflow_datasets as tfds

    size = check_image_size(image_size, allow_none=True)
    batch_size = check_batch_size(batch_size)
    if not isinstance(name, str) or not name:
        raise ValueError(f"`name` must be a non-empty TFDS dataset name; got {name!r}.")
    if data_dir is not None:
        data_dir = os.fspath(data_dir)

    builder = _prepared_builder(tfds, name, data_dir, download)
    features = builder.info.features
    _check_features(features, name, image_key, label_key if with_labels else None, size)
    num_examples = _split_size(builder, name, split)

    read_config = tfds.ReadConfig(shuffle_seed=seed) if shuffle else tfds.ReadConfig()
    dataset = builder.as_dataset(split=split, shuffle_files=shuffle, read_config=read_config)
    if shuffle:
        buffer = max(1, min(_SHUFFLE_BUFFER, num_examples))
        dataset = dataset.shuffle(buffer, seed=seed, reshuffle_each_iteration=True)
    convert = _converter(tf, image_key, label_key if with_labels else None, size)
    dataset = dataset.map(convert, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    dataset = dataset.prefetch(tf.data.AUTOTUNE)
    label_feature = features[label_key] if label_key in features else None
    is_class_label = isinstance(label_feature, tfds.features.ClassLabel)
    dataset.class_names = list(label_feature.names) if is_class_label else None
    dataset.info = builder.info
    return dataset


def _check_features(features, name, image_key, label_key, size):
    """Refuses an ``image_key`` or ``label_key`` (``None``: no labels) that ``features`` lacks,
    and ``size`` ``None`` for images of variable shape."""
    if image_key not in features:
        raise ValueError(
            f"`image_key` {image_key!r} is not a feature of {name!r}; features: "
            f"{sorted(features.keys())}."
        )
    if label_key is not None and label_key not in features:
        raise ValueError(
            f"`label_key` {label_key!r} is not a feature of {name!r}; features: "
            f"{sorted(features.keys())}."
        )
    image_shape = features[image_key].shape
    if size is None and (len(image_shape) != 3 or None in image_shape[:2]):
        raise ValueError(
            f"`image_size` is None but images of {name!r} have variable shape {image_shape}; "
            "give image_size=(height, width)."
        )


def _split_size(builder, name, split):
    """The number of examples of ``split``; refuses a split the dataset lacks or an empty one."""
    try:
        num_examples = builder.info.splits[split].num_examples
    except (KeyError, ValueError, AssertionError) as err:
        raise ValueError(
            f"`split` {split!r} is not available for {name!r}; splits: "
            f"{sorted(builder.info.splits.keys())}. ({err})"
        ) from err
    if num_examples == 0:
        raise ValueError(f"`split` {split!r} of {name!r} is empty (dataset empty).")
    return num_examples


def _converter(tf, image_key, label_key, size):
    """The map function of an example: float32 RGB image in [0, 1] (resized to ``size`` unless
    ``None``) and, unless ``label_key`` is ``None``, its int64 label."""

    def convert(example):
        image = to_rgb_float(example[image_key])
        if size is not None:
            if tuple(image.shape[-3:-1]) != size:
                image = tf.image.resize(image, size, method="bilinear", antialias=True)
                image = tf.clip_by_value(image, 0.0, 1.0)
        if label_key is None:
            return image
        return image, tf.cast(example[label_key], tf.int64)

    return convert


def tfds_random_access(name, split="train", data_dir=None, image_size=None, image_key="image",
                       label_key="label", download=False):
    """A prepared TFDS split read by index (``builder.as_data_source``, the reader behind
    ``tfds.data_source``), as a :class:`~keras_hardneg.data.random_access.ItemSource`; or
    ``None`` when the dataset was not prepared in a random-access file format
    (``array_record``; TFRecord files can only be streamed): the caller then reads it with
    :func:`tfds_dataset`.

    Args: as :func:`tfds_dataset` (``image_size``: an int or ``(height, width)``; ``None``
    keeps the stored size, which must then be the same for every image).

    Returns:
        :class:`~keras_hardneg.data.random_access.ItemSource` (``source[i]`` -> ``(uint8
        [H, W, 3], int64 label)``, the pixels :func:`tfds_dataset` gives before its float
        conversion) or ``None``.

    Example (needs CIFAR-10 prepared in ``data_dir``; not run by the doctests):
        >>> train = tfds_random_access("cifar10", data_dir="/data/tfds")  # doctest: +SKIP
        >>> train[0][0].shape  # doctest: +SKIP
        (32, 32, 3)
    """
    require_tensorflow(f"tfds_random_access({name!r}) (TensorFlow Datasets)")
    import tensorflow_datasets as tfds

    from keras_hardneg.data.random_access import ItemSource

    size = check_image_size(image_size, allow_none=True)
    if data_dir is not None:
        data_dir = os.fspath(data_dir)
    builder = _prepared_builder(tfds, name, data_dir, download)
    if "array_record" not in str(getattr(builder.info, "file_format", "")).lower():
        return None
    try:
        source = builder.as_data_source(split=split)
    except (KeyError, ValueError, AssertionError) as err:
        raise ValueError(
            f"`split` {split!r} is not available for {name!r}; splits: "
            f"{sorted(builder.info.splits.keys())}. ({err})"
        ) from err
    return ItemSource(source, size, image_key=image_key, label_key=label_key)
