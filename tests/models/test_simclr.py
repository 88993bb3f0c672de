import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_hardneg as khn
from tests.models.helpers import LOSSES, sgd, tiny_encoder, views


@pytest.mark.parametrize("loss_name", sorted(LOSSES))
def test_one_train_step_with_each_loss(loss_name):
    model = khn.models.SimCLR(tiny_encoder(), projection_dims=(16, 8))
    model.compile(optimizer=sgd(), loss=LOSSES[loss_name]())
    before = [w.numpy() for w in model.encoder.trainable_weights]
    x, y = views(labels=True)
    logs = model.train_on_batch(x, y, return_dict=True)
    after = [w.numpy() for w in model.encoder.trainable_weights]
    assert np.isfinite(logs["loss"]) and logs["loss"] > 0
    for key in ("positive_cosine", "negative_cosine", "false_negative_rate"):
        assert np.isfinite(logs[key])
    assert ("clamp_fraction" in logs) == LOSSES[loss_name]().has_clamp
    assert logs["nonfinite_steps"] == 0
    assert any(not np.allclose(a, b) for a, b in zip(before, after))


def test_loss_matches_the_loss_on_the_models_projections():
    model = khn.models.SimCLR(tiny_encoder(), projection_dims=(16, 8))
    loss = khn.losses.HardNegativeContrastiveLoss(temperature=0.5)
    model.compile(optimizer=sgd(), loss=loss)
    x = views()
    z1, z2 = model.project(tf.constant(x["view1"]), tf.constant(x["view2"]), training=False)
    logs = model.test_on_batch(x, return_dict=True)
    np.testing.assert_allclose(logs["loss"], float(loss(z1, z2)), rtol=1e-5)


def test_images_are_augmented_into_two_views():
    aug = khn.augment.simclr_augmentation(image_size=8, seed=1)
    model = khn.models.SimCLR(tiny_encoder(), projection_dims=(16, 8), augmentation=aug)
    model.compile(optimizer=sgd(), loss="hard")
    history = model.fit(views()["view1"], batch_size=8, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


def test_false_negative_rate_counts_same_label_negatives():
    model = khn.models.SimCLR(tiny_encoder(), projection_dims=(16, 8))
    model.compile(optimizer=sgd())
    x = views(n=4)
    same = model.test_on_batch(x, np.zeros(4, "int64"), return_dict=True)
    assert same["false_negative_rate"] == pytest.approx(1.0)
    model.reset_metrics()
    distinct = model.test_on_batch(x, np.arange(4), return_dict=True)
    assert distinct["false_negative_rate"] == pytest.approx(0.0)
    model.reset_metrics()
    # Labels [0, 0, 1, 1]: each anchor has 6 negatives, 2 of them its pair-mate's views.
    mixed = model.test_on_batch(x, np.array([0, 0, 1, 1]), return_dict=True)
    assert mixed["false_negative_rate"] == pytest.approx(2 / 6)


def test_memory_bank_is_filled_at_the_given_indices():
    model = khn.models.SimCLR(tiny_encoder(), projection_dims=(16, 8), memory_bank_size=20)
    model.compile(optimizer=sgd())
    x = views(n=4)
    index = np.array([3, 7, 11, 19])
    model.train_on_batch({**x, "index": index})
    bank = model.embedding_bank.numpy()
    np.testing.assert_allclose(np.linalg.norm(bank[index], axis=1), 1.0, rtol=1e-5)
    untouched = np.setdiff1d(np.arange(20), index)
    assert np.all(bank[untouched] == 0)


@pytest.mark.parametrize("kwargs,match", [
    ({"projection_dims": (8,)}, "projection_dims"),
    ({"projection_dims": "big"}, "projection_dims"),
    ({"memory_bank_size": 1}, "memory_bank_size"),
])
def test_bad_constructor_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        khn.models.SimCLR(tiny_encoder(), **kwargs)


def test_bad_inputs_are_named():
    model = khn.models.SimCLR(tiny_encoder(), projection_dims=(16, 8))
    model.compile(optimizer=sgd())
    with pytest.raises(ValueError, match="augmentation"):
        model.train_on_batch(views()["view1"])
    with pytest.raises(ValueError, match="view1"):
        model.train_on_batch({"pictures": views()["view1"]})
    with pytest.raises(ValueError, match="contrastive loss"):
        model.compile(optimizer=sgd(), loss=keras.losses.MeanSquaredError())
    with pytest.raises(ValueError, match="encoder"):
        khn.models.SimCLR(lambda x: x)


def test_model_call_returns_encoder_features():
    enc = tiny_encoder()
    model = khn.models.SimCLR(enc, projection_dims=(16, 8))
    x = views(n=2)["view1"]
    np.testing.assert_allclose(model(x).numpy(), enc(x).numpy(), rtol=1e-6)


def test_jit_compile_with_views_made_in_tf_data():
    """The TensorFlow route of wave 1: views made in tf.data, augmentation=None, fed as
    {"view1", "view2"} to a model compiled with jit_compile=True."""
    aug = khn.augment.simclr_augmentation(image_size=8, seed=1)
    images = views()["view1"]
    ds = tf.data.Dataset.from_tensor_slices(images).batch(8).map(
        lambda x: dict(zip(("view1", "view2"), khn.augment.two_views(aug)(x, training=True))))
    model = khn.models.SimCLR(tiny_encoder(), projection_dims=(16, 8))
    model.compile(optimizer=sgd(), loss="nt_xent", jit_compile=True)
    history = model.fit(ds, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
