"""View makers: the image view maker checks its input, honours asymmetric recipes (v3),
serializes, is registered, and is what the frameworks use for their `augmentation`."""

import keras
import numpy as np
import pytest
from keras import ops

import keras_hardneg as khn
from keras_hardneg.augment import ImageViews, ViewMaker, as_view_maker, simclr_views
from keras_hardneg.registry import VIEW_MAKERS, ConfigError


def _images(b=4, size=8, seed=0):
    return np.random.default_rng(seed).random((b, size, size, 3)).astype("float32")


@pytest.mark.backends
def test_image_views_draw_two_views_like_two_views():
    aug_a = khn.augment.simclr_augmentation(image_size=8, version="v3", seed=3)
    aug_b = khn.augment.simclr_augmentation(image_size=8, version="v3", seed=3)
    v1, v2 = ImageViews(aug_a)(_images(), training=True)
    w1, w2 = khn.augment.two_views(aug_b)(_images(), training=True)
    np.testing.assert_allclose(v1, w1)
    np.testing.assert_allclose(v2, w2)
    assert keras.backend.standardize_dtype(v1.dtype) == "float32"
    assert tuple(v1.shape) == (4, 8, 8, 3)


@pytest.mark.backends
def test_plain_layer_is_called_twice():
    views = ImageViews(keras.layers.Lambda(lambda x: 1.0 - x))
    v1, v2 = views(_images(), training=True)
    np.testing.assert_allclose(v1, 1.0 - _images(), rtol=1e-6)
    np.testing.assert_allclose(v2, v1)


@pytest.mark.backends
@pytest.mark.parametrize("shape", [(4, 8, 8), (4, 8, 8, 1), (4, 8, 8, 4)])
def test_image_views_refuse_non_images(shape):
    with pytest.raises(ValueError, match=r"Images must have shape \[batch, height, width, 3\]"):
        simclr_views(image_size=8)(np.zeros(shape, "float32"))


@pytest.mark.backends
def test_as_view_maker():
    aug = khn.augment.simclr_augmentation(image_size=8)
    assert as_view_maker(None) is None
    wrapped = as_view_maker(aug)
    assert isinstance(wrapped, ImageViews) and wrapped.augmentation is aug
    assert as_view_maker(wrapped) is wrapped
    with pytest.raises(ValueError, match="augmentation"):
        ImageViews(None)


@pytest.mark.backends
def test_serialization_round_trip():
    views = simclr_views(image_size=8, version="v3", seed=1)
    again = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(views))
    assert isinstance(again, ImageViews)
    assert again.augmentation.get_config() == views.augmentation.get_config()


def test_registered_with_its_modality_and_signature_defaults():
    assert "simclr" in VIEW_MAKERS.names(modality="image")
    # image_size and seed come from the data and the run, not from config keys.
    assert VIEW_MAKERS.defaults("simclr") == {"version": "v1", "strength": 1.0,
                                              "crop_scale": [0.08, 1.0],
                                              "exact_color_jitter": False,
                                              "contrast_mean": "channel",
                                              "crop_boxes": "continuous"}
    views = VIEW_MAKERS.get("simclr").factory(image_size=16, seed=0,
                                              **VIEW_MAKERS.check("simclr", {"version": "v2"}))
    assert isinstance(views, ImageViews)
    assert views.augmentation.image_size == 16 and views.augmentation.version == "v2"
    with pytest.raises(ConfigError, match="version"):
        VIEW_MAKERS.check("simclr", {"version": "v9"})
    with pytest.raises(ConfigError, match="crop_scale"):
        VIEW_MAKERS.check("simclr", {"crop_scale": [0.0, 1.0]})


class SwapViews(ViewMaker):
    """A non-image view maker: a vector and its reverse."""

    modality = "vector"

    def check_input(self, x):
        if len(x.shape) != 2:
            raise ValueError("vectors [batch, dim] expected")

    def make_views(self, x, training):
        return x, ops.flip(x, axis=1)


def test_frameworks_use_any_view_maker():
    inputs = keras.Input((6,))
    encoder = keras.Model(inputs, keras.layers.Dense(4)(inputs))
    model = khn.models.SimCLR(encoder, projection_dims=(8, 4), augmentation=SwapViews())
    assert isinstance(model.view_maker, SwapViews) and model.augmentation is model.view_maker
    model.compile(optimizer="sgd", loss="nt_xent", jit_compile=False)
    x = np.random.default_rng(0).normal(size=(8, 6)).astype("float32")
    history = model.fit(x, batch_size=8, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    with pytest.raises(ValueError, match="vectors"):
        model.train_on_batch(np.zeros((8, 6, 1), "float32"))


def test_model_wraps_augmentation_and_keeps_it_as_given():
    aug = khn.augment.simclr_augmentation(image_size=8, seed=0)
    model = khn.models.SimCLR(khn.encoders.small_convnet(input_shape=(8, 8, 3), width=4),
                              projection_dims=(16, 8), augmentation=aug)
    assert model.augmentation is aug
    assert isinstance(model.view_maker, ImageViews) and model.view_maker.augmentation is aug
    assert model.get_config()["augmentation"]["class_name"] == "SimCLRAugmentation"


@pytest.mark.backends
def test_uint8_images_are_scaled_to_unit_floats():
    """A uint8 batch gives the views of the same images as floats in [0, 1]."""
    import numpy as np

    from keras_hardneg.augment.views import ImageViews

    class Identity(keras.layers.Layer):
        def call(self, x, training=None):
            return x

    views = ImageViews(Identity())
    x = np.random.default_rng(0).integers(0, 256, (2, 4, 4, 3), dtype=np.uint8)
    v1, v2 = views(x, training=True)
    expected = x.astype("float32") * np.float32(1 / 255)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(v1), expected)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(v2), expected)
