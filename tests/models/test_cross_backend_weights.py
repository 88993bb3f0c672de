"""Weights trained under JAX (``.weights.h5``) load under TensorFlow, give the same encoder
features, and export to a SavedModel there (JAX trains in a subprocess; TensorFlow, the
suite's backend, loads in the test's own process)."""

import json
import os
import subprocess
import sys

import keras
import pytest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cross_backend_weights.py")


def _run(mode, backend, out_dir):
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.run([sys.executable, SCRIPT, mode, str(out_dir)], capture_output=True,
                          text=True, timeout=600, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, proc.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


@pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                    reason="loads under the TensorFlow test run")
@pytest.mark.heavy  # heavy tier since 2026-11-29 (suite time: docs/notes/suite_time.md)
def test_weights_trained_under_jax_load_and_export_under_tensorflow(tmp_path):
    pytest.importorskip("jax")
    from tests.models import cross_backend_weights

    assert _run("train", "jax", tmp_path)["backend"] == "jax"
    result = cross_backend_weights.load(str(tmp_path))
    assert result["backend"] == "tensorflow"
    for kind in ("simclr", "moco_v2"):
        assert result[kind]["weight_diff"] == 0.0, kind  # every weight, exactly
        assert result[kind]["feature_diff"] < 1e-5, kind  # Keras BN (JAX) vs fused BN (TF)
        assert result[kind]["export_diff"] < 1e-5, kind
    # the queue's labels (int64 under TF, int32 under JAX) and pointer came across
    assert result["moco_v2"]["queue_labels"] == [0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0]
    assert result["moco_v2"]["queue_pointer"] == 0
