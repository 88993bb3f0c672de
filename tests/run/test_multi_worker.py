"""TensorFlow multi-worker: 2 worker processes on loopback ports under
``MultiWorkerMirroredStrategy`` (the ``tf_multi_worker`` distribution), through ``fit``.

One pair of workers (``multi_worker_child.py``) first trains 3 steps on the same global
batches, each worker feeding its block (SimCLR with NT-Xent, MoCo
v2), and compares with one process on the global batches; then runs
``keras_hardneg.run.train`` on a small recipe until worker 1 SIGKILLs itself at the start of
epoch 1. The test waits for the chief's backup of epoch 1, kills the chief, and runs both
workers again: they resume from the chief's backup and finish.

Every worker runs in its own process group under a hard deadline: a hung worker fails the
test (all groups are killed) instead of hanging CI."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from keras_hardneg.registry import ConfigError
from keras_hardneg.run.distribution import multi_worker  # noqa: F401  (registers the entry)
from keras_hardneg.run.distribution import build_distribution

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, "multi_worker_child.py")
DEADLINE_S = 240  # the deadline only catches hangs (see the note for measured times)
CASES = ("nt_xent", "moco_v2")  # SimCLR; MoCo v2 (every loss of the family shares the
# cross-replica gather in losses/core.py: the hard loss as a third case cost ~15 CPU-s)

pytestmark = pytest.mark.multi_process


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Workers:
    """Worker processes, each in its own process group; :meth:`kill` ends them all."""

    def __init__(self, argvs, env, log_dir, tag):
        self.logs = [os.path.join(log_dir, f"{tag}-worker{i}.log") for i in range(len(argvs))]
        self.procs = []
        for argv, log in zip(argvs, self.logs):
            with open(log, "w") as out:
                self.procs.append(subprocess.Popen(argv, env=env, start_new_session=True,
                                                   stdout=out, stderr=subprocess.STDOUT))

    def wait_until(self, condition, deadline, what):
        while not condition():
            if time.monotonic() > deadline:
                self.kill()
                pytest.fail(f"hung: {what} not within the deadline; killed every worker\n"
                            + self.tail())
            time.sleep(0.2)

    def kill(self):
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def tail(self, chars=3000):
        return "\n".join(f"--- {log}\n{open(log).read()[-chars:]}" for log in self.logs)


def launch(tag, log_dir, tmp_dir, extra):
    workers = f"localhost:{free_port()},localhost:{free_port()}"
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "2",
           "CUDA_VISIBLE_DEVICES": "", "TMPDIR": str(tmp_dir)}
    env.pop("TF_CONFIG", None)
    argvs = [[sys.executable, CHILD, workers, str(i)] + extra[i] for i in range(2)]
    return Workers(argvs, env, str(log_dir), tag)


def committed_epoch(run_dir):
    try:
        with open(os.path.join(run_dir, "backup", "training_metadata.json")) as f:
            return json.load(f)["epoch"]
    except (OSError, ValueError, KeyError):
        return None


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    """Equality checks, then a train() run in which worker 1 dies at the start of epoch 1."""
    base = tmp_path_factory.mktemp("tf_multi_worker")
    out_dir, run_dir = base / "equality", base / "run"
    for d in (out_dir, base / "tmp-first", base / "tmp-rerun"):
        d.mkdir()
    train = ["--train", str(run_dir)]
    workers = launch("first", base, base / "tmp-first", [["--equality", str(out_dir)] + train,
                                           ["--equality", str(out_dir)] + train
                                           + ["--die-at-epoch", "1"]])
    deadline = time.monotonic() + DEADLINE_S
    died = workers.procs[1]
    workers.wait_until(lambda: died.poll() is not None, deadline, "worker 1's death")
    # The chief commits its backup of epoch 1 (nothing waits on worker 1 before that),
    # then fails or hangs in the next collective: end it.
    workers.wait_until(lambda: committed_epoch(run_dir) == 1
                       or workers.procs[0].poll() is not None, deadline, "the chief's backup")
    workers.kill()
    return {"base": base, "out_dir": out_dir, "run_dir": run_dir, "workers": workers,
            "died": died.returncode, "chief_backup": committed_epoch(run_dir)}


@pytest.mark.heavy
@pytest.mark.parametrize("case", CASES)
def test_two_workers_equal_one_process(first_run, case):
    out = first_run["out_dir"]
    files = [out / f"{name}_{case}.npz" for name in ("ref", "w0", "w1")]
    assert all(f.exists() for f in files), first_run["workers"].tail()
    ref, *workers = [dict(np.load(f)) for f in files]
    count = sum(1 for k in ref if re.fullmatch(r"w\d+", k))
    assert count > 4 and len(ref["losses"]) == 3
    moved = max(float(np.max(np.abs(ref[f"w{i}"] - ref[f"start{i}"]))) for i in range(count))
    assert moved > 1e-2  # the 3 steps did train
    for w in workers:
        np.testing.assert_allclose(w["losses"], ref["losses"], rtol=1e-4, atol=1e-4)
        for i in range(count):
            np.testing.assert_allclose(w[f"w{i}"], ref[f"w{i}"], rtol=1e-4, atol=1e-4,
                                       err_msg=f"weight {i}")


@pytest.mark.heavy
def test_killed_worker_resumes_from_the_chiefs_backup(first_run):
    assert first_run["died"] == -signal.SIGKILL, first_run["workers"].tail()
    assert first_run["chief_backup"] == 1, first_run["workers"].tail()
    run_dir = first_run["run_dir"]
    assert not (run_dir / "results.json").exists()
    rerun = launch("rerun", first_run["base"], first_run["base"] / "tmp-rerun",
                   [["--train", str(run_dir)]] * 2)
    deadline = time.monotonic() + DEADLINE_S
    rerun.wait_until(lambda: all(p.poll() is not None for p in rerun.procs), deadline,
                     "the rerun's end")
    assert [p.returncode for p in rerun.procs] == [0, 0], rerun.tail()
    seen = [json.loads((run_dir / f"worker{i}.json").read_text()) for i in range(2)]
    for s in seen:  # both restored the chief's epoch-1 backup, trained the last epoch
        assert (s["initial_epoch"], s["trained_now"], s["epochs_run"]) == (1, 1, 2)
    assert seen[0]["weights_at_begin"] == seen[1]["weights_at_begin"]
    assert seen[0]["loss"] == seen[1]["loss"]
    assert committed_epoch(run_dir) == 2
    results = json.loads((run_dir / "results.json").read_text())  # the chief's
    assert results["distribution"].startswith("tf_multi_worker (2 worker(s)")
    assert results["epochs_run"] == 2
    assert not os.listdir(first_run["base"] / "tmp-rerun")  # worker 1's private backup is gone


@pytest.mark.parametrize("spec, message", [
    ({"task_index": 0}, "'workers' and 'task_index' are given together"),
    ({"workers": "localhost:1,localhost:2", "task_index": 2}, "'task_index' must be in [0, 2)"),
    ({"workers": "localhost", "task_index": 0}, "must be 'host:port,host:port,...'"),
    ({"communication": "mpi"}, "choose one of auto, ring, nccl"),
])
def test_bad_specs_are_named(spec, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        build_distribution({"name": "tf_multi_worker", **spec})


def test_no_cluster_is_a_clear_error(monkeypatch):
    import keras

    if keras.backend.backend() != "tensorflow":
        pytest.skip("the backend is checked first")
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ConfigError, match="needs the cluster: set TF_CONFIG"):
        build_distribution("tf_multi_worker")


def test_place_follows_the_cluster_order():
    place = multi_worker._place({"chief": ["a:1"], "worker": ["b:1", "c:1"]}, "worker", 1)
    assert (place.num_workers, place.index, place.is_chief) == (3, 2, False)
    assert multi_worker._place({"worker": ["a:1", "b:1"]}, "worker", 0).is_chief
    with pytest.raises(ConfigError, match="not a training task"):
        multi_worker._place({"worker": ["a:1"], "evaluator": ["e:1"]}, "evaluator", 0)


def test_cli_hands_the_distribution_to_train(monkeypatch, tmp_path, capsys):
    from keras_hardneg import cli, run

    seen = {}

    def fake_train(recipe, output, **kwargs):
        seen.update(kwargs)
        return {"worker": 1, "epochs_run": 1}

    monkeypatch.setattr(run, "train", fake_train)
    spec = '{"name": "tf_multi_worker", "workers": "localhost:1,localhost:2", "task_index": 1}'
    assert cli.main(["train", "--output", str(tmp_path), "--distribution", spec]) == 0
    assert seen["distribution"] == {"name": "tf_multi_worker", "workers": "localhost:1,localhost:2",
                                    "task_index": 1}
    assert "worker 1 done" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.main(["train", "--distribution", "{not json"])
