import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import backend_run  # noqa: E402  (tests/backend_run.py)


def pytest_collection_finish(session):
    # Start the JAX re-run of the backend-sensitive tests now if its test was selected, so
    # that it runs alongside the TensorFlow tests (tests/backend_run.py).
    if os.environ.get("KERAS_BACKEND", "tensorflow") != "tensorflow" \
            or session.config.option.collectonly:
        return
    if any(item.nodeid.endswith(backend_run.TEST_ID.split("tests/", 1)[1])
           for item in session.items):
        try:
            import jax  # noqa: F401
        except ImportError:
            return
        backend_run.start()


def pytest_sessionfinish(session, exitstatus):
    backend_run.stop()
