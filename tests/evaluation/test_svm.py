"""SVM cross-validation of graph embeddings (keras_hardneg.evaluation.svm): the papers'
protocol (same folds, C and accuracies as GridSearchCV(SVC(), cv=5) in a 10-fold stratified
loop), determinism, separable data, input errors; embed_graphs over a GraphSet (both
backends)."""

import keras
import numpy as np
import pytest

from keras_hardneg.data.graphs import GraphSet
from keras_hardneg.evaluation.svm import C_GRID, embed_graphs, svm_cross_validation
from keras_hardneg.registry import EVALUATIONS


def blobs(n=120, classes=2, shift=1.0, seed=0, f=6):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % classes
    centers = rng.normal(size=(classes, f)) * shift
    return (rng.normal(size=(n, f)) + centers[y]).astype("float32"), y


def test_registered_as_graph_evaluation():
    comp = EVALUATIONS.get("svm")
    assert comp.tags == {"result": "svm_accuracy", "modality": "graph"}
    assert comp.defaults() == {"folds": 10, "inner_folds": 5}


def test_same_result_as_the_grid_search_protocol():
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.svm import SVC

    x, y = blobs(n=100, shift=0.8, seed=1)
    out = svm_cross_validation(x, y, folds=4, seed=3)
    accs, cs = [], []
    for tr, te in StratifiedKFold(4, shuffle=True, random_state=3).split(x, y):
        search = GridSearchCV(SVC(), {"C": list(C_GRID)}, cv=5).fit(x[tr].astype("float64"),
                                                                    y[tr])
        accs.append(np.mean(search.predict(x[te].astype("float64")) == y[te]))
        cs.append(search.best_params_["C"])
    np.testing.assert_allclose(out["fold_accuracies"], accs)
    assert out["chosen_C"] == cs
    assert out["svm_accuracy"] == pytest.approx(np.mean(accs))
    assert out["svm_accuracy_std"] == pytest.approx(np.std(accs))


def test_deterministic_for_a_seed():
    x, y = blobs(n=90, classes=3, shift=0.7, seed=2)
    a = svm_cross_validation(x, y, folds=5, seed=0)
    b = svm_cross_validation(x, y, folds=5, seed=0)
    c = svm_cross_validation(x, y, folds=5, seed=1)
    assert a == b
    assert a["fold_accuracies"] != c["fold_accuracies"]
    assert all(0.0 <= v <= 1.0 for v in a["fold_accuracies"])
    assert isinstance(a["svm_accuracy"], float) and len(a["fold_accuracies"]) == 5


def test_separable_data_and_chance_level():
    x, y = blobs(n=80, shift=10.0)
    labels = np.where(y == 0, -7, 3)  # any label values
    out = svm_cross_validation(x, labels, folds=5, seed=0)
    assert out["svm_accuracy"] == 1.0 and out["svm_accuracy_std"] == 0.0
    rng = np.random.default_rng(0)
    noise = svm_cross_validation(rng.normal(size=(120, 4)), rng.integers(0, 2, 120),
                                 folds=5, seed=0)
    assert 0.25 <= noise["svm_accuracy"] <= 0.75


@pytest.mark.parametrize("kwargs, match", [
    (dict(features=np.ones((10, 2)), labels=np.arange(9) % 2), "labels"),
    (dict(features=np.ones(10), labels=np.arange(10) % 2), "features"),
    (dict(features=np.full((20, 2), np.nan), labels=np.arange(20) % 2), "NaN"),
    (dict(features=np.ones((20, 2)), labels=np.zeros(20)), "2 classes"),
    (dict(features=np.ones((20, 2)), labels=np.r_[np.zeros(17), np.ones(3)]), "smallest class"),
    (dict(features=np.ones((40, 2)), labels=np.arange(40) % 2, folds=1), "folds"),
    (dict(features=np.ones((40, 2)), labels=np.arange(40) % 2, C_grid=[1, -1]), "C_grid"),
    (dict(features=np.ones((40, 2)), labels=np.arange(40) % 2, seed=-1), "seed"),
])
def test_bad_input_is_named(kwargs, match):
    kwargs = {"folds": 2, **kwargs}
    features, labels = kwargs.pop("features"), kwargs.pop("labels")
    with pytest.raises(ValueError, match=match):
        svm_cross_validation(features, labels, **kwargs)


@pytest.mark.backends
def test_embed_graphs_in_order_with_a_padded_last_batch():
    from keras_hardneg.encoders import gin

    rng = np.random.default_rng(0)
    graphs = []
    for n in (3, 5, 2, 4, 6):
        edges = np.array([[i, i + 1] for i in range(n - 1)] + [[i + 1, i] for i in range(n - 1)])
        graphs.append((rng.normal(size=(n, 3)).astype("float32"), edges))
    gset = GraphSet.from_graphs(graphs, labels=[0, 1, 0, 1, 0])
    keras.utils.set_random_seed(0)
    enc = gin(input_shape=(3,), width=4, num_layers=2)
    features = embed_graphs(enc, gset, batch_size=2)  # batches of 2, 2 and 1 (+ 1 empty)
    assert features.shape == (5, 8) and features.dtype == np.float32
    one_batch = embed_graphs(enc, gset, batch_size=5)
    np.testing.assert_allclose(features, one_batch, rtol=1e-5, atol=1e-5)
    expected = np.asarray(keras.ops.convert_to_numpy(enc(gset.batch([3]), training=False)))
    np.testing.assert_allclose(features[3], expected[0], rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="batch_size"):
        embed_graphs(enc, gset, batch_size=0)
    with pytest.raises(ValueError, match="GraphSet"):
        embed_graphs(enc, [graphs[0]])
