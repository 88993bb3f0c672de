"""JAX: keras.distribution.DataParallel over 2 virtual CPU devices equals one device (the
step is compiled over the global batch, so in-batch negatives are the global batch). Runs
in a subprocess: XLA_FLAGS must be set before JAX is imported."""

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


KINDS = ["simclr", "moco_v3"]


@pytest.fixture(scope="module")
def results():
    """Both kinds in one subprocess (each start paid the imports and JAX's start-up)."""
    pytest.importorskip("jax")
    env = {**os.environ, "KERAS_BACKEND": "jax",
           # the suite's XLA level (tests/conftest.py) and two host devices
           "XLA_FLAGS": (os.environ.get("XLA_FLAGS", "")
                         + " --xla_force_host_platform_device_count=2").strip()}
    proc = subprocess.run([sys.executable, os.path.join(HERE, "jax_data_parallel_check.py"),
                           *KINDS], capture_output=True, text=True, timeout=600, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, proc.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


@pytest.mark.parametrize("kind", KINDS)
def test_data_parallel_equals_one_device(kind, results):
    result = results[kind]
    assert result["devices"] == 2  # the weights really live on both devices
    assert result["loss_parallel"] == pytest.approx(result["loss_single"], rel=2e-5)
    assert result["moved"] > 0 and result["max_weight_change"] > 1e-3
    assert result["max_weight_diff"] < 1e-5
