"""The image input contract (issue 33): float [0, 1], uint8 pixels and float 0-255 pixels (what
``keras.utils.image_dataset_from_directory`` yields) give the same features, on a zoo
encoder, a run's encoder and a SavedModel export; a grayscale image is refused in one line;
[0, 1] inputs give bit-identical features to before the option existed."""

import json
import os

import keras
import numpy as np
import pytest

import keras_hardneg as khn
from keras_hardneg import cli
from keras_hardneg.encoders.normalization import (PIXEL_THRESHOLD, ImageNormalization,
                                                  input_contract)

ENTRY = "simclr-ntxent-cifar10-r18w8-cpu"  # the smallest image entry


def _images(shape=(4, 32, 32, 3), seed=0):
    """(uint8 pixels, the same as float 0-255, the same in [0, 1])."""
    pixels = np.random.default_rng(seed).integers(0, 256, shape).astype("uint8")
    return pixels, pixels.astype("float32"), pixels.astype("float32") / 255.0


def _np(x):
    return keras.ops.convert_to_numpy(x)


def _same_features_for_every_range(encoder, atol=1e-5):
    pixels, floats, unit = _images()
    want = _np(encoder(unit, training=False))
    for what, x in (("uint8", pixels), ("float 0-255", floats)):
        got = _np(encoder(x, training=False))
        assert np.abs(got - want).max() <= atol * max(1.0, np.abs(want).max()), what
    return want


def test_the_layer_reads_each_range_and_keeps_unit_images_bit_identical():
    pixels, floats, unit = _images((3, 5, 5, 3))
    auto, exact, raw = (ImageNormalization(), ImageNormalization(input_range="unit"),
                        ImageNormalization(input_range="pixels"))
    want = _np(exact(unit))
    assert np.array_equal(_np(auto(unit)), want)  # [0, 1]: the computation of before
    for layer, x in ((auto, floats), (auto, pixels), (raw, floats), (raw, pixels),
                     (exact, pixels)):
        np.testing.assert_allclose(_np(layer(x)), want, atol=1e-6)
    # Per image: a [0, 1] image beside a 0-255 one in the same batch.
    mixed = np.concatenate([unit[:1], floats[1:]])
    np.testing.assert_allclose(_np(auto(mixed)), want, atol=1e-6)
    # The documented limit: a 0-255 image with no value above 2 is read as [0, 1].
    dark = np.full((1, 5, 5, 3), PIXEL_THRESHOLD, "float32")
    assert np.allclose(_np(auto(dark)), _np(exact(dark)))
    with pytest.raises(ValueError, match="images must be RGB .B, H, W, 3.; got shape "
                                         r"\(2, 5, 5, 1\).*repeat its channel"):
        auto(np.zeros((2, 5, 5, 1), "float32"))
    with pytest.raises(ValueError, match="`input_range` must be one of"):
        ImageNormalization(input_range="0-255")


def test_configs_saved_before_the_option_load_as_auto():
    config = ImageNormalization().get_config()
    assert config["input_range"] == "auto"
    config.pop("input_range")
    assert ImageNormalization.from_config(config).input_range == "auto"
    again = ImageNormalization.from_config(ImageNormalization(input_range="pixels").get_config())
    assert again.input_range == "pixels"


def test_a_zoo_encoder_reads_pixels_and_refuses_grayscale_and_zoo_show_says_so(capsys):
    encoder = khn.zoo.load(ENTRY, trainable=False)
    want = _same_features_for_every_range(encoder)
    # The stored preset (saved before the option) gives what it gave: unit mode is the old
    # computation, and [0, 1] images are bit-identical under auto.
    for layer in encoder._flatten_layers():
        if isinstance(layer, ImageNormalization):
            assert layer.input_range == "auto"
            layer.input_range = "unit"
    assert np.array_equal(_np(encoder(_images()[2], training=False)), want)
    with pytest.raises(ValueError, match="images must be RGB"):
        encoder(np.zeros((2, 32, 32, 1), "float32"), training=False)
    assert cli.main(["zoo", "show", ENTRY]) == 0
    assert input_contract("auto") in capsys.readouterr().out


def test_a_runs_encoder_reads_pixels_also_after_its_preset_round_trip(tmp_path):
    from keras_hardneg import run
    from keras_hardneg.export import load_preset, save_preset

    recipe = run.load_recipe({"encoder": {"name": "small_convnet", "width": 4},
                              "data": {"name": "digits"}})
    encoder = run.build_model(recipe, input_shape=(32, 32, 3), num_examples=64).encoder
    _same_features_for_every_range(encoder)
    path = save_preset(encoder, str(tmp_path / "p"))
    _same_features_for_every_range(load_preset(path))
    keras_file = str(tmp_path / "e.keras")
    encoder.save(keras_file)
    _same_features_for_every_range(keras.saving.load_model(keras_file))


@pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                    reason="SavedModel export needs the TensorFlow backend")
def test_an_export_reads_pixels_through_every_loader_and_its_card_says_so(tmp_path):
    import tensorflow as tf

    from keras_hardneg.export import export_encoder, load_encoder, load_model_card

    encoder = khn.zoo.load(ENTRY, trainable=False)
    pixels, floats, unit = _images()
    want = _np(encoder(unit, training=False))
    out = str(tmp_path / "e")
    export_encoder(encoder, out)
    obj = tf.saved_model.load(out)
    layer = load_encoder(out)
    for what, x in (("uint8", pixels), ("float 0-255", floats), ("[0, 1]", unit)):
        for loader, got in (("tf.saved_model.load", obj(tf.constant(x), training=False)),
                            ("load_encoder", layer(x))):
            assert np.abs(_np(got) - want).max() <= 1e-5 * np.abs(want).max(), (loader, what)
    card = load_model_card(out)
    assert card.preprocessing == input_contract("auto")
    assert "0-255 pixels" in open(os.path.join(out, "model_card.md")).read()
    assert json.load(open(os.path.join(out, "model_card.json")))["input_range"] == [0.0, 1.0]
