"""The JAX re-run of the ``backends``-marked tests (``tests/test_backends.py``), started in
the background as soon as collection ends, so it overlaps the TensorFlow tests instead of
running after them: this suite's main process keeps less than one of CI's two cores busy
(it mostly waits on compiles and worker subprocesses), and the re-run was 4-5 of the
suite's ~20 minutes when it ran last.

Under pytest-xdist (the README's ``-n 2``) the workers each collect the whole suite, so the
controller starts the run instead (:func:`start_detached`, from ``conftest.py``): a detached
process writes the output and then the return code into a folder named by
``KHN_BACKEND_RUN_DIR``, which the workers inherit; :func:`result`, in whichever worker runs
the test, waits for that file."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEST_ID = "tests/test_backends.py::test_backend_sensitive_tests_pass_under_jax"
TIMEOUT_S = 1800
#: Folder of a run started by the xdist controller (``output.txt``, then ``returncode``).
RUN_DIR_ENV = "KHN_BACKEND_RUN_DIR"

_run: dict = {}


def command() -> list[str]:
    # "-n 0": one process (the README's command runs the TensorFlow tests under xdist).
    return [sys.executable, "-m", "pytest", "-q", "-m", "backends", "-p", "no:cacheprovider",
            "--timeout", "900", *(["-n", "0"] if _has_xdist() else []), "tests"]


def _has_xdist() -> bool:
    import importlib.util

    return importlib.util.find_spec("xdist") is not None


def start_detached(run_dir: str) -> subprocess.Popen:
    """Starts the JAX run in a process of its own (``python backend_run.py RUN_DIR``) that
    writes ``RUN_DIR/output.txt`` and, when the run ends, ``RUN_DIR/returncode``."""
    return subprocess.Popen([sys.executable, os.path.abspath(__file__), run_dir], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                            start_new_session=True)  # its own group: killed whole if left


def _wait_for_detached(run_dir: str) -> tuple[int, str]:
    import time

    code_path = os.path.join(run_dir, "returncode")
    deadline = time.time() + TIMEOUT_S
    while not os.path.exists(code_path) and time.time() < deadline:
        time.sleep(2)
    output_path = os.path.join(run_dir, "output.txt")
    output = open(output_path).read() if os.path.exists(output_path) else ""
    if not os.path.exists(code_path):
        return -1, output + f"\n(no return code after {TIMEOUT_S} s)"
    with open(code_path) as f:
        return int(f.read().strip()), output


def environment() -> dict[str, str]:
    # XLA_FLAGS: the suite's optimisation level, set by tests/conftest.py (the tests' arrays
    # are tiny: compiling is most of their time; docs/notes/suite_time.md).
    env = {**os.environ, "KERAS_BACKEND": "jax"}
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
    run_dir = os.environ.get(RUN_DIR_ENV)
    if run_dir and os.path.isdir(run_dir):
        return _wait_for_detached(run_dir)
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


if __name__ == "__main__":  # the detached run: python backend_run.py RUN_DIR
    folder = sys.argv[1]
    with open(os.path.join(folder, "output.txt"), "w") as stream:
        code = subprocess.call(command(), cwd=ROOT, env=environment(), stdout=stream,
                               stderr=subprocess.STDOUT)
    with open(os.path.join(folder, "returncode.tmp"), "w") as f:
        f.write(str(code))
    os.replace(os.path.join(folder, "returncode.tmp"), os.path.join(folder, "returncode"))
