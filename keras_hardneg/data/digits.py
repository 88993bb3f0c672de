"""The library's embedded default dataset: scikit-learn's 8x8 handwritten digits.

It ships inside scikit-learn (1,797 images, 10 classes), so it needs no download and
suits smoke tests, tutorials and the ``tune --dataset digits`` command.
"""

from __future__ import annotations

import numpy as np

from keras_hardneg.data._checks import check_image_size
from keras_hardneg.data.decode import resize_float_images

__all__ = ["load_digits"]


def load_digits(test_fraction: float = 0.2, seed: int = 0, image_size: int | None = None
                ) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """Loads scikit-learn's digits as RGB images in ``[0, 1]``, split into train and test.

    The 16-level grey images are scaled to ``[0, 1]`` (``pixel / 16``) and replicated to
    three channels. The split is stratified by class and deterministic given ``seed``.

    Args:
        test_fraction: fraction of the 1,797 images held out, in ``(0, 1)``.
        seed: integer seed of the split.
        image_size: ``None`` keeps ``8x8``; an int or ``(height, width)`` resizes
            (bilinear, with antialiasing) with Pillow
            (:func:`keras_hardneg.data.decode.resize_float_images`; no TensorFlow).

    Returns:
        ``(x_train, y_train), (x_test, y_test)``: images float32 ``[n, H, W, 3]`` in
        ``[0, 1]`` and labels int64 ``[n]`` in ``0..9``.

    Example:
        >>> (x, y), (xt, yt) = load_digits(test_fraction=0.2, seed=0)
        >>> x.shape, x.dtype, y.dtype
        ((1437, 8, 8, 3), dtype('float32'), dtype('int64'))
    """
    from sklearn.datasets import load_digits as sk_load_digits
    from sklearn.model_selection import train_test_split

    if isinstance(test_fraction, bool) or not isinstance(test_fraction, (int, float)) or not (
        0.0 < float(test_fraction) < 1.0
    ):
        raise ValueError(f"`test_fraction` must be a number in (0, 1); got {test_fraction!r}.")
    size = check_image_size(image_size, allow_none=True)

    bunch = sk_load_digits()
    images = (bunch.images.astype(np.float32) / 16.0)[..., None]
    images = np.repeat(images, 3, axis=-1)
    labels = bunch.target.astype(np.int64)
    if size is not None and size != images.shape[1:3]:
        images = resize_float_images(images, size)

    x_train, x_test, y_train, y_test = train_test_split(
        images, labels, test_size=float(test_fraction), random_state=seed, stratify=labels
    )
    return (x_train, y_train), (x_test, y_test)
