"""SimCLR augmentation: shapes/range, per-image randomness, graph + tf.data, serialization."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_hardneg.augment import RandomApply, SimCLRAugmentation, simclr_augmentation, two_views

# Everything off except what a test switches on.
OFF = dict(crop_scale=(1.0, 1.0), crop_ratio=(1.0, 1.0), flip=False, jitter_prob=0.0,
           grayscale_prob=0.0, blur_prob=0.0, solarize_prob=(0.0, 0.0))


def _images(b=8, size=16, seed=0):
    return np.random.default_rng(seed).random((b, size, size, 3)).astype("float32")


def _same_image_batch(b=16, size=16):
    return np.repeat(_images(1, size), b, axis=0)


def _n_distinct(batch):
    flat = np.round(np.asarray(batch).reshape(len(batch), -1), 5)
    return len({row.tobytes() for row in flat})


@pytest.mark.parametrize("version", ["v1", "v2", "v3"])
def test_shape_range_dtype(version):
    aug = simclr_augmentation(16, version=version, seed=0, blur_prob=0.5)
    v1, v2 = aug.two_views(_images())
    for v in (v1, v2):
        v = np.asarray(v)
        assert v.shape == (8, 16, 16, 3) and v.dtype == np.float32
        assert v.min() >= 0.0 and v.max() <= 1.0
    assert not np.allclose(v1, v2)


def test_other_input_size_and_unbatched():
    aug = simclr_augmentation(16, seed=0)
    assert tuple(aug(np.random.rand(2, 40, 24, 3)).shape) == (2, 16, 16, 3)
    assert tuple(aug(_images(1)[0]).shape) == (16, 16, 3)
    assert tuple(aug(_images(), training=False).shape) == (8, 16, 16, 3)
    np.testing.assert_allclose(aug(_images(), training=False), _images())


def test_identity_when_everything_off():
    aug = SimCLRAugmentation(16, seed=0, **OFF)
    np.testing.assert_allclose(aug(_images()), _images(), atol=1e-5)


def test_per_image_randomness_of_default_pipeline():
    out = simclr_augmentation(16, seed=0)(_same_image_batch())
    assert _n_distinct(out) == 16


@pytest.mark.parametrize("option, value", [("grayscale_prob", 0.5), ("jitter_prob", 0.5),
                                           ("flip", True), ("blur_prob", 0.5)])
def test_random_apply_is_per_image(option, value):
    """With p=0.5 one batch has both changed and unchanged copies of the same image."""
    kwargs = dict(OFF)
    kwargs[option] = value
    x = _same_image_batch(32)
    out = np.asarray(SimCLRAugmentation(16, seed=3, **kwargs)(x))
    unchanged = np.all(np.isclose(out, x, atol=1e-5), axis=(1, 2, 3))
    assert 0 < unchanged.sum() < 32
    if option == "grayscale_prob":
        gray = np.all(np.isclose(out[..., 0], out[..., 1], atol=1e-5), axis=(1, 2))
        np.testing.assert_array_equal(gray, ~unchanged)


def test_jitter_parameters_differ_per_image():
    kwargs = dict(OFF, jitter_prob=1.0)
    out = SimCLRAugmentation(16, seed=0, **kwargs)(_same_image_batch(16))
    assert _n_distinct(out) == 16


def test_solarization_second_view_only_v3():
    kwargs = dict(OFF)
    kwargs.pop("solarize_prob")
    aug = SimCLRAugmentation(16, version="v3", seed=0, **kwargs)
    assert aug.solarize_prob == (0.0, 0.2)
    aug = SimCLRAugmentation(16, version="v3", seed=0, solarize_prob=(0.0, 1.0), **kwargs)
    x = _images()
    v1, v2 = two_views(aug)(x)
    np.testing.assert_allclose(v1, x, atol=1e-5)
    np.testing.assert_allclose(v2, np.where(x < 0.5, x, 1.0 - x), atol=1e-5)


def test_blur_smooths():
    x = _images(4, 32)
    out = np.asarray(SimCLRAugmentation(32, seed=0, **dict(OFF, blur_prob=1.0))(x))
    tv = lambda a: np.abs(np.diff(a, axis=1)).mean()  # noqa: E731
    assert tv(out) < 0.8 * tv(x)
    np.testing.assert_allclose(out.mean(), x.mean(), atol=0.02)


def test_seed_reproducible():
    a = simclr_augmentation(16, seed=7)(_images())
    b = simclr_augmentation(16, seed=7)(_images())
    np.testing.assert_array_equal(a, b)


def test_in_tf_function_and_model_fit():
    aug = simclr_augmentation(16, seed=0)
    f = tf.function(lambda x: aug.two_views(x, training=True))
    v1, v2 = f(tf.constant(_images()))
    assert v1.shape == (8, 16, 16, 3) and not np.allclose(v1, v2)

    class Tiny(keras.Model):
        def __init__(self):
            super().__init__()
            self.aug = simclr_augmentation(16, seed=0)
            self.net = keras.Sequential([keras.layers.Flatten(), keras.layers.Dense(2)])

        def train_step(self, data):
            x1, x2 = self.aug.two_views(data, training=True)
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(self.net(x1) - self.net(x2)))
            grads = tape.gradient(loss, self.net.trainable_variables)
            self.optimizer.apply(grads, self.net.trainable_variables)
            return {"loss": loss}

        def call(self, x):
            return self.net(x)

    model = Tiny()
    model.compile(optimizer="sgd")
    hist = model.fit(tf.data.Dataset.from_tensor_slices(_images(16)).batch(8), epochs=1,
                     verbose=0)
    assert np.isfinite(hist.history["loss"][0])


def test_in_tf_data_batched_and_unbatched():
    aug = simclr_augmentation(16, version="v3", seed=0)
    ds = tf.data.Dataset.from_tensor_slices(_same_image_batch(8))
    batched = ds.batch(4).map(lambda x: aug.two_views(x), num_parallel_calls=2)
    views = list(batched)
    assert len(views) == 2 and views[0][0].shape == (4, 16, 16, 3)
    assert _n_distinct(np.concatenate([v[0] for v in views])) == 8
    single = ds.map(lambda x: aug(x, view=2), num_parallel_calls=2).batch(8)
    out = next(iter(single))
    assert out.shape == (8, 16, 16, 3) and _n_distinct(out) == 8


def test_mixed_precision_policy_keeps_float32():
    old = keras.mixed_precision.global_policy()
    try:
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
        out = simclr_augmentation(16, seed=0)(_images())
        assert out.dtype == tf.float32
    finally:
        keras.mixed_precision.set_global_policy(old)


def test_serialization(tmp_path):
    aug = simclr_augmentation(16, version="v2", strength=0.5, seed=3, blur_prob=0.25)
    restored = SimCLRAugmentation.from_config(aug.get_config())
    assert restored.get_config() == aug.get_config()
    model = keras.Sequential([keras.Input((16, 16, 3)), aug, keras.layers.Flatten(),
                              keras.layers.Dense(1)])
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.layers[0].get_config() == aug.get_config()


def test_random_apply_wrapper_per_image():
    sol = keras.layers.Solarization(threshold_factor=(0.5, 0.5), value_range=(0, 1))
    layer = RandomApply(sol, 0.5, seed=0)
    x = _same_image_batch(32)
    out = np.asarray(layer(x))
    changed = ~np.all(np.isclose(out, x), axis=(1, 2, 3))
    assert 0 < changed.sum() < 32
    np.testing.assert_allclose(layer(x, training=False), x)
    restored = RandomApply.from_config(layer.get_config())
    assert restored.probability == 0.5 and isinstance(restored.layer, keras.layers.Solarization)


@pytest.mark.parametrize("kwargs, name", [
    (dict(image_size=7), "image_size"),
    (dict(version="v4"), "version"),
    (dict(strength=-1.0), "strength"),
    (dict(crop_scale=(0.5, 0.2)), "crop_scale"),
    (dict(blur_prob=1.5), "blur_prob"),
    (dict(jitter_prob=-0.1), "jitter_prob"),
])
def test_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        simclr_augmentation(**kwargs)


def test_affine_jitter_close_to_exact_reference_jitter():
    """Same seed -> same factors/order; the fast affine jitter ~ sequential HSV jitter."""
    x = 0.3 + 0.4 * _images(16)
    for version in ("v1", "v2"):
        kw = dict(OFF, jitter_prob=1.0, strength=0.25, version=version)
        fast = np.asarray(SimCLRAugmentation(16, seed=4, **kw)(x))
        exact = np.asarray(SimCLRAugmentation(16, seed=4, exact_color_jitter=True, **kw)(x))
        assert not np.allclose(fast, x, atol=1e-3)
        assert np.abs(fast - exact).mean() < 0.01
