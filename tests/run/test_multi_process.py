"""JAX multi-process: 2 processes on loopback (``jax.distributed`` + gloo CPU collectives,
``keras.distribution.DataParallel`` over both processes' devices), each feeding its block of
every global batch, train SimCLR exactly as one process does on the global batches.

The workers run ``multi_process_child.py`` in their own process groups under a hard
deadline: a hung worker fails the test (both groups are killed) instead of hanging CI."""

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
from keras_hardneg.run.distribution import build_distribution
from keras_hardneg.run.distribution import multi_process  # noqa: F401  (registers the entry)

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, "multi_process_child.py")
DEADLINE_S = 240  # both parts: ~55 s alone, ~70 s on 2 loaded cores; it only catches hangs
LOSSES = ("nt_xent",)  # the family shares the gather (losses/core.py); "hard" cost ~15 CPU-s

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Hung(Exception):
    """A worker did not finish before the deadline (every worker has been killed)."""


def run_group(argvs, env, deadline_s):
    """Runs one process per argv, each in its own process group; waits for all until
    ``deadline_s``; returns ``[(returncode, output)]``. On the deadline, kills every group
    (the worker and anything it started) and raises :class:`Hung`."""
    procs = [subprocess.Popen(argv, env=env, start_new_session=True, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for argv in argvs]
    deadline = time.monotonic() + deadline_s
    outputs = []
    try:
        for proc in procs:
            out, _ = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
            outputs.append(out)
    except subprocess.TimeoutExpired:
        raise Hung(f"no result within {deadline_s} s") from None
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return [(proc.returncode, out) for proc, out in zip(procs, outputs)]


def run_workers(out_dir, mode, num_processes=2):
    """Runs the JAX workers in ``mode`` on a free loopback port; fails on a hang or error."""
    env = {**os.environ, "KERAS_BACKEND": "jax", "TF_CPP_MIN_LOG_LEVEL": "2",
           # the suite's XLA level (tests/conftest.py); 1 CPU device per process
           "XLA_FLAGS": os.environ.get("XLA_FLAGS", "")}
    address = f"127.0.0.1:{free_port()}"
    argvs = [[sys.executable, CHILD, address, str(num_processes), str(i), str(out_dir), mode]
             for i in range(num_processes)]
    try:
        results = run_group(argvs, env, DEADLINE_S)
    except Hung as err:
        pytest.fail(f"a JAX worker hung ({err}); killed them all")
    for i, (code, out) in enumerate(results):
        assert code == 0, f"worker {i} failed:\n{out[-4000:]}"


@pytest.mark.multi_process
def test_a_hung_worker_fails_by_the_deadline_and_is_killed(tmp_path):
    pid_file = tmp_path / "pid"
    sleeper = [sys.executable, "-c", "import os, sys, time; "
               "open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(120)", str(pid_file)]
    start = time.monotonic()
    with pytest.raises(Hung):
        run_group([[sys.executable, "-c", "pass"], sleeper], dict(os.environ), deadline_s=3)
    assert time.monotonic() - start < 30
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(int(pid_file.read_text()), 0)


@pytest.fixture(scope="module")
def workers(tmp_path_factory):
    pytest.importorskip("jax")
    out_dir = tmp_path_factory.mktemp("jax_multi_process")
    # One pair of processes runs both parts (starting and joining them is ~10 s a pair).
    run_workers(out_dir, "equality+train")
    results = [dict(np.load(os.path.join(out_dir, f"worker{i}.npz"))) for i in range(2)]
    for i, w in enumerate(results):
        w["disagreement"] = (out_dir / f"disagree{i}.txt").read_text()
        w["train"] = json.loads((out_dir / f"train{i}.json").read_text())
        w["out_dir"] = out_dir
    return results


@pytest.mark.multi_process
@pytest.mark.heavy
def test_each_process_feeds_its_block_and_the_step_sees_the_global_batch(workers):
    for w in workers:
        assert int(w["row_order_rows"]) == 8  # global batch = 2 blocks of 4
        assert float(w["row_order"]) == float(w["row_order_expected"])  # block p at rows 4p..
        assert all(int(w[f"{loss}/devices"]) == 2 for loss in LOSSES)  # weights span both


@pytest.mark.multi_process
@pytest.mark.heavy
def test_a_value_that_differs_between_processes_raises_on_every_process(workers):
    for w in workers:  # 7 and 7 agreed; 0 and 1 did not
        assert "the processes disagree on a test value (per process: [0, 1])" in w["disagreement"]


@pytest.mark.multi_process
@pytest.mark.heavy
@pytest.mark.parametrize("loss", LOSSES)
def test_two_processes_equal_one_process(workers, loss):
    chief = workers[0]
    reference = chief[f"{loss}/ref_losses"]
    assert len(reference) == 3
    trainable = chief[f"{loss}/trainable"]
    moved = max(float(np.max(np.abs(chief[f"{loss}/ref{i}"] - chief[f"{loss}/start{i}"])))
                for i in trainable)
    assert moved > 1e-3  # the 3 steps did train
    count = sum(1 for k in chief if k.startswith(f"{loss}/ref") and k[len(loss) + 4:].isdigit())
    for w in workers:
        np.testing.assert_allclose(w[f"{loss}/losses"], reference, rtol=1e-4, atol=1e-4)
        for i in range(count):
            np.testing.assert_allclose(w[f"{loss}/w{i}"], chief[f"{loss}/ref{i}"],
                                       rtol=1e-4, atol=1e-4, err_msg=f"weight {i}")


@pytest.mark.parametrize("spec, message", [
    ({"process_id": 1}, "'num_processes' and 'process_id' are given together"),
    ({"num_processes": 2, "process_id": 2}, "'process_id' must be in [0, 'num_processes')"),
    ({"coordinator_address": "localhost"}, "must be 'host:port'"),
    ({"cpu_collectives": "nccl"}, "choose one of gloo, mpi"),
])
def test_bad_specs_are_named(spec, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        build_distribution({"name": "jax_multi_process", **spec})


def test_needs_the_jax_backend():
    import keras

    if keras.backend.backend() == "jax":
        pytest.skip("checks the message on another backend")
    with pytest.raises(ConfigError, match="needs the JAX backend"):
        build_distribution({"name": "jax_multi_process", "coordinator_address": "127.0.0.1:1",
                            "num_processes": 2, "process_id": 0})


@pytest.mark.multi_process
@pytest.mark.heavy
def test_run_train_across_two_processes_equals_one_process(workers):
    """Uniform batches (epoch 2 included: the sharded walk draws the single-process
    epoch orders) and BatchSampler batches (graph refreshes, checksums compared)."""
    chief, other = (w["train"] for w in workers)
    for sampler in ("uniform", "batchsampler"):
        c, o = chief[sampler], other[sampler]
        assert len(c["single_loss"]) == 2  # epochs
        np.testing.assert_allclose(c["loss"], c["single_loss"], rtol=1e-4, atol=1e-4,
                                   err_msg=sampler)
        np.testing.assert_allclose(o["loss"], c["loss"], rtol=1e-4, atol=1e-4,
                                   err_msg=sampler)
        assert c["chief_results"] and not o["chief_results"]  # only the chief evaluates
        assert (workers[0]["out_dir"] / f"run_{sampler}" / "results.json").is_file()
