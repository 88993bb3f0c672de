"""Encoders: shapes, any input size, mixed precision, serialization, argument checks."""

import keras
import numpy as np
import pytest

from keras_hardneg.encoders import ImageNormalization, resnet18_cifar, resnet50, small_convnet


@pytest.fixture
def policy():
    old = keras.mixed_precision.global_policy()
    yield keras.mixed_precision.set_global_policy
    keras.mixed_precision.set_global_policy(old)


def _images(b, h, w=None, seed=0):
    return np.random.default_rng(seed).random((b, h, w or h, 3)).astype("float32")


@pytest.mark.parametrize("size", [8, 13, 32])
def test_resnet18_cifar_shapes(size):
    enc = resnet18_cifar(width=2, input_shape=(size, size, 3))
    out = enc(_images(3, size))
    assert tuple(out.shape) == (3, 16) and out.dtype == "float32"
    assert np.all(np.isfinite(out))


def test_resnet18_cifar_dynamic_size_and_structure():
    enc = resnet18_cifar(width=2, input_shape=(None, None, 3))
    assert tuple(enc(_images(2, 9, 11)).shape) == (2, 16)
    assert tuple(enc(_images(2, 40)).shape) == (2, 16)
    names = [l.name for l in enc.layers]
    assert "stem_conv" in names and not any("pool" in n and n != "avg_pool" for n in names)
    assert enc.get_layer("stem_conv").kernel_size == (3, 3)
    assert enc.get_layer("stem_conv").strides == (1, 1)
    assert sum(n.endswith("_add") for n in names) == 8          # 4 stages x 2 BasicBlocks
    assert enc.get_layer("stage4_block2_conv2").filters == 16   # width * 8
    assert isinstance(enc.layers[1], ImageNormalization)


def test_resnet18_param_count_width64():
    enc = resnet18_cifar(width=64)
    trainable = sum(int(np.prod(v.shape)) for v in enc.trainable_variables)
    assert trainable == 11_168_832     # ResNet-18 (CIFAR stem) without the classifier
    assert enc.output_shape == (None, 512)


def test_resnet50_structure():
    enc = resnet50(input_shape=(32, 32, 3), width=2)
    assert tuple(enc(_images(2, 32)).shape) == (2, 64)
    names = [l.name for l in enc.layers]
    blocks = [sum(n.startswith(f"stage{s}_") and n.endswith("_add") for n in names)
              for s in (1, 2, 3, 4)]
    assert blocks == [3, 4, 6, 3]
    stem = enc.get_layer("stem_conv")
    assert stem.kernel_size == (7, 7) and stem.strides == (2, 2)
    assert enc.get_layer("stem_pool").pool_size == (3, 3)


def test_resnet50_default_feature_dim():
    enc = resnet50()
    assert enc.output_shape == (None, 2048)
    trainable = sum(int(np.prod(v.shape)) for v in enc.trainable_variables)
    assert trainable == 23_508_032     # torchvision ResNet-50 minus fc (25,557,032 - 2,049,000)


def test_small_convnet_tiny_inputs():
    enc = small_convnet(input_shape=(8, 8, 3), width=4)
    assert tuple(enc(_images(5, 8)).shape) == (5, 16)
    enc = small_convnet(width=4)
    assert tuple(enc(_images(2, 32)).shape) == (2, 16)


@pytest.mark.parametrize("name", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_outputs_float32(policy, name):
    policy(name)
    for enc in (resnet18_cifar(width=2, input_shape=(8, 8, 3)),
                small_convnet(input_shape=(8, 8, 3), width=2)):
        assert enc.get_layer("stem_conv" if "resnet" in enc.name else "block1_conv") \
            .compute_dtype == name.split("_")[1]
        out = enc(_images(2, 8))
        assert out.dtype == "float32" and np.all(np.isfinite(out))


def test_normalization_inside_model():
    layer = ImageNormalization()
    y = np.asarray(layer(np.full((1, 2, 2, 3), 0.485, "float32")))
    np.testing.assert_allclose(y[..., 0], 0.0, atol=1e-6)
    enc = resnet18_cifar(width=2, input_shape=(8, 8, 3), normalization="none")
    np.testing.assert_allclose(np.asarray(enc.get_layer("normalize")(np.ones((1, 8, 8, 3)))), 1.0)


def test_sync_batchnorm_flag():
    enc = resnet18_cifar(width=2, input_shape=(8, 8, 3), sync_batchnorm=True)
    bns = [l for l in enc.layers if isinstance(l, keras.layers.BatchNormalization)]
    assert bns and all(l.synchronized for l in bns)
    out = enc(_images(4, 8), training=True)
    assert tuple(out.shape) == (4, 16)


def test_save_load_round_trip(tmp_path):
    keras.utils.set_random_seed(0)
    for enc in (resnet18_cifar(width=2, input_shape=(8, 8, 3), normalization="cifar10"),
                small_convnet(input_shape=(8, 8, 3), width=2)):
        path = str(tmp_path / f"{enc.name}.keras")
        enc.save(path)
        loaded = keras.saving.load_model(path)
        x = _images(2, 8)
        np.testing.assert_allclose(loaded(x), enc(x), rtol=1e-5, atol=1e-5)
        assert loaded.get_layer("normalize").mean == enc.get_layer("normalize").mean


@pytest.mark.parametrize("fn, kwargs, name", [
    (resnet18_cifar, {"width": 0}, "width"),
    (resnet18_cifar, {"input_shape": (7, 32, 3)}, "input_shape"),
    (resnet18_cifar, {"input_shape": (32, 32, 1)}, "input_shape"),
    (resnet18_cifar, {"normalization": "foo"}, "normalization"),
    (resnet50, {"width": -1}, "width"),
    (small_convnet, {"width": 1.5}, "width"),
])
def test_bad_arguments(fn, kwargs, name):
    with pytest.raises(ValueError, match=name):
        fn(**kwargs)
