"""WorkerShard: one global walk, a contiguous block per worker (issue #19, item 3).

Workers are built in one process from the same seed, which is what separate processes do;
one test runs two real processes to check exactly that.
"""

import os
import signal
import subprocess
import sys
import threading
import types

import numpy as np
import pytest

from keras_hardneg.registry import ConfigError
from keras_hardneg.sampling import BatchSampler, ProximityGraph, UniformSampler, WorkerShard

N, B = 600, 48
EMB = np.random.default_rng(1).normal(size=(N, 8)).astype("float32")


def make(kind, seed=0):
    if kind == "uniform":
        return UniformSampler(N, B, seed=seed)
    return BatchSampler(EMB, B, restart_prob=(0.2, 0.05), num_candidates=60, num_neighbors=8,
                        seed=seed)


def shards(kind, workers=2, **kw):
    return [WorkerShard(make(kind), workers, i, **kw) for i in range(workers)]


@pytest.mark.parametrize("kind", ["batchsampler", "uniform"])
@pytest.mark.parametrize("workers", [2, 3])
def test_global_batch_split_without_overlap_or_loss(kind, workers):
    one, ws = make(kind), shards(kind, workers)
    for _ in range(2 * one.steps_per_epoch):
        blocks = [w.next_batch() for w in ws]
        assert all(b.shape == (B // workers,) for b in blocks)
        joined = np.concatenate(blocks)
        assert len(np.unique(joined)) == B  # no example on two workers
        np.testing.assert_array_equal(joined, one.next_batch())  # none dropped, in order


@pytest.mark.parametrize("kind", ["batchsampler", "uniform"])
def test_every_example_covered_each_epoch_as_on_one_process(kind):
    one, ws = make(kind), shards(kind)
    for _ in range(2):
        seen = [np.concatenate(list(w.epoch())) for w in ws]
        single = np.concatenate(list(one.epoch()))
        assert len(seen[0]) == len(seen[1]) == len(single) // 2
        assert set(np.concatenate(seen)) == set(range(N))
        assert ws[0].last_epoch_batches == ws[1].last_epoch_batches == one.last_epoch_batches


@pytest.mark.parametrize("kind", ["batchsampler", "uniform"])
def test_chief_state_resumes_the_same_global_walk_on_every_worker(kind):
    one, ws = make(kind), shards(kind)
    for _ in range(5):
        one.next_batch()
        for w in ws:
            w.next_batch()
    state = ws[0].get_state()  # the chief's backup
    assert set(state) == set(one.get_state())  # the global sampler's own keys
    resumed = [WorkerShard(make(kind, seed=99), 2, i) for i in (0, 1)]
    for w in resumed:
        w.set_state(state)
    plain = make(kind, seed=99)
    plain.set_state(state)  # a backup of 2 workers resumes on one process too
    for _ in range(one.steps_per_epoch + 3):
        expected = one.next_batch()
        np.testing.assert_array_equal(np.concatenate([w.next_batch() for w in resumed]),
                                      expected)
        np.testing.assert_array_equal(plain.next_batch(), expected)


def _refresh(sampler, every=3):
    from keras_hardneg.callbacks import GraphRefreshCallback

    cb = GraphRefreshCallback(sampler, every_n_steps=every, num_candidates=60,
                              num_neighbors=8, backend="brute", seed=5)
    cb.set_model(types.SimpleNamespace(embedding_bank=_bank(99)))
    cb.params = {"epochs": 1, "steps": 40}
    return cb


def _bank(step):  # the (gathered) bank every worker holds after `step` steps
    return np.random.default_rng([7, step]).normal(size=(N, 8)).astype("float32")


def _train(shard, steps, ahead, cb):
    """Simulated fit: the feed draws `ahead` global batches beyond the one the next step
    needs (a prefetch depth: timing, different on every worker); returns the blocks trained
    on."""
    cb.on_train_begin()
    queue, trained = [], []
    for step in range(steps):
        while len(queue) < 1 + ahead:
            queue.append(shard.next_batch())
        trained.append(queue.pop(0))
        cb.model.embedding_bank = _bank(step)
        cb.on_train_batch_end(step)
    cb.on_train_end()
    return trained


def test_refresh_from_the_same_bank_keeps_workers_in_step_whatever_their_prefetch():
    steps, look = 30, 2
    ws = [WorkerShard(make("batchsampler"), 2, i, lookahead=look) for i in (0, 1)]
    runs = [_train(w, steps, ahead, _refresh(w)) for w, ahead in zip(ws, (look, 0))]
    ref = WorkerShard(make("batchsampler"), 1, 0, lookahead=look)  # one process
    single = _train(ref, steps, 1, _refresh(ref))
    for b0, b1, g in zip(*runs, single):
        assert not set(b0) & set(b1)
        np.testing.assert_array_equal(np.concatenate([b0, b1]), g)
    # the graph changed (refreshes happened) and is the same on both workers
    assert not np.array_equal(ws[0].neighbors, BatchSampler(
        EMB, B, num_candidates=60, num_neighbors=8, seed=0).neighbors)
    np.testing.assert_array_equal(ws[0].neighbors, ws[1].neighbors)
    assert ws[0].restart_prob == ws[1].restart_prob < 0.2


def test_without_a_clock_updates_apply_at_once_and_would_part_the_walks():
    # Why the clock exists: a worker that prefetched draws with the old graph.
    ws = shards("batchsampler")
    ahead = [ws[0].next_batch() for _ in range(3)]  # worker 0 prefetched 3 batches
    g = ProximityGraph.build(_bank(0), 60, 8, backend="brute", seed=1)
    for w in ws:
        w.update_graph(g)
    behind = [ws[1].next_batch() for _ in range(3)]
    assert any(set(a) & set(b) for a, b in zip(ahead, behind))


def test_feed_thread_waits_for_training_and_the_training_thread_cannot_run_ahead():
    w = WorkerShard(make("batchsampler"), 2, 0, lookahead=1)
    w.start_clock()
    w.next_batch(), w.next_batch()  # batches 0 and 1: allowed before step 1 ends
    with pytest.raises(RuntimeError, match="lookahead"):
        w.next_batch()  # the training thread itself would wait forever
    got = []
    t = threading.Thread(target=lambda: got.append(w.next_batch()), daemon=True)
    t.start()
    t.join(0.3)
    assert t.is_alive() and not got  # the feed waits for step 1
    w.step_done()
    t.join(10)
    assert not t.is_alive() and len(got) == 1
    w.stop_clock()


def test_bad_arguments_are_named():
    with pytest.raises(ConfigError, match="divisible by the number of workers"):
        WorkerShard(make("uniform"), 5, 0)
    with pytest.raises(ConfigError, match="index"):
        WorkerShard(make("uniform"), 2, 2)
    with pytest.raises(ConfigError, match="num_workers"):
        WorkerShard(make("uniform"), 0, 0)
    with pytest.raises(ConfigError, match="index sampler"):
        WorkerShard(object(), 2, 0)
    with pytest.raises(ConfigError, match="already a WorkerShard"):
        WorkerShard(WorkerShard(make("uniform"), 2, 0), 2, 0)


_CHILD = """
import sys
import numpy as np
from keras_hardneg.sampling import BatchSampler, ProximityGraph, WorkerShard
index = int(sys.argv[1])
emb = np.random.default_rng(1).normal(size=(600, 8)).astype("float32")
w = WorkerShard(BatchSampler(emb, 48, num_candidates=60, num_neighbors=8, seed=0), 2, index)
out = [w.next_batch() for _ in range(10)]
bank = np.random.default_rng(3).normal(size=(600, 8)).astype("float32")
w.update_graph(ProximityGraph.build(bank, 60, 8, backend="brute", seed=4))
out += [w.next_batch() for _ in range(15)]
np.save(sys.argv[2], np.stack(out))
"""


def test_two_processes_draw_complementary_blocks(tmp_path):
    procs, paths = [], []
    # The samplers are NumPy code: the children run on Keras's NumPy backend, so importing
    # the package loads no TensorFlow (~6 CPU-s less each).
    env = {**os.environ, "PYTHONHASHSEED": "random", "KERAS_BACKEND": "numpy"}
    for i in (0, 1):
        paths.append(str(tmp_path / f"w{i}.npy"))
        procs.append(subprocess.Popen([sys.executable, "-c", _CHILD, str(i), paths[-1]],
                                      env=env, start_new_session=True,
                                      stderr=subprocess.PIPE))
    try:
        for p in procs:
            _, err = p.communicate(timeout=60)
            assert p.returncode == 0, err.decode()[-2000:]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    b0, b1 = np.load(paths[0]), np.load(paths[1])
    one = BatchSampler(EMB, B, num_candidates=60, num_neighbors=8, seed=0)
    expected = [one.next_batch() for _ in range(10)]
    one.update_graph(ProximityGraph.build(np.random.default_rng(3).normal(size=(N, 8))
                                          .astype("float32"), 60, 8, backend="brute", seed=4))
    expected += [one.next_batch() for _ in range(15)]
    np.testing.assert_array_equal(np.concatenate([b0, b1], axis=1), np.stack(expected))


def test_a_backup_taken_with_updates_pending_holds_them():
    w = WorkerShard(make("batchsampler"), 2, 0, lookahead=2)
    w.start_clock()
    new = ProximityGraph.build(_bank(1), 60, 8, backend="brute", seed=2).neighbors
    w.update_graph(new)
    w.set_restart_prob(0.1)
    assert w.sampler.restart_prob == 0.2  # not yet in the walk: due at global batch 3
    state = w.get_state()
    np.testing.assert_array_equal(state["neighbors"], new)
    assert state["restart_prob"] == 0.1
    np.testing.assert_array_equal(w.neighbors, new)  # what the refresh merges with
    w.stop_clock()
    np.testing.assert_array_equal(w.sampler.neighbors, new)


def test_refresh_checks_that_workers_agree_on_the_graph():
    from keras_hardneg.callbacks.graph_refresh import graph_checksum

    seen = []
    cb = _refresh(WorkerShard(make("batchsampler"), 2, 1), every=2)
    cb.agree = lambda what, value, hint="": seen.append((what, value))
    _train(cb.sampler, 4, 0, cb)
    assert len(seen) == 2 and all("graph" in what for what, _ in seen)
    assert seen[-1][1] == graph_checksum(cb.sampler.neighbors) < 2 ** 26
