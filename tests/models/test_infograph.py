"""InfoGraph (keras_hardneg.models.infograph): the local-global pairs, the loss against a
NumPy transcription (contrastive and JSD), padding nodes weigh nothing, fit on small graphs
with NT-Xent, debiased and hard negatives, its input formats, refusals, serialization; under
JAX the train step compiles once over an epoch of varied graphs. Runs under TF and JAX."""

import keras
import numpy as np
import pytest

import keras_hardneg as khn
import keras_hardneg.models  # noqa: F401  (registers the frameworks)
from keras_hardneg.data.graphs import pad_graphs
from keras_hardneg.models.infograph import (InfoGraph, jsd_local_global_loss,
                                            local_global_pairs)
from keras_hardneg.registry import FRAMEWORKS
from tests.models.graph_helpers import (F, GraphBatches, compiled, count_jax_traces,
                                        random_graph)
from tests.models.helpers import LOSSES

pytestmark = pytest.mark.backends

ON_JAX = keras.backend.backend() == "jax"
# InfoGraph's three (HCL's set-up), eager steps under TensorFlow; under JAX, where each costs
# an XLA compilation of the step, the compiled fit below covers the hard loss.
STEP_LOSSES = [] if ON_JAX else ["nt_xent", "debiased", "hard"]


def encoder():
    return khn.encoders.gin(input_shape=(F,), width=4, num_layers=2)


def np_(x):
    return np.asarray(keras.ops.convert_to_numpy(x))


def graphs(seed=0, count=4):
    rng = np.random.default_rng(seed)
    return [random_graph(rng) for _ in range(count)]


def test_registered_for_graphs():
    comp = FRAMEWORKS.get("infograph")
    assert comp.tags["modality"] == "graph"
    assert comp.defaults() == {"estimator": "contrastive"}


def test_local_global_pairs():
    rng = np.random.default_rng(0)
    local, glob = rng.normal(size=(6, 3)), rng.normal(size=(3, 3))
    node_graph = np.array([0, 0, 1, 2, 3, 3])  # two padding nodes (graph B = 3)
    pairs = local_global_pairs(local.astype("float32"), glob.astype("float32"), node_graph,
                               graph_mask=np.array([1, 1, 0], "float32"))
    # N counts the real graphs other than the anchor's own: graph 2 is padding.
    assert int(np_(pairs.num_negatives)) == 1 and np_(pairs.negative_cos).shape == (6, 3)
    unit = glob / np.linalg.norm(glob, axis=1, keepdims=True)
    own = np.minimum(node_graph, 2)
    np.testing.assert_allclose(np_(pairs.positives), unit[own], rtol=1e-5)
    # own graph and the empty padding graph (graph_mask 0) are never negatives
    expected = (own[:, None] != np.arange(3)[None]) & (np.array([1, 1, 0]) > 0)[None]
    np.testing.assert_array_equal(np_(pairs.negative_mask), expected)


@pytest.mark.parametrize("name", ["debiased", "hard", "ring", "unremix"])
def test_padding_graphs_are_not_counted_among_the_negatives(name):
    """With empty padding graphs (``graph_mask`` 0) each real node has ``G_real - 1``
    negatives, and the losses that use ``N`` (the debiasing, the hard-negative mean, Ring's
    band, UnReMix's representativeness) use that count: the per-node losses equal a batch
    with the padding graphs removed."""
    from tests.losses import numpy_reference as ref

    rng = np.random.default_rng(1)
    local = rng.normal(size=(7, 5)).astype("float32")
    glob = rng.normal(size=(6, 5)).astype("float32")
    node_graph = np.array([0, 0, 1, 2, 3, 3, 6])  # node 6 is padding (graph B = 6)
    graph_mask = np.array([1, 1, 1, 1, 0, 0], "float32")  # graphs 4, 5: padding
    loss = LOSSES[name]()
    padded = loss.anchor_terms(local_global_pairs(local, glob, node_graph, graph_mask))["loss"]
    real = loss.anchor_terms(local_global_pairs(local[:6], glob[:4], node_graph[:6]))["loss"]
    np.testing.assert_allclose(np_(padded)[:6], np_(real), rtol=1e-5, atol=1e-6)
    if name in ("debiased", "hard", "ring"):  # against the NumPy transcription too
        lu = local / np.linalg.norm(local, axis=1, keepdims=True)
        gu = glob[:4] / np.linalg.norm(glob[:4], axis=1, keepdims=True)
        fn = {"debiased": ref.debiased, "hard": ref.hard, "ring": ref.ring}[name]
        kw = dict(tau_plus=0.1, beta=1.0, lower=5, upper=60)
        for n in range(6):
            logits = lu[n] @ gu.T / 0.5
            g = node_graph[n]
            want = fn(logits[g], np.delete(logits, g), 0.5, **kw)
            assert float(np_(padded)[n]) == pytest.approx(want, rel=1e-4, abs=1e-5), n


def _reference_loss(local, glob, batch, temperature=0.5):
    """NumPy InfoNCE over real nodes: positive own graph, negatives the other graphs."""
    lu = local / np.maximum(np.linalg.norm(local, axis=1, keepdims=True), 1e-12)
    gu = glob / np.linalg.norm(glob, axis=1, keepdims=True)
    logits = lu @ gu.T / temperature
    losses = []
    for n in np.flatnonzero(batch["node_mask"]):
        g = batch["node_graph"][n]
        losses.append(np.log(np.exp(logits[n]).sum()) - logits[n, g])
    return float(np.mean(losses))


def _reference_jsd(local, glob, batch):
    t = local @ glob.T
    real = batch["node_mask"] > 0
    pos = np.zeros_like(t, bool)
    pos[np.flatnonzero(real), batch["node_graph"][real]] = True
    sp = np.logaddexp(0, -t)
    e_pos = (np.log(2) - sp)[pos].mean()
    e_neg = (sp + t - np.log(2))[real[:, None] & ~pos].mean()
    return float(e_neg - e_pos)


@pytest.mark.parametrize("estimator", ["contrastive", "jsd"])
def test_loss_matches_numpy_and_padding_weighs_nothing(estimator):
    keras.utils.set_random_seed(0)
    model = InfoGraph(encoder(), estimator=estimator)
    model.compile(optimizer="sgd", loss=khn.losses.NTXentLoss(temperature=0.5))
    gs = graphs()
    values = []

    def forward(batch):
        loss = model.contrastive_forward(batch, None, None, training=False)["loss"]
        g, nodes = model.encoder(batch, return_nodes=True)
        return loss, model.local_projector(nodes), model.projector(g)

    forward = compiled(model, forward)
    for budgets in ((24, 48), (40, 64)):
        batch = pad_graphs(gs, budgets)
        loss, local, glob = (np_(t) for t in forward(batch))
        ref = (_reference_loss(local, glob, batch) if estimator == "contrastive"
               else _reference_jsd(local, glob, batch))
        assert float(loss) == pytest.approx(ref, rel=1e-4, abs=1e-5)
        values.append(float(loss))
    assert values[0] == pytest.approx(values[1], rel=1e-5, abs=1e-6)


def test_jsd_of_zero_scores_is_zero():
    z = np.zeros((3, 2), "float32")
    assert float(np_(jsd_local_global_loss(z, z[:2], np.array([0, 1, 2]),
                                           np.array([1, 1, 0], "float32")))) == 0.0


@pytest.mark.parametrize("name", STEP_LOSSES)
def test_train_steps_with_infographs_losses(name):
    keras.utils.set_random_seed(0)
    model = InfoGraph(encoder())
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=LOSSES[name](),
                  run_eagerly=not ON_JAX)
    before = [np_(w) for w in model.trainable_weights]
    batch, labels = GraphBatches(num_batches=1, batch_size=4, plain=True)[0]
    logs = model.train_on_batch(batch, labels, return_dict=True)
    assert np.isfinite(logs["loss"]) and logs["nonfinite_steps"] == 0
    assert 0.0 <= logs["false_negative_rate"] <= 1.0
    assert ("clamp_fraction" in logs) == LOSSES[name]().has_clamp
    after = [np_(w) for w in model.trainable_weights]
    assert all(not np.allclose(a, b) for a, b in zip(before, after) if a.ndim == 2)


def test_compiled_fit_fills_the_bank_with_global_projections():
    model = InfoGraph(encoder(), memory_bank_size=12)
    model.compile(optimizer="adam", loss="hard")
    traces = count_jax_traces(model) if ON_JAX else []
    data = GraphBatches(num_batches=3, batch_size=4, plain="graphs", seed=2)
    before = [np_(w) for w in model.trainable_weights]
    logs = model.fit(data, epochs=1, verbose=0).history
    assert np.isfinite(logs["loss"][0]) and logs["nonfinite_steps"][-1] == 0
    assert 0.0 <= logs["false_negative_rate"][0] <= 1.0 and "clamp_fraction" in logs
    after = [np_(w) for w in model.trainable_weights]
    assert all(not np.allclose(a, b) for a, b in zip(before, after) if a.ndim == 2)
    assert np_(model.health)[:4].tolist() == [1.0, 1.0, 1.0, 1.0]
    bank = np_(model.embedding_bank)
    np.testing.assert_allclose(np.linalg.norm(bank, axis=1), 1.0, rtol=1e-5)
    if ON_JAX:  # one compilation for the epoch of varied graphs (fixed budgets)
        assert len(traces) == 1, traces


def test_input_formats():
    model = InfoGraph(encoder())
    (x, _) = GraphBatches(num_batches=1, batch_size=4)[0]
    graph = x["view1"]
    assert model.make_views(graph, training=True)[0] is graph
    assert model.make_views({"graphs": graph, "index": x["index"]}, True)[2] is x["index"]
    view1, view2, index = model.make_views(x, training=True)  # the GraphCL feed: view1
    assert view1 is graph and view2 is None and index is x["index"]
    assert np_(model(graph)).shape == (4, 8)
    with pytest.raises(ValueError, match="graph batch"):
        model.make_views({"images": np.zeros((2, 4, 4, 3))}, training=True)


def test_refusals():
    with pytest.raises(ValueError, match="estimator"):
        InfoGraph(encoder(), estimator="dv")
    with pytest.raises(ValueError, match="augmentation"):
        InfoGraph(encoder(), augmentation=keras.layers.Identity())
    model = InfoGraph(encoder(), estimator="jsd")
    with pytest.raises(ValueError, match="jsd"):
        model.compile(loss="hard")
    model.compile(loss="nt_xent")


def test_serialization_round_trip():
    model = InfoGraph(encoder(), estimator="jsd", projection_dims=(8, 6))
    assert model.projector.dims == [8, 6] and model.local_projector.dims == [8, 6]
    clone = InfoGraph.from_config(model.get_config())
    assert clone.estimator == "jsd" and clone.projection_dims == (8, 6)
    clone.set_weights(model.get_weights())
    batch = pad_graphs(graphs(), (24, 48))
    a, b = (compiled(m, lambda x, m=m: m.contrastive_forward(x, None, None, False)["loss"])
            for m in (model, clone))
    assert float(np_(a(batch))) == pytest.approx(float(np_(b(batch))), rel=1e-6)
