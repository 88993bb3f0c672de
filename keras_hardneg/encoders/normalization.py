"""Input normalisation and output casting layers shared by every encoder.

Every encoder in :mod:`keras_hardneg.encoders` takes images ``[B, H, W, 3]`` and normalises
them itself with :class:`ImageNormalization` (per-channel ``(x - mean) / std``, by default
the ImageNet statistics used by SimCLR/MoCo reference code), so that datasets and
augmentation pipelines only ever deal with ``[0, 1]`` images.

The input contract (``input_range``, default ``"auto"``): RGB images as float in ``[0, 1]``
(what the augmentations produce), or raw 0-255 pixels as Keras's loaders give them
(``keras.utils.image_dataset_from_directory``: float32 0-255; ``uint8`` arrays): an integer
dtype is always 0-255, and a float image whose largest value exceeds
:data:`PIXEL_THRESHOLD` (2.0) is read as 0-255; both are divided by 255 inside, so they give
the features of the same images in ``[0, 1]``. Images in ``[0, 1]`` pass unchanged. Only a
0-255 image that is black to the eye (no value above 2 of 255) is read as ``[0, 1]``.
``input_range="unit"`` (float ``[0, 1]`` only, no check) and ``"pixels"`` (always 0-255, as
``keras.applications``) fix the range instead. Images must have 3 channels: a grayscale
``[B, H, W, 1]`` is refused (it would broadcast against the 3 means silently).

Example:

>>> import numpy as np
>>> layer = ImageNormalization()
>>> y = layer(np.full((1, 8, 8, 3), 0.5, "float32"))
>>> tuple(y.shape)
(1, 8, 8, 3)
>>> z = layer(np.full((1, 8, 8, 3), 127.5, "float32"))     # 0-255 pixels: the same
>>> bool(np.allclose(np.asarray(y), np.asarray(z)))
True
"""

from __future__ import annotations

from typing import Any, Sequence

import keras
from keras import ops

__all__ = ["ImageNormalization", "IMAGENET_MEAN", "IMAGENET_STD", "CIFAR10_MEAN", "CIFAR10_STD",
           "resolve_normalization", "INPUT_RANGES", "PIXEL_THRESHOLD", "input_contract"]

#: What :class:`ImageNormalization` accepts (see the module docstring).
INPUT_RANGES = ("auto", "unit", "pixels")
#: ``input_range="auto"``: a float image whose largest value exceeds this is 0-255 pixels.
PIXEL_THRESHOLD = 2.0

_CONTRACTS = {
    "auto": ("RGB images [B, H, W, 3]: float in [0, 1], or 0-255 pixels (uint8, or float as "
             "keras.utils.image_dataset_from_directory gives them: an image whose largest "
             "value exceeds 2 is read as 0-255), divided by 255 inside; normalization is "
             "done inside the encoder."),
    "unit": ("RGB images [B, H, W, 3] as float in [0, 1] (uint8 is divided by 255 inside; "
             "float 0-255 is not checked); normalization is done inside the encoder."),
    "pixels": ("RGB images [B, H, W, 3] as 0-255 pixels (uint8 or float), divided by 255 "
               "inside; normalization is done inside the encoder."),
}


def input_contract(input_range: str = "auto") -> str:
    """One sentence saying what images an encoder whose :class:`ImageNormalization` has
    ``input_range`` takes (model cards and ``zoo show`` print it)."""
    return _CONTRACTS[_check_input_range(input_range)]


def _check_input_range(input_range):
    if input_range not in INPUT_RANGES:
        raise ValueError(f"`input_range` must be one of {list(INPUT_RANGES)} ('auto': [0, 1] "
                         f"floats or 0-255 pixels, told apart per image); got {input_range!r}.")
    return input_range

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2470, 0.2435, 0.2616)

_PRESETS = {
    "imagenet": (IMAGENET_MEAN, IMAGENET_STD),
    "cifar10": (CIFAR10_MEAN, CIFAR10_STD),
    "none": ((0.0, 0.0, 0.0), (1.0, 1.0, 1.0)),
}


def resolve_normalization(normalization):
    """Map ``"imagenet" | "cifar10" | "none" | None | (mean, std)`` to ``(mean, std)``."""
    if normalization is None:
        normalization = "none"
    if isinstance(normalization, str):
        key = normalization.lower()
        if key not in _PRESETS:
            raise ValueError(
                f"normalization must be one of {sorted(_PRESETS)} or a (mean, std) pair, "
                f"got {normalization!r}")
        return _PRESETS[key]
    try:
        mean, std = normalization
        mean, std = tuple(float(m) for m in mean), tuple(float(s) for s in std)
    except (TypeError, ValueError):
        raise ValueError(
            f"normalization must be a preset name or a (mean, std) pair of 3-tuples, "
            f"got {normalization!r}") from None
    if len(mean) != 3 or len(std) != 3 or min(std) <= 0:
        raise ValueError(f"normalization (mean, std) must be two 3-tuples with std > 0, "
                         f"got {normalization!r}")
    return mean, std


@keras.saving.register_keras_serializable(package="keras_hardneg")
class ImageNormalization(keras.layers.Layer):
    """Per-channel ``(x - mean) / std`` for RGB images ``[B, H, W, 3]``, read in the range
    ``input_range`` says (see the module docstring).

    Args:
        mean: 3 per-channel means (default: ImageNet), of images in ``[0, 1]``.
        std: 3 per-channel standard deviations (default: ImageNet).
        input_range: ``"auto"`` (default; also what configs saved before the option load
            with): float ``[0, 1]``, or 0-255 pixels (an integer dtype, or a float image
            whose largest value exceeds :data:`PIXEL_THRESHOLD`) divided by 255;
            ``"unit"``: float ``[0, 1]`` as given (integer dtypes divided by 255);
            ``"pixels"``: always divided by 255.

    Shapes: ``[..., H, W, 3] -> [..., H, W, 3]`` in the layer's compute dtype; any other
    number of channels raises ``ValueError``. Images in ``[0, 1]`` give bit-identical
    outputs in every mode but ``"pixels"``.

    Example: ``ImageNormalization(input_range="pixels")(uint8_images)``.
    """

    def __init__(self, mean: Sequence[float] = IMAGENET_MEAN, std: Sequence[float] = IMAGENET_STD,
                 input_range: str = "auto", **kwargs: Any):
        super().__init__(**kwargs)
        self.mean, self.std = resolve_normalization((mean, std))
        self.input_range = _check_input_range(input_range)

    def _check_channels(self, shape):
        shape = tuple(shape)
        if len(shape) < 2 or shape[-1] not in (3, None):
            raise ValueError(
                f"{self.name}: images must be RGB [B, H, W, 3]; got shape {shape}. A "
                "grayscale image [B, H, W, 1]: repeat its channel "
                "(keras.ops.repeat(x, 3, axis=-1)); RGBA: drop the alpha channel.")

    def build(self, input_shape):
        self._check_channels(input_shape)
        super().build(input_shape)

    def call(self, inputs):
        self._check_channels(inputs.shape)
        dtype = keras.backend.standardize_dtype(getattr(inputs, "dtype", "float32"))
        x = ops.cast(inputs, self.compute_dtype)
        if "int" in dtype or self.input_range == "pixels":
            x = ops.divide(x, ops.cast(255.0, self.compute_dtype))
        elif self.input_range == "auto":
            rank = len(x.shape)
            axes = tuple(range(1, rank)) if rank > 3 else None  # per image (or the one)
            peak = ops.max(x, axis=axes, keepdims=True)
            x = ops.where(peak > PIXEL_THRESHOLD,
                          ops.divide(x, ops.cast(255.0, self.compute_dtype)), x)
        mean = ops.cast(ops.convert_to_tensor(self.mean), self.compute_dtype)
        inv_std = ops.cast(ops.convert_to_tensor([1.0 / s for s in self.std]),
                           self.compute_dtype)
        return (x - mean) * inv_std

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"mean": list(self.mean), "std": list(self.std),
                       "input_range": self.input_range})
        return config
