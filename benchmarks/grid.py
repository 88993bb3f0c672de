"""The loop the resumable benchmark grids share (``benchmarks/graphs/tu_grid.py``,
``benchmarks/text/sts_grid.py``): list a grid, or run every run that has no result yet.

A run is ``(run_id, recipe)``. Its result goes to ``results_dir/<run_id>.json`` (written
atomically when the run finishes), so a killed grid resumes where it stopped and a finished
run is never redone. Several workers (processes, machines sharing the folder) may walk the
same grid: a run is claimed with a lock file ``work_dir/<run_id>.lock`` holding the
claimer's process id; a lock left by a dead process is taken over (the run then resumes
from its own checkpoint under ``work_dir/<run_id>``).

Example:
>>> import tempfile
>>> d = tempfile.mkdtemp()
>>> runs = [("a", {}), ("b", {})]
>>> run_grid(runs, d, d, lambda rid, recipe: {"id": rid}, lambda r: r["id"] + " done")
a done
b done
0
>>> list_grid(runs, d)
done a
done b
"""

from __future__ import annotations

import json
import os
import traceback
from typing import Callable, Sequence

__all__ = ["claim", "write_result", "list_grid", "run_grid"]

Run = tuple[str, dict]


def claim(lock: str) -> bool:
    """Claims a run: a lock file holding this process's id; a lock left by a dead process
    (a killed worker) is taken over."""
    try:
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        try:
            with open(lock) as f:
                pid = int(f.read().strip() or 0)
            os.kill(pid, 0)
            return False  # a live worker has it
        except (ValueError, ProcessLookupError, PermissionError, FileNotFoundError):
            with open(lock, "w") as f:
                f.write(str(os.getpid()))
            return True
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    return True


def write_result(path: str, result: dict) -> None:
    """Writes ``result`` as JSON to ``path`` atomically (a temporary file, then a rename)."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=1)
    os.replace(tmp, path)


def list_grid(runs: Sequence[Run], results_dir: str) -> None:
    """Prints ``done RUN`` or ``todo RUN`` for each run."""
    for rid, _ in runs:
        done = os.path.exists(os.path.join(results_dir, rid + ".json"))
        print(("done " if done else "todo ") + rid)


def run_grid(runs: Sequence[Run], results_dir: str, work_dir: str,
             run_one: Callable[[str, dict], dict], summary: Callable[[dict], str]) -> int:
    """Runs each unfinished, unclaimed run with ``run_one(run_id, recipe) -> result``, writes
    its result and prints ``summary(result)``. A failing run prints its traceback and the
    grid goes on (the run stays to do). Returns 0."""
    os.makedirs(results_dir, exist_ok=True)
    os.makedirs(work_dir, exist_ok=True)
    for rid, recipe in runs:
        target = os.path.join(results_dir, rid + ".json")
        lock = os.path.join(work_dir, rid + ".lock")
        if os.path.exists(target) or not claim(lock):
            continue
        try:
            result = run_one(rid, recipe)
            write_result(target, result)
            print(summary(result), flush=True)
        except Exception:  # keep the grid going; the failure is printed
            traceback.print_exc()
        finally:
            if os.path.exists(lock):
                os.remove(lock)
    return 0
