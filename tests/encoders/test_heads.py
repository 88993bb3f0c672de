"""Projection / prediction heads: architectures, return_features contract, serialization."""

import keras
import numpy as np
import pytest

from keras_hardneg.encoders import ProjectionHead, prediction_head, projection_head

BN = keras.layers.BatchNormalization
DENSE = keras.layers.Dense


def _kinds(head):
    kinds = []
    for block in head.hidden_layers:
        kinds += [type(l).__name__ for l in block]
    kinds.append("Dense")
    if head.output_bn is not None:
        kinds.append("BatchNormalization")
    return kinds


@pytest.mark.parametrize("version, kinds", [
    ("simclr_v1", ["Dense", "BatchNormalization", "ReLU", "Dense"]),
    ("simclr_v2", ["Dense", "BatchNormalization", "ReLU"] * 2 + ["Dense"]),
    ("moco_v2", ["Dense", "ReLU", "Dense"]),
    ("moco_v3", ["Dense", "BatchNormalization", "ReLU"] * 2 + ["Dense", "BatchNormalization"]),
])
def test_architectures(version, kinds):
    head = projection_head(6, 10, 4, version=version)
    assert isinstance(head, ProjectionHead) and isinstance(head, keras.Model)
    assert _kinds(head) == kinds
    x = np.random.default_rng(0).normal(size=(5, 6)).astype("float32")
    z, h = head(x, training=True, return_features=True)
    assert tuple(z.shape) == (5, 4) and tuple(h.shape) == (5, 10)
    assert z.dtype == "float32" and h.dtype == "float32"
    if version == "moco_v3":
        assert not head.output_bn.center and not head.output_bn.scale
        assert len(head.output_bn.trainable_weights) == 0
    else:   # features are exactly the input of the last Dense layer
        np.testing.assert_allclose(head.last_dense(h), head(x, training=True), rtol=1e-5,
                                   atol=1e-5)


def test_hidden_dims_sequence_and_prediction_head():
    head = projection_head(8, (16, 12, 10), 4, version="simclr_v2")
    assert [b[0].units for b in head.hidden_layers] == [16, 12, 10]
    pred = prediction_head(4, 16, 4)
    assert _kinds(pred) == ["Dense", "BatchNormalization", "ReLU", "Dense"]
    assert tuple(pred(np.ones((3, 4), "float32")).shape) == (3, 4)


def test_mixed_precision_float32_outputs():
    old = keras.mixed_precision.global_policy()
    try:
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
        head = projection_head(8, 16, 4, version="moco_v3")
        z, h = head(np.ones((2, 8), "float32"), return_features=True)
        assert z.dtype == "float32" and h.dtype == "float32"
    finally:
        keras.mixed_precision.set_global_policy(old)


def test_sync_batchnorm():
    head = projection_head(8, 16, 4, version="simclr_v2", sync_batchnorm=True)
    bns = [l for b in head.hidden_layers for l in b if isinstance(l, BN)]
    assert len(bns) == 2 and all(l.synchronized for l in bns)
    head(np.ones((4, 8), "float32"), training=True)


@pytest.mark.parametrize("version", ["simclr_v1", "simclr_v2", "moco_v2", "moco_v3"])
def test_save_load_round_trip(tmp_path, version):
    keras.utils.set_random_seed(1)
    head = projection_head(8, 16, 4, version=version, name=f"head_{version}")
    x = np.random.default_rng(0).normal(size=(4, 8)).astype("float32")
    head(x, training=True)   # move BN statistics away from their initial values
    path = str(tmp_path / "head.keras")
    head.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, ProjectionHead) and loaded.version == version
    np.testing.assert_allclose(loaded(x), head(x), rtol=1e-5, atol=1e-5)
    z1, h1 = loaded(x, return_features=True)
    np.testing.assert_allclose(h1, head(x, return_features=True)[1], rtol=1e-5, atol=1e-5)


def test_head_inside_functional_model_round_trip(tmp_path):
    from keras_hardneg.encoders import small_convnet
    enc = small_convnet(input_shape=(8, 8, 3), width=2)
    head = projection_head(8, 8, 4)
    inp = keras.Input((8, 8, 3))
    model = keras.Model(inp, head(enc(inp)))
    path = str(tmp_path / "m.keras")
    model.save(path)
    x = np.random.default_rng(0).random((2, 8, 8, 3)).astype("float32")
    np.testing.assert_allclose(keras.saving.load_model(path)(x), model(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kwargs, name", [
    (dict(version="simclr_v4"), "version"),
    (dict(hidden_dims=0), "hidden_dims"),
    (dict(hidden_dims=[]), "hidden_dims"),
    (dict(output_dim=0), "output_dim"),
    (dict(input_dim=-3), "input_dim"),
])
def test_bad_arguments(kwargs, name):
    args = dict(input_dim=8, hidden_dims=16, output_dim=4)
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        projection_head(**args)


def test_simclr_v1_bn_is_lightlys_head():
    """lightly's SimCLRProjectionHead(512, 512, 128): Linear-BN-ReLU, Linear-BN, no biases
    before a BN, the output BN with scale and shift (the head of its CIFAR-10 benchmark)."""
    head = projection_head(6, 10, 4, version="simclr_v1_bn")
    assert _kinds(head) == ["Dense", "BatchNormalization", "ReLU", "Dense",
                            "BatchNormalization"]
    assert not head.hidden_layers[0][0].use_bias and not head.last_dense.use_bias
    assert head.output_bn.center and head.output_bn.scale
    assert len(head.output_bn.trainable_weights) == 2
    x = np.random.default_rng(0).normal(size=(64, 6)).astype("float32")
    z, h = head(x, training=True, return_features=True)
    z = keras.ops.convert_to_numpy(z)
    np.testing.assert_allclose(z.mean(0), 0.0, atol=1e-4)   # batch statistics, beta 0
    np.testing.assert_allclose(z.std(0), 1.0, atol=1e-2)    # gamma 1
    assert tuple(keras.ops.shape(h)) == (64, 10)


@pytest.mark.parametrize("dense_init", ["glorot_uniform", "torch_linear"])
def test_dense_init_bounds(dense_init):
    keras.utils.set_random_seed(0)
    head = projection_head(64, 256, 32, version="simclr_v1_bn", dense_init=dense_init)
    for layer, (fan_in, fan_out) in ((head.hidden_layers[0][0], (64, 256)),
                                     (head.output_dense, (256, 32))):
        w = keras.ops.convert_to_numpy(layer.kernel)
        # torch_linear: PyTorch's nn.Linear default, U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
        limit = (1 / np.sqrt(fan_in) if dense_init == "torch_linear"
                 else np.sqrt(6 / (fan_in + fan_out)))
        assert np.abs(w).max() <= limit
        assert np.abs(w).max() > 0.98 * limit
        assert w.std() == pytest.approx(limit / np.sqrt(3), rel=0.05)


def test_dense_init_is_in_the_config_and_checked():
    head = projection_head(8, 16, 4, dense_init="torch_linear")
    again = ProjectionHead.from_config(head.get_config())
    assert again.dense_init == "torch_linear"
    old = dict(head.get_config())
    del old["dense_init"]                        # configs saved before the option existed
    assert ProjectionHead.from_config(old).dense_init == "glorot_uniform"
    with pytest.raises(ValueError, match="^dense_init must be one of"):
        projection_head(8, 16, 4, dense_init="he")
