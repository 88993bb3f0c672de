"""Feeds built from a sampler's index batches (BatchSampler, Yang et al. 2023, Alg. 1:
"Load the mini-batch"): a ``tf.data`` pipeline (:func:`make_dataset`, TensorFlow) or a
``keras.utils.PyDataset`` (:func:`make_py_dataset` / :class:`SamplerPyDataset`, any backend,
no TensorFlow).

``make_dataset(sampler, source, labels=None, ...)`` maps each ``[B]`` index batch drawn by the
sampler to its examples.  Sources:

(a) in-memory arrays: ``source`` = images ``[N, H, W, C]`` (uint8 in [0, 255], uint16 in
    [0, 65535] or float already in [0, 1]), or token ids ``[N, L]`` / ``[N, 2, L]``
    (int32 / int64, passed through unchanged under the same ``"images"`` key);
    ``labels`` = ``[N]`` array or None.  Gathering is a
    numpy fancy-index in the producer thread; scaling to float32 runs in the tf.data graph.
(b) image files: ``source`` = list of ``N`` paths (JPEG / PNG / GIF / BMP), ``labels`` = list or
    None.  Files are decoded by the package's one decoder, :mod:`keras_hardneg.data.decode`
    (Pillow, the same pixels as ``keras_hardneg.data.image_folder``), one sampler batch per
    call, batches in parallel (``num_parallel_calls``), in order; ``image_size=(H, W)``
    resizes (Pillow bilinear, antialiased; needed when files differ in size).
(c) random access: any object with ``__getitem__`` / ``__len__`` such as
    ``tfds.data_source(...)``; an item is a dict (``image_key`` / ``label_key``), a tuple
    ``(image, label)`` or an image.  Items are fetched by ``num_workers`` threads.
(d) text: ``source`` = ``N`` strings with ``texts=True`` (passed through unchanged, as
    ``tf.string`` / a NumPy object array, under the same ``"images"`` key: for a model
    whose preprocessor tokenizes, e.g. a keras-hub ``TextEmbedder``).

Elements: ``({"images": float32 [B, H, W, C] in [0, 1], "index": int64 [B]}, labels [B])``, or
just the dict without labels.  Every sampler batch becomes exactly one element (no data is
dropped, no batch is split); the dataset is endless with ``repeat=True`` (use
``steps_per_epoch=sampler.steps_per_epoch`` in ``fit``) or one sampler epoch otherwise.
The sampler runs ahead of training by the prefetch depth (``prefetch`` elements); a graph or
restart-probability update therefore takes effect a few batches later.

Example
-------
>>> import numpy as np
>>> from keras_hardneg.sampling import UniformSampler, make_dataset
>>> x = np.random.default_rng(0).integers(0, 256, size=(100, 8, 8, 3), dtype=np.uint8)
>>> ds = make_dataset(UniformSampler(100, batch_size=10), x, labels=np.arange(100))
>>> feats, y = next(iter(ds))
>>> feats["images"].shape, feats["images"].dtype.name, feats["index"].shape
(TensorShape([10, 8, 8, 3]), 'float32', TensorShape([10]))

The same elements as NumPy arrays, without TensorFlow (under ``KERAS_BACKEND=jax``, say):

>>> from keras_hardneg.sampling import make_py_dataset
>>> feed = make_py_dataset(UniformSampler(100, batch_size=10), x, labels=np.arange(100))
>>> feats, y = feed[0]
>>> feats["images"].shape, feats["images"].dtype.name, feats["index"].dtype.name
((10, 8, 8, 3), 'float32', 'int64')

:class:`SamplerPyDataset` draws the sampler's batches in order, however Keras reads it (a
batch read ahead to build the model, worker threads); it is endless (pass
``steps_per_epoch=sampler.steps_per_epoch`` to ``fit``) and holds no state of its own: the
sampler's ``get_state`` / ``set_state`` (what
:class:`~keras_hardneg.callbacks.AtomicBackupAndRestore` saves) is the whole resume state.
Image files are decoded by :mod:`keras_hardneg.data.decode` as in ``make_dataset``; a
random-access source with ``image_size`` is resized by the same module (Pillow bilinear,
antialiased), where ``make_dataset`` uses ``tf.image.resize`` (bilinear, no antialiasing).
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import keras
import numpy as np

from keras_hardneg.data._tf import require_tensorflow
from keras_hardneg.data.decode import decode_images, resize_float_images, to_unit_float

__all__ = ["make_dataset", "make_py_dataset", "SamplerPyDataset"]

_AUTOTUNE = -1  # tf.data.AUTOTUNE, without importing TensorFlow


def _index_stream(sampler, repeat):
    def gen():
        it = iter(sampler) if repeat else sampler.epoch()
        for batch in it:
            yield np.asarray(batch, dtype=np.int64)
    return gen


def _is_paths(source):
    if isinstance(source, (list, tuple)) and len(source) > 0:
        return all(isinstance(s, (str, bytes, os.PathLike)) for s in source[:16])
    if isinstance(source, np.ndarray):
        return source.dtype.kind in ("U", "S", "O") and source.ndim == 1
    return False


def _finish(ds, with_labels, prefetch):
    import tensorflow as tf

    if with_labels:
        ds = ds.map(lambda img, idx, y: ({"images": img, "index": idx}, y),
                    num_parallel_calls=tf.data.AUTOTUNE)
    else:
        ds = ds.map(lambda img, idx: {"images": img, "index": idx},
                    num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(prefetch)


def make_dataset(sampler, source, labels=None, *, image_size=None, image_key="image",
                 label_key="label", repeat=True, prefetch=_AUTOTUNE,
                 num_parallel_calls=_AUTOTUNE, num_workers=4, channels=3, texts=False):
    """Build a ``tf.data.Dataset`` of sampled mini-batches (needs TensorFlow; without it use
    :func:`make_py_dataset`).

    Args:
        sampler: ``BatchSampler`` / ``UniformSampler`` / ``KNNSampler`` (or any object with
            ``num_nodes``, ``batch_size``, ``__iter__`` and ``epoch()``).
        source: images array ``[N, ...]``, list of ``N`` image paths, or a random-access
            source (``__getitem__`` + ``__len__``).
        labels: ``[N]`` labels (arrays / paths); for random-access sources labels are read
            from the items (``label_key``) unless ``labels`` is given; ``False`` disables them.
        image_size: ``(H, W)`` to resize to (paths / random access), optional.
        image_key, label_key: dict keys of random-access items.
        repeat: endless stream (True) or a single sampler epoch (False).
        prefetch: prefetch depth (elements).
        num_parallel_calls: parallel decodes for paths.
        num_workers: threads fetching items from a random-access source.
        channels: channels decoded from files: 3 (RGB) or 1 (luma).
        texts: ``source`` is ``N`` strings, passed through as ``tf.string`` (source (d)).

    A sampler with ``variable_batch_size = True`` (a
    :class:`~keras_hardneg.sampling.TupleBatches` keeping its last incomplete batch) gets
    elements whose batch dimension is unknown (None).

    Returns:
        ``tf.data.Dataset`` of ``({"images", "index"}, labels)`` or ``{"images", "index"}``.

    Raises:
        TensorFlowRequiredError: TensorFlow cannot be imported (an ``ImportError``).
    """
    require_tensorflow("make_dataset (a tf.data pipeline; without TensorFlow use "
                       "make_py_dataset)")
    n, b = int(sampler.num_nodes), int(sampler.batch_size)
    if getattr(sampler, "variable_batch_size", False):
        b = None
    try:
        size = len(source)
    except TypeError:
        raise ValueError("`source` must be an array, a list of paths or a random-access "
                         "source with __len__ / __getitem__.")
    if size != n:
        raise ValueError(f"`source` has {size} examples but the sampler has N={n} nodes.")
    if labels is not None and labels is not False and len(labels) != n:
        raise ValueError(f"`labels` has {len(labels)} entries, expected N={n}.")
    idx_gen = _index_stream(sampler, repeat)

    if texts:
        return _from_arrays(idx_gen, _text_rows(source), labels, b, prefetch)
    if _is_paths(source):
        return _from_paths(idx_gen, [os.fspath(p) if not isinstance(p, bytes) else p
                                     for p in source],
                           labels, b, image_size, num_parallel_calls, prefetch, channels)
    if isinstance(source, np.ndarray):
        return _from_arrays(idx_gen, source, labels, b, prefetch)
    if hasattr(source, "__getitem__"):
        return _from_random_access(idx_gen, source, labels, b, image_size, image_key,
                                   label_key, prefetch, num_workers)
    raise ValueError(f"unsupported `source` type {type(source).__name__}.")


def _from_arrays(idx_gen, images, labels, b, prefetch):
    import tensorflow as tf

    if images.ndim < 2 and images.dtype != object:
        raise ValueError(f"`source` images must have rank >= 2 [N, ...], got {images.shape}.")
    with_labels = labels is not None and labels is not False
    lab = np.asarray(labels) if with_labels else None

    def gen():
        for idx in idx_gen():
            if with_labels:
                yield images[idx], idx, lab[idx]
            else:
                yield images[idx], idx

    dtype = tf.string if images.dtype == object else tf.as_dtype(images.dtype)
    sig = [tf.TensorSpec((b,) + images.shape[1:], dtype), tf.TensorSpec((b,), tf.int64)]
    if with_labels:
        sig.append(tf.TensorSpec((b,) + lab.shape[1:], tf.as_dtype(lab.dtype)))
    ds = tf.data.Dataset.from_generator(gen, output_signature=tuple(sig))
    if not _is_token_ids(images) and images.dtype != object:
        ds = ds.map(lambda img, *rest: (to_unit_float(img),) + tuple(rest),
                    num_parallel_calls=tf.data.AUTOTUNE)
    return _finish(ds, with_labels, prefetch)


def _text_rows(source):
    """``N`` strings as a NumPy object array ``[N]`` (checked)."""
    if isinstance(source, (str, bytes)):
        raise ValueError("`source` must be a sequence of strings with `texts=True`, not one "
                         "string.")
    rows = np.empty(len(source), dtype=object)
    for i, text in enumerate(source):
        if not isinstance(text, (str, bytes, np.str_, np.bytes_)):
            raise ValueError(f"`source[{i}]` must be a string with `texts=True`; got "
                             f"{type(text).__name__}.")
        rows[i] = str(text) if isinstance(text, np.str_) else text
    return rows


def _is_token_ids(array):
    """int32 / int64 arrays are token ids (text): they pass through unscaled. Pixels are
    uint8, uint16 or float."""
    return np.dtype(array.dtype).name in ("int32", "int64")


def _from_paths(idx_gen, paths, labels, b, image_size, num_parallel_calls, prefetch, channels):
    import tensorflow as tf

    from keras_hardneg.data.decode import tf_decode_images

    with_labels = labels is not None and labels is not False
    paths_t = tf.constant(paths)
    labels_t = tf.constant(np.asarray(labels)) if with_labels else None
    size = None if image_size is None else tuple(int(s) for s in image_size)

    def load(i):  # one sampler batch [b]: decoded by keras_hardneg.data.decode (Pillow)
        images, _ = tf_decode_images(tf.gather(paths_t, i), size, channels, on_error="raise")
        img = to_unit_float(images)
        if with_labels:
            return img, i, tf.gather(labels_t, i)
        return img, i

    ds = tf.data.Dataset.from_generator(idx_gen,
                                        output_signature=tf.TensorSpec((b,), tf.int64))
    # Batches are decoded in parallel (`num_parallel_calls`), in order.
    ds = ds.map(load, num_parallel_calls=num_parallel_calls, deterministic=True)
    return _finish(ds, with_labels, prefetch)


def _split_item(item, image_key, label_key):
    if isinstance(item, dict):
        return item[image_key], item.get(label_key)
    if isinstance(item, (tuple, list)) and len(item) == 2:
        return item[0], item[1]
    return item, None


def _from_random_access(idx_gen, source, labels, b, image_size, image_key, label_key,
                        prefetch, num_workers):
    import tensorflow as tf

    img0, lab0 = _split_item(source[0], image_key, label_key)
    img0 = np.asarray(img0)
    if labels is False:
        with_labels, ext = False, None
    elif labels is not None:
        with_labels, ext = True, np.asarray(labels)
    else:
        with_labels, ext = lab0 is not None, None
    lab_shape, lab_dtype = ((), np.int64)
    if with_labels:
        l0 = ext[0] if ext is not None else np.asarray(lab0)
        lab_shape, lab_dtype = np.shape(l0), np.asarray(l0).dtype
    pool = ThreadPoolExecutor(num_workers) if num_workers and num_workers > 1 else None

    def fetch(i):
        return _split_item(source[int(i)], image_key, label_key)

    def gen():
        for idx in idx_gen():
            items = list(pool.map(fetch, idx)) if pool else [fetch(i) for i in idx]
            imgs = [np.asarray(it[0]) for it in items]
            if image_size is None:
                shapes = {im.shape for im in imgs}
                if len(shapes) > 1:
                    raise ValueError(f"images of different shapes {sorted(shapes)[:3]}...; "
                                     "pass `image_size`.")
                imgs = np.stack(imgs)
            out = (imgs, idx)
            if with_labels:
                y = ext[idx] if ext is not None else np.asarray([it[1] for it in items])
                out = out + (y,)
            yield out

    if image_size is None:
        img_spec = tf.TensorSpec((b,) + img0.shape, tf.as_dtype(img0.dtype))
    else:
        inner = gen

        def gen():  # noqa: F811 -- resize each image, then stack
            for out in inner():
                imgs = [tf.image.resize(im, image_size) for im in out[0]]
                yield (tf.stack(imgs).numpy(),) + out[1:]

        img_spec = tf.TensorSpec((b,) + tuple(image_size) + img0.shape[-1:], tf.float32)
    sig = [img_spec, tf.TensorSpec((b,), tf.int64)]
    if with_labels:
        sig.append(tf.TensorSpec((b,) + tuple(lab_shape), tf.as_dtype(lab_dtype)))
    ds = tf.data.Dataset.from_generator(gen, output_signature=tuple(sig))
    if image_size is None:
        ds = ds.map(lambda img, *rest: (to_unit_float(img),) + tuple(rest),
                    num_parallel_calls=tf.data.AUTOTUNE)
    else:
        # resized uint8 images are float in [0, 255]; floats stay in [0, 1]
        scale = 255.0 if img0.dtype == np.uint8 else (65535.0 if img0.dtype == np.uint16
                                                      else 1.0)
        ds = ds.map(lambda img, *rest: (tf.clip_by_value(img / scale, 0.0, 1.0),)
                    + tuple(rest), num_parallel_calls=tf.data.AUTOTUNE)
    return _finish(ds, with_labels, prefetch)


# ------------------------------------------------------------------ PyDataset (no TensorFlow)
class _Gather:
    """Index batch ``[B]`` -> ``(images float32 [B, H, W, C] in [0, 1], labels or None)`` with
    NumPy and Pillow only (one of the three kinds of ``source`` of :func:`make_dataset`)."""

    def __init__(self, source, labels, image_size, image_key, label_key, num_workers,
                 channels, texts=False):
        self.size = None if image_size is None else tuple(int(s) for s in image_size)
        self.channels = channels
        self.image_key, self.label_key = image_key, label_key
        self.labels = None if labels is None or labels is False else np.asarray(labels)
        self.pool = None
        if texts:
            self.kind, self.source = "texts", _text_rows(source)
        elif _is_paths(source):
            self.kind = "paths"
            self.source = [os.fspath(p) if not isinstance(p, bytes) else p.decode()
                           for p in source]
        elif isinstance(source, np.ndarray):
            if source.ndim < 2:
                raise ValueError(f"`source` images must have rank >= 2 [N, ...], got "
                                 f"{source.shape}.")
            self.kind, self.source = "arrays", source
        elif hasattr(source, "__getitem__"):
            self.kind, self.source = "random_access", source
            if labels is None:  # labels from the items, when they have some
                self.from_items = _split_item(source[0], image_key, label_key)[1] is not None
            if num_workers and num_workers > 1:
                self.pool = ThreadPoolExecutor(num_workers)
        else:
            raise ValueError(f"unsupported `source` type {type(source).__name__}.")
        self.item_labels = (self.kind == "random_access" and labels is None
                            and self.from_items)

    @property
    def with_labels(self):
        return self.labels is not None or self.item_labels

    def __call__(self, idx):
        if self.kind == "texts":
            return self.source[idx], (None if self.labels is None else self.labels[idx])
        if self.kind == "arrays":
            if _is_token_ids(self.source):
                return np.asarray(self.source[idx]), (None if self.labels is None
                                                      else self.labels[idx])
            images = to_unit_float(self.source[idx])
            y = None
        elif self.kind == "paths":
            images, _ = decode_images([self.source[i] for i in idx], self.size, self.channels,
                                      on_error="raise")
            images, y = to_unit_float(images), None
        else:
            fetch = lambda i: _split_item(self.source[int(i)], self.image_key,  # noqa: E731
                                          self.label_key)
            items = list(self.pool.map(fetch, idx)) if self.pool else [fetch(i) for i in idx]
            if self.size is None:
                shapes = {np.shape(it[0]) for it in items}
                if len(shapes) > 1:
                    raise ValueError(f"images of different shapes {sorted(shapes)[:3]}...; "
                                     "pass `image_size`.")
                images = to_unit_float(np.stack([np.asarray(it[0]) for it in items]))
            else:
                images = np.concatenate([
                    resize_float_images(to_unit_float(np.asarray(it[0]))[None], self.size)
                    for it in items])
            y = np.asarray([it[1] for it in items]) if self.item_labels else None
        if self.labels is not None:
            y = self.labels[idx]
        return np.asarray(images, np.float32), y


class SamplerPyDataset(keras.utils.PyDataset):
    """A sampler's index batches mapped to their examples, as an endless
    ``keras.utils.PyDataset`` (any Keras backend; NumPy and Pillow, no TensorFlow).

    Element ``i``: ``({"images": float32 [B, H, W, C] in [0, 1], "index": int64 [B]},
    labels [B])`` (or the dict alone without labels), the format of :func:`make_dataset`.

    Batches come from the sampler in order: reading element ``i`` draws the sampler's
    batches up to the ``i``-th of the current pass (worker threads may ask out of order;
    the draws stay sequential). Reading element 0 a second time starts a new pass that
    continues the sampler's stream (Keras restarts its iterator when ``fit`` starts; the
    batch it read ahead to build an unbuilt model is drawn but not trained on, as
    ``tf.data``'s prefetch does with :func:`make_dataset`). The dataset keeps no state of
    its own beyond the current pass: restoring the sampler (``sampler.set_state``, as
    :class:`~keras_hardneg.callbacks.AtomicBackupAndRestore` does at ``on_train_begin``)
    before the pass starts resumes exactly.

    Args:
        sampler: ``BatchSampler`` / ``UniformSampler`` / ``KNNSampler`` (or any object with
            ``num_nodes``, ``batch_size``, ``steps_per_epoch`` and ``next_batch()``).
        source, labels, image_size, image_key, label_key, num_workers, channels, texts: as
            in :func:`make_dataset` (``num_workers`` threads fetch the items of a
            random-access source).
        **kwargs: ``workers``, ``use_multiprocessing``, ``max_queue_size`` of
            ``keras.utils.PyDataset`` (``workers > 1`` decodes batches in parallel threads,
            and the sampler then runs ahead of training by up to ``max_queue_size`` batches,
            as with ``make_dataset``'s prefetch: measured 36 draws for 30 steps with
            ``workers=3, max_queue_size=4``; multiprocessing is refused: the sampler lives
            in this process).

    Attributes:
        steps_per_epoch: ``sampler.steps_per_epoch``; pass it to ``fit``.
    """

    def __init__(self, sampler: Any, source: Any, labels: Any = None, *,
                 image_size: tuple[int, int] | None = None, image_key: str = "image",
                 label_key: str = "label", num_workers: int = 4, channels: int = 3,
                 texts: bool = False, **kwargs: Any):
        if kwargs.get("use_multiprocessing"):
            raise ValueError("`use_multiprocessing` must be False: the sampler draws the "
                             "batches in this process (use `workers` threads instead).")
        super().__init__(**kwargs)
        _check_feed(sampler, source, labels)
        if channels not in (1, 3):
            raise ValueError(f"`channels` must be 1 or 3; got {channels!r}.")
        self.sampler = sampler
        self.steps_per_epoch = int(sampler.steps_per_epoch)
        self._gather = _Gather(source, labels, image_size, image_key, label_key,
                               num_workers, channels, texts)
        self._lock = threading.Lock()
        self._pending = {}      # position in this pass -> index batch drawn, not yet read
        self._drawn = 0         # batches drawn in this pass
        self._read_first = False  # element 0 of this pass was read

    @property
    def num_batches(self) -> None:
        return None

    def _indices(self, i: int) -> np.ndarray:
        with self._lock:
            if i == 0:
                if self._read_first:  # a new pass: continue the sampler's stream
                    self._pending.clear()
                    self._drawn = 0
                self._read_first = True
            if i < self._drawn and i not in self._pending:
                raise IndexError(f"element {i} of this pass was already read; a pass reads "
                                 "each element once (start a new pass at element 0).")
            while self._drawn <= i:
                self._pending[self._drawn] = np.asarray(self.sampler.next_batch(), np.int64)
                self._drawn += 1
            return self._pending.pop(i)

    def __getitem__(self, i: int):
        idx = self._indices(int(i))
        images, labels = self._gather(idx)
        features = {"images": images, "index": idx}
        return features if labels is None else (features, labels)


def _check_feed(sampler, source, labels):
    n = int(sampler.num_nodes)
    try:
        size = len(source)
    except TypeError:
        raise ValueError("`source` must be an array, a list of paths or a random-access "
                         "source with __len__ / __getitem__.") from None
    if size != n:
        raise ValueError(f"`source` has {size} examples but the sampler has N={n} nodes.")
    if labels is not None and labels is not False and len(labels) != n:
        raise ValueError(f"`labels` has {len(labels)} entries, expected N={n}.")


def make_py_dataset(sampler: Any, source: Any, labels: Any = None, **kwargs: Any
                    ) -> SamplerPyDataset:
    """:class:`SamplerPyDataset` ``(sampler, source, labels, **kwargs)``: the sampler feed as a
    ``keras.utils.PyDataset``, for ``fit`` under any backend without TensorFlow.
    ``source`` holds the ``n`` rows the sampler indexes (e.g. images ``[n, H, W, C]``),
    ``labels`` int ``[n]`` or ``None``; each batch is ``{"images": [B, ...] (the rows drawn),
    "index": int [B]}``, paired with their labels ``[B]`` when ``labels`` is given.

    Example:
    >>> import numpy as np
    >>> from keras_hardneg.sampling import UniformSampler
    >>> x = np.zeros((20, 4, 4, 3), np.uint8)
    >>> feed = make_py_dataset(UniformSampler(20, batch_size=5, seed=0), x)
    >>> sorted(feed[0]), feed.steps_per_epoch
    (['images', 'index'], 4)
    """
    return SamplerPyDataset(sampler, source, labels, **kwargs)
