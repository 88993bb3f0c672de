"""TupleBatches / TupleBatchSampler: epochs of a fixed number of duplicate-free batches over
replaceable tuples; the walk order puts tuples with neighbouring positives together."""

import numpy as np
import pytest

from keras_hardneg.sampling import TupleBatches, TupleBatchSampler


def _clustered_tuples(clusters=12, size=10, d=8, seed=0):
    """``T = clusters * size`` tuples (query t, positive t, negative T + t): no document
    shared, so every batch conflict-free; the positives' embeddings form tight clusters."""
    rng = np.random.default_rng(seed)
    t = clusters * size
    centers = rng.normal(size=(clusters, d)) * 5.0
    label = np.repeat(np.arange(clusters), size)
    emb = centers[label] + 0.3 * rng.normal(size=(t, d))
    doc_emb = np.concatenate([emb, rng.normal(size=(t, d))])  # rows T.. are the negatives
    tuples = (np.arange(t), np.arange(t), (t + np.arange(t))[:, None])
    return tuples, doc_emb, label


def _same_cluster_rate(batches, label):
    """Fraction of the pairs of tuples sharing a batch that are in the same cluster."""
    same = total = 0
    for b in batches:
        lab = label[b]
        same += int((lab[:, None] == lab[None, :]).sum() - lab.size)
        total += lab.size * (lab.size - 1)
    return same / total


def _assert_duplicate_free(batches, tuples):
    q, p, n = tuples
    for b in batches:
        docs = np.concatenate([p[b], n[b].ravel()])
        assert np.unique(docs).size == docs.size and np.unique(q[b]).size == b.size


def test_every_epoch_has_steps_per_epoch_duplicate_free_batches():
    q = np.arange(50) // 2                         # 25 queries with two positives each
    p = np.arange(50)
    n = np.stack([(p + 7) % 50, 100 + p], axis=1)  # negatives are other tuples' positives
    batches = TupleBatches((q, p, n), 8, seed=0)
    assert batches.steps_per_epoch == 50 // 8
    for _ in range(3):
        epoch = batches.epoch_batches()
        assert len(epoch) == 6 and all(b.shape == (8,) for b in epoch)
        _assert_duplicate_free(epoch, (q, p, n))
        stats = batches.last_epoch
        assert stats["placed"] + stats["unplaced"] == 50
        assert stats["placed"] + stats["repeated"] == 6 * 8
    assert batches.epoch_index == 3


def test_replaced_tuples_are_read_at_the_next_epoch():
    tuples, _, _ = _clustered_tuples()
    batches = TupleBatches(tuples, 10, seed=0)
    first = list(batches.epoch())
    q, p, n = tuples
    assert all(np.array_equal(negs, n[idx]) for idx, (_, _, negs) in first)
    new_n = n + 1000
    batches.set_tuples((q, p, new_n))
    second = list(batches.epoch())
    assert len(second) == len(first) == batches.steps_per_epoch
    assert all((negs >= 1000 + len(q)).all() for _, (_, _, negs) in second)
    assert batches.version == 1
    with pytest.raises(ValueError, match="K=2 negatives.*K=1"):
        batches.set_tuples((q, p, np.stack([n[:, 0], new_n[:, 0]], axis=1)))
    with pytest.raises(ValueError, match="`batch_size` \\(10\\) must be <= the number of "
                                         "tuples T=5"):
        batches.set_tuples((q[:5], p[:5], n[:5]))


def test_fewer_tuples_keep_the_epoch_length_by_repeating():
    tuples, _, _ = _clustered_tuples()
    q, p, n = tuples
    batches = TupleBatches(tuples, 10, seed=0)
    batches.set_tuples((q[:60], p[:60], n[:60]))
    epoch = batches.epoch_batches()
    assert len(epoch) == batches.steps_per_epoch == 12
    assert batches.last_epoch["placed"] == 60 and batches.last_epoch["repeated"] == 60
    assert batches.last_epoch["extra_packings"] == 1


def test_walk_order_puts_neighbours_in_a_batch_more_often_than_uniform():
    tuples, doc_emb, label = _clustered_tuples()
    uniform = TupleBatches(tuples, 10, seed=0)
    walk = TupleBatchSampler(tuples, 10, embeddings=doc_emb, num_candidates=119,
                             num_neighbors=9, seed=0)
    rates = {"uniform": [], "walk": []}
    for _ in range(3):
        rates["uniform"].append(_same_cluster_rate(uniform.epoch_batches(), label))
        epoch = walk.epoch_batches()
        _assert_duplicate_free(epoch, tuples)
        rates["walk"].append(_same_cluster_rate(epoch, label))
    chance = (10 - 1) / (120 - 1)                # same-cluster rate of random pairs
    assert np.mean(rates["uniform"]) < 2 * chance
    assert np.mean(rates["walk"]) > 0.5 > 4 * chance, rates
    again = TupleBatchSampler(tuples, 10, embeddings=doc_emb, num_candidates=119,
                              num_neighbors=9, seed=0)
    assert all(np.array_equal(a, b) for a, b in zip(
        TupleBatchSampler(tuples, 10, embeddings=doc_emb, num_candidates=119,
                          num_neighbors=9, seed=0).epoch_batches(), again.epoch_batches()))


def test_walk_sampler_rebuilds_its_graph_from_new_embeddings():
    tuples, doc_emb, label = _clustered_tuples()
    walk = TupleBatchSampler(tuples, 10, embeddings=doc_emb, num_candidates=119,
                             num_neighbors=9, seed=0)
    shuffled = doc_emb.copy()
    perm = np.random.default_rng(1).permutation(120)
    shuffled[:120] = doc_emb[perm]              # the clusters now follow `label[perm]`
    walk.set_tuples(tuples, embeddings=shuffled)
    epoch = walk.epoch_batches()
    assert _same_cluster_rate(epoch, label[perm]) > 0.5 > _same_cluster_rate(epoch, label)
    by_query = TupleBatchSampler(tuples, 10, embeddings=doc_emb[:120], on="queries",
                                 num_candidates=119, num_neighbors=9)
    assert _same_cluster_rate(by_query.epoch_batches(), label) > 0.5


@pytest.mark.parametrize("kwargs,match", [
    ({"batch_size": 1}, "`batch_size` must be an integer >= 2"),
    ({"steps_per_epoch": 0}, "`steps_per_epoch` must be an integer >= 1"),
    ({"drop_remainder": 1}, "`drop_remainder` must be a bool"),
    ({"tuples": "abc"}, "`tuples` must be a MinedNegatives"),
])
def test_bad_settings_are_refused_naming_the_parameter(kwargs, match):
    args = {"tuples": (np.arange(6), np.arange(6)), "batch_size": 2, **kwargs}
    with pytest.raises(ValueError, match=match):
        TupleBatches(args.pop("tuples"), args.pop("batch_size"), **args)


def test_walk_sampler_checks_its_embeddings_and_graph_choice():
    tuples = (np.arange(6), np.arange(6))
    with pytest.raises(ValueError, match="`on` must be one of"):
        TupleBatchSampler(tuples, 2, embeddings=np.zeros((6, 2)), on="docs")
    with pytest.raises(ValueError, match="`embeddings` has 4 rows"):
        TupleBatchSampler(tuples, 2, embeddings=np.zeros((4, 2)))
    with pytest.raises(ValueError, match="`embeddings` must be finite"):
        TupleBatchSampler(tuples, 2, embeddings=np.full((6, 2), np.nan))


def _through_a_backup(state, tmp_path):
    """``state`` written and read back as a run's backup does (an ``.npz``, no pickle)."""
    from keras_hardneg.callbacks.backup import _decode_state, _encode_state

    path = tmp_path / "state.npz"
    path.write_bytes(_encode_state({"tuples": state}))
    return _decode_state(str(path))["tuples"]


def test_a_restored_feed_goes_on_with_the_same_tuples_and_orders(tmp_path):
    """``get_state`` / ``set_state`` (what a run's backup keeps): a feed restored into a new
    object, mid-run, packs the epochs the original would -- uniform, and a walk whose graph
    was rebuilt from new embeddings and whose generator has run an epoch."""
    tuples, doc_emb, _ = _clustered_tuples()
    q, p, n = tuples
    later = (q, p, n + 7)
    shuffled = doc_emb[np.random.default_rng(1).permutation(len(doc_emb))]
    for make in (lambda emb: TupleBatches(tuples, 10, seed=4),
                 lambda emb: TupleBatchSampler(tuples, 10, embeddings=emb, seed=4,
                                               num_candidates=119, num_neighbors=9)):
        original = make(doc_emb)
        original.epoch_batches()
        if isinstance(original, TupleBatchSampler):
            original.set_tuples(later, embeddings=shuffled)
        else:
            original.set_tuples(later)
        original.epoch_batches()
        restored = make(np.zeros_like(doc_emb))          # a new process: placeholders
        restored.set_state(_through_a_backup(original.get_state(), tmp_path))
        assert restored.epoch_index == original.epoch_index == 2
        assert np.array_equal(restored.tuples[2], later[2])
        for _ in range(2):
            assert all(np.array_equal(a, b) for a, b in zip(original.epoch_batches(),
                                                            restored.epoch_batches()))
        if isinstance(original, TupleBatchSampler):       # the next rebuild is seeded alike
            original.set_tuples(tuples, embeddings=doc_emb)
            restored.set_tuples(tuples, embeddings=doc_emb)
            assert all(np.array_equal(a, b) for a, b in zip(original.epoch_batches(),
                                                            restored.epoch_batches()))
    by_query = TupleBatchSampler(tuples, 10, embeddings=doc_emb, on="queries",
                                 num_candidates=119, num_neighbors=9)
    with pytest.raises(ValueError, match="`state` is of a walk on 'positives'; this one is "
                                         "on 'queries'"):
        by_query.set_state(original.get_state())
