"""Images in class folders (``root/<class>/<file>``) as a ``tf.data`` pipeline or numpy arrays.

Layout is the one ``tfds.ImageFolder`` and ``keras.utils.image_dataset_from_directory`` read:
one sub-folder per class (sorted folder names give the label ids ``0..C-1``), image files
anywhere below it. Files whose extension is not an image extension (``.jpg .jpeg .png .bmp
.gif``, any case) are ignored and listed in the report.

Bad files. A file with an image extension that cannot be decoded (truncated, or not an
image at all) is either skipped and counted (``on_error="skip"``, the default: the names
are logged as a warning and kept in ``dataset.report``) or reported with a ``ValueError``
naming the file (``on_error="raise"``). They are found by a pre-pass chosen by ``validate``:

* ``"decode"`` (default): every file is decoded once (threads over
  :func:`keras_hardneg.data.decode.decode_image`, the decoder the pipeline uses); exact.
  Cost: one decoding pass (about 5k files/s for CIFAR-10's 32x32 JPEGs on this project's
  2-core machine, see ``docs/notes/data_eval.md``; decoding large photos releases the GIL
  and scales with cores).
* ``"header"``: reads only the first and last bytes of each file (format signature and
  end marker: JPEG ``FFD9``, PNG ``IEND``, GIF ``;``, BMP size field); files that fail the
  end-marker test are then decoded to confirm, so a valid file is never skipped. Catches
  non-images and truncated files; misses corruption in the middle of an intact file.
* ``"none"``: no pre-pass. With ``on_error="skip"`` undecodable files are dropped where
  they are decoded (named in a logged warning, not counted in the report); with
  ``"raise"`` iteration stops with an error naming the file.

Decoding is :mod:`keras_hardneg.data.decode` (Pillow) on every route (the ``tf.data``
pipeline calls it through ``tf.numpy_function``), so a file gives the same pixels here, in
:func:`load_image_folder_arrays` (which needs no TensorFlow) and in
``keras_hardneg.sampling.make_dataset``. Channels: grayscale, grayscale+alpha, palette and
RGBA images are converted to RGB (alpha is dropped); 16-bit PNGs are scaled to 8 bits.
Images are resized (Pillow bilinear, antialiased when shrinking) to ``image_size`` when
their size differs; then kept as uint8 (and cached as uint8 when ``cache`` is set: 150 MB
for CIFAR-10 train) and converted to float32 in ``[0, 1]`` per batch
(:func:`keras_hardneg.data.decode.to_unit_float`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from keras_hardneg.data._checks import (
    check_batch_size,
    check_choice,
    check_image_size,
    check_positive_int,
)
from keras_hardneg.data._tf import require_tensorflow
from keras_hardneg.data.decode import (
    ImageDecodeError,
    decode_image,
    decode_images,
    tf_decode_images,
    to_unit_float,
)

__all__ = [
    "IMAGE_EXTENSIONS",
    "ImageFolderReport",
    "image_folder",
    "load_image_folder_arrays",
    "list_image_files",
    "scan_image_folder",
]

logger = logging.getLogger("keras_hardneg.data")

#: File extensions read as images (lower-cased before the test); other files are ignored.
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif")
ON_ERROR_CHOICES = ("skip", "raise")
VALIDATE_CHOICES = ("decode", "header", "none")
_MAX_NAMES_LOGGED = 20
_DECODE_CHUNK = 64  # files per tf.numpy_function call in the tf.data pipeline


@dataclasses.dataclass
class ImageFolderReport:
    """What was read from an image folder.

    Attributes:
        directory: the folder read.
        class_names: sorted class sub-folder names; label ``i`` is ``class_names[i]``.
        file_paths: the image files used, in label-then-name order (before shuffling).
        labels: int64 ``[n]`` (``n = len(file_paths)``) label of each used file (-1 if
            ``labels=False``).
        skipped: ``[(path, reason)]`` for every undecodable file that was skipped.
        ignored: paths of files without an image extension (not read).
        validate: the pre-pass used (``"decode"``, ``"header"`` or ``"none"``).
    """

    directory: str
    class_names: list
    file_paths: list
    labels: np.ndarray
    skipped: list = dataclasses.field(default_factory=list)
    ignored: list = dataclasses.field(default_factory=list)
    validate: str = "decode"

    @property
    def num_images(self):
        """Number of image files used."""
        return len(self.file_paths)

    @property
    def num_skipped(self):
        """Number of undecodable image files skipped."""
        return len(self.skipped)

    def summary(self):
        """One-paragraph human-readable summary, listing skipped files (first 20)."""
        text = (
            f"{self.directory}: {self.num_images} images in {len(self.class_names)} classes; "
            f"{self.num_skipped} unreadable file(s) skipped; {len(self.ignored)} non-image "
            f"file(s) ignored (validate={self.validate!r})."
        )
        if self.skipped:
            shown = "\n".join(f"  {p}: {r}" for p, r in self.skipped[:_MAX_NAMES_LOGGED])
            more = self.num_skipped - _MAX_NAMES_LOGGED
            text += "\nSkipped:\n" + shown + (f"\n  ... and {more} more" if more > 0 else "")
        return text


# --------------------------------------------------------------------------- listing


def _is_image_name(name):
    return name.lower().endswith(IMAGE_EXTENSIONS) and not name.startswith(".")


def _walk_files(folder):
    """All non-hidden files below ``folder``, sorted, following the sorted folder order."""
    out = []
    for root, dirs, files in os.walk(folder, followlinks=True):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        out.extend(os.path.join(root, f) for f in sorted(files) if not f.startswith("."))
    return out


def list_image_files(directory: str | os.PathLike, labels: bool = True
                     ) -> tuple[list[str], list[tuple[str, list[str]]], list[str]]:
    """Lists a class-folder tree without reading any image.

    Args:
        directory: root folder.
        labels: if true, images must sit in class sub-folders (files directly in
            ``directory`` are ignored) and every class folder must hold an image;
            if false, every image below ``directory`` is listed, grouped by sub-folder.

    Returns:
        ``(class_names, groups, ignored)``: sorted sub-folder names; a list of
        ``(group_name, [image paths])`` in sorted order (with ``labels=True`` one group per
        class, in ``class_names`` order); paths of ignored non-image files.

    Raises:
        ValueError: naming ``directory`` if it does not exist or holds no image, or naming
            the class folder that holds no image.
    """
    if not isinstance(directory, (str, os.PathLike)):
        raise ValueError(f"`directory` must be a path; got {directory!r}.")
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        raise ValueError(f"`directory` {directory!r} does not exist or is not a directory.")
    entries = sorted(os.listdir(directory))
    class_names = [
        e for e in entries if not e.startswith(".") and os.path.isdir(os.path.join(directory, e))
    ]
    root_files = [
        os.path.join(directory, e)
        for e in entries
        if not e.startswith(".") and os.path.isfile(os.path.join(directory, e))
    ]
    ignored = []
    groups = []
    if labels:
        if not class_names:
            raise ValueError(
                f"`directory` {directory!r} has no class sub-folders; expected "
                "directory/<class_name>/<image files> (use labels=False for a flat folder)."
            )
        ignored.extend(root_files)  # files next to the class folders carry no label
    else:
        root_images = [p for p in root_files if _is_image_name(os.path.basename(p))]
        ignored.extend(p for p in root_files if not _is_image_name(os.path.basename(p)))
        if root_images:
            groups.append(("", root_images))
    for name in class_names:
        files = _walk_files(os.path.join(directory, name))
        images = [p for p in files if _is_image_name(os.path.basename(p))]
        ignored.extend(p for p in files if not _is_image_name(os.path.basename(p)))
        if labels and not images:
            raise ValueError(
                f"Class folder {os.path.join(directory, name)!r} contains no image files "
                f"(extensions {', '.join(IMAGE_EXTENSIONS)}); found {len(files)} other file(s)."
            )
        if images:
            groups.append((name, images))
    if not groups:
        example = f"; e.g. {ignored[0]!r}" if ignored else ""
        raise ValueError(
            f"`directory` {directory!r} contains no image files (extensions "
            f"{', '.join(IMAGE_EXTENSIONS)}); found {len(ignored)} other file(s){example}."
        )
    return class_names, groups, ignored


# --------------------------------------------------------------------------- decoding


def _decode_error(path):
    """The reason ``path`` cannot be decoded (by :func:`decode_image`), or ``None``."""
    try:
        decode_image(path)
    except ImageDecodeError as err:
        message = str(err)
        prefix = f"Cannot decode image file {path!r}: "
        return message[len(prefix):] if message.startswith(prefix) else message
    return None


# --------------------------------------------------------------------------- validation

_SIGNATURES = (
    (b"\xff\xd8\xff", "jpeg"),
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"GIF87a", "gif"),
    (b"GIF89a", "gif"),
    (b"BM", "bmp"),
)


def _header_problem(path):
    """Cheap structural check. Returns ``(reason, definite)`` or ``None`` if it looks fine.

    ``definite`` is true when TensorFlow certainly cannot decode the file (empty, unknown
    signature); otherwise the file is suspicious (no end marker) and must be confirmed.
    """
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(16)
            f.seek(max(0, size - 512))
            tail = f.read(512)
    except OSError as err:
        return f"cannot read file: {err}", True
    if size == 0:
        return "empty file", True
    kind = next((k for sig, k in _SIGNATURES if head.startswith(sig)), None)
    if kind is None:
        return "not an image (unknown file signature)", True
    stripped = tail.rstrip(b"\x00\r\n ")
    if kind == "jpeg" and not stripped.endswith(b"\xff\xd9"):
        return "JPEG without end-of-image marker (truncated?)", False
    if kind == "png" and b"IEND" not in tail[-16:]:
        return "PNG without IEND chunk (truncated?)", False
    if kind == "gif" and not stripped.endswith(b";"):
        return "GIF without trailer (truncated?)", False
    if kind == "bmp" and len(head) >= 6 and int.from_bytes(head[2:6], "little") > size:
        return "BMP shorter than its header says (truncated?)", False
    return None


def _validate_header(paths):
    bad = {}
    for i, path in enumerate(paths):
        problem = _header_problem(path)
        if problem is None:
            continue
        reason, definite = problem
        if definite:
            bad[i] = reason
        else:
            error = _decode_error(path)
            if error is not None:
                bad[i] = f"{reason} {error}"
    return bad


def _validate_decode(paths):
    """Decodes every file (threads; Pillow releases the GIL while decoding); returns
    ``{index: reason}`` of the failures."""
    if not paths:
        return {}
    with ThreadPoolExecutor(max(1, min(os.cpu_count() or 1, len(paths)))) as pool:
        reasons = list(pool.map(_decode_error, paths, chunksize=64))
    return {i: reason for i, reason in enumerate(reasons) if reason is not None}


def _validate(paths, validate):
    if validate == "decode":
        return _validate_decode(paths)
    if validate == "header":
        return _validate_header(paths)
    return {}


def _select(groups, limit_per_class, validate, on_error):
    """Validates files, keeping up to ``limit_per_class`` readable ones per group.

    The first ``limit_per_class`` files of every group (all files if ``None``) are validated
    in one pass; groups that lost files to errors are refilled from their next files.
    Returns ``(group_index_per_file, paths, skipped)`` in group-then-name order.
    """
    kept = [[] for _ in groups]
    cursor = [0] * len(groups)
    skipped = []
    while True:
        batch = []  # (group id, path) to validate in this round
        for gid, (_, files) in enumerate(groups):
            want = len(files) if limit_per_class is None else limit_per_class - len(kept[gid])
            chunk = files[cursor[gid]: cursor[gid] + max(0, want)]
            cursor[gid] += len(chunk)
            batch.extend((gid, path) for path in chunk)
        if not batch:
            break
        bad = _validate([path for _, path in batch], validate)
        for i, (gid, path) in enumerate(batch):
            if i in bad:
                if on_error == "raise":
                    raise ValueError(f"Cannot decode image file {path!r}: {bad[i]}")
                skipped.append((path, bad[i]))
            else:
                kept[gid].append(path)
        if not bad or limit_per_class is None:
            break
    paths = [path for group in kept for path in group]
    group_ids = np.repeat(np.arange(len(groups), dtype=np.int64), [len(g) for g in kept])
    skipped.sort()
    return group_ids, paths, skipped


def scan_image_folder(
    directory, labels=True, on_error="skip", limit_per_class=None, validate="decode"
):
    """Lists and validates an image folder; returns an :class:`ImageFolderReport`.

    Logs a warning naming skipped files. See the module docstring for ``validate``.
    Raises ``ValueError`` for a missing/empty directory, an empty class folder, a bad
    ``on_error``/``validate``/``limit_per_class``, no readable image at all, or (with
    ``on_error="raise"``) the first undecodable file.
    """
    check_choice("on_error", on_error, ON_ERROR_CHOICES)
    check_choice("validate", validate, VALIDATE_CHOICES)
    limit_per_class = check_positive_int("limit_per_class", limit_per_class, allow_none=True)
    class_names, groups, ignored = list_image_files(directory, labels=labels)
    group_ids, paths, skipped = _select(groups, limit_per_class, validate, on_error)
    if labels:
        label_ids = group_ids  # groups are exactly the classes, in order
    else:
        label_ids = np.full(len(paths), -1, dtype=np.int64)
    report = ImageFolderReport(
        directory=os.fspath(directory),
        class_names=list(class_names),
        file_paths=paths,
        labels=label_ids,
        skipped=skipped,
        ignored=ignored,
        validate=validate,
    )
    if skipped:
        logger.warning("Skipped unreadable image files. %s", report.summary())
    if not paths:
        raise ValueError(
            f"`directory` {os.fspath(directory)!r} has no readable image: all "
            f"{len(skipped)} image file(s) failed to decode (first: {skipped[0][0]!r})."
        )
    return report


# --------------------------------------------------------------------------- pipeline


def image_folder(
    directory: str | os.PathLike,
    image_size: int | tuple[int, int] = (32, 32),
    batch_size: int = 256,
    shuffle: bool = True,
    seed: int = 0,
    labels: bool = True,
    on_error: str = "skip",
    limit_per_class: int | None = None,
    drop_remainder: bool = False,
    cache: bool | str = False,
    validate: str = "decode",
):
    """A batched ``tf.data.Dataset`` of the images in ``directory/<class>/...``.

    Args:
        directory: root folder with one sub-folder per class.
        image_size: int or ``(height, width)``; images of another size are resized.
        batch_size: images per batch, ``>= 1``.
        shuffle: shuffle the order, differently each epoch, reproducibly given ``seed``.
        seed: integer seed of the shuffling.
        labels: yield ``(images, labels)`` if true, else images only (then the folder may
            also be flat, with images directly inside).
        on_error: ``"skip"`` undecodable image files (counted, named in a logged warning
            and in ``dataset.report``) or ``"raise"`` a ``ValueError`` naming the file.
        limit_per_class: keep at most this many (readable) files per class, the first in
            sorted name order; ``None`` keeps all.
        drop_remainder: drop the last partial batch.
        cache: ``False``; ``True`` caches decoded uint8 images in memory after the first
            epoch; a string caches to that file path.
        validate: the bad-file pre-pass, ``"decode"`` (exact), ``"header"`` (cheap) or
            ``"none"``; see the module docstring.

    Returns:
        A ``tf.data.Dataset`` of ``(images float32 [B, H, W, 3] in [0, 1], labels int64 [B])``
        (or images only), with attributes ``class_names`` (list of str), ``file_paths``
        and ``report`` (:class:`ImageFolderReport`).

    Example (a folder with one sub-folder per class, made here):
        >>> import os, numpy as np
        >>> from PIL import Image
        >>> for c in ("cat", "dog"):
        ...     os.makedirs(os.path.join("pets", c), exist_ok=True)
        ...     for i in range(3):
        ...         Image.fromarray(np.full((40, 48, 3), 40 * i, np.uint8)).save(
        ...             os.path.join("pets", c, f"{i}.png"))
        >>> ds = image_folder("pets", image_size=32, batch_size=4)
        >>> images, labels = next(iter(ds))
        >>> images.shape, ds.class_names, ds.report.num_skipped
        (TensorShape([4, 32, 32, 3]), ['cat', 'dog'], 0)
    """
    size = check_image_size(image_size)
    batch_size = check_batch_size(batch_size)
    if not isinstance(cache, (bool, str)):
        raise ValueError(f"`cache` must be a bool or a file path string; got {cache!r}.")
    report = scan_image_folder(
        directory, labels=labels, on_error=on_error,
        limit_per_class=limit_per_class, validate=validate,
    )
    dataset = _build_pipeline(
        report, size, batch_size, shuffle, seed, labels, on_error, drop_remainder, cache
    )
    dataset.class_names = report.class_names
    dataset.file_paths = report.file_paths
    dataset.report = report
    return dataset


def _build_pipeline(report, size, batch_size, shuffle, seed, labels, on_error, drop_remainder,
                    cache):
    tf = require_tensorflow("image_folder (a tf.data pipeline; without TensorFlow use "
                            "load_image_folder_arrays)")

    n = report.num_images
    paths = tf.data.Dataset.from_tensor_slices(
        (tf.constant(report.file_paths), tf.constant(report.labels, dtype=tf.int64))
    )

    def load(chunk_paths, chunk_labels):
        images, ok = tf_decode_images(chunk_paths, size, 3, on_error)
        return images, chunk_labels, ok

    def to_float(images, batch_labels):
        images = to_unit_float(images)
        return (images, batch_labels) if labels else images

    if shuffle and not cache:
        # Shuffling file names (cheap strings) before decoding gives a full-size buffer.
        paths = paths.shuffle(n, seed=seed, reshuffle_each_iteration=True)
    # A chunk of files per decode call (see decode.tf_decode_images), chunks in parallel.
    dataset = paths.batch(_DECODE_CHUNK).map(load, num_parallel_calls=tf.data.AUTOTUNE,
                                             deterministic=True).unbatch()
    if on_error == "skip":  # files the pre-pass did not catch (validate != "decode")
        dataset = dataset.filter(lambda image, label, ok: ok)
    dataset = dataset.map(lambda image, label, ok: (image, label))
    if cache:
        dataset = dataset.cache("" if cache is True else cache)
        if shuffle:
            dataset = dataset.shuffle(n, seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    dataset = dataset.map(to_float, num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.prefetch(tf.data.AUTOTUNE)


def load_image_folder_arrays(
    directory,
    image_size=(32, 32),
    limit_per_class=None,
    labels=True,
    on_error="skip",
    validate="decode",
    return_report=False,
):
    """Loads an image folder into memory as numpy arrays, in label-then-file-name order.

    Args: as :func:`image_folder` (no batching, shuffling or caching); ``return_report``
    also returns the :class:`ImageFolderReport` (with ``class_names``).

    Returns:
        ``(images, labels)``: float32 ``[n, H, W, 3]`` in ``[0, 1]`` and int64 ``[n]``;
        images only if ``labels`` is false; ``report`` appended if ``return_report``.
        Memory: ``n * H * W * 12`` bytes (600 MB for CIFAR-10 train).

    Example (a folder with one sub-folder per class, made here):
        >>> import os, numpy as np
        >>> from PIL import Image
        >>> for c in ("cat", "dog"):
        ...     os.makedirs(os.path.join("pets", c), exist_ok=True)
        ...     for i in range(3):
        ...         Image.fromarray(np.full((40, 48, 3), 40 * i, np.uint8)).save(
        ...             os.path.join("pets", c, f"{i}.png"))
        >>> x, y, report = load_image_folder_arrays("pets", image_size=32, limit_per_class=2,
        ...                                         return_report=True)
        >>> x.shape, y.tolist(), report.class_names
        ((4, 32, 32, 3), [0, 0, 1, 1], ['cat', 'dog'])
    """
    size = check_image_size(image_size)
    report = scan_image_folder(
        directory, labels=labels, on_error=on_error,
        limit_per_class=limit_per_class, validate=validate,
    )
    pixels, ok = decode_images(report.file_paths, size, 3, on_error, threads=os.cpu_count())
    images = to_unit_float(pixels[ok])
    label_ids = report.labels[ok].astype(np.int64)
    out = (images, label_ids) if labels else (images,)
    if return_report:
        out = out + (report,)
    return out[0] if len(out) == 1 else out
