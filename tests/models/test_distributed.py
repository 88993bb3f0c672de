"""Many devices: MirroredStrategy over 2 logical CPUs equals one device. Every step of a
short single-device run is replayed under the strategy from the same state on the same batch:
equal losses, equal updates, equal queue and pointer (see distributed_check.py for why steps
are compared from a shared state rather than as free-running trajectories)."""

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


# MoCo's cases are in the heavy tier (tests/conftest.py): simclr checks the strategy's
# gather and update in the default run; the MoCo ones add the queue under the strategy.
@pytest.mark.parametrize("kind", ["simclr", pytest.param("moco_v2", marks=pytest.mark.heavy),
                                  pytest.param("moco_v2_symmetric", marks=pytest.mark.heavy),
                                  pytest.param("moco_v3", marks=pytest.mark.heavy)])
@pytest.mark.heavy  # heavy tier since 2026-11-29 (suite time: docs/notes/suite_time.md)
def test_mirrored_equals_single_device(kind, tmp_path):
    proc = subprocess.run(
        [sys.executable, os.path.join(HERE, "distributed_check.py"), kind, str(tmp_path)],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, proc.stderr[-3000:]
    result = json.loads(lines[-1][len("RESULT "):])[kind]
    # float32 round-off from a different reduction order is ~1e-6 relative per step.
    assert result["loss_mirrored"] == pytest.approx(result["loss_single"], rel=2e-5)
    assert result["max_weight_change"] > 1e-2  # training really moved the weights
    assert max(result["relative_update_diff"]) < 1e-3
    assert result["max_weight_diff"] < 1e-4
    if kind == "moco_v2":
        # The queue got the keys of both replicas, in the same slots, at every step.
        assert result["queue_diff"] < 1e-5
        assert result["pointers"] == [[8, 8], [0, 0], [8, 8]]  # batch 8, queue 16, FIFO wrap
    if kind == "moco_v2_symmetric":
        # Both orders' keys of both replicas, k2 then k1, in the slots one device writes.
        assert result["queue_diff"] < 1e-5
        assert result["pointers"] == [[16, 16], [0, 0], [16, 16]]  # 2B = 16 a step, queue 32
