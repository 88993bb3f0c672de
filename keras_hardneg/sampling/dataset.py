"""``tf.data`` pipelines fed by a sampler's index batches (BatchSampler, Yang et al. 2023, Alg. 1:
"Load the mini-batch").

``make_dataset(sampler, source, labels=None, ...)`` maps each ``[B]`` index batch drawn by the
sampler to its examples.  Sources:

(a) in-memory arrays: ``source`` = images ``[N, H, W, C]`` (uint8 in [0, 255], uint16 in
    [0, 65535] or float already in [0, 1]); ``labels`` = ``[N]`` array or None.  Gathering is a
    numpy fancy-index in the producer thread; scaling to float32 runs in the tf.data graph.
(b) image files: ``source`` = list of ``N`` paths (JPEG / PNG / GIF / BMP), ``labels`` = list or
    None.  Files are decoded by the package's one decoder, :mod:`keras_hardneg.data.decode`
    (Pillow, the same pixels as ``keras_hardneg.data.image_folder``), one sampler batch per
    call, batches in parallel (``num_parallel_calls``), in order; ``image_size=(H, W)``
    resizes (Pillow bilinear, antialiased; needed when files differ in size).
(c) random access: any object with ``__getitem__`` / ``__len__`` such as
    ``tfds.data_source(...)``; an item is a dict (``image_key`` / ``label_key``), a tuple
    ``(image, label)`` or an image.  Items are fetched by ``num_workers`` threads.

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
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import tensorflow as tf

from keras_hardneg.data.decode import to_unit_float

__all__ = ["make_dataset"]


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
    if with_labels:
        ds = ds.map(lambda img, idx, y: ({"images": img, "index": idx}, y),
                    num_parallel_calls=tf.data.AUTOTUNE)
    else:
        ds = ds.map(lambda img, idx: {"images": img, "index": idx},
                    num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(prefetch)


def make_dataset(sampler, source, labels=None, *, image_size=None, image_key="image",
                 label_key="label", repeat=True, prefetch=tf.data.AUTOTUNE,
                 num_parallel_calls=tf.data.AUTOTUNE, num_workers=4, channels=3):
    """Build a ``tf.data.Dataset`` of sampled mini-batches.

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

    Returns:
        ``tf.data.Dataset`` of ``({"images", "index"}, labels)`` or ``{"images", "index"}``.
    """
    n, b = int(sampler.num_nodes), int(sampler.batch_size)
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
    if images.ndim < 2:
        raise ValueError(f"`source` images must have rank >= 2 [N, ...], got {images.shape}.")
    with_labels = labels is not None and labels is not False
    lab = np.asarray(labels) if with_labels else None

    def gen():
        for idx in idx_gen():
            if with_labels:
                yield images[idx], idx, lab[idx]
            else:
                yield images[idx], idx

    sig = [tf.TensorSpec((b,) + images.shape[1:], tf.as_dtype(images.dtype)),
           tf.TensorSpec((b,), tf.int64)]
    if with_labels:
        sig.append(tf.TensorSpec((b,) + lab.shape[1:], tf.as_dtype(lab.dtype)))
    ds = tf.data.Dataset.from_generator(gen, output_signature=tuple(sig))
    ds = ds.map(lambda img, *rest: (to_unit_float(img),) + tuple(rest),
                num_parallel_calls=tf.data.AUTOTUNE)
    return _finish(ds, with_labels, prefetch)


def _from_paths(idx_gen, paths, labels, b, image_size, num_parallel_calls, prefetch, channels):
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
