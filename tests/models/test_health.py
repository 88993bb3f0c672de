"""Model health: the step record, the guarded state, and NonFiniteGuard (which fit attaches)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_hardneg as khn
from keras_hardneg.models.health import (HEALTH_FIELDS, GuardedState, NonFiniteError,
                                          NonFiniteGuard, health_values)
from tests.models.helpers import sgd, tiny_encoder, views


@pytest.mark.parametrize("framework", ["simclr", "moco"])
def test_nan_input_stops_the_run_with_a_report_and_keeps_weights(framework):
    enc = tiny_encoder()
    if framework == "simclr":
        model = khn.models.SimCLR(enc, projection_dims=(16, 8))
    else:
        model = khn.models.MoCo(enc, projection_dims=(16, 8), queue_size=16, momentum=1.0)
    model.compile(optimizer=sgd(), loss=khn.losses.HardNegativeContrastiveLoss())
    x = views(n=16)
    x["view1"][8:] = np.nan  # the second batch is broken
    weights_after_first = {}

    class Snapshot(khn.callbacks.NonFiniteGuard.__bases__[0]):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 0:
                weights_after_first["w"] = [w.numpy().copy() for w in model.weights]

    with pytest.raises(khn.callbacks.NonFiniteError, match=r"batch 1.*non-finite.*input values"):
        model.fit(x, batch_size=8, epochs=1, shuffle=False, verbose=0, callbacks=[Snapshot()])
    # No weight (trainable, moving statistics, queue) took the broken batch.
    for v, before in zip(model.weights, weights_after_first["w"]):
        if "health" not in v.path:
            np.testing.assert_array_equal(v.numpy(), before, err_msg=v.path)


def test_callbacks_reexport_the_guard():
    assert khn.callbacks.NonFiniteGuard is NonFiniteGuard is khn.models.NonFiniteGuard
    assert khn.callbacks.NonFiniteError is NonFiniteError


def test_health_values_name_what_broke():
    views = [tf.constant([[0.0, 2.0], [np.nan, -1.0]]), tf.constant([[0.5, 0.5], [0.5, 0.5]])]
    projections = [{"embeddings": tf.constant([[np.inf, 0.0]])}, tf.constant([[1.0, 0.0]])]
    terms = {"positive_cosine": tf.constant(0.5), "negative_cosine": tf.constant(np.nan)}
    h = dict(zip(HEALTH_FIELDS, health_values(views, projections, terms, tf.constant(1.0),
                                              tf.constant(False)).numpy().tolist()))
    assert h == {"loss_finite": 1.0, "positive_term_finite": 1.0, "negative_term_finite": 0.0,
                 "gradients_finite": 0.0, "input_min": -1.0, "input_max": 2.0,
                 "input_nonfinite_values": 1.0, "projection_nonfinite_values": 1.0}


def test_guarded_state_restores_moving_statistics_only_when_not_finite():
    bn = keras.layers.BatchNormalization()
    bn.build((None, 3))
    guard = GuardedState([bn, None, bn])  # shared / missing layers are fine
    assert len(guard.variables) == 2  # moving mean and variance, once each
    snapshot = guard.snapshot()
    bn(np.ones((4, 3), "float32") * 5, training=True)
    moved = [v.numpy().copy() for v in guard.variables]
    guard.restore_unless(tf.constant(True), snapshot)
    for v, m in zip(guard.variables, moved):
        np.testing.assert_array_equal(v.numpy(), m)
    guard.restore_unless(tf.constant(False), snapshot)
    for v, old in zip(guard.variables, snapshot):
        np.testing.assert_array_equal(v.numpy(), old.numpy())


@pytest.mark.parametrize("version", ["v2", "v3"])
def test_moco_guards_both_branches(version):
    model = khn.models.MoCo(tiny_encoder(), projection_dims=(16, 8), queue_size=8, version=version)
    layers = model.guarded_layers()
    for layer in (model.encoder, model.projector, model.key_encoder, model.key_projector):
        assert any(layer is g for g in layers)
    assert any(getattr(model, "predictor", None) is g for g in layers) == (version == "v3")


def test_fit_attaches_one_guard(monkeypatch):
    seen = []

    class Spy(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            seen.extend(type(c).__name__ for c in self.model._spy_callbacks)

    model = khn.models.SimCLR(tiny_encoder(), projection_dims=(16, 8))
    model.compile(optimizer=sgd())
    original_fit = keras.Model.fit

    def recording_fit(self, *args, callbacks=None, **kwargs):
        self._spy_callbacks = list(callbacks)
        return original_fit(self, *args, callbacks=callbacks, **kwargs)

    monkeypatch.setattr(keras.Model, "fit", recording_fit)
    model.fit(views(n=8), batch_size=8, epochs=1, verbose=0, callbacks=[Spy()])
    # The guard first; fit's DroppedBatchWarning (a batch without negatives) last.
    assert seen == ["NonFiniteGuard", "Spy", "DroppedBatchWarning"]
    seen.clear()
    mine = NonFiniteGuard(raise_error=False)
    model.fit(views(n=8), batch_size=8, epochs=1, verbose=0, callbacks=[Spy(), mine])
    assert seen == ["Spy", "NonFiniteGuard", "DroppedBatchWarning"]  # a given guard: not doubled


def test_guard_config_round_trip():
    guard = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(NonFiniteGuard(raise_error=False)))
    assert isinstance(guard, NonFiniteGuard) and guard.raise_error is False
