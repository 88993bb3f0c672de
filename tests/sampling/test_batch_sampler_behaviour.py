"""BatchSampler behaviour that reading ``restart_prob`` or bounding an epoch from below does
not see (issue 26: planted bugs that the other sampler tests let pass).

* The walk uses the *annealed* restart probability: after ``set_restart_prob(a)`` the
  batches are those of a sampler built with ``a`` (and not those of the initial one).
* Seeds are uncovered nodes: an epoch (every node covered once) then takes few batches
  beyond ``ceil(N / B)``. Seeds drawn regardless of coverage re-walk covered regions and an
  epoch grows from ~62 to ~80 batches (``tail="fill"``) or from ~105 to several hundred
  (``tail="walk"``) on this graph; the upper bounds below sit between the two.
"""

import numpy as np
import pytest

from keras_hardneg.sampling import BatchSampler, ProximityGraph
from keras_hardneg.sampling import samplers

N, B = 2000, 100


@pytest.fixture(scope="module")
def graph(data):
    return ProximityGraph.build(data[0], 300, 15, seed=0)


def _walk(graph, schedule, annealed_to=None, batches=5):
    s = BatchSampler(graph, B, seed=5, restart_prob=schedule)
    if annealed_to is not None:
        s.set_restart_prob(annealed_to)
    return np.concatenate([s.next_batch() for _ in range(batches)])


def test_walk_uses_the_annealed_restart_probability(graph):
    annealed = _walk(graph, (0.0, 0.9), annealed_to=0.9)
    np.testing.assert_array_equal(annealed, _walk(graph, (0.9, 0.9)))
    # The probability matters here: the initial one gives other batches.
    assert not np.array_equal(annealed, _walk(graph, (0.0, 0.0)))


def _mean_epoch_batches(graph, tail, seeds=(0, 1, 2), epochs=3):
    lengths = []
    for seed in seeds:
        s = BatchSampler(graph, B, seed=seed, tail=tail, restart_prob=0.2)
        for _ in range(epochs):
            list(s.epoch())
            lengths.append(s.last_epoch_batches)
    return float(np.mean(lengths))


# Upper bounds on the mean epoch length, in units of ceil(N / B) = 20 batches. Measured on
# this graph: fill 61.8 (correct seeds) vs 78-80 (seeds ignoring coverage); walk 105 vs
# 500-2000.
BOUNDS = {"fill": 3.5, "walk": 6.5}


@pytest.mark.parametrize("tail", ["fill", "walk"])
def test_seed_coverage_bounds_the_epoch_from_above(graph, tail):
    s = BatchSampler(graph, B, seed=0, tail=tail)
    assert s.steps_per_epoch == 20
    assert _mean_epoch_batches(graph, tail) <= BOUNDS[tail] * s.steps_per_epoch


def _seed_any_node(self):
    return int(self._rng.integers(self.num_nodes))


def _seed_in_permutation_order(self):
    if self._perm is None:
        self._perm = self._rng.permutation(self.num_nodes).astype(np.int64)
        self._ptr = 0
    seed = int(self._perm[self._ptr % self.num_nodes])
    self._ptr += 1
    return seed


@pytest.mark.parametrize("planted", [_seed_any_node, _seed_in_permutation_order])
def test_the_bound_catches_seeds_that_ignore_coverage(graph, monkeypatch, planted):
    """The bound above is not vacuous: with seeds drawn regardless of coverage (two ways of
    planting the bug), the fill tail's epochs exceed it."""
    monkeypatch.setattr(samplers._GraphSampler, "_next_seed", planted)
    assert _mean_epoch_batches(graph, "fill", seeds=(0, 1)) > BOUNDS["fill"] * 20


def test_the_walk_check_catches_the_initial_probability(graph, monkeypatch):
    """Planting the bug (the walk reading the schedule's start) makes the first test fail."""
    def draw_initial(self, seed_node):
        return samplers.random_walk_with_restart(
            self._neighbors, seed_node, self.restart_prob_schedule[0], self.batch_size,
            self._rng)

    monkeypatch.setattr(samplers.BatchSampler, "_draw", draw_initial)
    with pytest.raises(AssertionError):
        test_walk_uses_the_annealed_restart_probability(graph)
