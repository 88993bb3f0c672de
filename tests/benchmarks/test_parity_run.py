"""benchmarks/parity/run.py park: a running cell's last committed epoch (the commit record and
the two files it names, not the one before it), its curve and its log are staged for a
commit, so that a fresh checkout resumes the cell; a cell with no committed epoch is refused."""

import argparse
import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "parity"))
import run  # noqa: E402

CELL = "keras:jax:all_lightly_bf16:s1"


def _git(repo, *args):
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout


def test_park_stages_the_last_committed_epoch_only(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    tmp = repo / "benchmarks" / "results" / "tmp" / "parity"
    backup = tmp / "backups" / "keras-jax-all_lightly_bf16-s1"
    backup.mkdir(parents=True)
    (tmp / "logs").mkdir()
    _git(repo, "init", "-q")
    (repo / ".gitignore").write_text("benchmarks/results/tmp/\n")
    for name in ("ckpt-2.weights.h5", "ckpt-2.state.npz", "ckpt-3.weights.h5",
                 "ckpt-3.state.npz"):
        (backup / name).write_bytes(b"x")
    meta = {"epoch": 3, "weights": "ckpt-3.weights.h5", "state": "ckpt-3.state.npz",
            "previous": {"epoch": 2, "weights": "ckpt-2.weights.h5",
                         "state": "ckpt-2.state.npz"}}
    (backup / "training_metadata.json").write_text(json.dumps(meta))
    (tmp / "backups" / "keras-jax-all_lightly_bf16-s1.log.json").write_text("{}")
    (tmp / "logs" / "keras-jax-all_lightly_bf16-s1.log").write_text("epoch 3: loss 5.4\n")
    monkeypatch.setattr(run, "ROOT", str(repo))
    monkeypatch.setattr(run, "TMP", str(tmp))

    run.park(argparse.Namespace(cells=[CELL]))
    staged = sorted(_git(repo, "diff", "--cached", "--name-only").split())
    prefix = "benchmarks/results/tmp/parity/"
    assert staged == [prefix + p for p in (
        "backups/keras-jax-all_lightly_bf16-s1.log.json",
        "backups/keras-jax-all_lightly_bf16-s1/ckpt-3.state.npz",
        "backups/keras-jax-all_lightly_bf16-s1/ckpt-3.weights.h5",
        "backups/keras-jax-all_lightly_bf16-s1/training_metadata.json",
        "logs/keras-jax-all_lightly_bf16-s1.log")]

    with pytest.raises(SystemExit, match="no committed epoch"):
        run.park(argparse.Namespace(cells=["keras:jax:all_lightly_bf16:s2"]))
    with pytest.raises(SystemExit, match="only Keras cells"):
        run.park(argparse.Namespace(cells=["lightly:separate:s0"]))
