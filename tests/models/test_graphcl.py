"""GraphCL (keras_hardneg.models.graphcl): fit on small graphs with every loss of the family,
the loss equals the family's loss on the model's projections (both pairings), model(graph),
serialization, errors; under JAX the train step compiles once over an epoch of varied graphs
with fixed budgets. Runs under TensorFlow and JAX."""

import keras
import numpy as np
import pytest

import keras_hardneg as khn
import keras_hardneg.models  # noqa: F401  (registers the frameworks)
from keras_hardneg.losses import core
from keras_hardneg.registry import FRAMEWORKS
from tests.models.graph_helpers import F, GraphBatches, compiled, count_jax_traces
from tests.models.helpers import LOSSES

pytestmark = pytest.mark.backends

ON_JAX = keras.backend.backend() == "jax"
# Under JAX every loss costs an XLA compilation of the whole step (eager JAX compiles op by
# op): a covering subset there (UnReMix: the head's features path; the compiled fit below
# takes the hard loss); the loss math itself is checked on both backends in tests/losses.
STEP_LOSSES = ["unremix"] if ON_JAX else sorted(LOSSES)
PAIRINGS = ["cross_view"] if ON_JAX else ["cross_view", "in_batch"]


def encoder():
    return khn.encoders.gin(input_shape=(F,), width=4, num_layers=2)


def np_(x):
    return np.asarray(keras.ops.convert_to_numpy(x))


def test_registered_for_graphs():
    comp = FRAMEWORKS.get("graphcl")
    assert comp.tags["modality"] == "graph"
    assert comp.defaults() == {"head_version": "moco_v2", "pairing": "cross_view"}


@pytest.mark.parametrize("name", STEP_LOSSES)
def test_train_steps_with_every_loss_of_the_family(name):
    # TensorFlow: eager steps (a traced step per loss costs seconds each); fit() with the
    # compiled step is checked below (and under JAX, its compilations counted).
    keras.utils.set_random_seed(0)
    model = khn.models.GraphCL(encoder(), projection_dims=(8, 8))
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=LOSSES[name](),
                  run_eagerly=not ON_JAX)
    before = [np_(w) for w in model.encoder.trainable_weights]
    x, labels = GraphBatches(num_batches=1, batch_size=4)[0]
    logs = model.train_on_batch(x, labels, return_dict=True)
    assert np.isfinite(logs["loss"]) and logs["nonfinite_steps"] == 0
    assert 0.0 <= logs["false_negative_rate"] <= 1.0
    assert ("clamp_fraction" in logs) == LOSSES[name]().has_clamp
    after = [np_(w) for w in model.encoder.trainable_weights]
    assert any(not np.allclose(a, b) for a, b in zip(before, after))


def test_compiled_fit_fills_the_bank_and_the_health_record():
    model = khn.models.GraphCL(encoder(), projection_dims=(8, 8), memory_bank_size=12)
    model.compile(optimizer="adam", loss="hard")
    traces = count_jax_traces(model) if keras.backend.backend() == "jax" else []
    logs = model.fit(GraphBatches(num_batches=3, batch_size=4), epochs=1, verbose=0).history
    assert np.isfinite(logs["loss"][0]) and logs["nonfinite_steps"][-1] == 0
    bank = np_(model.embedding_bank)
    np.testing.assert_allclose(np.linalg.norm(bank, axis=1), 1.0, rtol=1e-5)
    assert np_(model.health)[:4].tolist() == [1.0, 1.0, 1.0, 1.0]
    if keras.backend.backend() == "jax":  # one compilation for the epoch of varied graphs
        assert len(traces) == 1, traces


@pytest.mark.parametrize("pairing", PAIRINGS)
def test_loss_is_the_family_loss_of_the_projections(pairing):
    keras.utils.set_random_seed(0)
    model = khn.models.GraphCL(encoder(), projection_dims=(8, 8), pairing=pairing)
    loss = khn.losses.HardNegativeContrastiveLoss(temperature=0.5, beta=1.0)
    model.compile(optimizer="sgd", loss=loss)
    (x, labels) = GraphBatches(num_batches=1, batch_size=4)[0]

    def forward(x):
        step = model.contrastive_forward(x["view1"], x["view2"], None, training=False)
        h1, h2 = model(x["view1"]), model.encoder(x["view2"])
        z1, z2 = model.projector(h1), model.projector(h2)
        if pairing == "cross_view":
            pairs = core.cross_view_pairs(z1, z2)  # GraphCL: B anchors, B - 1 negatives
            assert pairs.num_negatives == 3
        else:
            pairs = core.in_batch_pairs(z1, z2)
        return step["loss"], keras.ops.mean(loss.anchor_terms(pairs)["loss"]), h1

    got, expected, h1 = (np_(t) for t in compiled(model, forward)(x))
    assert float(got) == pytest.approx(float(expected), rel=1e-5, abs=1e-6)
    assert h1.shape == (4, 8)


def test_views_may_be_raw_graph_batches_for_a_view_maker_and_call_takes_graphs():
    (x, labels) = GraphBatches(num_batches=1, batch_size=4)[0]
    model = khn.models.GraphCL(encoder(), projection_dims=(8, 8))
    graph = x["view1"]
    np.testing.assert_allclose(np_(model(graph)), np_(model({"view1": graph})), rtol=1e-6)
    v1, v2, index = model.make_views(x, training=True)
    assert v1 is x["view1"] and index is x["index"]
    with pytest.raises(ValueError, match="no `augmentation`"):
        model.make_views(graph, training=True)


def test_serialization_round_trip():
    model = khn.models.GraphCL(encoder(), pairing="in_batch")
    assert model.projection_dims == (8, 8) and model.head_version == "moco_v2"
    clone = khn.models.GraphCL.from_config(model.get_config())
    assert clone.pairing == "in_batch" and clone.projection_dims == (8, 8)
    clone.set_weights(model.get_weights())
    graph = GraphBatches(num_batches=1)[0][0]["view1"]
    np.testing.assert_allclose(np_(clone(graph)), np_(model(graph)), rtol=1e-6)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="pairing"):
        khn.models.GraphCL(encoder(), pairing="both")
    with pytest.raises(ValueError, match="encoder"):
        khn.models.GraphCL("gin")
