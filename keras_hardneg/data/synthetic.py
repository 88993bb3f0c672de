"""Synthetic random-access images: ``N`` JPEG images whose content is a function of the index.

For measuring the data path at any ``N`` (ImageNet's 1,281,167 by default) without a
download: :class:`SyntheticImages` keeps a small bank of JPEG files (encoded once, on first
use; its size does not depend on ``N``) and reads example ``i`` by *decoding* a JPEG from it
with :func:`keras_hardneg.data.decode.decode_image`, the library's one decoder, so the cost
of a read is the cost of decoding a real JPEG of ``stored_size`` pixels (plus a resize when
``image_size`` differs). Nothing proportional to ``N`` is ever allocated.

Content of example ``i`` (``g = offset + i``, the global index; deterministic, the same in
every process):

* label ``g mod num_classes``;
* the bank's JPEG number ``label mod num_bases`` (so examples of a class share a base image
  when ``num_classes <= num_bases``: the classes are learnable, a kNN scores above chance);
* the decoded base, rolled ``v mod W`` pixels to the right and flipped upside down when
  ``(v // W)`` is odd, with ``v = g // num_classes`` the example's number within its class.

A bank image is a smooth random colour field (a ``4 x 4`` random image upsampled bilinearly)
plus uniform noise of amplitude ``noise`` (JPEG has real detail to decode), seeded by
``(seed, base)``.

Example:
>>> source = SyntheticImages(1_281_167, image_size=16)
>>> image, label = source[1_000_003]
>>> image.shape, image.dtype.name, int(label)
((16, 16, 3), 'uint8', 3)
>>> bool((source[5][0] == SyntheticImages(10, image_size=16)[5][0]).all())
True
"""

from __future__ import annotations

import io
import numbers
import threading

import numpy as np

from keras_hardneg.data.decode import decode_image
from keras_hardneg.data.random_access import RandomAccessImages

__all__ = ["SyntheticImages", "IMAGENET_TRAIN_SIZE"]

#: Images in ImageNet-1k's training set (ILSVRC-2012), the default ``N``.
IMAGENET_TRAIN_SIZE = 1_281_167


def _positive_int(value, name, low=1):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"`{name}` must be an integer >= {low}; got {value!r}.")
    return int(value)


class SyntheticImages(RandomAccessImages):
    """``num_images`` synthetic JPEG images, read by index (see the module docstring).

    Args:
        num_images: ``N >= 1``.
        image_size: side of the images a read returns (``>= 8``).
        stored_size: side of the stored JPEGs (default ``image_size``); a different size is
            resized on every read (Pillow bilinear, antialiased), as a real dataset's reader
            does.
        num_classes: labels are ``index mod num_classes``.
        seed: seed of the bank's images.
        quality: JPEG quality of the bank (1..95).
        num_bases: JPEGs in the bank (default ``min(num_classes, 1000)``).
        offset: global index of example 0 (a test split is ``offset=N_train``: other
            images, same classes).
        noise: amplitude of the per-pixel noise in the bank images (0..255).
    """

    def __init__(self, num_images: int = IMAGENET_TRAIN_SIZE, image_size: int = 64, *,
                 stored_size: int | None = None, num_classes: int = 1000, seed: int = 0,
                 quality: int = 90, num_bases: int | None = None, offset: int = 0,
                 noise: int = 24):
        self.num_images = _positive_int(num_images, "num_images")
        self.image_size = _positive_int(image_size, "image_size", 8)
        self.stored_size = _positive_int(stored_size if stored_size is not None else image_size,
                                         "stored_size", 8)
        self.num_classes = _positive_int(num_classes, "num_classes")
        self.quality = _positive_int(quality, "quality")
        if self.quality > 95:
            raise ValueError(f"`quality` must be in 1..95; got {quality!r}.")
        self.num_bases = _positive_int(num_bases if num_bases is not None
                                       else min(self.num_classes, 1000), "num_bases")
        self.offset = _positive_int(offset, "offset", 0)
        self.seed = _positive_int(seed, "seed", 0)
        self.noise = _positive_int(noise, "noise", 0)
        self.image_shape = (self.image_size, self.image_size, 3)
        self._bank: list[bytes | None] = [None] * self.num_bases
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self.num_images

    def label(self, index: int) -> int:
        return (self.offset + int(index)) % self.num_classes

    def jpeg(self, index: int) -> bytes:
        """The JPEG file that example ``index`` decodes (shared by its class)."""
        return self._base(self.label(index) % self.num_bases)

    def prepare(self) -> "SyntheticImages":
        """Encodes the whole JPEG bank now (else each JPEG is encoded at its first read);
        returns ``self``."""
        for b in range(self.num_bases):
            self._base(b)
        return self

    def _base(self, b: int) -> bytes:
        data = self._bank[b]
        if data is None:
            with self._lock:
                data = self._bank[b]
                if data is None:
                    data = self._bank[b] = self._encode(b)
        return data

    def _encode(self, b: int) -> bytes:
        from PIL import Image

        rng = np.random.default_rng([self.seed, b])
        s = self.stored_size
        coarse = Image.fromarray(rng.integers(0, 256, (4, 4, 3), dtype=np.uint8), mode="RGB")
        field = np.asarray(coarse.resize((s, s), resample=Image.Resampling.BILINEAR),
                           dtype=np.int16)
        if self.noise:
            field = field + rng.integers(-self.noise, self.noise + 1, field.shape,
                                         dtype=np.int16)
        pixels = np.clip(field, 0, 255).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(pixels, mode="RGB").save(buf, format="JPEG", quality=self.quality)
        return buf.getvalue()

    def load(self, index: int) -> np.ndarray:
        image = decode_image(self.jpeg(index), self.image_size)
        v = (self.offset + int(index)) // self.num_classes
        width = image.shape[1]
        shift = v % width
        if shift:
            image = np.roll(image, shift, axis=1)
        if (v // width) % 2:
            image = image[::-1]
        return np.ascontiguousarray(image)

    def __repr__(self) -> str:
        return (f"SyntheticImages({self.num_images} images of {self.image_shape}, JPEG "
                f"{self.stored_size}px q{self.quality}, {self.num_classes} classes, "
                f"offset {self.offset})")
