"""pack_without_duplicates: no query and no document twice in a batch, conflicting tuples
carried to the next batch, every tuple placed once or counted."""

import numpy as np
import pytest

from keras_hardneg.sampling import pack_without_duplicates
from keras_hardneg.sampling.no_duplicates import tuple_arrays


def _planted(t=120, k=2):
    """Tuples with planted conflicts: every 4th tuple's first negative is the positive of
    the tuple after it, every 5th shares a negative with the 5th after it, and tuples
    ``3i`` and ``3i + 1`` share their query."""
    query = np.arange(t) // 3 * 2 + (np.arange(t) % 3 == 2)
    positive = np.arange(t)
    negatives = 1000 + np.arange(t * k).reshape(t, k)
    negatives[::4, 0] = (positive[::4] + 1) % t
    negatives[::5, 1] = 5000 + np.arange(0, t, 5) // 10
    return query, positive, negatives


def _check(packing, query, positive, negatives, t, b):
    seen = []
    for batch in packing.batches:
        docs = np.concatenate([positive[batch], negatives[batch].ravel()])
        assert np.unique(docs).size == docs.size, "a document twice in a batch"
        assert np.unique(query[batch]).size == batch.size, "a query twice in a batch"
        assert batch.size <= b
        seen.extend(batch.tolist())
    assert len(seen) == len(set(seen)), "a tuple in two batches"
    unplaced = packing.unplaced.tolist()
    assert sorted(seen + unplaced) == list(range(t)), "a tuple neither placed nor counted"


def test_no_duplicates_and_every_tuple_placed_or_counted():
    q, p, n = _planted()
    for seed in range(3):
        packing = pack_without_duplicates(q, p, n, 8, seed=seed)
        _check(packing, q, p, n, len(q), 8)
        assert all(b.size == 8 for b in packing.batches)  # drop_remainder: full batches only
        assert packing.carried > 0                         # the planted conflicts were met
        summary = packing.summary()
        assert summary["placed"] + summary["dropped"] + summary["conflicting"] == len(q)
    a = pack_without_duplicates(q, p, n, 8, seed=1)
    b = pack_without_duplicates(q, p, n, 8, seed=1)
    assert all(np.array_equal(x, y) for x, y in zip(a.batches, b.batches))


def test_a_conflicting_tuple_is_carried_to_the_next_batch_first():
    q = np.array([0, 1, 2, 3, 4, 5])
    p = np.array([10, 11, 12, 13, 14, 15])
    n = np.array([[20], [10], [21], [22], [23], [24]])  # tuple 1's negative is tuple 0's positive
    packing = pack_without_duplicates(q, p, n, 3, order=np.arange(6))
    assert [b.tolist() for b in packing.batches] == [[0, 2, 3], [1, 4, 5]]
    assert packing.carried == 1 and packing.unplaced.size == 0


def test_the_last_incomplete_batch_is_dropped_or_kept():
    q, p = np.arange(10), np.arange(10)
    n = np.arange(100, 110)[:, None]
    dropped = pack_without_duplicates(q, p, n, 4, seed=0)
    kept = pack_without_duplicates(q, p, n, 4, seed=0, drop_remainder=False)
    assert [b.size for b in dropped.batches] == [4, 4] and dropped.dropped.size == 2
    assert [b.size for b in kept.batches] == [4, 4, 2] and kept.unplaced.size == 0
    assert np.array_equal(np.sort(dropped.dropped), np.sort(kept.batches[-1]))


def test_tuples_that_cannot_be_placed_are_counted():
    # Six tuples share document 99: at most one per batch; a tuple repeating its own
    # document can never be placed.
    q, p = np.arange(12), np.arange(12)
    n = np.arange(100, 112)[:, None]
    n[:6, 0] = 99
    n[11, 0] = 11                             # its positive again
    packing = pack_without_duplicates(q, p, n, 4, seed=0)
    _check(packing, q, p, n, 12, 4)
    assert 11 in packing.conflicting
    with_99 = [int(np.sum(b < 6)) for b in packing.batches]
    assert max(with_99) == 1


def test_pairs_and_mined_negatives_are_accepted():
    class Mined:  # what MinedNegatives exposes
        query, positive = np.array([0, 1, 2]), np.array([3, 4, 5])
        negatives = np.array([[6], [7], [8]])

    q, p, n = tuple_arrays(Mined())
    assert n.shape == (3, 1)
    q, p, n = tuple_arrays((np.arange(4), np.arange(4)))
    assert n.shape == (4, 0)
    packing = pack_without_duplicates(np.array([0, 0, 1, 1]), np.arange(4), n, 2, seed=0)
    assert all(np.unique(np.array([0, 0, 1, 1])[b]).size == 2 for b in packing.batches)


@pytest.mark.parametrize("kwargs,name", [
    ({"batch_size": 0}, "batch_size"), ({"order": [0, 0, 1]}, "order"),
    ({"order": [0, 7]}, "order"), ({"drop_remainder": "yes"}, "drop_remainder"),
    ({"negatives": np.zeros(3, int)}, "tuples.negatives"),
    ({"positive": [0.5, 1, 2]}, "tuples.positive"),
])
def test_bad_input_is_one_line_naming_the_parameter(kwargs, name):
    args = {"query": np.arange(3), "positive": np.arange(3),
            "negatives": np.zeros((3, 1), int) + 9, "batch_size": 2, **kwargs}
    with pytest.raises(ValueError, match=f"`{name}`") as e:
        pack_without_duplicates(**args)
    assert "\n" not in str(e.value)
