"""Input normalisation and output casting layers shared by every encoder.

Every encoder in :mod:`keras_hardneg.encoders` takes images ``[B, H, W, 3]``
with float values in ``[0, 1]`` and normalises them itself with
:class:`ImageNormalization` (per-channel ``(x - mean) / std``, by default the
ImageNet statistics used by SimCLR/MoCo reference code), so that datasets and
augmentation pipelines only ever deal with ``[0, 1]`` images.

Example:

>>> import numpy as np
>>> layer = ImageNormalization()
>>> y = layer(np.full((1, 8, 8, 3), 0.5, "float32"))
>>> tuple(y.shape)
(1, 8, 8, 3)
"""

import keras
from keras import ops

__all__ = ["ImageNormalization", "IMAGENET_MEAN", "IMAGENET_STD", "CIFAR10_MEAN", "CIFAR10_STD",
           "resolve_normalization"]

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
    """Per-channel ``(x - mean) / std`` for ``[B, H, W, 3]`` images in ``[0, 1]``.

    Args:
        mean: 3 per-channel means (default: ImageNet).
        std: 3 per-channel standard deviations (default: ImageNet).

    Shapes: ``[..., 3] -> [..., 3]`` in the layer's compute dtype.
    """

    def __init__(self, mean=IMAGENET_MEAN, std=IMAGENET_STD, **kwargs):
        super().__init__(**kwargs)
        self.mean, self.std = resolve_normalization((mean, std))

    def call(self, inputs):
        x = ops.cast(inputs, self.compute_dtype)
        mean = ops.cast(ops.convert_to_tensor(self.mean), self.compute_dtype)
        inv_std = ops.cast(ops.convert_to_tensor([1.0 / s for s in self.std]),
                           self.compute_dtype)
        return (x - mean) * inv_std

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"mean": list(self.mean), "std": list(self.std)})
        return config
