"""The JAX re-run of the ``backends``-marked tests (``tests/test_backends.py``), started in
the background as soon as collection ends, so it overlaps the TensorFlow tests instead of
running after them: this suite's main process keeps less than one of CI's two cores busy
(it mostly waits on compiles and worker subprocesses), and the re-run was 4-5 of the
suite's ~20 minutes when it ran last."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEST_ID = "tests/test_backends.py::test_backend_sensitive_tests_pass_under_jax"
TIMEOUT_S = 1800

_run: dict = {}


def command() -> list[str]:
    return [sys.executable, "-m", "pytest", "-q", "-m", "backends", "-p", "no:cacheprovider",
            "--timeout", "900", "tests"]


def environment() -> dict[str, str]:
    env = {**os.environ, "KERAS_BACKEND": "jax"}
    # The tests' arrays are tiny: compiling is most of their time, and XLA's backend
    # optimisation level 0 cut the JAX run from 4.2 to 3.1 minutes (docs/notes/backend_tests.md).
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0").strip()
    env.pop("PYTEST_ADDOPTS", None)
    return env


def start() -> None:
    """Starts the JAX run (once), its output going to a temporary file."""
    if _run:
        return
    out = tempfile.TemporaryFile(mode="w+")
    _run["out"] = out
    _run["proc"] = subprocess.Popen(command(), cwd=ROOT, env=environment(), stdout=out,
                                    stderr=subprocess.STDOUT, text=True)


def result() -> tuple[int, str]:
    """``(returncode, output)`` of the JAX run, starting it if it was not started; waits
    for it (killed after ``TIMEOUT_S``)."""
    start()
    proc, out = _run["proc"], _run["out"]
    try:
        proc.wait(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    out.seek(0)
    return proc.returncode, out.read()


def stop() -> None:
    """Kills a run nobody waited for (e.g. the session was interrupted)."""
    proc = _run.get("proc")
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait()
