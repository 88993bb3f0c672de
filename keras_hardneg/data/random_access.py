"""Random-access image datasets: images read one index at a time, never all held in memory.

A :class:`RandomAccessImages` is what a dataset entry (:data:`keras_hardneg.registry.DATASETS`)
returns instead of arrays when the data would not fit, or should not be copied, in memory:
``len(source)`` examples, ``source[i]`` -> ``(image uint8 [H, W, 3], label int64)``, every
image of the same shape :attr:`~RandomAccessImages.image_shape`. The training feed
(:func:`keras_hardneg.sampling.make_dataset` / :func:`~keras_hardneg.sampling.make_py_dataset`,
a random-access source there) draws a sampler's index batch and reads only those items, so
the host memory of a run does not grow with ``N`` beyond what the sampler keeps per example
(its graph, a few int arrays).

Subclasses implement :meth:`~RandomAccessImages.load` (one image) and
:meth:`~RandomAccessImages.label` (one label), and set ``image_shape``. Here:

* :class:`ImageFiles`: image files by path (an image folder), decoded by
  :mod:`keras_hardneg.data.decode`, the library's one image decoder;
* :class:`ItemSource`: any ``__getitem__`` source whose items are dicts, such as
  ``tfds.data_source(...)`` (:func:`keras_hardneg.data.tfds_loader.tfds_random_access`);
* :class:`keras_hardneg.data.synthetic.SyntheticImages`: ``N`` synthetic JPEGs.

:class:`SourceBatches` reads a fixed list of indices in batches (float32 in ``[0, 1]``) as a
finite ``keras.utils.PyDataset``: how the kNN monitor and the final evaluation read a bounded
subset of a random-access source.

Example:
>>> import numpy as np
>>> class Ramp(RandomAccessImages):
...     image_shape = (4, 4, 3)
...     def __len__(self): return 10
...     def load(self, i): return np.full(self.image_shape, i, np.uint8)
...     def label(self, i): return i % 2
>>> image, label = Ramp()[3]
>>> image.shape, int(image[0, 0, 0]), int(label)
((4, 4, 3), 3, 1)
>>> Ramp().images([1, 2]).shape
(2, 4, 4, 3)
"""

from __future__ import annotations

import numbers
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

import keras
import numpy as np

from keras_hardneg.data.decode import decode_image, to_unit_float

__all__ = ["RandomAccessImages", "ImageFiles", "ItemSource", "SourceBatches",
           "is_random_access"]


def is_random_access(x: Any) -> bool:
    """Whether ``x`` is a :class:`RandomAccessImages` (rather than in-memory arrays)."""
    return isinstance(x, RandomAccessImages)


class RandomAccessImages:
    """Base class of random-access image datasets (see the module docstring).

    Attributes:
        image_shape: ``(H, W, 3)`` of every image ``load`` returns.
    """

    image_shape: tuple[int, int, int] = (0, 0, 3)

    def __len__(self) -> int:
        raise NotImplementedError

    def load(self, index: int) -> np.ndarray:
        """Image ``index``: uint8 ``[H, W, 3]``."""
        raise NotImplementedError

    def label(self, index: int) -> int:
        """Label of example ``index`` (an integer class id)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ access
    def _index(self, index: Any) -> int:
        if isinstance(index, bool) or not isinstance(index, numbers.Integral):
            raise TypeError(f"index must be an integer; got {index!r}.")
        n = len(self)
        i = int(index) + (n if index < 0 else 0)
        if not 0 <= i < n:
            raise IndexError(f"index {int(index)} is out of range for {n} examples.")
        return i

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.int64]:
        i = self._index(index)
        return self.load(i), np.int64(self.label(i))

    def labels_of(self, indices: Sequence[int]) -> np.ndarray:
        """int64 ``[n]`` labels of ``indices``."""
        return np.asarray([self.label(self._index(i)) for i in indices], dtype=np.int64)

    def images(self, indices: Sequence[int], threads: int | None = None) -> np.ndarray:
        """uint8 ``[n, H, W, 3]`` images of ``indices`` (``threads`` > 1 reads in parallel;
        Pillow releases the GIL while decoding)."""
        idx = [self._index(i) for i in indices]
        out = np.empty((len(idx),) + tuple(self.image_shape), np.uint8)
        if threads and threads > 1 and len(idx) > 1:
            with ThreadPoolExecutor(threads) as pool:
                for j, image in enumerate(pool.map(self.load, idx)):
                    out[j] = image
        else:
            for j, i in enumerate(idx):
                out[j] = self.load(i)
        return out

    def arrays(self, indices: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """``(images float32 [n, H, W, 3] in [0, 1], labels int64 [n])`` of ``indices``: the
        array form of a subset (small subsets only)."""
        return to_unit_float(self.images(indices)), self.labels_of(indices)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} images of {tuple(self.image_shape)})"


class ImageFiles(RandomAccessImages):
    """Image files by path, decoded (and resized) on each read by
    :func:`keras_hardneg.data.decode.decode_image`: the same pixels as
    :func:`keras_hardneg.data.load_image_folder_arrays` gives for the same files.

    Args:
        paths: ``N`` file paths.
        labels: ``N`` integer labels.
        image_size: ``(height, width)`` (or an int) every image is resized to.

    Example:
    >>> files = ImageFiles(["a.jpg", "b.png"], [0, 1], image_size=32)  # doctest: +SKIP
    >>> files[1][0].shape  # doctest: +SKIP
    (32, 32, 3)
    """

    def __init__(self, paths: Sequence[str | os.PathLike], labels: Sequence[int],
                 image_size: int | tuple[int, int]):
        if len(paths) != len(labels):
            raise ValueError(f"`paths` ({len(paths)}) and `labels` ({len(labels)}) must have "
                             "the same length.")
        if len(paths) == 0:
            raise ValueError("`paths` is empty: no images to read.")
        size = (image_size, image_size) if isinstance(image_size, numbers.Integral) \
            else tuple(int(s) for s in image_size)
        self.paths = [os.fspath(p) for p in paths]
        self.labels = np.asarray(labels, dtype=np.int64)
        self.image_size = size
        self.image_shape = (size[0], size[1], 3)

    def __len__(self) -> int:
        return len(self.paths)

    def load(self, index: int) -> np.ndarray:
        return decode_image(self.paths[index], self.image_size)

    def label(self, index: int) -> int:
        return int(self.labels[index])

    def subset(self, indices: Sequence[int]) -> "ImageFiles":
        """The files at ``indices`` (e.g. a train/test split), still by path."""
        idx = np.asarray(indices, dtype=np.int64)
        return ImageFiles([self.paths[i] for i in idx], self.labels[idx], self.image_size)


class ItemSource(RandomAccessImages):
    """A ``__getitem__`` source of dict items (``tfds.data_source(...)``, say) as images:
    item ``i`` holds the encoded-or-decoded image under ``image_key`` (uint8 ``[h, w, c]``,
    ``c`` in 1..4, or the file's bytes) and the label under ``label_key``. Images are
    converted to RGB and resized to ``image_size`` by :mod:`keras_hardneg.data.decode`
    (bilinear, antialiased; none when the size already matches).

    Args:
        source: the item source (``__len__`` and ``__getitem__``).
        image_size: ``(height, width)`` (or an int); ``None`` keeps the first item's size
            (every item must then have it).
        image_key, label_key: the items' keys.
        indices: optional subset of the source's indices (e.g. a split of a split).
    """

    def __init__(self, source: Any, image_size: int | tuple[int, int] | None = None, *,
                 image_key: str = "image", label_key: str = "label",
                 indices: Sequence[int] | None = None):
        if not hasattr(source, "__getitem__") or not hasattr(source, "__len__"):
            raise ValueError("`source` must have __len__ and __getitem__ (a random-access "
                             f"source); got {type(source).__name__}.")
        self.source, self.image_key, self.label_key = source, image_key, label_key
        self.indices = None if indices is None else np.asarray(indices, dtype=np.int64)
        if len(self) == 0:
            raise ValueError("`source` is empty: no images to read.")
        first = self._item(0)
        for key in (image_key, label_key):
            if key not in first:
                raise ValueError(f"items have no key {key!r}; keys: {sorted(first)}.")
        if image_size is None:
            self.image_size = None
            shape = self._pixels(first[image_key]).shape
            self.image_shape = (int(shape[0]), int(shape[1]), 3)
        else:
            size = (image_size, image_size) if isinstance(image_size, numbers.Integral) \
                else tuple(int(s) for s in image_size)
            self.image_size = size
            self.image_shape = (size[0], size[1], 3)

    def __len__(self) -> int:
        return len(self.source) if self.indices is None else len(self.indices)

    def _item(self, index: int) -> dict:
        i = index if self.indices is None else int(self.indices[index])
        return self.source[i]

    def _pixels(self, value: Any) -> np.ndarray:
        from PIL import Image

        if isinstance(value, (bytes, bytearray)):
            return decode_image(bytes(value), self.image_size)
        pixels = np.asarray(value)
        if pixels.dtype != np.uint8:
            raise ValueError(f"item images must be uint8 pixels or encoded bytes; got dtype "
                             f"{pixels.dtype}.")
        if pixels.ndim == 2:
            pixels = pixels[..., None]
        channels = pixels.shape[-1]
        if channels == 1:
            pixels = np.repeat(pixels, 3, axis=-1)
        elif channels == 2:
            pixels = np.repeat(pixels[..., :1], 3, axis=-1)
        elif channels == 4:
            pixels = pixels[..., :3]
        elif channels != 3:
            raise ValueError(f"item images must have 1 to 4 channels; got {channels}.")
        size = getattr(self, "image_size", None)
        if size is not None and pixels.shape[:2] != tuple(size):
            image = Image.fromarray(np.ascontiguousarray(pixels), mode="RGB")
            from keras_hardneg.data.decode import RESIZE_FILTER

            pixels = np.asarray(image.resize((size[1], size[0]), resample=RESIZE_FILTER,
                                             reducing_gap=None))
        return np.ascontiguousarray(pixels, dtype=np.uint8)

    def load(self, index: int) -> np.ndarray:
        pixels = self._pixels(self._item(index)[self.image_key])
        if pixels.shape != tuple(self.image_shape):
            raise ValueError(f"item {index} has shape {pixels.shape}, the source "
                             f"{tuple(self.image_shape)}; give `image_size`.")
        return pixels

    def label(self, index: int) -> int:
        return int(self._item(index)[self.label_key])

    def subset(self, indices: Sequence[int]) -> "ItemSource":
        """The items at ``indices`` of this source (still by index)."""
        idx = np.asarray(indices, dtype=np.int64)
        base = idx if self.indices is None else self.indices[idx]
        return ItemSource(self.source, self.image_size, image_key=self.image_key,
                          label_key=self.label_key, indices=base)


class SourceBatches(keras.utils.PyDataset):
    """A fixed list of indices of a :class:`RandomAccessImages`, read in batches: element
    ``j`` is ``(images float32 [b, H, W, 3] in [0, 1], labels int64 [b])`` (or the images
    alone with ``labelled=False``); finite (``num_batches``), the last batch partial.

    Args:
        source: the random-access images.
        indices: which examples, in order.
        batch_size: ``>= 1``.
        labelled: yield labels too.
        threads: decode threads per batch.
    """

    def __init__(self, source: RandomAccessImages, indices: Sequence[int], batch_size: int = 256,
                 *, labelled: bool = True, threads: int | None = 4, **kwargs: Any):
        super().__init__(**kwargs)
        if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) \
                or batch_size < 1:
            raise ValueError(f"`batch_size` must be an integer >= 1; got {batch_size!r}.")
        self.source = source
        self.indices = np.asarray(indices, dtype=np.int64)
        self.batch_size, self.labelled, self.threads = int(batch_size), labelled, threads

    @property
    def num_batches(self) -> int:
        return -(-len(self.indices) // self.batch_size)

    def __len__(self) -> int:
        return self.num_batches

    def __getitem__(self, j: int):
        if not 0 <= j < self.num_batches:
            raise IndexError(f"batch {j} out of range ({self.num_batches} batches).")
        idx = self.indices[j * self.batch_size:(j + 1) * self.batch_size]
        images = to_unit_float(self.source.images(idx, threads=self.threads))
        return (images, self.source.labels_of(idx)) if self.labelled else images
