"""GraphCL's graph augmentations: each respects its ratio and never empties a graph
(property-style over many random graphs, 1- and 2-node graphs included); GraphViews is
deterministic for a given generator and registered as the graph modality's view maker."""

import numpy as np
import pytest

from keras_hardneg.augment.graph_views import (AUGMENTATIONS, GraphViews, attribute_mask,
                                               edge_perturb, graphcl_views, identity, node_drop,
                                               subgraph)
from keras_hardneg.registry import VIEW_MAKERS, ConfigError


def random_graph(rng, n, density=None, dim=4):
    """Undirected, both directions listed, no self-loops; features with distinct rows."""
    density = rng.uniform(0.0, 1.0) if density is None else density
    iu, ju = np.triu_indices(n, 1)
    pick = rng.random(len(iu)) < density
    e = np.stack([iu[pick], ju[pick]], 1)
    e = np.concatenate([e, e[:, ::-1]]).astype(np.int32)
    f = np.concatenate([np.arange(n)[:, None], rng.normal(size=(n, dim - 1))], 1)
    return f.astype(np.float32), e


def random_graphs(seed=0, count=150):
    rng = np.random.default_rng(seed)
    sizes = [1, 1, 2, 2, 2, 3] + rng.integers(1, 40, count).tolist()
    return [random_graph(rng, n, density=rng.choice([0.0, 0.05, 0.3, 1.0])) for n in sizes]


def undirected(e):
    return {(min(a, b), max(a, b)) for a, b in e.tolist()}


def is_symmetric(e):
    return set(map(tuple, e.tolist())) == set(map(tuple, e[:, ::-1].tolist()))


def induced_ok(f0, e0, f1, e1):
    """(f1, e1) is the subgraph of (f0, e0) induced on some nodes (rows keep their order)."""
    ids = f1[:, 0].astype(int)  # column 0 holds the original node id
    assert (np.diff(ids) > 0).all()
    np.testing.assert_array_equal(f1, f0[ids])
    want = {(a, b) for a, b in e0.tolist() if a in set(ids) and b in set(ids)}
    assert set(map(tuple, ids[e1].tolist())) == want and len(e1) == len(want)


@pytest.mark.parametrize("ratio", [0.0, 0.2, 0.5, 0.9])
def test_node_drop_and_subgraph_keep_their_share_and_never_empty(ratio):
    rng = np.random.default_rng(1)
    for f, e in random_graphs():
        n = len(f)
        for fn in (node_drop, subgraph):
            f1, e1 = fn(f, e, ratio, rng)
            assert len(f1) == n - min(int(n * ratio), n - 1) >= 1
            assert f1.dtype == np.float32 and e1.dtype == np.int32 and e1.shape[1:] == (2,)
            induced_ok(f, e, f1, e1)


def test_subgraph_of_a_connected_graph_is_connected():
    rng = np.random.default_rng(2)
    for n in range(2, 30):
        # a random spanning tree plus a few chords: connected
        parents = [int(rng.integers(i)) for i in range(1, n)]
        e = np.array([(i, p) for i, p in zip(range(1, n), parents)])
        e = np.concatenate([e, e[:, ::-1]])
        f = np.arange(n, dtype=np.float32)[:, None]
        f1, e1 = subgraph(f, e, 0.3, rng)
        reached, todo = {0}, [0]
        adj = {}
        for a, b in e1.tolist():
            adj.setdefault(a, []).append(b)
        while todo:
            for b in adj.get(todo.pop(), []):
                if b not in reached:
                    reached.add(b)
                    todo.append(b)
        assert len(reached) == len(f1)


def test_subgraph_jumps_when_the_component_is_exhausted():
    f = np.arange(10, dtype=np.float32)[:, None]
    e = np.array([[0, 1], [1, 0]])  # eight isolated nodes
    for seed in range(20):
        f1, _ = subgraph(f, e, 0.2, np.random.default_rng(seed))
        assert len(f1) == 8


@pytest.mark.parametrize("ratio", [0.0, 0.2, 0.5])
def test_edge_perturb_drops_and_adds_the_same_number(ratio):
    rng = np.random.default_rng(3)
    for f, e in random_graphs(seed=4):
        n, before = len(f), undirected(e)
        f1, e1 = edge_perturb(f, e, ratio, rng)
        np.testing.assert_array_equal(f1, f)
        after = undirected(e1)
        k = int(len(before) * ratio)
        free = n * (n - 1) // 2 - len(before)
        assert len(before - after) == k
        assert len(after - before) == min(k, free)
        assert all(a != b for a, b in after) and is_symmetric(e1)
        assert len(e1) == 2 * len(after) and e1.dtype == np.int32


def test_edge_perturb_on_large_sparse_graphs_uses_new_edges():
    rng = np.random.default_rng(5)
    f, e = random_graph(rng, 400, density=0.01)
    f1, e1 = edge_perturb(f, e, 0.2, rng)
    before, after = undirected(e), undirected(e1)
    k = int(len(before) * 0.2)
    assert len(before - after) == k == len(after - before) and len(after) == len(before)


@pytest.mark.parametrize("ratio", [0.0, 0.2, 0.5])
def test_attribute_mask_masks_its_share_with_the_mean_row(ratio):
    rng = np.random.default_rng(6)
    for f, e in random_graphs(seed=7):
        f1, e1 = attribute_mask(f, e, ratio, rng)
        changed = (f1 != f).any(1)
        k = int(len(f) * ratio)
        assert changed.sum() <= k and f1.shape == f.shape
        masked = np.isclose(f1, f.mean(0)).all(1)
        assert masked.sum() >= k  # exactly k rows set (a row may equal the mean already)
        np.testing.assert_array_equal(f1[~masked], f[~masked])
        np.testing.assert_array_equal(e1, e)


def test_inputs_are_not_modified_and_bad_ratios_refused():
    rng = np.random.default_rng(8)
    f, e = random_graph(rng, 12, density=0.4)
    f.setflags(write=False)
    e.setflags(write=False)
    for fn in AUGMENTATIONS.values():
        fn(f, e, 0.5, rng)
        for bad in (1.0, -0.1, "0.2", True):
            with pytest.raises(ValueError, match="`ratio` must be a number in \\[0, 1\\)"):
                fn(f, e, bad, rng)
    with pytest.raises(ValueError, match="n >= 1"):
        node_drop(np.zeros((0, 3)), np.zeros((0, 2)), 0.2, rng)
    f1, e1 = identity(f, e, 0.2, rng)
    np.testing.assert_array_equal(f1, f)


def test_graph_views_are_deterministic_for_a_generator_and_differ_between_draws():
    graphs = random_graphs(seed=9, count=30)
    views = GraphViews(("node_drop", "subgraph", "edge_perturb", "attribute_mask"), ratio=0.3)
    a = views.make_views(graphs, np.random.default_rng(11))
    b = views.make_views(graphs, np.random.default_rng(11))
    c = views.make_views(graphs, np.random.default_rng(12))
    flat = lambda vs: [x.tobytes() for v in vs for g in v for x in g]  # noqa: E731
    assert flat(a) == flat(b) and flat(a) != flat(c)
    assert len(a[0]) == len(a[1]) == len(graphs)
    for graph, v1, v2 in zip(graphs, *a):
        for f1, e1 in (v1, v2):
            assert 1 <= len(f1) <= len(graph[0]) and len(e1) <= len(graph[1])
    # seeded without a generator: reproducible from the seed
    s1 = GraphViews(seed=3).make_views(graphs)
    s2 = GraphViews(seed=3).make_views(graphs)
    assert flat(s1) == flat(s2)


def test_modes_and_original_first_view():
    rng = np.random.default_rng(13)
    f, e = random_graph(rng, 20, density=0.3)
    # sequence: both removals apply: 20 -> 16 (node drop) -> 13 (subgraph)
    seq = GraphViews(("node_drop", "subgraph"), ratio=0.2, mode="sequence")
    v1, v2 = seq.make_views([(f, e)], rng)
    assert len(v1[0][0]) == len(v2[0][0]) == 13
    # choice: each view is one of the two (both remove 4 nodes)
    choice = GraphViews(("dnodes", "subgraph"), ratio=0.2)
    assert choice.augmentations == ("node_drop", "subgraph")
    v1, v2 = choice.make_views([(f, e)] * 5, rng)
    assert {len(v[0]) for v in v1 + v2} == {16}
    first = GraphViews(("node_drop",), augment_first=False)
    v1, v2 = first.make_views([(f, e)], rng)
    np.testing.assert_array_equal(v1[0][0], f)
    np.testing.assert_array_equal(v1[0][1], e)
    assert len(v2[0][0]) == 16
    with pytest.raises(ValueError, match="unknown augmentation 'rotate'"):
        GraphViews(("rotate",))
    with pytest.raises(ValueError, match="`mode`"):
        GraphViews(mode="all")
    with pytest.raises(ValueError, match="non-empty"):
        GraphViews(())
    assert GraphViews().modality == "graph" and GraphViews().host_side is True


def test_registered_as_the_graph_view_maker():
    assert "graphcl" in VIEW_MAKERS.names(modality="graph")
    assert VIEW_MAKERS.defaults("graphcl") == {
        "augmentations": ["node_drop", "subgraph"], "ratio": 0.2, "mode": "choice",
        "augment_first": True}
    views = VIEW_MAKERS.make("graphcl", {"augmentations": ["pedges", "mask_nodes"],
                                         "ratio": 0.1}, seed=0)
    assert isinstance(views, GraphViews)
    assert views.get_config() == {"augmentations": ["edge_perturb", "attribute_mask"],
                                  "ratio": 0.1, "mode": "choice", "augment_first": True,
                                  "seed": 0}
    with pytest.raises(ConfigError, match="unknown augmentation 'flip'"):
        VIEW_MAKERS.check("graphcl", {"augmentations": ["flip"]})
    with pytest.raises(ConfigError, match="ratio"):
        VIEW_MAKERS.check("graphcl", {"ratio": 1.0})
    assert isinstance(graphcl_views(), GraphViews)
