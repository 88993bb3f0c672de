"""benchmarks/gpu/parity_report.py: the full-scale parity call's table reads each run's
monitor checkpoints and final kNN from the files the call writes, and marks runs cut short."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "gpu"))
import parity_report  # noqa: E402


def _ours(folder, name, seed, epochs, run_to, monitor, final):
    out = folder / f"out_{name}"
    out.mkdir(parents=True)
    rows = [{"epoch": e, "knn_monitor": monitor.get(e), "epoch_seconds": 3.0 + e / 100}
            for e in range(1, run_to + 1)]
    (out / "simclr-ntxent-cifar10.epochs.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows))
    (out / "simclr-ntxent-cifar10.run.json").write_text(json.dumps(
        {"recipe": {"seed": seed, "epochs": epochs}, "epochs_run": run_to,
         "gpu_knn_accuracy_full_bank_test_pack": final}))


def test_table_rows_checkpoints_and_cut_short_runs(tmp_path):
    call = tmp_path / "call1"
    _ours(call, "recipe", 0, 20, 20, {10: 0.5, 20: 0.6}, 0.65)
    _ours(call, "all_lightly", 0, 20, 12, {10: 0.55}, 0.58)  # stopped by the budget
    (call / "lightly.log.json").write_text(json.dumps(
        {"seed": 0, "epochs": 20, "loss": [5.0] * 11, "epoch_seconds": [8.0] * 11,
         "knn": {"10": 0.61, "11": 0.6}, "knn_monitor": {"10": 0.52, "11": 0.51}}))
    calls = parity_report.collect(str(tmp_path))
    runs = dict(calls)["call1"]
    assert set(runs) == {"ours recipe", "ours all_lightly", "lightly"}
    assert runs["lightly"]["final"] is None  # stopped at 11 of 20: no final figure
    assert runs["lightly"]["monitor"] == {10: 0.52, 11: 0.51}
    lines = parity_report.table(calls).splitlines()
    assert lines[0].count("kNN@") == 2  # checkpoints 10 and 20 (11 is off the grid)
    row = {line.split("|")[2].strip(): line for line in lines[2:]}
    assert "| 0.5000 | 0.6000 | 0.6500 |" in row["ours recipe"]
    assert "| 0.5500 |  | 0.5800 (at 12) |" in row["ours all_lightly"]
    assert "| 0.5200 |  |  |" in row["lightly"]
