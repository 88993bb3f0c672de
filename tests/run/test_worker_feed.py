"""run.make_train_feed(..., place=): with several workers each feed yields its block of the
one global walk (uniform batches too); with one worker nothing changes."""

import keras
import numpy as np
import pytest

from keras_hardneg import run
from keras_hardneg.data import load_digits
from keras_hardneg.run.distribution import WorkerPlace
from keras_hardneg.sampling import BatchSampler, UniformSampler

pytestmark = pytest.mark.backends

TINY = {"encoder": {"name": "small_convnet", "width": 8}, "projection_dims": [16, 8],
        "data": {"name": "digits", "test_fraction": 0.75}, "batch_size": 64, "epochs": 1,
        "evaluation": {"monitor_every": 0, "linear_probe": False}}
GRAPH = {"name": "batchsampler", "num_candidates": 40, "num_neighbors": 8, "refresh_every": 3}


@pytest.fixture(scope="module")
def digits():
    return load_digits(test_fraction=0.75)[0]


def _elements(dataset, count):
    if keras.backend.backend() == "tensorflow":
        it = iter(dataset)
        return [next(it) for _ in range(count)]
    return [dataset[i] for i in range(count)]


def _reference(recipe, x, sampler_spec):
    """The single process's global walk (the same sampler, seed and graph)."""
    n, b = len(x), recipe["batch_size"]
    if sampler_spec["name"] == "uniform":
        return UniformSampler(n, b, seed=0, drop_remainder=True)
    initial = run.modality_of(recipe).initial_embeddings(x, 0)
    return BatchSampler(initial, b, num_candidates=40, num_neighbors=8, backend="brute", seed=0)


@pytest.mark.parametrize("sampler", [{"name": "uniform"}, GRAPH])
def test_two_workers_feed_the_blocks_of_the_single_process_global_batches(digits, sampler):
    x, y = digits
    recipe = run.load_recipe({**TINY, "sampler": sampler})
    feeds = [run.make_train_feed(recipe, x, y, place=WorkerPlace(2, i)) for i in (0, 1)]
    reference = _reference(recipe, x, sampler)
    steps = len(x) // 64 if sampler["name"] == "uniform" else -(-len(x) // 64)
    assert feeds[0].steps_per_epoch == reference.steps_per_epoch == steps
    per_worker = [_elements(f.dataset, 3) for f in feeds]
    for (f0, y0), (f1, y1) in zip(*per_worker):
        i0, i1 = np.asarray(f0["index"]), np.asarray(f1["index"])
        assert i0.shape == i1.shape == (32,) and not set(i0) & set(i1)
        np.testing.assert_array_equal(np.concatenate([i0, i1]), reference.next_batch())
        np.testing.assert_array_equal(np.asarray(f1["images"]), x[i1].astype("float32"))
        np.testing.assert_array_equal(np.asarray(y1), y[i1])
    # backed up with the run: the shard's state is the global walk's
    assert set(feeds[0].sampler.get_state()) == set(reference.get_state())


def test_one_worker_is_the_single_process_feed(digits):
    x, y = digits
    recipe = {**TINY, "sampler": {"name": "uniform"}}
    feed = run.make_train_feed(recipe, x, y, place=WorkerPlace(1, 0))
    assert feed.sampler is None and feed.steps_per_epoch == len(x) // 64
    graph = run.make_train_feed({**TINY, "sampler": GRAPH}, x, y, place=WorkerPlace(1, 0))
    # a graph sampler is clocked on one process too, its shard holding every row
    assert type(graph.sampler.sampler).__name__ == "BatchSampler"
    assert graph.sampler.num_workers == 1 and graph.sampler.rows == slice(0, 64)


def test_the_sharded_uniform_walk_is_the_single_process_order_off_tensorflow(digits):
    # Across epochs (epoch 2 included), the uniform walk the workers share draws the
    # batches of the single-process ShuffledBatches feed: a run across workers trains on
    # the same batches as on one process.
    from keras_hardneg.data import ShuffledBatches

    x, y = digits
    single = ShuffledBatches(x, y, 64, seed=3)
    walk = UniformSampler(len(x), 64, seed=3, drop_remainder=True)
    assert walk.steps_per_epoch == single.steps_per_epoch
    for i in range(3 * single.steps_per_epoch):
        np.testing.assert_array_equal(walk.next_batch(), single.indices(i))


def test_bad_worker_settings_are_refused_clearly(digits):
    x, y = digits
    with pytest.raises(ValueError, match="divisible by the number of workers"):
        run.make_train_feed({**TINY, "sampler": {"name": "uniform"}}, x, y,
                            place=WorkerPlace(3, 0))
    with pytest.raises(ValueError, match="scann.*several workers"):
        run.make_train_feed({**TINY, "sampler": {**GRAPH, "backend": "scann"}}, x, y,
                            place=WorkerPlace(2, 1))


def test_a_worker_trains_on_its_feed_with_the_clocked_refresh(digits):
    # Real fit: the prefetching feed waits on the refresh's step clock without hanging,
    # and the refreshes reach the walk.
    x, y = digits
    recipe = run.load_recipe({**TINY, "sampler": GRAPH})
    feed = run.make_train_feed(recipe, x, y, place=WorkerPlace(2, 1))
    model = run.build_model(recipe, x_train=x)
    before = feed.sampler.neighbors.copy()
    model.fit(feed.dataset, epochs=1, steps_per_epoch=feed.steps_per_epoch,
              callbacks=feed.callbacks, verbose=0)
    refresh = feed.callbacks[0]
    assert len(refresh.refreshes) == feed.steps_per_epoch // 3
    assert not np.array_equal(feed.sampler.neighbors, before)
    assert not feed.sampler._clock and not feed.sampler._pending  # stopped, all applied
