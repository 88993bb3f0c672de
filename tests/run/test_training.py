"""``train`` leaves the process and the output folder as a caller expects: the caller's
Keras dtype policy is back after the run (finished or failed), and ``history.json`` is
replaced whole (like ``results.json``), never left truncated by a failed write."""

import json
import os

import keras
import pytest

from keras_hardneg import run

RECIPE = {"data": {"name": "digits"}, "epochs": 1, "batch_size": 64,
          "projection_dims": [16, 8], "encoder": {"name": "small_convnet", "width": 4},
          "evaluation": {"monitor_every": 0, "linear_probe": False}}


@pytest.fixture
def caller_policy():
    before = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_bfloat16")
    yield "mixed_bfloat16"
    keras.config.set_dtype_policy(before)


def test_train_restores_the_callers_dtype_policy_and_writes_history_whole(
        tmp_path, caller_policy, monkeypatch):
    out = str(tmp_path / "run")
    result = run.train(RECIPE, out, verbose=0, export=False)
    assert result["epochs_run"] == 1
    # The recipe's float32 was used for the run; the caller's policy is back after it.
    assert keras.config.dtype_policy().name == caller_policy
    with open(f"{out}/history.json") as f:
        first = json.load(f)
    assert len(first["loss"]) == 1

    # A second call (starting over: the first call's outputs are removed first) whose
    # history write fails half-way leaves no truncated file (the write is atomic); and the
    # caller's policy is back after the failure.
    real_dump = json.dump

    def failing_dump(obj, fp, *args, **kwargs):
        if isinstance(obj, dict) and isinstance(obj.get("loss"), list):
            fp.write('{"loss": [')
            raise OSError("disk full")
        return real_dump(obj, fp, *args, **kwargs)

    monkeypatch.setattr(json, "dump", failing_dump)
    with pytest.raises(OSError, match="disk full"):
        run.train(RECIPE, out, resume=False, verbose=0, export=False)
    monkeypatch.setattr(json, "dump", real_dump)
    assert not os.path.exists(f"{out}/history.json")
    assert [f for f in os.listdir(out) if "history.json" in f] == []  # no temporary left
    assert keras.config.dtype_policy().name == caller_policy
