"""Keras presets (issue 24): config.json + model.weights.h5 round trips for each modality,
float16 storage, refusals (a user's folder, a damaged or missing file), and the preset of a
SavedModel export equal to the SavedModel to 1e-5. No TensorFlow import at the top: the
``backends`` tests run under JAX too."""

import json
import os

import keras
import numpy as np
import pytest

import keras_hardneg as khn
from keras_hardneg.export.preset import (PresetError, find_preset, load_preset,
                                         read_preset_metadata, save_preset)
from tests.models.graph_helpers import GraphBatches


def np_(x):
    return np.asarray(keras.ops.convert_to_numpy(x))


def _image_encoder(width=2):
    keras.utils.set_random_seed(0)
    return khn.encoders.resnet18_cifar(width=width, input_shape=(8, 8, 3))


@pytest.mark.backends
def test_image_preset_round_trip_is_exact_and_trainable(tmp_path):
    enc = _image_encoder()
    x = np.random.default_rng(0).random((4, 8, 8, 3), dtype=np.float32)
    path = save_preset(enc, str(tmp_path / "p"))
    assert sorted(os.listdir(path)) == ["config.json", "metadata.json", "model.weights.h5"]
    again = load_preset(path)
    np.testing.assert_array_equal(np_(again(x, training=False)), np_(enc(x, training=False)))
    assert again.trainable and len(again.trainable_weights) == len(enc.trainable_weights)
    meta = again.preset_metadata
    assert meta["modality"] == "image" and meta["input"] == {"input_shape": [8, 8, 3]}
    assert meta["output_dim"] == 16 and meta["weights_dtype"] == "float32"
    assert not load_preset(path, trainable=False).trainable


@pytest.mark.backends
def test_float16_storage_halves_the_weights_and_stays_close(tmp_path):
    enc = _image_encoder(width=8)  # large enough for the arrays to outweigh HDF5's headers
    x = np.random.default_rng(1).random((4, 8, 8, 3), dtype=np.float32)
    full = save_preset(enc, str(tmp_path / "f32"))
    half = save_preset(enc, str(tmp_path / "f16"), weights_dtype="float16")
    size = lambda p: os.path.getsize(os.path.join(p, "model.weights.h5"))  # noqa: E731
    assert size(half) < 0.75 * size(full)
    meta = read_preset_metadata(half)
    assert meta["weights_dtype"] == "float16" and 0 < meta["max_relative_rounding_error"] < 1e-3
    loaded = load_preset(half)
    assert all(v.dtype == "float32" for v in loaded.weights)
    want, got = np_(enc(x, training=False)), np_(loaded(x, training=False))
    assert np.abs(got - want).max() <= 1e-2 * np.abs(want).max()


@pytest.mark.backends
def test_graph_and_text_presets_round_trip(tmp_path):
    keras.utils.set_random_seed(0)
    gin = khn.encoders.gin(input_shape=(4,), width=4, num_layers=2)
    batch = GraphBatches(num_batches=1, batch_size=3, plain=True)[0][0]
    want = np_(gin(batch))
    path = save_preset(gin, str(tmp_path / "g"), modality="graph",
                       input_spec={"feature_dim": 4})
    np.testing.assert_allclose(np_(load_preset(path)(batch)), want, rtol=1e-6)
    text = khn.encoders.text_transformer(input_shape=(6,), vocab_size=20, width=8,
                                         num_layers=1, num_heads=2)
    ids = np.random.default_rng(0).integers(1, 20, size=(3, 6)).astype("int32")
    tok = tmp_path / "tokenizer.json"
    tok.write_text("{}")
    path = save_preset(text, str(tmp_path / "t"), modality="text",
                       input_spec={"max_length": 6}, assets={"tokenizer.json": str(tok)})
    assert os.path.isfile(os.path.join(path, "assets", "tokenizer.json"))
    np.testing.assert_allclose(np_(load_preset(path)(ids, training=False)),
                               np_(text(ids, training=False)), rtol=1e-6)


def test_refusals_name_the_problem(tmp_path):
    enc = _image_encoder()
    user = tmp_path / "mine"
    user.mkdir()
    (user / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="not a keras-hardneg preset; not touched"):
        save_preset(enc, str(user), overwrite=True)
    assert (user / "notes.txt").read_text() == "keep me"
    path = save_preset(enc, str(tmp_path / "p"))
    with pytest.raises(FileExistsError, match="overwrite=True"):
        save_preset(enc, path)
    assert save_preset(enc, path, overwrite=True) == path
    with pytest.raises(ValueError, match="`weights_dtype`"):
        save_preset(enc, str(tmp_path / "q"), weights_dtype="int8")
    with pytest.raises(ValueError, match="`modality`"):
        save_preset(enc, str(tmp_path / "q"), modality="audio")
    with pytest.raises(ValueError, match="`trainable`"):
        load_preset(path, trainable="no")
    with pytest.raises(PresetError, match="no such folder"):
        load_preset(str(tmp_path / "absent"))
    with pytest.raises(PresetError, match="not a keras-hardneg preset"):
        load_preset(str(user))
    entry = tmp_path / "entry"
    entry.mkdir()
    (entry / "recipe.json").write_text("{}")
    with pytest.raises(PresetError, match="not trained"):
        find_preset(str(entry))
    with open(os.path.join(path, "model.weights.h5"), "r+b") as f:
        f.seek(200)
        f.write(b"\x00garbage\x00")
    with pytest.raises(PresetError, match="model.weights.h5 is damaged"):
        load_preset(path)
    os.remove(os.path.join(path, "config.json"))
    with pytest.raises(PresetError, match="config.json is missing"):
        load_preset(path)


def test_float16_refuses_values_out_of_range(tmp_path):
    enc = _image_encoder()
    enc.weights[1].assign(np.full(enc.weights[1].shape, 1e6, "float32"))
    with pytest.raises(PresetError, match="float16's range"):
        save_preset(enc, str(tmp_path / "p"), weights_dtype="float16")
    assert not os.path.exists(tmp_path / "p")


def test_a_run_folder_and_an_export_folder_lead_to_their_preset(tmp_path):
    enc = _image_encoder()
    save_preset(enc, str(tmp_path / "run" / "preset"))
    assert find_preset(str(tmp_path / "run")) == str(tmp_path / "run" / "preset")


def test_preset_of_a_savedmodel_export_equals_it(tmp_path):
    pytest.importorskip("tensorflow")
    if keras.backend.backend() != "tensorflow":
        pytest.skip("SavedModel export needs the TensorFlow backend")
    from keras_hardneg.run import load_recipe, save_recipe
    from keras_hardneg.run.artifacts import preset_from_export

    entry = tmp_path / "entry"
    entry.mkdir()
    recipe = load_recipe({"encoder": {"name": "resnet18_cifar", "width": 2},
                          "data": {"name": "digits"}})
    save_recipe(recipe, str(entry / "recipe.json"))
    enc = khn.run.build_encoder(recipe, (8, 8, 3))
    x = np.random.default_rng(0).random((5, 8, 8, 3), dtype=np.float32)
    enc(x, training=True)  # BN statistics move away from their initial values
    khn.export.export_encoder(enc, str(entry / "encoder"))
    path = preset_from_export(str(entry / "encoder"))
    assert path == str(entry / "encoder" / "preset")
    saved = khn.export.load_encoder(str(entry / "encoder"))
    got = np_(load_preset(path)(x, training=False))
    assert np.abs(got - np.asarray(saved(x))).max() <= 1e-5
    card = json.load(open(os.path.join(path, "model_card.json")))
    assert card["output_dim"] == 16
