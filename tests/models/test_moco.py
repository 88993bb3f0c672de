import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_hardneg as khn
from tests.models.helpers import LOSSES, sgd, tiny_encoder, views


def moco(version="v2", **kwargs):
    kwargs.setdefault("queue_size", 24)
    kwargs.setdefault("momentum", 0.9)
    return khn.models.MoCo(tiny_encoder(), projection_dims=(16, 8), version=version, **kwargs)


@pytest.mark.parametrize("version", ["v2", "v3"])
@pytest.mark.parametrize("loss_name", sorted(LOSSES))
def test_one_train_step_with_each_loss(version, loss_name):
    model = moco(version)
    model.compile(optimizer=sgd(), loss=LOSSES[loss_name]())
    x, y = views(labels=True)
    before = [w.numpy() for w in model.encoder.trainable_weights]
    logs = model.train_on_batch(x, y, return_dict=True)
    assert np.isfinite(logs["loss"]) and logs["loss"] > 0
    assert logs["nonfinite_steps"] == 0
    after = [w.numpy() for w in model.encoder.trainable_weights]
    assert any(not np.allclose(a, b) for a, b in zip(before, after))


def test_queue_is_fifo_with_unit_norm_rows():
    model = moco("v2", queue_size=12, momentum=1.0)  # frozen key branch: keys predictable
    model.compile(optimizer=sgd())
    q0 = model.queue.numpy()
    np.testing.assert_allclose(np.linalg.norm(q0, axis=1), 1.0, rtol=1e-5)
    keys = []
    for step in range(4):  # 4 batches of 4 keys into 12 slots: wraps around once
        x = views(n=4, seed=step)
        k = model.keys(tf.constant(x["view2"]))  # the keys this step will enqueue
        model.train_on_batch(x)
        keys.append(k.numpy() / np.linalg.norm(k.numpy(), axis=1, keepdims=True))
    queue = model.queue.numpy()
    np.testing.assert_allclose(np.linalg.norm(queue, axis=1), 1.0, rtol=1e-5)
    # Oldest batch (step 0) was overwritten by step 3; steps 1, 2 still in place.
    np.testing.assert_allclose(queue[0:4], keys[3], atol=1e-5)
    np.testing.assert_allclose(queue[4:8], keys[1], atol=1e-5)
    np.testing.assert_allclose(queue[8:12], keys[2], atol=1e-5)
    assert int(model.queue_pointer.numpy()) == 4


def test_key_encoder_is_the_momentum_average_of_the_query_encoder():
    m = 0.75
    model = moco("v2", momentum=m)
    model.compile(optimizer=sgd())
    assert [w.shape for w in model.key_encoder.weights] == [w.shape for w in model.encoder.weights]
    # Start from different key weights to see the average.
    model.key_encoder.set_weights([w * 0.5 for w in model.encoder.get_weights()])
    key_before = [w.numpy() for w in model.key_encoder.trainable_weights]
    query_before = [w.numpy() for w in model.encoder.trainable_weights]
    model.train_on_batch(views())
    key_after = [w.numpy() for w in model.key_encoder.trainable_weights]
    for kb, qb, ka in zip(key_before, query_before, key_after):
        np.testing.assert_allclose(ka, m * kb + (1 - m) * qb, rtol=1e-5, atol=1e-6)
    # and the optimizer never touches the key branch
    key_ids = {id(v) for v in model.key_encoder.weights + model.key_projector.weights}
    assert key_ids.isdisjoint(id(v) for v in model.trainable_variables)


def test_queue_false_negative_rate_uses_queued_labels():
    model = moco("v2", queue_size=8)
    model.compile(optimizer=sgd())
    x = views(n=8)
    first = model.train_on_batch(x, np.zeros(8, "int64"), return_dict=True)
    assert first["false_negative_rate"] == 0.0  # nothing known in the queue yet: not counted
    model.reset_metrics()
    second = model.train_on_batch(x, np.zeros(8, "int64"), return_dict=True)
    assert second["false_negative_rate"] == pytest.approx(1.0)


@pytest.mark.parametrize("kwargs,match", [
    ({"version": "v1"}, "version"),
    ({"momentum": 1.5}, "momentum"),
    ({"queue_size": 0}, "queue_size"),
    ({"symmetric": "yes"}, "`symmetric` must be True or False"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        moco(**kwargs)


# ------------------------------------------------------------ MoCo -> MoCoV2 / MoCoV3
def _built(factory, seed=3, **kwargs):
    keras.utils.set_random_seed(seed)
    return factory(tiny_encoder(), projection_dims=(16, 8), momentum=0.9, **kwargs)


@pytest.mark.parametrize("version,cls,kwargs", [
    ("v2", khn.models.MoCoV2, {"queue_size": 24}),
    ("v3", khn.models.MoCoV3, {}),
])
def test_moco_version_builds_the_same_model_as_the_class(version, cls, kwargs):
    via_moco = _built(khn.models.MoCo, version=version, queue_size=24)
    direct = _built(cls, **kwargs)
    assert type(via_moco) is cls
    assert isinstance(via_moco, khn.models.MomentumContrast)
    assert [(w.path.split("/", 1)[1], tuple(w.shape)) for w in via_moco.weights] == \
        [(w.path.split("/", 1)[1], tuple(w.shape)) for w in direct.weights]
    for a, b in zip(via_moco.weights, direct.weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.path)
    # the key encoder is the encoder's copy, same weights in the same order
    assert [w.shape for w in direct.key_encoder.weights] == [w.shape for w in direct.encoder.weights]
    for k, q in zip(direct.key_encoder.weights, direct.encoder.weights):
        np.testing.assert_array_equal(np.asarray(k), np.asarray(q))
    assert direct.version == version


def test_v2_has_a_queue_and_v3_a_predictor():
    v2, v3 = moco("v2"), moco("v3")
    assert tuple(v2.queue.shape) == (24, 8) and not hasattr(v3, "queue")
    assert v3.predictor is not None and not hasattr(v2, "predictor")
    assert v3.query_layers()[-1] is v3.predictor


def _plain_encoder():
    inputs = keras.Input((8, 8, 3))
    x = keras.layers.GlobalAveragePooling2D()(keras.layers.Conv2D(4, 3)(inputs))
    return keras.Model(inputs, keras.layers.Dense(16)(x))


@pytest.mark.parametrize("version", ["v2", "v3"])
def test_config_round_trip_and_legacy_moco_config(version):
    aug = khn.augment.simclr_augmentation(image_size=8, seed=0)
    model = khn.models.MoCo(_plain_encoder(), projection_dims=(16, 8), queue_size=24,
                            version=version, augmentation=aug)
    config = model.get_config()
    assert "version" not in config
    again = type(model).from_config(config)
    assert type(again) is type(model)
    assert isinstance(again.view_maker, khn.augment.ImageViews)
    assert again.augmentation.get_config() == aug.get_config()
    assert [tuple(w.shape) for w in again.weights] == [tuple(w.shape) for w in model.weights]
    # A config written before the split (class MoCo, with version and both keys) still builds.
    legacy = {**model.get_config(), "version": version, "queue_size": 24, "predictor_dims": None, "seed": 0}
    old = keras.saving.deserialize_keras_object(
        {"module": "keras_hardneg.models.moco", "class_name": "MoCo", "config": legacy,
         "registered_name": "keras_hardneg>MoCo"})
    assert type(old) is type(model)


def test_frameworks_registry_builds_the_classes():
    from keras_hardneg.registry import FRAMEWORKS, ConfigError

    assert FRAMEWORKS.defaults("moco_v2") == {"queue_size": 65536, "momentum": 0.999,
                                              "symmetric": False}
    assert FRAMEWORKS.defaults("moco_v3") == {"momentum": 0.999}
    assert FRAMEWORKS.get("simclr").factory is khn.models.SimCLR
    model = FRAMEWORKS.build("moco_v2", tiny_encoder(), queue_size=16, momentum=0.5)
    assert type(model) is khn.models.MoCoV2 and model.queue_size == 16 and model.momentum == 0.5
    assert not model.symmetric
    assert FRAMEWORKS.build("moco_v2", tiny_encoder(), queue_size=16, symmetric=True).symmetric
    assert type(FRAMEWORKS.build("moco_v3", tiny_encoder())) is khn.models.MoCoV3
    with pytest.raises(ConfigError, match="momentum"):
        FRAMEWORKS.check("moco_v3", {"momentum": 2.0})
    with pytest.raises(ConfigError, match="queue_size"):
        FRAMEWORKS.check("moco_v2", {"queue_size": 0})


def test_symmetric_round_trips_through_the_config_and_trains_with_each_loss():
    model = moco("v2", symmetric=True)
    again = khn.models.MoCoV2.from_config(model.get_config())
    assert again.symmetric is True and moco("v2").get_config()["symmetric"] is False
    for loss_name in ("hard", "unremix"):  # unremix: dict queries, array keys
        model = moco("v2", symmetric=True)
        model.compile(optimizer=sgd(), loss=LOSSES[loss_name]())
        x, y = views(labels=True)
        logs = model.train_on_batch(x, y, return_dict=True)
        assert np.isfinite(logs["loss"]) and logs["nonfinite_steps"] == 0
        assert int(model.queue_pointer.numpy()) == 2 * len(y) % model.queue_size


def test_moco_is_a_function_not_a_class_that_misleads():
    """``MoCo(..., version=...)`` is a plain function returning a :class:`MoCoV2` or
    :class:`MoCoV3`: no class whose ``isinstance`` / ``issubclass`` answers are made up by a
    metaclass and that cannot be subclassed. The family's real base is
    :class:`MomentumContrast`; configs saved under the name ``MoCo`` still load."""
    import inspect

    assert inspect.isfunction(khn.models.MoCo) and not inspect.isclass(khn.models.MoCo)
    assert issubclass(khn.models.MoCoV2, khn.models.MomentumContrast)
    assert issubclass(khn.models.MoCoV3, khn.models.MomentumContrast)

    class MyMoCo(khn.models.MoCoV2):  # the classes subclass as any Keras model
        pass

    mine = MyMoCo(tiny_encoder(), projection_dims=(16, 8), queue_size=8)
    assert isinstance(mine, khn.models.MoCoV2)
    v3 = khn.models.MoCo(tiny_encoder(), projection_dims=(16, 8), version="v3")
    assert type(v3) is khn.models.MoCoV3
    legacy = {"module": None, "class_name": "MoCo", "registered_name": "keras_hardneg>MoCo",
              "config": {**v3.get_config(), "version": "v3", "queue_size": 8}}
    assert type(keras.saving.deserialize_keras_object(legacy)) is khn.models.MoCoV3
