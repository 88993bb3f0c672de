"""GIN encoder (keras_hardneg.encoders.gin): permutation invariance, batching and padding do
not change a graph's embedding, batch norm ignores padding rows, serialization, errors.
Runs under TensorFlow and JAX."""

import keras
import numpy as np
import pytest

from keras_hardneg.data.graphs import pad_graphs
from keras_hardneg.encoders.gin import GINEncoder, gin
from keras_hardneg.registry import ENCODERS

pytestmark = pytest.mark.backends

F = 5


def random_graph(rng, n):
    """(features [n, F], edges [e, 2]) of a random undirected graph (both directions)."""
    feats = rng.normal(size=(n, F)).astype("float32")
    pairs = {(int(a), int(b)) for a, b in rng.integers(0, n, size=(2 * n, 2)) if a != b}
    edges = sorted(pairs | {(b, a) for a, b in pairs})
    return feats, np.array(edges, "int32").reshape(-1, 2)


def graphs(seed=0, sizes=(4, 7, 3)):
    rng = np.random.default_rng(seed)
    return [random_graph(rng, n) for n in sizes]


def np_(x):
    return np.asarray(keras.ops.convert_to_numpy(x))


_JITTED = {}


def call(enc, batch, training=False, return_nodes=False):
    """``enc(batch, ...)``; under JAX one ``jax.jit`` compilation of the whole call (op by op,
    every op and shape compiles on its own), with the moving statistics written back."""
    if keras.backend.backend() != "jax":
        return enc(batch, training=training, return_nodes=return_nodes)
    import jax

    key = (id(enc), training, return_nodes)
    if key not in _JITTED:
        def fn(trainable, non_trainable, batch):
            return enc.stateless_call(trainable, non_trainable, batch, training=training,
                                      return_nodes=return_nodes)

        _JITTED[key] = (enc, jax.jit(fn))  # keeps enc alive: its id stays unique
    out, non_trainable = _JITTED[key][1]([v.value for v in enc.trainable_variables],
                                         [v.value for v in enc.non_trainable_variables], batch)
    for v, value in zip(enc.non_trainable_variables, non_trainable):
        v.assign(value)
    return out


def trained_encoder(**kwargs):
    """A GIN whose batch norms hold non-trivial moving statistics."""
    keras.utils.set_random_seed(1)
    enc = gin(input_shape=(F,), width=8, num_layers=3, **kwargs)
    call(enc, pad_graphs(graphs(5, (6, 5, 8, 4)), (32, 64)), training=True)
    return enc


def test_registered_as_graph_encoder_with_paper_defaults():
    comp = ENCODERS.get("gin")
    assert comp.tags["modality"] == "graph"
    assert comp.defaults() == {"width": 32, "num_layers": 3}
    enc = ENCODERS.make("gin", {}, input_shape=(F,))
    assert isinstance(enc, GINEncoder) and enc.output_shape == (None, 96)


def test_invariant_to_node_permutation():
    enc = trained_encoder()
    feats, edges = graphs()[1]
    perm = np.random.default_rng(3).permutation(len(feats))
    inverse = np.argsort(perm)  # new position of each old node
    permuted = (feats[perm], inverse[edges].astype("int32"))
    batch_a = pad_graphs([(feats, edges)], (8, 32))
    batch_b = pad_graphs([permuted], (8, 32))
    for training in (False, True):
        ga, na = call(enc, batch_a, training, return_nodes=True)
        gb, nb = call(enc, batch_b, training, return_nodes=True)
        np.testing.assert_allclose(np_(ga), np_(gb), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(np_(na)[perm], np_(nb)[:len(perm)], rtol=1e-4, atol=1e-4)


def test_batch_equals_graphs_one_by_one_with_any_budgets():
    enc = trained_encoder()
    gs = graphs()
    together = np_(call(enc, pad_graphs(gs, (24, 48), num_graphs=4)))
    assert together.shape == (4, 24)
    np.testing.assert_array_equal(together[3], 0.0)  # the empty padding graph
    for i, g in enumerate(gs):
        alone = np_(call(enc, pad_graphs([g], (8 + 8 * i, 40))))
        np.testing.assert_allclose(alone[0], together[i], rtol=1e-5, atol=1e-4)
    nodes = np_(call(enc, pad_graphs(gs, (24, 48)), return_nodes=True)[1])
    assert nodes.shape == (24, 24)
    np.testing.assert_array_equal(nodes[sum(len(g[0]) for g in gs):], 0.0)


def test_batch_norm_ignores_padding_rows():
    gs = graphs(seed=2)
    outs, stats = [], []
    for budgets in ((16, 40), (40, 96)):
        keras.utils.set_random_seed(0)
        enc = gin(input_shape=(F,), width=8, num_layers=2)
        batch = pad_graphs(gs, budgets)
        # Padding rows with large features must not move anything either.
        n = int(batch["node_mask"].sum())
        batch["nodes"][n:] = 100.0
        outs.append(np_(call(enc, batch, training=True)))
        stats.append([np_(v) for v in enc.non_trainable_variables])
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-4)
    for a, b in zip(*stats):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # The first layer's statistics are the moments over the real nodes only.
    keras.utils.set_random_seed(0)
    enc = gin(input_shape=(F,), width=8, num_layers=1)
    batch = pad_graphs(gs, (16, 40))
    call(enc, batch, training=True)
    feats = np.concatenate([g[0] for g in gs])
    agg = feats.copy()
    for src, tgt in np.concatenate([g[1] + off for g, off in
                                    zip(gs, np.cumsum([0] + [len(g[0]) for g in gs[:-1]]))]):
        agg[tgt] += feats[src]
    first, second = enc.mlps[0]
    pre = np.maximum(np_(second(first(agg))), 0.0)
    bn = enc.norms[0]
    np.testing.assert_allclose(np_(bn.moving_mean), 0.1 * pre.mean(0), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(np_(bn.moving_variance), 0.9 + 0.1 * pre.var(0),
                               rtol=1e-4, atol=1e-6)


def test_sum_readout_of_every_layer_and_trainable_eps():
    keras.utils.set_random_seed(0)
    enc = gin(input_shape=(F,), width=4, num_layers=2, batch_norm=False, train_eps=True)
    batch = pad_graphs(graphs(), (16, 48))
    g, nodes = call(enc, batch, return_nodes=True)
    g, nodes = np_(g), np_(nodes)
    sums = np.stack([nodes[batch["node_graph"] == i].sum(0) for i in range(3)])
    np.testing.assert_allclose(g, sums, rtol=1e-5, atol=1e-5)
    assert len(enc.trainable_weights) == 2 + 2 * 4


def test_serialization_round_trip():
    enc = trained_encoder(eps=0.25)
    clone = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(enc))
    assert isinstance(clone, GINEncoder) and clone.get_config() == enc.get_config()
    clone.set_weights(enc.get_weights())
    batch = pad_graphs(graphs(), (16, 48))
    np.testing.assert_allclose(np_(call(clone, batch)), np_(call(enc, batch)), rtol=1e-6,
                               atol=1e-6)


def test_bad_input_is_refused_with_a_clear_error():
    with pytest.raises(ValueError, match="input_shape"):
        gin(input_shape=(4, 4, 3))
    with pytest.raises(ValueError, match="width"):
        gin(input_shape=(3,), width=0)
    with pytest.raises(ValueError, match="num_layers"):
        gin(input_shape=(3,), num_layers=0)
    enc = gin(input_shape=(3,), width=4, num_layers=1)
    with pytest.raises(ValueError, match="node_mask"):
        enc({"nodes": np.ones((2, 3), "float32")})
