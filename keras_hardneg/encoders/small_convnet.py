"""A small conv-BN-ReLU encoder for quick runs, tests and tiny inputs (8x8 digits).

Three blocks ``conv3x3(c) - BN - ReLU`` with channels ``width * (1, 2, 4)``; the
second and third blocks have stride 2 (an 8x8 input ends at 2x2), then global
average pooling. ``F = 4 * width``. Same contract as the ResNets
(SimCLR-style encoder, Chen et al. 2020): images ``[B, H, W, 3]`` in ``[0, 1]``,
normalised inside the model, float32 features ``[B, F]`` under any
mixed-precision policy.

Example:

>>> import numpy as np
>>> enc = small_convnet(input_shape=(8, 8, 3), width=8)
>>> enc(np.zeros((2, 8, 8, 3), "float32")).shape
TensorShape([2, 32])
"""

from __future__ import annotations

import keras

from keras_hardneg.encoders.normalization import ImageNormalization, resolve_normalization
from keras_hardneg.encoders.resnet import (WIDTH, _check_input_shape, _check_width, _head, batch_norm,
                                           conv)
from keras_hardneg.registry import ENCODERS

__all__ = ["small_convnet"]


@ENCODERS.register("small_convnet", params={"width": WIDTH}, modality="image")
def small_convnet(input_shape: tuple = (32, 32, 3), width: int = 32,
                  name: str = "small_convnet", normalization: str | tuple = "imagenet",
                  sync_batchnorm: bool = False) -> keras.Model:
    """Small encoder: 3 conv-BN-ReLU blocks (strides 1, 2, 2) + global average pooling.

    Args:
        input_shape: ``(H, W, 3)``; ``H, W >= 4`` or ``None``.
        width: channels of the first block (blocks have ``width * (1, 2, 4)``).
        name: model name.
        normalization: ``"imagenet"`` (default), ``"cifar10"``, ``"none"`` or ``(mean, std)``.
        sync_batchnorm: synchronized BatchNormalization across replicas.

    Returns:
        ``keras.Model``: ``[B, H, W, 3]`` -> ``[B, 4 * width]`` float32.
    """
    _check_width(width)
    input_shape = _check_input_shape(input_shape, 4)
    mean, std = resolve_normalization(normalization)
    inputs = keras.Input(shape=input_shape, name="images")
    x = ImageNormalization(mean, std, name="normalize")(inputs)
    for i, (mult, stride) in enumerate(zip((1, 2, 4), (1, 2, 2)), start=1):
        x = conv(width * mult, 3, stride, f"block{i}_conv")(x)
        x = batch_norm(f"block{i}_bn", sync_batchnorm)(x)
        x = keras.layers.ReLU(name=f"block{i}_relu")(x)
    return keras.Model(inputs, _head(x), name=name)
