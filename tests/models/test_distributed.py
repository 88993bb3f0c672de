"""Many devices: MirroredStrategy over 2 logical CPUs equals one device (same data, same
initial weights): equal losses and equal weights after a few steps."""

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.parametrize("kind", ["simclr", "moco_v2", "moco_v3"])
def test_mirrored_equals_single_device(kind, tmp_path):
    proc = subprocess.run(
        [sys.executable, os.path.join(HERE, "distributed_check.py"), kind, str(tmp_path)],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, proc.stderr[-3000:]
    result = json.loads(lines[-1][len("RESULT "):])[kind]
    assert result["loss_single"] == pytest.approx(result["loss_mirrored"], rel=1e-4)
    assert result["max_weight_change"] > 1e-2  # training really moved the weights
    assert result["max_weight_diff"] < 1e-3 * max(1.0, result["max_weight_change"])
    assert result["relative_update_diff"] < 1e-3
    if kind == "moco_v2":
        # The queue got the keys of both replicas, in the same slots.
        assert result["queue_diff"] < 1e-5
        assert result["pointers"][0] == result["pointers"][1] == (3 * 8) % 16
