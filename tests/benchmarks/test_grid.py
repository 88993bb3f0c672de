"""benchmarks/grid.py: the resumable loop of the benchmark grids (finished runs are skipped,
a failing run does not stop the grid, a dead worker's lock is taken over, a live one's is not)."""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import grid  # noqa: E402


def test_runs_each_unfinished_run_once_and_resumes(tmp_path):
    calls = []

    def run_one(rid, recipe):
        calls.append(rid)
        if rid == "bad":
            raise RuntimeError("boom")
        return {"id": rid, "x": recipe["x"]}

    runs = [("a", {"x": 1}), ("bad", {"x": 2}), ("c", {"x": 3})]
    assert grid.run_grid(runs, str(tmp_path), str(tmp_path / "work"), run_one,
                         lambda r: r["id"]) == 0
    assert calls == ["a", "bad", "c"]  # the failure did not stop the grid
    assert json.loads((tmp_path / "c.json").read_text()) == {"id": "c", "x": 3}
    assert not (tmp_path / "bad.json").exists()
    assert not list((tmp_path / "work").glob("*.lock"))
    calls.clear()
    grid.run_grid(runs, str(tmp_path), str(tmp_path / "work"), run_one, lambda r: r["id"])
    assert calls == ["bad"]  # finished runs are not redone


def test_claim_takes_over_a_dead_workers_lock_only(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    lock = tmp_path / "r.lock"
    lock.write_text(dead)
    assert grid.claim(str(lock))
    assert lock.read_text() == str(os.getpid())
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        lock.write_text(str(live.pid))
        assert not grid.claim(str(lock))
    finally:
        live.kill()
        live.wait()
