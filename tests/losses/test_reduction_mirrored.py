"""Every loss under ``tf.distribute.MirroredStrategy`` (2 logical CPUs, in a child process:
logical devices must be set before TensorFlow starts): the loss's one reduction path scales
per replica as Keras does, and SimCLR with each loss, ``sample_weight`` and a non-default
``reduction`` takes the step one device takes (see mirrored_check.py)."""

import json
import os
import subprocess
import sys

import keras
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


# Heavy tier (a process of its own under a two-replica MirroredStrategy, ~70 s): the
# single-device reductions are checked in the default suite (test_reduction.py).
@pytest.mark.heavy
@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="tf.distribute")
def test_every_loss_reduces_per_replica_as_keras_and_steps_as_one_device():
    proc = subprocess.run([sys.executable, os.path.join(HERE, "mirrored_check.py")],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, proc.stderr[-3000:]
    result = json.loads(lines[-1][len("RESULT "):])
    assert len(result["loss"]) == 15 and len(result["framework"]) == 5
    for case, values in result["loss"].items():
        for convention, (mirrored, want) in values.items():
            assert mirrored == pytest.approx(want, rel=1e-5, abs=1e-6), (case, convention)
    for case, values in result["framework"].items():
        assert values["moved"] >= 4, case  # the step really moved the weights
        # float32 round-off from a different reduction order (as distributed_check.py)
        assert values["max_relative_update_diff"] < 1e-3, (case, values)
