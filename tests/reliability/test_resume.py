"""Interrupted training: a real SIGKILL in the middle of an epoch (or in the middle of a
checkpoint write), then the same command again. See docs/reliability.md. The two SimCLR
kills are one chain of three processes (each process costs ~20 CPU-s here).

Every test here is the heavy tier (``KHN_HEAVY_TESTS=1``, ``.ci/run``): process-level runs.
The default run checks the same mechanisms in one process: tests/reliability/test_backup.py
(an uncommitted or cut checkpoint is ignored and removed, a damaged latest backup falls
back to the previous one), tests/run/test_rerun.py (an interrupted run resumes to the
uninterrupted run's epochs), tests/models/test_checkpoint.py (MoCo's queue, key encoder and
step resume) and tests/callbacks/test_annealing.py (the schedules as functions of the
epoch)."""

import os
import signal
import subprocess
import sys
import time

import pytest

from keras_hardneg.callbacks.annealing import beta_schedule, ring_upper_schedule
from keras_hardneg.callbacks.backup import _decode_state
from tests.reliability._common import digest_state, read_json, write_json

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EPOCHS = 3
TINY = {"encoder": {"name": "small_convnet", "width": 8}, "projection_dims": [16, 8],
        "data": {"name": "digits", "test_fraction": 0.75}, "batch_size": 32, "epochs": EPOCHS,
        "evaluation": {"monitor_every": 0, "linear_probe": False, "knn_k": 20}}

MOCO = {**TINY, "framework": "moco_v2",
        "loss": {"name": "hard", "temperature": 0.5, "tau_plus": 0.1, "beta": 1.0},
        "sampler": {"name": "batchsampler", "num_candidates": 40, "num_neighbors": 8,
                    "refresh_every": 4, "restart_prob": [0.2, 0.05]},
        "moco": {"queue_size": 128, "momentum": 0.9}, "annealing": {"beta_changes": EPOCHS}}

SIMCLR = {**TINY, "framework": "simclr",
          "loss": {"name": "ring", "temperature": 0.5, "lower_percentile": 5.0,
                   "upper_percentile": 100.0},
          "annealing": {"ring_start": 100.0, "ring_end": 10.0}}


def _child_cmd(recipe_path, out, probe, *extra):
    return [sys.executable, "-m", "tests.reliability._child", recipe_path, out, probe, *extra]


def _env():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
    return env


def _kill_when_marker(cmd, out, timeout=300):
    """Starts ``cmd``, waits for ``out/marker``, SIGKILLs the child; returns its pid."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    marker = os.path.join(out, "marker")
    deadline = time.monotonic() + timeout
    while not os.path.exists(marker):
        if proc.poll() is not None:
            raise AssertionError(f"child ended before the marker: {proc.stderr.read()[-3000:]!r}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("child never reached the marker")
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    os.remove(marker)
    return proc.pid


def _run(cmd):
    done = subprocess.run(cmd, cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, timeout=600)
    assert done.returncode == 0, done.stderr.decode()[-3000:]


def _killed_run(recipe_path, out, probe, pause):
    """Runs the child until its pause, SIGKILLs it; returns (its probe, the commit record,
    the committed sampler state), read before the next run's commit removes the files."""
    _kill_when_marker(_child_cmd(recipe_path, out, probe, *pause), out)
    meta = read_json(os.path.join(out, "backup", "training_metadata.json"))
    state = meta["state"] and _decode_state(os.path.join(out, "backup", meta["state"]))
    return read_json(probe), meta, state


def _scenario(tmp_path, recipe, pause):
    recipe_path = str(tmp_path / "recipe.json")
    write_json(recipe_path, recipe)
    out = str(tmp_path / "run")
    os.makedirs(out)
    killed, meta, state = _killed_run(recipe_path, out, str(tmp_path / "killed.json"), pause)
    resumed_probe = str(tmp_path / "resumed.json")
    _run(_child_cmd(recipe_path, out, resumed_probe))
    return killed, meta, state, read_json(resumed_probe)


@pytest.fixture(scope="module")
def simclr_chain(tmp_path_factory):
    """One SimCLR run killed twice (three processes, not four): first inside its 2nd
    checkpoint write (the end of epoch 0 is committed), then, resumed, in the middle of
    epoch 2; the third process finishes it."""
    tmp = tmp_path_factory.mktemp("simclr_chain")
    recipe_path = str(tmp / "recipe.json")
    write_json(recipe_path, SIMCLR)
    out = str(tmp / "run")
    os.makedirs(out)
    in_save = _killed_run(recipe_path, out, str(tmp / "in_save.json"), ["--pause-in-save", "2"])
    mid_epoch = _killed_run(recipe_path, out, str(tmp / "mid_epoch.json"),
                            ["--pause-at", "2", "1"])
    _run(_child_cmd(recipe_path, out, str(tmp / "finished.json")))
    return {"in_save": in_save, "mid_epoch": mid_epoch, "out": out,
            "finished": read_json(str(tmp / "finished.json"))}


def _check_common(killed, meta, resumed, kill_epoch):
    # The kill came in epoch `kill_epoch`: epochs 0..kill_epoch-1 are committed.
    assert meta["epoch"] == kill_epoch
    # The killed process committed every epoch it trained (from where it began).
    first = killed["begin"]["initial_epoch"]
    assert sorted(killed["saved"], key=int) == [str(e) for e in range(first, kill_epoch)]
    begin = resumed["begin"]
    last = killed["saved"][str(kill_epoch - 1)]
    assert begin["initial_epoch"] == kill_epoch  # = last completed epoch + 1
    for key in ("weights", "optimizer", "iterations", "queue", "key_encoder"):
        if key in last:
            assert begin[key] == last[key], key
    assert begin["iterations"] > 0
    # The whole run's history: restored epochs, then the resumed ones.
    assert resumed["epochs_run"] == EPOCHS
    assert resumed["epochs_trained_now"] == EPOCHS - kill_epoch  # the rest came from the backup
    assert all(len(v) == EPOCHS for v in resumed["history"].values())
    # Epochs before the kill are reported as the killed process measured them.
    assert resumed["history"]["loss"][:kill_epoch] == [h["loss"] for h in meta["history"]]
    assert sorted(resumed["loss_params"], key=int) == [str(e) for e in range(kill_epoch, EPOCHS)]


@pytest.mark.heavy
@pytest.mark.timeout(900)
def test_moco_batchsampler_sigkill_mid_epoch_resumes(tmp_path):
    kill_epoch = 1
    killed, meta, saved_state, resumed = _scenario(
        tmp_path, MOCO, ["--pause-at", str(kill_epoch), "3"])
    _check_common(killed, meta, resumed, kill_epoch)
    begin = resumed["begin"]
    # Sampler: rng, permutation, coverage, graph and restart probability as committed.
    assert begin["sampler"] == digest_state(saved_state["sampler"])
    assert begin["restart_prob"] == pytest.approx(float(saved_state["sampler"]["restart_prob"]))
    assert begin["restart_prob"] < 0.2  # the schedule had moved on before the kill
    assert begin["refresh_step"] == killed["saved"][str(kill_epoch - 1)]["refresh_step"] > 0
    # beta schedule continues from the restored epoch (Robinson et al. App. D.1).
    for e, params in resumed["loss_params"].items():
        assert params["beta"] == pytest.approx(beta_schedule(1.0, EPOCHS, EPOCHS, int(e)))


@pytest.mark.heavy
@pytest.mark.timeout(900)
def test_simclr_sigkill_mid_epoch_resumes(simclr_chain):
    kill_epoch = 2
    killed, meta, _ = simclr_chain["mid_epoch"]
    resumed = simclr_chain["finished"]
    assert killed["begin"]["initial_epoch"] == 1  # this process had resumed once already
    _check_common(killed, meta, resumed, kill_epoch)
    for e, params in resumed["loss_params"].items():
        assert params["upper_percentile"] == pytest.approx(
            ring_upper_schedule(100.0, 10.0, EPOCHS, int(e)))


@pytest.mark.heavy
@pytest.mark.timeout(900)
def test_sigkill_during_checkpoint_write_keeps_previous(simclr_chain):
    # The 2nd save (end of epoch 1) is cut in half and the process is killed in it.
    killed, meta, _ = simclr_chain["in_save"]
    resumed, _, _ = simclr_chain["mid_epoch"]  # the next process (itself killed later)
    assert meta["epoch"] == 1  # the commit record still names epoch 0's files
    assert resumed["begin"]["initial_epoch"] == 1
    assert resumed["begin"]["weights"] == killed["saved"]["0"]["weights"]
    assert sorted(resumed["saved"], key=int) == ["1"]  # it retrained epoch 1 and committed it
    finished = simclr_chain["finished"]
    assert finished["epochs_run"] == EPOCHS
    # The half-written file was removed; the last backup and the one before it remain.
    backup = os.path.join(simclr_chain["out"], "backup")
    files = sorted(f for f in os.listdir(backup) if f.startswith("ckpt-"))
    final = read_json(os.path.join(backup, "training_metadata.json"))
    named = {final["weights"], final["state"], final["previous"]["weights"],
             final["previous"]["state"]} - {None}
    assert set(files) == named and final["weights"].startswith(f"ckpt-{EPOCHS:05d}")
    assert final["previous"]["weights"].startswith(f"ckpt-{EPOCHS - 1:05d}")
