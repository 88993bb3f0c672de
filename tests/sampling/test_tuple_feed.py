"""The tuple feed: one flat batch of B * (2 + K) rows per batch of B tuples, example-major
([q_0, p_0, n_0_1 .. n_0_K, q_1, ...]), as texts or token ids, as tf.data and as a
PyDataset; each epoch reads the tuples current at its start."""

import numpy as np
import pytest

from keras_hardneg.sampling import TupleBatches, make_tuple_py_dataset
from keras_hardneg.sampling.tuple_feed import tuple_rows

Q, N, K, B = 12, 40, 2, 3


def _data(seed=0):
    rng = np.random.default_rng(seed)
    query = np.arange(Q)
    positive = rng.permutation(N)[:Q]
    rest = np.setdiff1d(np.arange(N), positive)
    negatives = rng.permutation(rest)[:Q * K].reshape(Q, K)  # no document twice anywhere
    q_texts = [f"query {i}" for i in range(Q)]
    d_texts = [f"document {j}" for j in range(N)]
    q_ids = (np.arange(Q * 3).reshape(Q, 3) + 1).astype("int32")   # L = 3
    d_ids = (1000 + np.arange(N * 5).reshape(N, 5)).astype("int32")  # L' = 5
    return (query, positive, negatives), (q_texts, d_texts), (q_ids, d_ids)


def _expected(tuples, q_rows, d_rows):
    """{query: the B * (2 + K) rows expected for its tuple}, built row by row."""
    query, positive, negatives = tuples
    return {int(query[t]): [q_rows[query[t]], d_rows[positive[t]]]
            + [d_rows[j] for j in negatives[t]] for t in range(len(query))}


def _check_layout(x, rows, tuples, q_rows, d_rows):
    want = _expected(tuples, q_rows, d_rows)
    assert len(x) == len(rows) == B * (2 + K)
    for start in range(0, len(x), 2 + K):            # example-major: one tuple at a time
        block = x[start:start + 2 + K]
        assert rows[start] < Q and (rows[start + 1:start + 2 + K] >= Q).all()
        got = [r.tolist() if hasattr(r, "tolist") else r for r in block]
        exp = [r.tolist() if hasattr(r, "tolist") else r for r in want[int(rows[start])]]
        assert got == exp


@pytest.mark.backends
def test_py_dataset_rows_are_example_major_in_both_forms():
    tuples, (q_texts, d_texts), (q_ids, d_ids) = _data()
    feed = make_tuple_py_dataset(TupleBatches(tuples, B, seed=0), q_texts, d_texts)
    assert len(feed) == Q // B
    for i in range(len(feed)):
        x, rows = feed[i]
        assert x.shape == (B * (2 + K),) and rows.dtype == np.int64
        _check_layout(list(x), rows, tuples, q_texts, d_texts)
    feed = make_tuple_py_dataset(TupleBatches(tuples, B, seed=0), q_ids, d_ids)
    x, rows = feed[0]
    assert x.shape == (B * (2 + K), 5) and x.dtype == np.int32
    padded_q = np.pad(q_ids, ((0, 0), (0, 2)))               # queries padded with 0 to L'
    _check_layout(x, rows, tuples, padded_q, d_ids)


@pytest.mark.backends
def test_py_dataset_packs_each_epoch_from_the_current_tuples():
    tuples, _, (q_ids, d_ids) = _data()
    batches = TupleBatches(tuples, B, seed=0)
    feed = make_tuple_py_dataset(batches, q_ids, d_ids)
    first = [feed[i][1] for i in range(len(feed))]
    feed.on_epoch_begin()                       # Keras: epoch 0 starts on the lazy packing
    assert all(np.array_equal(feed[i][1], first[i]) for i in range(len(feed)))
    query, positive, negatives = tuples
    batches.set_tuples((query, negatives[:, 0], np.stack([positive, negatives[:, 1]], 1)))
    assert np.array_equal(feed[0][1], first[0])  # the running epoch is unchanged
    feed.on_epoch_end()
    feed.on_epoch_begin()
    rows = np.concatenate([feed[i][1] for i in range(len(feed))]).reshape(-1, 2 + K)
    assert set(rows[:, 1] - Q) <= set(negatives[:, 0].tolist())   # the new positives


def test_tuple_rows_and_bad_feeds():
    assert tuple_rows(np.array([1]), np.array([2]), np.zeros((1, 0), int), 5).tolist() == [1, 7]
    tuples, (q_texts, d_texts), (q_ids, d_ids) = _data()
    batches = TupleBatches(tuples, B)
    with pytest.raises(ValueError, match="same form"):
        make_tuple_py_dataset(batches, q_texts, d_ids)
    with pytest.raises(ValueError, match="`queries` has 4 rows"):
        make_tuple_py_dataset(batches, q_ids[:4], d_ids)
    with pytest.raises(ValueError, match="`corpus` has 10 rows"):
        make_tuple_py_dataset(batches, q_ids, d_ids[:10])
    with pytest.raises(ValueError, match="`use_multiprocessing` must be False"):
        make_tuple_py_dataset(batches, q_ids, d_ids, use_multiprocessing=True)


def test_tf_dataset_rows_layout_cardinality_and_epochs():
    tf = pytest.importorskip("tensorflow")
    from keras_hardneg.sampling import make_tuple_dataset

    tuples, (q_texts, d_texts), (q_ids, d_ids) = _data()
    batches = TupleBatches(tuples, B, seed=0)
    ds = make_tuple_dataset(batches, q_texts, d_texts)
    assert int(ds.cardinality()) == Q // B
    assert ds.element_spec[0].dtype == tf.string
    for x, rows in ds:
        _check_layout([s.decode() for s in x.numpy()], rows.numpy(), tuples, q_texts, d_texts)
    ids_ds = make_tuple_dataset(TupleBatches(tuples, B, seed=0), q_ids, d_ids)
    assert ids_ds.element_spec[0].shape.as_list() == [B * (2 + K), 5]
    x, rows = next(iter(ids_ds))
    _check_layout(x.numpy(), rows.numpy(), tuples, np.pad(q_ids, ((0, 0), (0, 2))), d_ids)
    keep = make_tuple_dataset(TupleBatches(tuples, 5, drop_remainder=False), q_ids, d_ids)
    assert keep.element_spec[0].shape.as_list() == [None, 5]   # the last batch is smaller
    assert [int(x.shape[0]) for x, _ in keep] == [5 * (2 + K), 5 * (2 + K), 2 * (2 + K)]
    # Every iteration (a Keras epoch) packs the tuples current when it starts.
    query, positive, negatives = tuples
    batches.set_tuples((query, negatives[:, 0], np.stack([positive, negatives[:, 1]], 1)))
    rows = np.concatenate([r.numpy() for _, r in ds]).reshape(-1, 2 + K)
    assert set(rows[:, 1] - Q) <= set(negatives[:, 0].tolist())
