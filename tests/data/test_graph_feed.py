"""The graph training feed: constant shapes over an epoch, batches within their budgets,
deterministic views for a seed, whatever order Keras reads them in, and a resumed feed
(sampler state + feed state) draws the same batches and views."""

import numpy as np
import pytest

from keras_hardneg.augment.graph_views import GraphViews
from keras_hardneg.data.graph_feed import GraphFeed, graph_tf_dataset
from keras_hardneg.data.graphs import GraphSet
from keras_hardneg.sampling import UniformSampler


def toy_set(seed=0, count=30, dim=5):
    rng = np.random.default_rng(seed)
    graphs = []
    for _ in range(count):
        n = int(rng.integers(1, 12))
        iu, ju = np.triu_indices(n, 1)
        pick = rng.random(len(iu)) < 0.4
        e = np.stack([iu[pick], ju[pick]], 1)
        graphs.append((rng.normal(size=(n, dim)).astype(np.float32),
                       np.concatenate([e, e[:, ::-1]])))
    return GraphSet.from_graphs(graphs, labels=rng.integers(0, 3, count))


def make_feed(graphs, sampler_seed=0, seed=0, batch_size=8, **kwargs):
    views = GraphViews(("node_drop", "subgraph", "edge_perturb", "attribute_mask"), ratio=0.3)
    return GraphFeed(graphs, UniformSampler(len(graphs), batch_size, seed=sampler_seed),
                     views, seed=seed, **kwargs)


def flat(element):
    x, y = element
    arrays = [x["index"], y] + [x[v][k] for v in ("view1", "view2") for k in sorted(x[v])]
    return [a.tobytes() for a in arrays]


@pytest.mark.backends
def test_shapes_are_constant_over_an_epoch_and_batches_valid():
    graphs = toy_set()
    feed = make_feed(graphs)
    assert feed.steps_per_epoch == 4 and feed.budgets == graphs.budgets(8)
    shapes = feed.element_shapes()
    seen = set()
    for i in range(feed.steps_per_epoch + 2):
        x, y = feed[i]
        assert x["index"].dtype == np.int64 and y.dtype == np.int32 and y.shape == (8,)
        np.testing.assert_array_equal(y, graphs.labels[x["index"]])
        seen.update(x["index"].tolist())
        for view in ("view1", "view2"):
            batch = x[view]
            for key, (shape, dtype) in shapes[0][view].items():
                assert batch[key].shape == shape and batch[key].dtype.name == dtype
            n = int(batch["node_mask"].sum())
            assert batch["graph_mask"].tolist() == [1.0] * 8
            # every graph keeps at least one node, no view is bigger than its graph
            counts = np.bincount(batch["node_graph"][:n], minlength=8)
            assert (counts >= 1).all() and (counts <= graphs.num_nodes[x["index"]]).all()
            real = batch["edges"][:int(batch["edge_mask"].sum())]
            assert (batch["node_graph"][real[:, 0]] == batch["node_graph"][real[:, 1]]).all()
    assert seen == set(range(30))


@pytest.mark.backends
def test_deterministic_for_a_seed_in_any_read_order():
    graphs = toy_set()
    a = [flat(make_feed(graphs)[i]) for i in range(1)]
    feed_a, feed_b, feed_c = make_feed(graphs), make_feed(graphs), make_feed(graphs, seed=1)
    in_order = [flat(feed_a[i]) for i in range(5)]
    out_of_order = {i: flat(feed_b[i]) for i in (2, 0, 4, 1, 3)}  # worker threads
    assert in_order == [out_of_order[i] for i in range(5)] and a[0] == in_order[0]
    other = [flat(feed_c[i]) for i in range(5)]
    assert all(o[0] == s[0] for o, s in zip(other, in_order))  # same indices,
    assert all(o[2:] != s[2:] for o, s in zip(other, in_order))  # other views
    with pytest.raises(IndexError, match="already read"):
        feed_a[3]


@pytest.mark.backends
def test_state_round_trip_resumes_the_same_batches_and_views():
    graphs = toy_set()
    feed = make_feed(graphs)
    for i in range(3):
        feed[i]
    sampler_state, feed_state = feed.sampler.get_state(), feed.get_state()
    assert feed_state == {"class": "GraphFeed", "seed": 0, "draws": 3}
    rest = [flat(feed[i]) for i in range(3, 8)]
    resumed = make_feed(graphs, sampler_seed=123, seed=99)
    resumed.sampler.set_state(sampler_state)
    resumed.set_state(feed_state)
    assert [flat(resumed[i]) for i in range(5)] == rest
    # a new pass (element 0 read again) continues the stream
    again = make_feed(graphs)
    first = [flat(again[i]) for i in range(3)]
    assert [flat(again[i]) for i in range(5)] == rest and first[0] != rest[0]
    with pytest.raises(ValueError, match="not a 'GraphFeed'|not a GraphFeed"):
        feed.set_state({"class": "UniformSampler"})


@pytest.mark.backends
def test_bad_arguments_are_refused():
    graphs = toy_set()
    views = GraphViews()
    with pytest.raises(ValueError, match="draws from 20 examples but `graphs` has 30"):
        GraphFeed(graphs, UniformSampler(20, 4), views, seed=0)
    with pytest.raises(ValueError, match="use_multiprocessing"):
        GraphFeed(graphs, UniformSampler(30, 4), views, seed=0, use_multiprocessing=True)
    with pytest.raises(ValueError, match="make_views"):
        GraphFeed(graphs, UniformSampler(30, 4), object(), seed=0)
    with pytest.raises(ValueError, match="`seed`"):
        GraphFeed(graphs, UniformSampler(30, 4), views, seed=-1)
    with pytest.raises(ValueError, match="exceeds the budgets"):
        make_feed(graphs, budgets=(8, 8))[0]
    unseeded = GraphFeed(graphs, UniformSampler(30, 4), views, seed=None)
    assert isinstance(unseeded.get_state()["seed"], int)


def test_tf_dataset_has_the_same_elements_and_a_static_signature():
    tf = pytest.importorskip("tensorflow")
    graphs = toy_set()
    ds = graph_tf_dataset(make_feed(graphs))
    x_spec, y_spec = ds.element_spec
    assert x_spec["view1"]["nodes"].shape == (graphs.budgets(8)[0], 5)
    assert x_spec["index"].dtype == tf.int64 and y_spec.dtype == tf.int32
    feed = make_feed(graphs)
    for i, element in zip(range(3), ds):
        element = tf.nest.map_structure(lambda t: t.numpy(), element)
        assert flat(element) == flat(feed[i])
