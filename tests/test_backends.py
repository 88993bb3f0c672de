"""Every test marked ``backends`` runs again under Keras's JAX backend, so the README's one test
command checks both backends (TensorFlow, the default, runs them in this process)."""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.skipif(os.environ.get("KERAS_BACKEND", "tensorflow") != "tensorflow",
                    reason="this test starts the JAX run; it does not run inside it")
def test_backend_sensitive_tests_pass_under_jax():
    pytest.importorskip("jax")
    env = {**os.environ, "KERAS_BACKEND": "jax"}
    # The tests' arrays are tiny: compiling is most of their time, and XLA's backend
    # optimisation level 0 cut the JAX run from 4.2 to 3.1 minutes (docs/notes/backend_tests.md).
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0").strip()
    env.pop("PYTEST_ADDOPTS", None)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-m", "backends", "-p", "no:cacheprovider",
         "--timeout", "900", "tests"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    passed = re.search(r"(\d+) passed", summary)
    assert passed and int(passed.group(1)) > 0, summary
    print(f"JAX backend: {summary}")
