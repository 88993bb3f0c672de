"""Every test marked ``backends`` runs again under Keras's JAX backend, so the README's one test
command checks both backends (TensorFlow, the default, runs them in this process). The JAX
run starts in the background when collection ends (``tests/backend_run.py``); this test
waits for it and reports its result."""

import os
import re

import pytest

import backend_run


@pytest.mark.skipif(os.environ.get("KERAS_BACKEND", "tensorflow") != "tensorflow",
                    reason="this test starts the JAX run; it does not run inside it")
def test_backend_sensitive_tests_pass_under_jax():
    pytest.importorskip("jax")
    code, output = backend_run.result()
    lines = output.strip().splitlines()
    summary = lines[-1] if lines else "(no output)"
    assert code == 0, output[-9000:]
    passed = re.search(r"(\d+) passed", summary)
    assert passed and int(passed.group(1)) > 0, summary
    print(f"JAX backend: {summary}")
