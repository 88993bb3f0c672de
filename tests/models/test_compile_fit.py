"""What ``compile`` and ``fit`` promise a Keras user (issue 48, items 5-7): ``metrics=`` is
refused in one line (the frameworks show their own); ``jit_compile="auto"`` resolves as
Keras resolves it; the non-finite guard is a default that ``compile(nonfinite_guard=False)``
leaves out; the loss's ``reduction`` and the data's ``sample_weight`` reach the training
and test steps of every framework (one reduction path, :meth:`ContrastiveLoss.reduce`),
and a per-anchor ``reduction=None`` is refused at ``compile``. Runs under TF and JAX."""

import keras
import numpy as np
import pytest

import keras_hardneg as khn
from keras_hardneg.data.graphs import pad_graphs
from keras_hardneg.losses import core
from tests.models.graph_helpers import F, random_graph
from tests.models.helpers import tiny_encoder, views

pytestmark = pytest.mark.backends

ON_JAX = keras.backend.backend() == "jax"


def np_(x):
    return np.asarray(keras.ops.convert_to_numpy(x), dtype="float64")


def _simclr(**compile_kw):
    keras.utils.set_random_seed(0)
    model = khn.models.SimCLR(tiny_encoder(), projection_dims=(16, 8))
    model.compile(optimizer=keras.optimizers.SGD(0.1), **compile_kw)
    return model


# ------------------------------------------------------------------------ metrics
@pytest.mark.parametrize("key", ["metrics", "weighted_metrics"])
def test_compile_refuses_keras_metrics_in_one_line(key):
    model = khn.models.SimCLR(tiny_encoder(), projection_dims=(16, 8))
    with pytest.raises(ValueError) as e:
        model.compile(optimizer="sgd", **{key: ["accuracy"]})
    message = str(e.value)
    assert f"`{key}`" in message and "\n" not in message, message
    assert "positive_cosine" in message and "KNNMonitor" in message, message
    model.compile(optimizer="sgd", **{key: None})  # None (Keras's default) is fine
    model.compile(optimizer="sgd", **{key: []})


# -------------------------------------------------------------------- jit_compile
class _FakeGPU:
    device_type, name = "GPU", "/physical_device:GPU:0"


def _keras_auto():
    """What Keras's own ``compile(jit_compile="auto")`` resolves to here."""
    plain = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    plain.compile(optimizer="sgd", loss="mse", jit_compile="auto")
    return plain.jit_compile


@pytest.mark.parametrize("gpu", [False, True])
def test_jit_compile_auto_means_what_keras_means(gpu, monkeypatch):
    """TensorFlow: XLA off on a CPU-only machine, on with an accelerator (``gpu=True`` fakes
    one: what Keras reads); JAX: on. A model whose in-model view maker cannot be compiled
    (``jit_compatible=False``) is one Keras does not compile (``supports_jit``)."""
    if gpu and ON_JAX:
        pytest.skip("JAX's auto does not depend on the devices")
    if gpu:
        import tensorflow as tf

        real = tf.config.list_physical_devices
        monkeypatch.setattr(tf.config, "list_physical_devices",
                            lambda kind=None: real(kind) + ([_FakeGPU()] if kind in (None, "GPU")
                                                            else []))
    expected = _keras_auto()
    assert expected == (ON_JAX or gpu)
    model = khn.models.SimCLR(tiny_encoder(), projection_dims=(16, 8))
    model.compile(optimizer="sgd", jit_compile="auto")
    assert model.jit_compile == expected
    hosted = khn.models.SimCLR(tiny_encoder(), projection_dims=(16, 8),
                               augmentation=_HostViews())
    hosted.compile(optimizer="sgd", jit_compile="auto")
    assert hosted.jit_compile is False
    with pytest.raises(ValueError, match="jit_compile=True"):
        hosted.compile(optimizer="sgd", jit_compile=True)


class _HostViews(khn.augment.ViewMaker):
    """A view maker that cannot run inside a compiled step."""

    jit_compatible = False

    def make_views(self, x, training):
        return x, x


# ---------------------------------------------------------------- non-finite guard
def test_the_nonfinite_guard_is_a_default_that_can_be_left_out():
    x = views(n=8)
    x["view1"][0, 0, 0, 0] = np.nan
    model = _simclr()
    assert model.nonfinite_guard is True
    with pytest.raises(khn.callbacks.NonFiniteError, match="Non-finite values at epoch 0"):
        model.fit(x, batch_size=8, epochs=1, verbose=0)
    model = _simclr(nonfinite_guard=False)
    before = [np_(w) for w in model.trainable_weights]
    history = model.fit(x, batch_size=8, epochs=2, verbose=0)  # runs on, as Keras's fit
    assert history.history["nonfinite_steps"] == [1.0, 1.0]
    # The step itself still skips a non-finite update (the weights are as they were).
    for a, b in zip(before, model.trainable_weights):
        np.testing.assert_array_equal(a, np_(b))
    with pytest.raises(ValueError, match="`nonfinite_guard` must be True, False or a "
                                         "NonFiniteGuard"):
        _simclr(nonfinite_guard="off")
    own = khn.callbacks.NonFiniteGuard(raise_error=False)
    model = _simclr(nonfinite_guard=own)
    model.fit(x, batch_size=8, epochs=1, verbose=0)
    assert own.report is not None and model.get_compile_config()["nonfinite_guard"]


# ------------------------------------------------------- reduction and sample_weight
def _reduce(values, weights, reduction):
    """NumPy transcription of the reduction of weighted per-anchor losses (as Keras)."""
    weighted = values * weights
    return {"sum": weighted.sum(), "sum_over_batch_size": weighted.mean(),
            "mean_with_sample_weight": weighted.sum() / weights.sum()}[reduction]


def _hard(reduction):
    return khn.losses.HardNegativeContrastiveLoss(temperature=0.5, reduction=reduction)


@pytest.mark.parametrize("reduction", ["sum", "mean_with_sample_weight"])
def test_simclr_steps_honour_reduction_and_sample_weight(reduction):
    x = views(n=8)
    w = np.linspace(0.2, 1.6, 8).astype("float32")
    model = _simclr(loss=_hard(reduction))
    z1, z2 = model.project(x["view1"], x["view2"], training=False)
    per_anchor = np_(_hard(None)(z1, z2))  # [2B]: view 1's rows, then view 2's
    logs = model.test_on_batch(x, sample_weight=w, return_dict=True)
    want = _reduce(per_anchor, np.concatenate([w, w]), reduction)
    assert logs["loss"] == pytest.approx(want, rel=1e-5)
    model.reset_metrics()
    logs = model.train_on_batch(x, sample_weight=w, return_dict=True)
    assert np.isfinite(logs["loss"])


def test_the_gradient_follows_the_reduction():
    """One SGD step with ``reduction="sum"`` moves every weight ``2B`` times as far as the
    default mean (the gradient of the sum over the ``2B`` anchors)."""
    x = views(n=8)
    deltas = []
    for reduction in ("sum_over_batch_size", "sum"):
        model = _simclr(loss=_hard(reduction))
        before = [np_(w) for w in model.trainable_weights]
        model.train_on_batch(x)
        deltas.append([np_(w) - b for w, b in zip(model.trainable_weights, before)])
    for mean, summed in zip(*deltas):
        np.testing.assert_allclose(summed, 16 * mean, rtol=2e-3, atol=1e-6)


@pytest.mark.parametrize("kind", ["moco_v2_symmetric", "moco_v3"])
def test_moco_steps_honour_reduction_and_sample_weight(kind):
    x = views(n=8)
    w = np.linspace(0.2, 1.6, 8).astype("float32")
    keras.utils.set_random_seed(0)
    if kind == "moco_v3":
        model = khn.models.MoCoV3(tiny_encoder(), projection_dims=(16, 8), momentum=0.9)
    else:
        model = khn.models.MoCoV2(tiny_encoder(), projection_dims=(16, 8), queue_size=16,
                                  momentum=0.9, symmetric=True)
    model.compile(optimizer="sgd", loss=_hard("sum"))
    v1, v2 = (keras.ops.convert_to_tensor(x[k]) for k in ("view1", "view2"))
    q1, q2 = model.query(v1, False), model.query(v2, False)
    k1, k2 = model.keys(v1), model.keys(v2)
    loss = _hard(None)
    if kind == "moco_v3":
        # v3 encodes both views as one 2B batch (the key branch's batch norm sees both).
        both = keras.ops.concatenate([v1, v2], axis=0)
        q1, q2 = keras.ops.split(model.query(both, False), 2, axis=0)
        k1, k2 = keras.ops.split(model.keys(both), 2, axis=0)
        terms = [loss.compute_terms(core.cross_view_pairs(q, k))["loss"]
                 for q, k in ((q1, k2), (q2, k1))]
    else:
        queue = model.queue.value
        terms = [loss.call_with_negatives(q, k, queue) for q, k in ((q1, k2), (q2, k1))]
    per_anchor = np.concatenate([np_(t) for t in terms])  # both orders' B anchors
    logs = model.test_on_batch(x, sample_weight=w, return_dict=True)
    assert logs["loss"] == pytest.approx(_reduce(per_anchor, np.concatenate([w, w]), "sum"),
                                         rel=1e-5)


def test_infograph_weighs_each_node_by_its_graphs_weight_and_masks_padding():
    rng = np.random.default_rng(0)
    batch = pad_graphs([random_graph(rng) for _ in range(4)], (32, 64))
    w = np.array([0.5, 1.0, 2.0, 0.0], "float32")
    keras.utils.set_random_seed(0)
    model = khn.models.InfoGraph(khn.encoders.gin(input_shape=(F,), width=4, num_layers=2))
    model.compile(optimizer="sgd", loss=_hard("mean_with_sample_weight"))
    g, nodes = model.encoder(batch, return_nodes=True)
    pairs = khn.models.infograph.local_global_pairs(
        model.local_projector(nodes), model.projector(g), batch["node_graph"],
        batch["graph_mask"])
    per_node = np_(_hard(None).anchor_terms(pairs)["loss"])
    real = batch["node_mask"] > 0
    node_w = w[np.minimum(batch["node_graph"], 3)] * real
    logs = model.test_on_batch(batch, sample_weight=w, return_dict=True)
    assert logs["loss"] == pytest.approx((per_node * node_w).sum() / node_w.sum(), rel=1e-5)


def test_a_per_anchor_reduction_is_refused_at_compile():
    model = khn.models.SimCLR(tiny_encoder(), projection_dims=(16, 8))
    for reduction in (None, "none"):
        with pytest.raises(ValueError) as e:
            model.compile(optimizer="sgd", loss=_hard(reduction))
        message = str(e.value)
        assert "reduction" in message and "'sum'" in message and "\n" not in message, message
