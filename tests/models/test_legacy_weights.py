"""Weights saved before MoCo was split into MoCoV2 / MoCoV3 (and before views came from a
view maker) load into the current classes, every weight in its place. The fixtures were
written by fixtures/make_legacy_weights.py with the code of commit de55f33."""

import gzip
import os
import shutil

import numpy as np
import pytest

import keras_hardneg as khn
from tests.models.fixtures.make_legacy_weights import NAMES, build, legacy_values

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def _unzipped(name, tmp_path):
    path = tmp_path / f"{name}.weights.h5"
    with gzip.open(os.path.join(FIXTURES, f"{name}.weights.h5.gz"), "rb") as src, \
            open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return str(path)


@pytest.mark.parametrize("name", NAMES)
def test_legacy_weights_load_into_the_new_classes(name, tmp_path):
    model = build(name)  # the same constructor call as when the fixture was written
    expected_class = {"simclr": khn.models.SimCLR, "moco_v2": khn.models.MoCoV2,
                      "moco_v3": khn.models.MoCoV3}[name]
    assert type(model) is expected_class
    model.load_weights(_unzipped(name, tmp_path))
    expected = legacy_values(model)
    assert len(model.weights) == len(expected)
    for w, want in zip(model.weights, expected):
        np.testing.assert_array_equal(np.asarray(w), want, err_msg=w.path)


@pytest.mark.parametrize("cls,name", [("MoCoV2", "moco_v2"), ("MoCoV3", "moco_v3")])
def test_legacy_weights_load_into_directly_built_classes(cls, name, tmp_path):
    import keras

    keras.utils.set_random_seed(0)
    enc = khn.encoders.small_convnet(input_shape=(8, 8, 3), width=4)
    kwargs = {"queue_size": 12} if cls == "MoCoV2" else {}
    model = getattr(khn.models, cls)(
        enc, projection_dims=(16, 8), momentum=0.9, memory_bank_size=16,
        augmentation=khn.augment.simclr_augmentation(image_size=8, seed=0), **kwargs)
    model.load_weights(_unzipped(name, tmp_path))
    for w, want in zip(model.weights, legacy_values(model)):
        np.testing.assert_array_equal(np.asarray(w), want, err_msg=w.path)
    # the key encoder holds the saved key weights, in encoder order
    assert [w.shape for w in model.key_encoder.weights] == [w.shape for w in model.encoder.weights]
