"""ResNet options for PyTorch alignment: ``padding="symmetric"`` and ``conv_init``.

The convolution is checked against a NumPy transcription of the sum it must compute; the
initialisers against the standard deviations He et al. (2015) give for each fan."""

import keras
import numpy as np
import pytest

from keras_hardneg.encoders import resnet18_cifar
from keras_hardneg.encoders.resnet import conv


def _numpy_conv(x, kernel, stride, pad_before, pad_after):
    """``[H, W, Cin]`` * ``[k, k, Cin, Cout]`` -> ``[H', W', Cout]``, zero padding."""
    k = kernel.shape[0]
    xp = np.pad(x, ((pad_before, pad_after), (pad_before, pad_after), (0, 0)))
    out_h = (xp.shape[0] - k) // stride + 1
    out_w = (xp.shape[1] - k) // stride + 1
    out = np.zeros((out_h, out_w, kernel.shape[-1]))
    for i in range(out_h):
        for j in range(out_w):
            patch = xp[i * stride:i * stride + k, j * stride:j * stride + k]
            out[i, j] = np.tensordot(patch, kernel, axes=3)
    return out


@pytest.mark.parametrize("size", [6, 7])
@pytest.mark.parametrize("padding, before, after", [("symmetric", 1, 1), ("same", 0, 1)])
def test_strided_conv_padding_matches_numpy(size, padding, before, after):
    x = np.random.default_rng(0).normal(size=(1, size, size, 2)).astype("float32")
    layer = conv(3, 3, 2, "c", padding=padding)
    y = keras.ops.convert_to_numpy(layer(x))[0]
    if padding == "same" and size % 2:  # Keras pads odd sizes on both sides
        before = after = 1
    kernel = keras.ops.convert_to_numpy(getattr(layer, "conv", layer).kernel)
    ref = _numpy_conv(x[0], kernel, 2, before, after)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)


def test_symmetric_padding_centres_the_3x3_path_on_the_shortcut_sample():
    """An impulse at pixel (0, 0): the symmetric 3x3/2 output (0, 0) is centred on it (as
    the 1x1/2 shortcut's sample), Keras's "same" sees it only at a corner tap."""
    x = np.zeros((1, 8, 8, 1), "float32")
    x[0, 0, 0, 0] = 1.0
    for padding, tap in (("symmetric", (1, 1)), ("same", (0, 0))):
        layer = conv(1, 3, 2, f"c_{padding}", padding=padding)
        y = keras.ops.convert_to_numpy(layer(x))[0, 0, 0, 0]
        kernel = keras.ops.convert_to_numpy(getattr(layer, "conv", layer).kernel)[:, :, 0, 0]
        assert y == pytest.approx(kernel[tap])


def test_symmetric_encoder_shapes_and_same_parameters():
    a = resnet18_cifar(width=2, padding="symmetric")
    b = resnet18_cifar(width=2)
    x = np.random.default_rng(0).random((2, 32, 32, 3)).astype("float32")
    assert tuple(a(x).shape) == (2, 16)
    assert a.count_params() == b.count_params()
    assert a.get_layer("stage2_block1_conv1").padding == "valid"
    assert a.get_layer("stage2_block1_conv2").padding == "same"     # stride 1: symmetric


@pytest.mark.parametrize("conv_init, fan_channels, truncated", [
    ("he_normal_fan_in", 64, True), ("he_normal_fan_out", 16, False)])
def test_conv_init_standard_deviation(conv_init, fan_channels, truncated):
    keras.utils.set_random_seed(0)
    layer = conv(16, 3, 1, "c", conv_init=conv_init)
    layer.build((None, 8, 8, 64))                         # C_in 64, C_out 16
    w = keras.ops.convert_to_numpy(layer.kernel)
    expected = np.sqrt(2.0 / (9 * fan_channels))
    assert w.std() == pytest.approx(expected, rel=0.05)
    # Keras's truncated normal stops at 2 standard deviations of its underlying normal.
    assert (np.abs(w).max() < 2.3 * expected) == truncated


@pytest.mark.parametrize("key, value", [("padding", "valid"), ("conv_init", "torch")])
def test_bad_options_are_one_line_errors(key, value):
    with pytest.raises(ValueError, match=f"^{key} must be one of"):
        resnet18_cifar(width=2, **{key: value})


def test_options_survive_save_and_load(tmp_path):
    enc = resnet18_cifar(width=2, padding="symmetric", conv_init="he_normal_fan_out")
    path = str(tmp_path / "enc.keras")
    enc.save(path)
    again = keras.models.load_model(path)
    x = np.random.default_rng(1).random((2, 32, 32, 3)).astype("float32")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(again(x)),
                               keras.ops.convert_to_numpy(enc(x)), rtol=1e-5, atol=1e-6)
