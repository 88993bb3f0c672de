"""TU loader and GraphSet: the seven shared benchmarks match their README table; a small
synthetic TU folder (written to tmp_path) tests deduplication, degree features and the
errors on malformed files without the shared data; batches respect their budgets and the
padding conventions of the graph batch format."""

import os

import numpy as np
import pytest

from keras_hardneg.data.graphs import BATCH_KEYS, GraphSet, is_tu_folder, load_tu, pad_graphs
from keras_hardneg.registry import DATASETS, ConfigError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TU_ROOT = os.path.join(REPO, "..", "shared", "data", "tudataset")

# README table: graphs, class counts (in sorted label order), feature scheme (F), edges after
# deduplication (directed rows) and the lines of D_A.txt.
README = {
    "MUTAG": (188, [63, 125], "node_labels(7)", 7),
    "PTC_MR": (344, [192, 152], "node_labels(18)", 18),
    "PROTEINS": (1113, [663, 450], "node_labels(3)+node_attributes(1)", 4),
    "ENZYMES": (600, [100] * 6, "node_labels(3)+node_attributes(18)", 21),
    "NCI1": (4110, [2053, 2057], "node_labels(37)", 37),
    "IMDB-BINARY": (1000, [500, 500], "degree_onehot(max_degree=135)", 136),
    "IMDB-MULTI": (1500, [500] * 3, "degree_onehot(max_degree=88)", 89),
}


@pytest.fixture(scope="module")
def shared_sets():
    if not os.path.isdir(TU_ROOT):
        pytest.skip("shared TU data (../shared/data/tudataset) is absent")
    return {name: load_tu(os.path.join(TU_ROOT, name)) for name in README}


@pytest.mark.parametrize("name", sorted(README))
def test_shared_benchmarks_match_the_readme(shared_sets, name):
    g = shared_sets[name]
    graphs, class_counts, scheme, dim = README[name]
    assert g.name == name and len(g) == graphs
    assert np.bincount(g.labels).tolist() == class_counts
    assert g.num_classes == len(class_counts) == len(g.label_values)
    assert g.feature_scheme == scheme and g.feature_dim == dim
    indicator_lines = sum(1 for _ in open(os.path.join(TU_ROOT, name,
                                                      f"{name}_graph_indicator.txt")))
    assert int(g.num_nodes.sum()) == indicator_lines and g.num_nodes.min() >= 1
    # one-hot part: exactly one 1 per node
    width = dim - (1 if name == "PROTEINS" else 18 if name == "ENZYMES" else 0)
    onehot = g.node_features[:, :width]
    assert np.array_equal(onehot.sum(1), np.ones(len(onehot))) and set(np.unique(onehot)) <= {0, 1}
    s = g.stats
    assert s["self_loops"] == 0 and s["reverse_edges_added"] == 0
    # IMDB-* list every direction twice: half the lines are duplicates
    assert s["duplicate_edges"] == (s["lines_A"] // 2 if name.startswith("IMDB") else 0)
    assert int(g.num_edges.sum()) == s["edges"] == s["lines_A"] - s["duplicate_edges"]
    # every edge's reverse is present, no duplicate within a graph
    f, e = g.graph(len(g) // 2)
    assert set(map(tuple, e.tolist())) == set(map(tuple, e[:, ::-1].tolist()))
    assert len(np.unique(e, axis=0)) == len(e)


def test_imdb_degree_features_are_the_degrees(shared_sets):
    g = shared_sets["IMDB-BINARY"]
    for i in (0, 500, 999):
        f, e = g.graph(i)
        assert np.array_equal(f.argmax(1), np.bincount(e[:, 0], minlength=len(f)))


def test_loading_is_fast(shared_sets):  # all seven load in about a second
    import time

    start = time.perf_counter()
    load_tu(os.path.join(TU_ROOT, "NCI1"))
    assert time.perf_counter() - start < 5.0


# --------------------------------------------------------------- synthetic TU folders
def write_tu(folder, name="TOY", edges=None, indicator=None, graph_labels=None,
             node_labels=None, attributes=None, edge_labels=None):
    """A TU folder: by default 3 graphs (nodes 1-3, 4-5, 6) with duplicated edges, one edge
    given in one direction only and a self-loop."""
    os.makedirs(folder, exist_ok=True)
    edges = edges if edges is not None else [
        (1, 2), (2, 1), (1, 2), (2, 1),  # duplicated
        (2, 3),                          # reverse missing
        (3, 3),                          # self-loop
        (4, 5), (5, 4)]
    indicator = indicator if indicator is not None else [1, 1, 1, 2, 2, 3]
    graph_labels = graph_labels if graph_labels is not None else [-1, 1, -1]

    def put(part, rows):
        if rows is None:
            return
        with open(os.path.join(folder, f"{name}_{part}.txt"), "w") as f:
            for row in rows:
                f.write((", ".join(map(str, row)) if isinstance(row, (tuple, list))
                         else str(row)) + "\n")

    put("A", edges)
    put("graph_indicator", indicator)
    put("graph_labels", graph_labels)
    put("node_labels", node_labels)
    put("node_attributes", attributes)
    put("edge_labels", edge_labels)
    return folder


def test_synthetic_folder_dedup_reverse_selfloops_degree(tmp_path):
    folder = write_tu(str(tmp_path / "toy"))
    assert is_tu_folder(folder) and not is_tu_folder(str(tmp_path))
    g = load_tu(folder)
    assert g.name == "TOY" and len(g) == 3
    assert g.labels.tolist() == [0, 1, 0] and g.label_values.tolist() == [-1, 1]
    assert g.num_nodes.tolist() == [3, 2, 1]
    assert g.stats == {"lines_A": 8, "self_loops": 1, "duplicate_edges": 2,
                       "reverse_edges_added": 1, "edges": 6, "isolated_nodes": 1}
    f0, e0 = g.graph(0)
    assert sorted(map(tuple, e0.tolist())) == [(0, 1), (1, 0), (1, 2), (2, 1)]
    assert e0.dtype == np.int32 and f0.dtype == np.float32
    # no node labels: one-hot degree, max degree 2 -> 3 columns
    assert g.feature_scheme == "degree_onehot(max_degree=2)" and g.feature_dim == 3
    assert f0.argmax(1).tolist() == [1, 2, 1]
    assert g.graph(2)[0].argmax(1).tolist() == [0] and len(g.graph(2)[1]) == 0
    capped = load_tu(folder, max_degree=1)
    assert capped.feature_dim == 2 and capped.graph(0)[0].argmax(1).tolist() == [1, 1, 1]
    with pytest.raises(ValueError, match="node_labels"):
        load_tu(folder, node_features="labels")


def test_synthetic_labels_attributes_and_unsorted_indicator(tmp_path):
    # nodes of graph 2 listed first: the loader groups nodes by graph
    folder = write_tu(str(tmp_path / "toy"), edges=[(1, 2), (2, 1), (3, 4), (4, 3)],
                      indicator=[2, 2, 1, 1], graph_labels=[0, 1], node_labels=[5, 7, 5, 9],
                      attributes=[(0.5, 1), (1.5, 2), (2.5, 3), (3.5, 4)],
                      edge_labels=[1, 1, 2, 2])
    g = load_tu(folder)
    assert g.feature_scheme == "node_labels(3)+node_attributes(2)" and g.feature_dim == 5
    f0, e0 = g.graph(0)  # graph 1 = file nodes 3, 4
    np.testing.assert_array_equal(f0, [[1, 0, 0, 2.5, 3], [0, 0, 1, 3.5, 4]])
    assert sorted(map(tuple, e0.tolist())) == [(0, 1), (1, 0)]
    np.testing.assert_array_equal(g.graph(1)[0][:, 3:], [[0.5, 1], [1.5, 2]])
    assert load_tu(folder, node_attributes=False).feature_dim == 3
    assert load_tu(folder, node_features="degree").feature_scheme == \
        "degree_onehot(max_degree=1)+node_attributes(2)"


@pytest.mark.parametrize("change,message", [
    ({"edges": [(1, 2), ("x", 1)]}, r"TOY_A.txt, line 2: expected 2 integers"),
    ({"edges": [(1, 2), (1, 2, 3)]}, r"TOY_A.txt, line 2"),
    ({"edges": [(1, 2), (2, 9)]}, r"TOY_A.txt, line 2: node id out of 1..6"),
    ({"edges": [(1, 2), (3, 4)]}, r"TOY_A.txt, line 2: edge between nodes of different graphs"),
    ({"indicator": [1, 1, 1, 2, 2, 5]}, r"graph_indicator.txt, line 6: graph id 5 is outside"),
    ({"indicator": [1, 1, 1, 1, 1, 3]}, r"graph 2 has no nodes"),
    ({"graph_labels": [0, "a", 1]}, r"graph_labels.txt, line 2"),
    ({"node_labels": [1, 2]}, r"node_labels.txt has 2 lines; expected one per node \(6\)"),
    ({"attributes": [(1, 2)] * 5 + [(1,)]}, r"node_attributes.txt, line 6: expected 2 numbers"),
    ({"edge_labels": [1, 2]}, r"edge_labels.txt has 2 lines"),
    ({"graph_labels": []}, r"graph_labels.txt: the file is empty"),
])
def test_malformed_files_name_file_and_line(tmp_path, change, message):
    folder = write_tu(str(tmp_path / "bad"), **change)
    with pytest.raises(ValueError, match=message):
        load_tu(folder)


def test_missing_files_and_ambiguous_names(tmp_path):
    folder = write_tu(str(tmp_path / "toy"))
    os.remove(os.path.join(folder, "TOY_graph_labels.txt"))
    with pytest.raises(ValueError, match="has no TOY_graph_labels.txt"):
        load_tu(folder)
    assert not is_tu_folder(folder)
    two = write_tu(write_tu(str(tmp_path / "two"), name="A1"), name="B2")
    with pytest.raises(ValueError, match="cannot tell the dataset name.*A1, B2"):
        load_tu(two)
    assert len(load_tu(two, name="B2")) == 3
    with pytest.raises(ValueError, match="does not exist"):
        load_tu(str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match="node_features"):
        load_tu(two, name="A1", node_features="onehot")


def test_registered_as_a_graph_dataset(tmp_path):
    folder = write_tu(str(tmp_path / "toy"))
    assert "tu" in DATASETS.names(modality="graph")
    (graphs, labels), (x_test, y_test), desc = DATASETS.build("tu", 0, folder=folder)
    assert isinstance(graphs, GraphSet) and labels is graphs.labels
    assert x_test is None and y_test is None and desc.startswith("TU TOY (3 graphs, 2 classes")
    with pytest.raises(ConfigError, match="'folder'"):
        DATASETS.check("tu", {})
    with pytest.raises(ConfigError, match="node_features"):
        DATASETS.check("tu", {"folder": folder, "node_features": "x"})


# ------------------------------------------------------------------- GraphSet batches
def random_set(seed=0, graphs=40, max_nodes=9, dim=3):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(graphs):
        n = int(rng.integers(1, max_nodes + 1))
        m = int(rng.integers(0, n * 2))
        pairs = rng.integers(0, n, size=(m, 2))
        pairs = pairs[pairs[:, 0] != pairs[:, 1]]
        e = np.unique(np.concatenate([pairs, pairs[:, ::-1]]), axis=0).reshape(-1, 2)
        out.append((rng.normal(size=(n, dim)).astype(np.float32), e))
    return GraphSet.from_graphs(out, labels=rng.integers(0, 3, graphs)), out


def check_batch(batch, graphs, budgets, b):
    n_max, e_max = budgets
    assert tuple(batch) == BATCH_KEYS
    assert batch["nodes"].shape[0] == n_max and batch["edges"].shape == (e_max, 2)
    assert batch["graph_mask"].shape == (b,)
    dtypes = {k: v.dtype.name for k, v in batch.items()}
    assert dtypes == {"nodes": "float32", "edges": "int32", "node_graph": "int32",
                      "node_mask": "float32", "edge_mask": "float32", "graph_mask": "float32"}
    n = sum(len(f) for f, _ in graphs)
    m = sum(len(e) for _, e in graphs)
    assert batch["node_mask"].tolist() == [1.0] * n + [0.0] * (n_max - n)
    assert batch["edge_mask"].tolist() == [1.0] * m + [0.0] * (e_max - m)
    assert batch["graph_mask"].tolist() == [1.0] * len(graphs) + [0.0] * (b - len(graphs))
    assert not batch["nodes"][n:].any()
    assert (batch["node_graph"][n:] == b).all()
    assert (batch["edges"][m:] == n_max - 1).all()
    np.testing.assert_array_equal(batch["nodes"][:n], np.concatenate([f for f, _ in graphs]))
    owners = np.repeat(np.arange(len(graphs)), [len(f) for f, _ in graphs])
    assert batch["node_graph"][:n].tolist() == owners.tolist()
    real = batch["edges"][:m]
    assert (batch["node_graph"][real[:, 0]] == batch["node_graph"][real[:, 1]]).all()
    start = 0
    for i, (f, e) in enumerate(graphs):  # each graph's edges, shifted by its offset
        offset = int(np.flatnonzero(owners == i)[0])
        np.testing.assert_array_equal(real[start:start + len(e)], e + offset)
        start += len(e)


def test_batches_never_exceed_budgets_and_follow_the_padding_conventions():
    g, graphs = random_set()
    rng = np.random.default_rng(1)
    for b in (1, 2, 5, 16, 40):
        budgets = g.budgets(b)
        assert budgets[0] % 8 == 0 and budgets[1] % 8 == 0
        assert budgets[0] >= np.sort(g.num_nodes)[-b:].sum()
        assert budgets[1] >= np.sort(g.num_edges)[-b:].sum()
        for _ in range(10):
            idx = rng.choice(len(g), b, replace=False)
            batch = g.batch(idx)
            check_batch(batch, [graphs[i] for i in idx], budgets, b)
    # the largest graphs fill the budget: still fits
    top = np.argsort(-g.num_nodes, kind="stable")[:5]
    check_batch(g.batch(top), [graphs[i] for i in top], g.budgets(5), 5)
    assert g.budgets(1000) == g.budgets(len(g))


def test_batch_of_views_and_budget_errors():
    g, graphs = random_set()
    views = [(f[:1], np.zeros((0, 2), np.int32)) for f, _ in graphs[:4]]
    batch = g.batch(views, num_graphs=6)
    check_batch(batch, views, g.budgets(6), 6)
    with pytest.raises(ValueError, match=r"exceeds the budgets \(N_max=8, E_max=8\)"):
        g.batch(np.argsort(-g.num_nodes)[:4], budgets=(8, 8))
    with pytest.raises(ValueError, match="`indices` must lie in 0..39"):
        g.batch([0, 40])
    with pytest.raises(ValueError, match="outside its 2 nodes"):
        pad_graphs([(np.ones((2, 1)), np.array([[0, 2]]))], (8, 8))
    with pytest.raises(ValueError, match="one F"):
        pad_graphs([(np.ones((2, 1)), np.zeros((0, 2))), (np.ones((2, 2)), np.zeros((0, 2)))],
                   (8, 8))
    with pytest.raises(ValueError, match="num_graphs"):
        pad_graphs(graphs[:3], (64, 64), num_graphs=2)
    with pytest.raises(ValueError, match="batch_size"):
        g.budgets(0)
    empty = pad_graphs([], (8, 8), num_graphs=2, feature_dim=3)
    assert empty["graph_mask"].tolist() == [0.0, 0.0] and empty["nodes"].shape == (8, 3)


def test_evaluation_batches_cover_all_graphs_in_order():
    g, graphs = random_set(graphs=23)
    batches = list(g.batches(5))
    assert len(batches) == 5
    assert {tuple((k, v.shape) for k, v in b.items()) for b in batches} == \
        {tuple((k, v.shape) for k, v in batches[0].items())}
    check_batch(batches[-1], graphs[20:], g.budgets(5), 5)
    assert sum(b["graph_mask"].sum() for b in batches) == 23


def test_subset_and_graph_access():
    g, graphs = random_set()
    idx = [7, 3, 3, 39]
    s = g.subset(idx)
    assert len(s) == 4 and s.num_classes == g.num_classes
    assert s.labels.tolist() == g.labels[idx].tolist()
    for j, i in enumerate(idx):
        np.testing.assert_array_equal(s.graph(j)[0], graphs[i][0])
        np.testing.assert_array_equal(s.graph(j)[1], graphs[i][1])
    np.testing.assert_array_equal(g[-1][0], graphs[-1][0])
    with pytest.raises(IndexError):
        g.graph(40)
    with pytest.raises(ValueError):
        g.graph(0)[0][0, 0] = 1.0  # read-only views
    with pytest.raises(ValueError, match="empty"):
        g.subset([])
    assert "40 graphs" in repr(g) and len(list(g)) == 40
