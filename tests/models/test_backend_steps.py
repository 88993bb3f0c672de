"""The frameworks' one step description on every backend (this module runs under TensorFlow
and again under JAX, see tests/test_backends.py): SimCLR, MoCo v2 and MoCo v3 train with
fit(); queue, momentum encoder, embedding bank, metrics and the non-finite guard behave the
same; under JAX the train step compiles a bounded number of times."""

import keras
import numpy as np
import pytest

import keras_hardneg as khn
from tests.models.helpers import sgd, tiny_encoder, views

pytestmark = pytest.mark.backends

FRAMEWORKS = {
    "simclr": (lambda **kw: khn.models.SimCLR(tiny_encoder(), projection_dims=(16, 8), **kw),
               lambda: khn.losses.HardNegativeContrastiveLoss(temperature=0.5, beta=1.0)),
    "moco_v2": (lambda **kw: khn.models.MoCo(tiny_encoder(), projection_dims=(16, 8),
                                             queue_size=24, momentum=0.9, version="v2", **kw),
                lambda: khn.losses.NTXentLoss(temperature=0.2)),
    "moco_v3": (lambda **kw: khn.models.MoCo(tiny_encoder(), projection_dims=(16, 8),
                                             momentum=0.9, version="v3", **kw),
                lambda: khn.losses.DebiasedContrastiveLoss(temperature=0.5, tau_plus=0.1)),
}


def _np(v):
    return np.array(keras.ops.convert_to_numpy(v))


# MoCo v2 is covered by the queue test below (one compilation per framework: JAX compiles
# are the cost of this module).
@pytest.mark.parametrize("kind", ["simclr", "moco_v3"])
def test_one_fit_step_trains_and_fills_the_bank(kind):
    build, loss = FRAMEWORKS[kind]
    model = build(memory_bank_size=20)
    model.compile(optimizer=sgd(), loss=loss())
    x, y = views(n=8, labels=True)
    index = np.array([0, 2, 4, 6, 8, 10, 12, 19])
    before = [_np(w) for w in model.encoder.trainable_weights]
    history = model.fit({**x, "index": index}, y, batch_size=8, epochs=1, verbose=0)
    logs = {k: v[-1] for k, v in history.history.items()}
    assert np.isfinite(logs["loss"]) and logs["loss"] > 0
    for key in ("positive_cosine", "negative_cosine", "false_negative_rate"):
        assert np.isfinite(logs[key]), key
    assert ("clamp_fraction" in logs) == loss().has_clamp
    assert logs["nonfinite_steps"] == 0
    after = [_np(w) for w in model.encoder.trainable_weights]
    assert any(not np.allclose(a, b) for a, b in zip(before, after))
    bank = _np(model.embedding_bank)
    np.testing.assert_allclose(np.linalg.norm(bank[index], axis=1), 1.0, rtol=1e-5)
    assert np.all(bank[np.setdiff1d(np.arange(20), index)] == 0)
    health = _np(model.health)
    assert health[:4].tolist() == [1.0, 1.0, 1.0, 1.0]  # loss, terms, gradients finite


def test_moco_v2_queue_is_fifo_and_key_encoder_is_the_momentum_average():
    m = 0.75
    model = khn.models.MoCo(tiny_encoder(), projection_dims=(16, 8), queue_size=12,
                            momentum=m, version="v2", memory_bank_size=20)
    model.compile(optimizer=sgd(), loss=FRAMEWORKS["moco_v2"][1]())
    model.key_encoder.set_weights([w * 0.5 for w in model.encoder.get_weights()])
    key_before = [_np(w) for w in model.key_encoder.trainable_weights]
    query_before = [_np(w) for w in model.encoder.trainable_weights]
    for step in range(4):  # 4 batches of 4 keys into 12 slots: wraps around once
        x = {**views(n=4, seed=step), "index": np.arange(4) + 4 * step}
        before = [_np(w) for w in model.encoder.trainable_weights]
        model.reset_metrics()
        logs = model.train_on_batch(x, np.full(4, [0, 1, 2, 1][step]), return_dict=True)
        assert np.isfinite(logs["loss"]) and logs["nonfinite_steps"] == 0
        after = [_np(w) for w in model.encoder.trainable_weights]
        assert any(not np.allclose(a, b) for a, b in zip(before, after))
        if step == 0:
            key_after = [_np(w) for w in model.key_encoder.trainable_weights]
            for kb, qb, ka in zip(key_before, query_before, key_after):
                np.testing.assert_allclose(ka, m * kb + (1 - m) * qb, rtol=1e-5, atol=1e-6)
    queue = _np(model.queue)
    np.testing.assert_allclose(np.linalg.norm(queue, axis=1), 1.0, rtol=1e-5)
    # Oldest batch (step 0) was overwritten by step 3; steps 1, 2 still in place.
    assert _np(model.queue_labels).tolist() == [1] * 4 + [1] * 4 + [2] * 4
    assert int(_np(model.queue_pointer)) == 4
    key_ids = {id(v) for v in model.key_encoder.weights + model.key_projector.weights}
    assert key_ids.isdisjoint(id(v) for v in model.trainable_variables)
    # the last batch (label 1) saw a queue labelled [0]*4 + [1]*4 + [2]*4
    assert logs["false_negative_rate"] == pytest.approx(1 / 3)
    bank = _np(model.embedding_bank)
    np.testing.assert_allclose(np.linalg.norm(bank[:16], axis=1), 1.0, rtol=1e-5)
    assert np.all(bank[16:] == 0)


def _info_nce(q, k, negatives, t):
    """NumPy InfoNCE with a queue (spec: NT-Xent, queue convention), mean over anchors."""
    unit = lambda a: a / np.linalg.norm(a, axis=1, keepdims=True)  # noqa: E731
    q, k, negatives = unit(q), unit(k), unit(negatives)
    pos = np.sum(q * k, axis=1) / t
    neg = q @ negatives.T / t
    return float(np.mean(np.log(np.exp(pos) + np.exp(neg).sum(axis=1)) - pos))


def test_moco_v2_symmetric_loss_is_the_mean_of_both_orders_and_enqueues_both_keys():
    # A frozen key branch (momentum 1): the keys and queries the step uses are computed
    # beforehand, each pass its own batch-norm batch as in the step.
    t, n = 0.2, 4
    model = khn.models.MoCo(tiny_encoder(), projection_dims=(16, 8), queue_size=12,
                            momentum=1.0, version="v2", symmetric=True)
    model.compile(optimizer=sgd(), loss=khn.losses.NTXentLoss(temperature=t))
    x = views(n=n, seed=5)
    v1, v2 = (keras.ops.convert_to_tensor(x[k]) for k in ("view1", "view2"))
    q1, q2 = _np(model.query(v1, True)), _np(model.query(v2, True))
    k1, k2 = _np(model.keys(v1)), _np(model.keys(v2))
    queue = _np(model.queue)
    logs = model.train_on_batch(x, np.array([0, 1, 2, 1]), return_dict=True)
    expected = 0.5 * (_info_nce(q1, k2, queue, t) + _info_nce(q2, k1, queue, t))
    assert logs["loss"] == pytest.approx(expected, rel=1e-4)
    assert _info_nce(q1, k2, queue, t) != pytest.approx(expected, rel=1e-3)  # both count
    unit = lambda a: a / np.linalg.norm(a, axis=1, keepdims=True)  # noqa: E731
    np.testing.assert_allclose(_np(model.queue)[:2 * n], unit(np.concatenate([k2, k1])),
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(_np(model.queue)[2 * n:], queue[2 * n:])  # untouched
    assert _np(model.queue_labels)[:2 * n].tolist() == [0, 1, 2, 1] * 2
    assert int(_np(model.queue_pointer)) == 2 * n


def test_false_negative_rate_and_test_step():
    model = khn.models.SimCLR(tiny_encoder(), projection_dims=(16, 8))
    model.compile(optimizer=sgd())
    x = views(n=4)
    # Labels [0, 0, 1, 1]: each anchor has 6 negatives, 2 of them its pair-mate's views.
    logs = model.test_on_batch(x, np.array([0, 0, 1, 1]), return_dict=True)
    assert logs["false_negative_rate"] == pytest.approx(2 / 6)
    z1, z2 = model.project(x["view1"], x["view2"], training=False)
    np.testing.assert_allclose(logs["loss"], float(model.contrastive_loss(z1, z2)), rtol=1e-5)


def test_nan_batch_is_skipped_and_stops_the_run():
    # MoCo v2 with a frozen key branch: every weight (query and key branches, moving
    # statistics, queue) must stay as it was; SimCLR's step goes through the same code.
    model = khn.models.MoCo(tiny_encoder(), projection_dims=(16, 8), queue_size=16,
                            momentum=1.0)
    model.compile(optimizer=sgd(), loss=khn.losses.HardNegativeContrastiveLoss())
    x = views(n=16)
    x["view1"][8:] = np.nan  # the second batch is broken
    saved = {}

    class Snapshot(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 0:
                # self.model: on JAX, reading it syncs the state into the variables
                saved["w"] = [_np(w).copy() for w in self.model.weights]

    with pytest.raises(khn.models.NonFiniteError, match=r"batch 1.*non-finite.*input values"):
        model.fit(x, batch_size=8, epochs=1, shuffle=False, verbose=0, callbacks=[Snapshot()])
    # No weight (trainable, moving statistics, key branch, queue) took the broken batch.
    for v, before in zip(model.weights, saved["w"]):
        if "health" not in v.path:
            np.testing.assert_array_equal(_np(v), before, err_msg=v.path)
    h = dict(zip(khn.models.HEALTH_FIELDS, _np(model.health).tolist()))
    # (TensorFlow's CPU kernels turn the NaN pixels into finite projections and a NaN
    # gradient; JAX propagates them to the loss: either way the step is not finite.)
    assert min(h["loss_finite"], h["gradients_finite"]) == 0.0
    assert h["input_nonfinite_values"] == 8 * 8 * 8 * 3


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="counts JAX compilations")
def test_jax_train_step_compiles_a_bounded_number_of_times_with_augmentation():
    import jax

    aug = khn.augment.simclr_augmentation(image_size=8, seed=1)
    model = khn.models.SimCLR(tiny_encoder(), projection_dims=(16, 8), augmentation=aug)
    model.compile(optimizer=sgd(), loss="hard")
    traces = []
    step = model.train_step

    def counted(*args):
        traces.append(1)  # runs only when jax traces the step
        return step(*args)

    model.train_step = counted
    compiles = []
    listener = lambda event, duration, **kw: compiles.append(event)  # noqa: E731
    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        images = views(n=160)["view1"]
        history = model.fit(images, batch_size=8, epochs=1, verbose=0)  # 20 steps
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    backend_compiles = [e for e in compiles if e == "/jax/core/compile/backend_compile_duration"]
    assert np.isfinite(history.history["loss"][0])
    assert len(traces) == 1, traces
    # One compilation of the step, plus a few small ones (metrics, state sync); not per step.
    assert len(backend_compiles) <= 10, len(backend_compiles)
