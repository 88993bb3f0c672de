"""random_graph: K distinct uniformly random neighbours per node, no self loops, seeded."""

import numpy as np
import pytest

from keras_hardneg.sampling import BatchSampler, random_graph


def test_rows_are_distinct_without_self_loops_and_seeded():
    g = random_graph(3000, 12, seed=3)
    nb = g.neighbors
    assert nb.shape == (3000, 12) and nb.dtype == np.int32
    assert (nb != np.arange(3000)[:, None]).all()
    assert all(len(set(row)) == 12 for row in nb.tolist())
    assert np.array_equal(nb, random_graph(3000, 12, seed=3).neighbors)
    # Uniform: every node is someone's neighbour about K times.
    assert abs(np.bincount(nb.ravel(), minlength=3000).mean() - 12) < 1e-9


def test_dense_and_bad_sizes():
    nb = random_graph(5, 4, seed=0).neighbors  # every other node
    assert all(sorted(row) == sorted(set(range(5)) - {i}) for i, row in enumerate(nb.tolist()))
    with pytest.raises(ValueError, match="num_neighbors"):
        random_graph(5, 5)


def test_batchsampler_walks_a_random_graph():
    s = BatchSampler(random_graph(500, 8, seed=0), batch_size=32, seed=0)
    batches = list(s.epoch())
    assert len(np.unique(np.concatenate(batches))) == 500
