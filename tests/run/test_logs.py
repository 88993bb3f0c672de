"""A run's logs: every epoch's logs in ``OUTPUT/history.csv`` (a resumed run continues the
file, each epoch once), TensorBoard's event files under ``OUTPUT/tensorboard/`` when asked."""

import csv
import json
import os

import pytest

from keras_hardneg import run
from keras_hardneg.run.training import HISTORY_CSV, TENSORBOARD_DIR, trim_history_csv

from tests.run.test_rerun import TINY, _Interrupt, _KillAt


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_trim_keeps_the_committed_epochs_and_drops_a_partial_line(tmp_path):
    path = tmp_path / HISTORY_CSV
    path.write_text("epoch,loss\n0,3.5\n1,3.25\n2,3.0\n3,2.")  # epoch 3: cut by a kill
    trim_history_csv(str(path), 2)
    assert path.read_text() == "epoch,loss\n0,3.5\n1,3.25\n"


def test_trim_of_a_missing_file_writes_nothing(tmp_path):
    trim_history_csv(str(tmp_path / HISTORY_CSV), 1)
    assert not (tmp_path / HISTORY_CSV).exists()


def test_a_resumed_run_continues_history_csv_and_writes_tensorboard(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(_Interrupt):  # epoch 0 commits, epoch 1 is killed mid-way
        run.train(TINY, str(out), verbose=0, export=False, report=False, tensorboard=True,
                  extra_callbacks=[_KillAt(1, 2)])
    assert [r["epoch"] for r in _rows(out / HISTORY_CSV)] == ["0"]
    # as after a kill between an epoch's row and its commit, the next row half written:
    with open(out / HISTORY_CSV, "a") as f:
        f.write("1,9.9,9.9\n2,9.")
    result = run.train(TINY, str(out), verbose=0, export=False, report=False,
                       tensorboard=True)
    assert result["epochs_trained_now"] == 1
    rows = _rows(out / HISTORY_CSV)
    assert [r["epoch"] for r in rows] == ["0", "1"]
    with open(out / "history.json") as f:
        losses = json.load(f)["loss"]
    assert [float(r["loss"]) for r in rows] == pytest.approx(losses, rel=1e-6)
    events = [name for _, _, names in os.walk(out / TENSORBOARD_DIR) for name in names
              if name.startswith("events.out.tfevents")]
    assert events, "no TensorBoard event file"


def test_history_csv_without_tensorboard_by_default(tmp_path):
    out = tmp_path / "run"
    run.train({**TINY, "epochs": 1}, str(out), verbose=0, export=False, report=False)
    assert [r["epoch"] for r in _rows(out / HISTORY_CSV)] == ["0"]
    assert not (out / TENSORBOARD_DIR).exists()
