"""ResNet encoders (He et al. 2016, "Deep Residual Learning for Image Recognition").

Two variants, both functional :class:`keras.Model` s mapping images
``[B, H, W, 3]`` (float, values in ``[0, 1]``) to features ``[B, F]`` (float32):

* :func:`resnet18_cifar` -- the CIFAR variant used by SimCLR (Chen et al. 2020,
  appendix B.9) and most contrastive-learning papers on 32x32 images: a 3x3
  stride-1 stem convolution, **no** max-pool, 4 stages of 2 BasicBlocks of widths
  ``width * (1, 2, 4, 8)`` (strides 1, 2, 2, 2), global average pooling.
  ``F = 8 * width`` (512 at the default width 64).
* :func:`resnet50` -- the ImageNet ResNet-50 (7x7/2 stem conv + 3x3/2 max-pool,
  bottleneck blocks 3-4-6-3, stride on the 3x3 conv, i.e. "v1.5").
  ``F = 32 * width`` (2048 at width 64).

Input normalisation: the first layer is
:class:`~keras_hardneg.encoders.normalization.ImageNormalization`, by default
``(x - ImageNet mean) / ImageNet std``; choose ``normalization="cifar10"``,
``"none"`` or ``(mean, std)``.

Mixed precision: layers follow the global :mod:`keras.mixed_precision` policy
(e.g. ``mixed_bfloat16``); the last layer casts features to float32.

Example:

>>> import numpy as np
>>> enc = resnet18_cifar(width=4, input_shape=(8, 8, 3))
>>> enc(np.zeros((2, 8, 8, 3), "float32")).shape
TensorShape([2, 32])
"""

from __future__ import annotations

import keras

from keras_hardneg.encoders.batch_norm import FusedBatchNormalization
from keras_hardneg.encoders.normalization import ImageNormalization, resolve_normalization
from keras_hardneg.registry import ENCODERS, Param

__all__ = ["resnet18_cifar", "resnet50"]

_BN_MOMENTUM = 0.9   # SimCLR / PyTorch (momentum 0.1) convention
_BN_EPSILON = 1e-5


#: The ``width`` config key of the registered encoders.
WIDTH = Param(int, low=1, help="channel width multiplier of the first stage")

#: ``conv_init``: how convolution kernels are drawn (He et al. 2015, std ``sqrt(2 / fan)``).
CONV_INITS = {
    # Keras's "he_normal": truncated normal, fan = kh * kw * C_in.
    "he_normal_fan_in": "he_normal",
    # torchvision's ResNet (kaiming_normal_, mode "fan_out", relu): untruncated normal,
    # fan = kh * kw * C_out. Smaller stem and down-sampling kernels than fan-in.
    "he_normal_fan_out": {"class_name": "VarianceScaling",
                          "config": {"scale": 2.0, "mode": "fan_out",
                                     "distribution": "untruncated_normal"}},
}
#: ``padding`` of the strided convolutions: Keras's ``"same"`` pads a stride-2 3x3
#: convolution on the bottom/right only (its window is centred one pixel off the 1x1
#: shortcut's sample); ``"symmetric"`` pads ``(k - 1) // 2`` on every side, as PyTorch's
#: ``padding=k // 2`` (both paths of a down-sampling block see the same pixel centres).
PADDINGS = ("same", "symmetric")
_ENCODER_PARAMS = {
    "width": WIDTH,
    "conv_init": Param(str, choices=tuple(CONV_INITS),
                       help="convolution kernels: he_normal_fan_in (Keras) or "
                            "he_normal_fan_out (torchvision's ResNet)"),
    "padding": Param(str, choices=PADDINGS,
                     help="strided convolutions: same (Keras) or symmetric (PyTorch)"),
}

def _check_width(width):
    if isinstance(width, bool) or not isinstance(width, int) or width < 1:
        raise ValueError(f"width must be a positive int, got {width!r}")


def _check_input_shape(input_shape, min_size):
    try:
        shape = tuple(input_shape)
    except TypeError:
        raise ValueError(f"input_shape must be (H, W, 3), got {input_shape!r}") from None
    if len(shape) != 3 or shape[-1] != 3:
        raise ValueError(f"input_shape must be (H, W, 3), got {input_shape!r}")
    for dim in shape[:2]:
        if dim is not None and dim < min_size:
            raise ValueError(
                f"input_shape spatial size must be >= {min_size} (or None), got {input_shape!r}")
    return shape


def batch_norm(name, sync_batchnorm=False, **kwargs):
    """BatchNormalization with the SimCLR constants; ``synchronized`` across replicas if asked
    (one fused kernel on TensorFlow: :class:`FusedBatchNormalization`)."""
    return FusedBatchNormalization(
        momentum=_BN_MOMENTUM, epsilon=_BN_EPSILON, synchronized=bool(sync_batchnorm),
        name=name, **kwargs)


def _check_choice(value, choices, what):
    if value not in choices:
        raise ValueError(f"{what} must be one of {list(choices)}, got {value!r}")
    return value


def conv(filters, kernel_size, strides, name, conv_init="he_normal_fan_in", padding="same"):
    """``x -> Conv2D(x)`` without bias. With ``padding="symmetric"`` a strided convolution
    is ``ZeroPadding2D((k - 1) // 2)`` then a ``"valid"`` convolution (PyTorch's
    alignment; the returned callable's ``conv`` is the Conv2D layer); a stride-1 ``"same"``
    convolution of odd size is symmetric already."""
    layer = keras.layers.Conv2D(
        filters, kernel_size, strides=strides, use_bias=False,
        padding="valid" if padding == "symmetric" and strides != 1 else "same",
        kernel_initializer=keras.initializers.get(CONV_INITS[conv_init]), name=name)
    if layer.padding == "same" or kernel_size == 1:
        return layer
    pad = keras.layers.ZeroPadding2D((kernel_size - 1) // 2, name=f"{name}_pad")

    def padded(x):
        return layer(pad(x))

    padded.conv = layer  # the convolution itself (its kernel)
    return padded


def _basic_block(x, filters, strides, prefix, sync_batchnorm, **conv_args):
    shortcut = x
    y = conv(filters, 3, strides, f"{prefix}_conv1", **conv_args)(x)
    y = batch_norm(f"{prefix}_bn1", sync_batchnorm)(y)
    y = keras.layers.ReLU(name=f"{prefix}_relu1")(y)
    y = conv(filters, 3, 1, f"{prefix}_conv2", **conv_args)(y)
    y = batch_norm(f"{prefix}_bn2", sync_batchnorm)(y)
    if strides != 1 or x.shape[-1] != filters:
        shortcut = conv(filters, 1, strides, f"{prefix}_proj", **conv_args)(x)
        shortcut = batch_norm(f"{prefix}_proj_bn", sync_batchnorm)(shortcut)
    y = keras.layers.Add(name=f"{prefix}_add")([y, shortcut])
    return keras.layers.ReLU(name=f"{prefix}_out")(y)


def _bottleneck_block(x, filters, strides, prefix, sync_batchnorm, expansion=4, **conv_args):
    out_filters = filters * expansion
    shortcut = x
    y = conv(filters, 1, 1, f"{prefix}_conv1", **conv_args)(x)
    y = batch_norm(f"{prefix}_bn1", sync_batchnorm)(y)
    y = keras.layers.ReLU(name=f"{prefix}_relu1")(y)
    y = conv(filters, 3, strides, f"{prefix}_conv2", **conv_args)(y)
    y = batch_norm(f"{prefix}_bn2", sync_batchnorm)(y)
    y = keras.layers.ReLU(name=f"{prefix}_relu2")(y)
    y = conv(out_filters, 1, 1, f"{prefix}_conv3", **conv_args)(y)
    y = batch_norm(f"{prefix}_bn3", sync_batchnorm)(y)
    if strides != 1 or x.shape[-1] != out_filters:
        shortcut = conv(out_filters, 1, strides, f"{prefix}_proj", **conv_args)(x)
        shortcut = batch_norm(f"{prefix}_proj_bn", sync_batchnorm)(shortcut)
    y = keras.layers.Add(name=f"{prefix}_add")([y, shortcut])
    return keras.layers.ReLU(name=f"{prefix}_out")(y)


def _head(x):
    x = keras.layers.GlobalAveragePooling2D(name="avg_pool")(x)
    # Final cast: float32 features whatever the mixed-precision policy.
    return keras.layers.Activation("linear", dtype="float32", name="features")(x)


@ENCODERS.register("resnet18_cifar", params=_ENCODER_PARAMS, modality="image")
def resnet18_cifar(width: int = 64, input_shape: tuple = (32, 32, 3),
                   name: str = "resnet18_cifar", normalization: str | tuple = "imagenet",
                   sync_batchnorm: bool = False, conv_init: str = "he_normal_fan_in",
                   padding: str = "same") -> keras.Model:
    """ResNet-18, CIFAR variant (SimCLR, Chen et al. 2020, appendix B.9).

    Args:
        width: channels of the first stage; stages have ``width * (1, 2, 4, 8)``.
        input_shape: ``(H, W, 3)``; ``H, W >= 8`` or ``None`` (any size).
        name: model name.
        normalization: ``"imagenet"`` (default), ``"cifar10"``, ``"none"`` or ``(mean, std)``;
            applied inside the model to the ``[0, 1]`` input.
        sync_batchnorm: use ``BatchNormalization(synchronized=True)`` so batch statistics are
            reduced across replicas under ``tf.distribute``.
        conv_init: ``"he_normal_fan_in"`` (default; Keras's ``he_normal``) or
            ``"he_normal_fan_out"`` (torchvision's ResNet initialisation).
        padding: ``"same"`` (default; Keras) or ``"symmetric"`` (PyTorch's alignment of
            the stride-2 convolutions, see :data:`PADDINGS`).

    Returns:
        ``keras.Model``: ``[B, H, W, 3]`` in ``[0, 1]`` -> ``[B, 8 * width]`` float32.

    Raises:
        ValueError: ``width < 1`` or ``input_shape`` not ``(H>=8, W>=8, 3)``.

    Example:

    >>> import numpy as np
    >>> enc = resnet18_cifar(width=4)
    >>> enc(np.random.rand(2, 32, 32, 3).astype("float32")).shape
    TensorShape([2, 32])
    """
    _check_width(width)
    input_shape = _check_input_shape(input_shape, 8)
    conv_args = {"conv_init": _check_choice(conv_init, CONV_INITS, "conv_init"),
                 "padding": _check_choice(padding, PADDINGS, "padding")}
    mean, std = resolve_normalization(normalization)
    inputs = keras.Input(shape=input_shape, name="images")
    x = ImageNormalization(mean, std, name="normalize")(inputs)
    x = conv(width, 3, 1, "stem_conv", **conv_args)(x)
    x = batch_norm("stem_bn", sync_batchnorm)(x)
    x = keras.layers.ReLU(name="stem_relu")(x)
    for stage, (mult, stride) in enumerate(zip((1, 2, 4, 8), (1, 2, 2, 2)), start=1):
        for block in range(2):
            x = _basic_block(x, width * mult, stride if block == 0 else 1,
                             f"stage{stage}_block{block + 1}", sync_batchnorm, **conv_args)
    return keras.Model(inputs, _head(x), name=name)


@ENCODERS.register("resnet50", params={"width": WIDTH}, modality="image")
def resnet50(input_shape: tuple = (224, 224, 3), width: int = 64, name: str = "resnet50",
             normalization: str | tuple = "imagenet", sync_batchnorm: bool = False
             ) -> keras.Model:
    """ResNet-50 with the ImageNet stem (He et al. 2016), as used by SimCLR and MoCo.

    7x7/2 stem convolution, 3x3/2 max-pool, bottleneck blocks 3-4-6-3 with inner widths
    ``width * (1, 2, 4, 8)`` and expansion 4 (stride on the 3x3 convolution), global
    average pooling.

    Args:
        input_shape: ``(H, W, 3)``; ``H, W >= 32`` or ``None``.
        width: inner width of the first stage (64 = standard ResNet-50).
        name: model name.
        normalization: see :func:`resnet18_cifar`.
        sync_batchnorm: see :func:`resnet18_cifar`.

    Returns:
        ``keras.Model``: ``[B, H, W, 3]`` in ``[0, 1]`` -> ``[B, 32 * width]`` float32
        (2048 at width 64).

    Example:

    >>> import numpy as np
    >>> enc = resnet50(input_shape=(32, 32, 3), width=2)
    >>> enc(np.zeros((1, 32, 32, 3), "float32")).shape
    TensorShape([1, 64])
    """
    _check_width(width)
    input_shape = _check_input_shape(input_shape, 32)
    mean, std = resolve_normalization(normalization)
    inputs = keras.Input(shape=input_shape, name="images")
    x = ImageNormalization(mean, std, name="normalize")(inputs)
    x = conv(width, 7, 2, "stem_conv")(x)
    x = batch_norm("stem_bn", sync_batchnorm)(x)
    x = keras.layers.ReLU(name="stem_relu")(x)
    x = keras.layers.MaxPooling2D(3, strides=2, padding="same", name="stem_pool")(x)
    for stage, (mult, blocks, stride) in enumerate(
            zip((1, 2, 4, 8), (3, 4, 6, 3), (1, 2, 2, 2)), start=1):
        for block in range(blocks):
            x = _bottleneck_block(x, width * mult, stride if block == 0 else 1,
                                  f"stage{stage}_block{block + 1}", sync_batchnorm)
    return keras.Model(inputs, _head(x), name=name)
