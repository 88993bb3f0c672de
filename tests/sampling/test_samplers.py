import numpy as np
import pytest

from keras_hardneg.sampling import (BatchSampler, KNNSampler, ProximityGraph, UniformSampler)


@pytest.fixture(scope="module")
def graph(data):
    return ProximityGraph.build(data[0], 300, 15, seed=0)


def _make(kind, data, graph, **kw):
    if kind == "batch":
        return BatchSampler(graph, 100, restart_prob=0.2, seed=7, **kw)
    if kind == "knn":
        return KNNSampler(data[0], 100, seed=7, **kw)
    return UniformSampler(len(data[0]), 100, seed=7)


@pytest.mark.parametrize("kind", ["batch", "knn", "uniform"])
def test_epoch_covers_all_nodes(kind, data, graph):
    s = _make(kind, data, graph)
    for _ in range(2):
        batches = list(s.epoch())
        assert all(b.shape == (100,) and len(set(b.tolist())) == 100 for b in batches)
        assert np.unique(np.concatenate(batches)).size == 2000
        assert len(batches) >= s.steps_per_epoch == 20
        assert s.last_epoch_batches == len(batches)
    if kind == "uniform":
        assert len(batches) == 20


@pytest.mark.parametrize("tail,thr", [("walk", None), ("fill", None), ("fill", 0.3)])
def test_tail_modes_cover_and_fill_shortens(data, graph, tail, thr):
    s = BatchSampler(graph, 100, seed=1, tail=tail, fill_threshold=thr)
    batches = list(s.epoch())
    assert np.unique(np.concatenate(batches)).size == 2000
    if thr:
        s2 = BatchSampler(graph, 100, seed=1, tail="fill")
        assert len(batches) <= len(list(s2.epoch()))


@pytest.mark.parametrize("kind", ["batch", "knn", "uniform"])
def test_state_resume_gives_identical_continuation(kind, data, graph, tmp_path):
    s = _make(kind, data, graph)
    for _ in range(13):  # mid-epoch
        s.next_batch()
    state = s.get_state()
    s.save_state(tmp_path / "st.npz")
    expected = [s.next_batch() for _ in range(40)]  # crosses an epoch boundary
    r = _make(kind, data, graph)
    r.set_state(state)
    assert all((a == b).all() for a, b in zip(expected, [r.next_batch() for _ in range(40)]))
    r2 = _make(kind, data, graph)
    r2.load_state(tmp_path / "st.npz")
    assert all((a == b).all() for a, b in zip(expected, [r2.next_batch() for _ in range(40)]))


def test_state_carries_restart_prob_and_graph(data, graph):
    s = BatchSampler(graph, 100, seed=3)
    s.set_restart_prob(0.11)
    g2 = ProximityGraph.build(data[0], 100, 15, seed=9)
    s.update_graph(g2)
    st = s.get_state()
    r = BatchSampler(graph, 100, seed=0)
    r.set_state(st)
    assert r.restart_prob == 0.11
    assert (r.neighbors == g2.neighbors).all()
    assert (r.next_batch() == s.next_batch()).all()


def test_update_graph_and_restart_prob_validation(graph):
    s = BatchSampler(graph, 100)
    with pytest.raises(ValueError, match="neighbors"):
        s.update_graph(np.zeros((10, 3), int))
    with pytest.raises(ValueError, match="restart_prob"):
        s.set_restart_prob(1.0)
    with pytest.raises(ValueError, match="batch_size"):
        BatchSampler(graph, 1)
    with pytest.raises(ValueError, match="batch_size"):
        UniformSampler(10, 11)
    with pytest.raises(ValueError, match="tail"):
        BatchSampler(graph, 10, tail="drop")
    with pytest.raises(ValueError, match="restart_prob"):
        BatchSampler(graph, 10, restart_prob=1.5)


def test_knn_sampler_batch_is_seed_plus_nearest(data):
    x = data[0]
    s = KNNSampler(x, 50, seed=0)
    b = s.next_batch()
    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    sims = xn @ xn[b[0]]
    sims[b[0]] = -np.inf
    nearest = set(np.argsort(-sims)[:49].tolist())
    assert set(b[1:].tolist()) == nearest


def test_batch_sampler_builds_graph_from_embeddings(data):
    s = BatchSampler(data[0], 64, num_candidates=200, num_neighbors=10, seed=0)
    assert s.neighbors.shape == (2000, 10)
    assert next(iter(s)).shape == (64,)


def test_batches_harder_than_uniform(data, graph):
    from keras_hardneg.sampling import batch_statistics
    x, y = data
    bs = batch_statistics((b for _, b in zip(range(30), BatchSampler(graph, 100, seed=0))), x, y)
    us = batch_statistics((b for _, b in zip(range(30), UniformSampler(2000, 100))), x, y)
    assert bs["mean_cosine"] > us["mean_cosine"]


def test_sampler_completes_small_components():
    n = 60
    nb = np.zeros((n, 2), dtype=np.int64)
    for i in range(10):  # nodes 0..9: a closed 10-cycle
        nb[i] = [(i + 1) % 10, (i + 2) % 10]
    for i in range(10, n):
        nb[i] = [10 + (i - 10 + 1) % 50, 10 + (i - 10 + 2) % 50]
    s = BatchSampler(nb, 16, seed=0)
    batches = list(s.epoch())
    assert np.unique(np.concatenate(batches)).size == n
    assert all(len(set(b.tolist())) == 16 for b in batches)
    assert s.small_component_batches >= 1
    s2 = BatchSampler(nb, 16, seed=0)
    s2.complete_small_components = False
    with pytest.raises(ValueError, match="reachable"):
        for _ in range(50):
            s2.next_batch()


def test_uniform_drop_remainder_is_shuffled_batches_and_resumes():
    # drop_remainder=True: N // B full batches an epoch in epoch_permutation's order (the
    # single-process ShuffledBatches order), and a saved state resumes the same walk.
    from keras_hardneg.data.batches import epoch_permutation

    s = UniformSampler(10, 4, seed=5, drop_remainder=True)
    assert s.steps_per_epoch == 2
    first = [s.next_batch() for _ in range(3)]  # epoch 0: 2 batches, then epoch 1
    np.testing.assert_array_equal(np.concatenate(first[:2]), epoch_permutation(5, 0, 10)[:8])
    np.testing.assert_array_equal(first[2], epoch_permutation(5, 1, 10)[:4])
    state = s.get_state()
    resumed = UniformSampler(10, 4, seed=5, drop_remainder=True)
    resumed.set_state(state)
    np.testing.assert_array_equal(resumed.next_batch(), s.next_batch())
    with pytest.raises(ValueError, match="drop_remainder"):
        UniformSampler(10, 4, seed=5).set_state(state)
    with pytest.raises(ValueError, match="`drop_remainder` must be a bool"):
        UniformSampler(10, 4, drop_remainder="yes")
    with pytest.raises(ValueError, match="`seed` must be an integer >= 0"):
        UniformSampler(10, 4, seed=None, drop_remainder=True)


# Issue 56, bug 6: the sampler itself (not only the run layer) fits its graph to small data.
def _small(n=40, seed=0):
    return np.random.default_rng(seed).normal(size=(n, 8)).astype("float32")


def test_registered_batchsampler_with_its_defaults_builds_on_small_data():
    import warnings

    from keras_hardneg.registry import SAMPLERS

    with pytest.warns(UserWarning, match=r"num_neighbors.*K=38") as caught:
        s = SAMPLERS.build("batchsampler", _small(), 8)
    assert len([w for w in caught if "num_neighbors" in str(w.message)]) == 1  # said once
    # M = 1000 >= N - 1 is the exact kNN graph (M = N - 1 = 39); K = M - 1.
    assert s.neighbors.shape == (40, 38) and s.num_neighbors == 38
    assert next(iter(s)).shape == (8,)
    with warnings.catch_warnings():  # data large enough for K = 100: nothing to say
        warnings.simplefilter("error")
        assert BatchSampler(_small(300), 8, num_candidates=150).num_neighbors == 100


def test_default_num_neighbors_follows_num_candidates():
    with pytest.warns(UserWarning, match="K=9"):
        s = BatchSampler(_small(), 8, num_candidates=10)
    assert s.neighbors.shape == (40, 9)


def test_an_explicit_num_neighbors_the_data_cannot_have_is_refused_in_one_line():
    from keras_hardneg.registry import SAMPLERS

    with pytest.raises(ValueError, match=r"^`num_neighbors` \(K=100\) must be < ") as info:
        SAMPLERS.build("batchsampler", _small(), 8, num_neighbors=100)
    assert "\n" not in str(info.value)


def test_knn_sampler_default_fits_a_batch_as_large_as_the_data():
    with pytest.warns(UserWarning, match="K=10"):  # K = B - 1 = 11 needs N - 1 > 11
        s = KNNSampler(_small(12), 12)
    assert s.neighbors.shape == (12, 10) and next(iter(s)).shape == (12,)
