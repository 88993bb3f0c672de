import os
import sys

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
#: The XLA backend optimisation level of every test process and child (the JAX re-run, JAX
#: children and examples inherit ``XLA_FLAGS``; TensorFlow's eager tests ignore it). The
#: tests' arrays are tiny, so compiles are most of a JAX test's time; but the compiled code
#: of a low level runs slower. Measured per level in docs/notes/suite_time.md.
XLA_LEVEL_ENV = "KHN_TEST_XLA_LEVEL"
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level="
        + os.environ.get(XLA_LEVEL_ENV, "0")).strip()
#: One TensorFlow (and OpenMP) thread per test process and child, unless set: the suite runs
#: two xdist workers and the JAX re-run on CI's two cores, so each has a core at most and
#: TensorFlow's pools only wait on each other. Measured (docs/notes/suite_time.md,
#: 2026-11-27): the in-process model, loss, augmentation and encoder tests, ``-n 2``, took 403
#: instead of 455 CPU-s. Set ``KHN_TEST_THREADS=0`` for TensorFlow's own choice.
THREADS_ENV = "KHN_TEST_THREADS"
if os.environ.get(THREADS_ENV, "1") != "0":
    for _name in ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS"):
        os.environ.setdefault(_name, os.environ.get(THREADS_ENV, "1"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import backend_run  # noqa: E402  (tests/backend_run.py)


_detached = {}
#: Set to a file path to log each test's wall and CPU seconds (its own process and the
#: children it waited for) as JSON lines, with the backend (the JAX re-run of the ``backends``
#: tests writes to the same file), the xdist worker and the time the test ended: where the
#: suite's time goes, under xdist too, and whether a worker idled at the end.
CPU_LOG_ENV = "KHN_TEST_CPU_LOG"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    path = os.environ.get(CPU_LOG_ENV)
    if not path:
        yield
        return
    import json
    import time

    t0, c0 = time.perf_counter(), os.times()
    yield
    c1 = os.times()
    cpu = (c1.user - c0.user) + (c1.system - c0.system)
    children = (c1.children_user - c0.children_user) + (c1.children_system - c0.children_system)
    with open(path, "a") as f:
        f.write(json.dumps({"test": item.nodeid, "backend": os.environ.get("KERAS_BACKEND",
                                                                         "tensorflow"),
                            "wall": round(time.perf_counter() - t0, 2),
                            "cpu": round(cpu, 2), "children_cpu": round(children, 2),
                            "worker": os.environ.get("PYTEST_XDIST_WORKER", ""),
                            "end": round(time.time(), 1)}) + "\n")


#: The files that take longest (most start processes), run first: under xdist each worker
#: takes the next file when it finishes one, so a long file collected late ran alone at the
#: end while the other worker idled (``tests/reliability/test_resume.py``, ~2 minutes, in
#: the runs of 2026-11-27). Longest first leaves short files for the end. Ranked by the
#: default run's per-file CPU of ``KHN_TEST_CPU_LOG`` (TensorFlow side, 2026-11-29:
#: docs/notes/suite_time.md); a file not listed keeps its place after these, and every file
#: keeps its own order of tests. xdist must not reorder them (``_keep_longest_first``).
LONGEST_FIRST = (
    "tests/run/test_run_report.py",
    "tests/run/test_modality.py",
    "tests/run/test_rerun.py",
    "tests/test_zoo.py",
    "tests/losses/test_ring.py",
    "tests/models/test_moco.py",
    "tests/export/test_export.py",
    "tests/encoders/test_pretrained_text.py",
    "tests/test_doctests.py",
    "tests/test_new_user.py",
    "tests/tuning/test_search.py",
    "tests/run/test_feed.py",
    "tests/models/test_compile_fit.py",
    "tests/export/test_preset.py",
    "tests/test_serialization.py",
    "tests/test_no_tensorflow.py",
    "tests/losses/test_numerics_and_api.py",
    "tests/reliability/test_numerics.py",
    "tests/models/test_text_simclr.py",
)

#: The heavy tier's files, longest first (wall seconds of a run beside other jobs, keras-hub
#: hidden as in CI, 2026-11-29: the first and third run only with the MiniLM wheel). Without
#: it the new-user run (~460 s) started last, at 743 s, and one worker ended 300 s after
#: the other (docs/notes/suite_time.md).
HEAVY_LONGEST_FIRST = (
    "tests/run/test_retrieval_modality.py",  # ~650 with the MiniLM wheel, else seconds
    "tests/test_anywhere.py",  # ~460
    "tests/test_zoo_twins.py",  # ~350 with the MiniLM wheel
    "tests/run/test_rerun.py",  # ~190
    "tests/test_no_tensorflow.py",  # ~170
    "tests/reliability/test_resume.py",  # ~160
    "tests/losses/test_reduction_mirrored.py",  # ~160
    "tests/run/test_multi_process.py",  # ~120
    "tests/models/test_distributed.py",  # ~90
    "tests/run/test_run_report.py",  # ~80
    "tests/run/test_multi_worker.py",  # ~75
)


#: Set to 1 to run the heavy tier too: process-level and integration runs
#: (``@pytest.mark.heavy``) -- multi-worker and multi-process training, the SIGKILL resume
#: chains, MoCo under MirroredStrategy, every example's smoke run, the no-TensorFlow child's
#: MoCo and presets scenarios, the zoo's concurrent fetches and non-editable install, the run
#: from a wheel. Without it they are skipped, naming this variable: the default suite must
#: stay inside 15 minutes on two cores (docs/notes/suite_time.md says what each costs, what
#: the default run still covers, and when to run the tier; ``.ci/run`` runs both).
HEAVY_ENV = "KHN_HEAVY_TESTS"


def _skip_heavy(items):
    if os.environ.get(HEAVY_ENV) == "1":
        return
    skip = pytest.mark.skip(reason=f"heavy tier: {HEAVY_ENV}=1 runs it "
                                   "(docs/notes/suite_time.md)")
    for item in items:
        if item.get_closest_marker("heavy"):
            item.add_marker(skip)


def pytest_collection_modifyitems(session, config, items):
    _skip_heavy(items)
    # The JAX re-run's test only waits for that run (tests/backend_run.py): last, so that
    # its worker waits when nothing else is left.
    order = LONGEST_FIRST
    if os.environ.get(HEAVY_ENV) == "1":
        order = HEAVY_LONGEST_FIRST + tuple(p for p in LONGEST_FIRST
                                            if p not in HEAVY_LONGEST_FIRST)
    rank = {path: i for i, path in enumerate(order)}
    rank[backend_run.TEST_ID.split("::")[0]] = len(rank) + 1
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(order)))


def _jax_available():
    try:
        import jax  # noqa: F401
    except ImportError:
        return False
    return True


#: Set to 1 to keep TensorFlow's graph optimiser (grappler) on in the test processes.
GRAPPLER_ENV = "KHN_TEST_GRAPPLER"


def _tensorflow_without_grappler(config):
    """Turns grappler off in a process that runs TensorFlow tests (not the xdist controller):
    it optimises every traced graph for throughput, while the tests' graphs are tiny and run
    a few steps. Off, ``tests/models/test_moco.py`` + ``test_simclr.py`` took 50 instead of
    60 CPU-s, with the same results (docs/notes/suite_time.md). Children the tests start keep
    it on."""
    if os.environ.get(GRAPPLER_ENV) == "1" \
            or os.environ.get("KERAS_BACKEND", "tensorflow") != "tensorflow" \
            or (getattr(config.option, "numprocesses", None)
                and not hasattr(config, "workerinput")):
        return
    try:
        import tensorflow as tf
    except ImportError:
        return
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})


def _keep_longest_first(config):
    """pytest-xdist (3.8 here) reorders ``--dist loadfile``'s files by their number of tests,
    most first (``--loadscope-reorder``, on by default), which undid ``LONGEST_FIRST``: the
    few-test, many-process files (examples, SIGKILL resume, the no-TensorFlow child) ran
    last, one worker idle while the other finished them (docs/notes/suite_time.md,
    2026-11-29). Off, the workers take files in the collected order."""
    if getattr(config.option, "loadscopereorder", None):
        config.option.loadscopereorder = False


def pytest_configure(config):
    _keep_longest_first(config)
    _tensorflow_without_grappler(config)
    # Under pytest-xdist the controller starts the JAX re-run once, before the workers start
    # (they inherit KHN_BACKEND_RUN_DIR), when the whole suite is what runs: every worker
    # collects every test, so the workers cannot tell which of them will run its test.
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        return
    if os.environ.get("KERAS_BACKEND", "tensorflow") != "tensorflow" \
            or config.option.collectonly or config.option.keyword or config.option.markexpr:
        return
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    targets = [os.path.abspath(a.split("::")[0]) for a in config.args] or [
        os.path.join(root, "tests")]
    wanted = os.path.join(root, backend_run.TEST_ID.split("::")[0])
    if not any(wanted == t or wanted.startswith(t.rstrip(os.sep) + os.sep) for t in targets):
        return
    if not _jax_available():
        return
    import tempfile

    run_dir = tempfile.mkdtemp(prefix="khn-jax-run-")
    os.environ[backend_run.RUN_DIR_ENV] = run_dir
    _detached["proc"] = backend_run.start_detached(run_dir)


def pytest_collection_finish(session):
    # Start the JAX re-run of the backend-sensitive tests now if its test was selected, so
    # that it runs alongside the TensorFlow tests (tests/backend_run.py). Under xdist the
    # controller has started it (pytest_configure).
    if os.environ.get("KERAS_BACKEND", "tensorflow") != "tensorflow" \
            or session.config.option.collectonly or hasattr(session.config, "workerinput"):
        return
    if any(item.nodeid.endswith(backend_run.TEST_ID.split("tests/", 1)[1])
           for item in session.items):
        if _jax_available():
            backend_run.start()


def pytest_sessionfinish(session, exitstatus):
    backend_run.stop()
    proc = _detached.get("proc")
    if proc is not None and proc.poll() is None:  # nobody waited for it (interrupted)
        import signal

        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    if proc is not None:
        import shutil

        shutil.rmtree(os.environ.get(backend_run.RUN_DIR_ENV, ""), ignore_errors=True)
