"""Runs example scripts one after the other in this process (``runpy``, each with its own
``sys.argv`` and a fresh Keras session), recording for each whether it finished, what it
printed and how long it took: ``python _runner.py JOBS.json RESULTS.json``.

``JOBS.json`` is a list of ``{"name", "script", "argv"}``; ``RESULTS.json`` maps each name
to ``{"ok", "error", "output", "seconds", "warnings"}`` (every Python warning the example
raised, each once) and is rewritten after every example, so a crash leaves the finished ones
recorded. Used by ``tests/test_anywhere.py``.
"""

import contextlib
import io
import json
import runpy
import sys
import time
import traceback
import warnings


def main(jobs_path, results_path):
    with open(jobs_path) as f:
        jobs = json.load(f)
    results = {}
    for job in jobs:
        import keras

        keras.backend.clear_session()
        buffer = io.StringIO()
        start = time.perf_counter()
        ok, error = True, ""
        sys.argv = [job["script"], *job["argv"]]
        caught = []
        try:
            with contextlib.redirect_stdout(buffer), warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                caught = w
                runpy.run_path(job["script"], run_name="__main__")
        except SystemExit as e:  # argparse errors and explicit exits
            ok = e.code in (None, 0)
            error = "" if ok else f"SystemExit({e.code!r})"
        except BaseException:  # noqa: BLE001 -- recorded, then the next example runs
            ok, error = False, traceback.format_exc()
        seconds = round(time.perf_counter() - start, 1)
        results[job["name"]] = {"ok": ok, "error": error, "output": buffer.getvalue(),
                                "seconds": seconds,
                                "warnings": sorted({f"{w.category.__name__}: {w.message}"
                                                    for w in caught})}
        print(f"{job['name']}: {'ok' if ok else 'FAILED'} in {seconds} s", flush=True)
        with open(results_path, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
