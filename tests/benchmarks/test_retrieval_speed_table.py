"""benchmarks/retrieval/speed_table.py (issue 57, item 8): the committed ``speed.json`` is
what the committed logs give (no figure typed by hand), and logs whose runs do not pair up
are refused in one line."""

import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks", "retrieval"))
import speed_table  # noqa: E402


def test_the_committed_table_is_the_logs_recomputed(tmp_path, monkeypatch, capsys):
    with open(os.path.join(speed_table.SPEED, "speed.json")) as f:
        committed = json.load(f)
    for name in os.listdir(speed_table.SPEED):  # recompute in a copy: nothing rewritten
        if name.endswith(".log"):
            (tmp_path / name).write_bytes(open(os.path.join(speed_table.SPEED, name), "rb").read())
    monkeypatch.setattr(speed_table, "SPEED", str(tmp_path))
    assert speed_table.main() == committed
    pairs = committed["training"]["pairs"]
    assert len(pairs) == 2 and len(committed["encoding"]["pairs"]) == 2
    assert len(committed["encoding_compiled"]["pairs"]) == 2  # the pair after compiling ours
    for p in pairs:  # each side's median step after the first, 32 tuples a step
        assert p["ours_tuples_per_s"] == pytest.approx(32 / p["ours_step_s"])
        assert p["ours_over_theirs"] == pytest.approx(p["theirs_step_s"] / p["ours_step_s"])
    out = capsys.readouterr().out
    assert "| 1 |" in out and "ours compiled" in out


def test_unpaired_logs_are_refused(tmp_path, monkeypatch):
    (tmp_path / "train_ours.log").write_text("".join(f"step {i} 10.0 0.5\n" for i in range(12)))
    (tmp_path / "train_st.log").write_text("".join(f"  step {i} 12.0 s\n" for i in range(6)))
    monkeypatch.setattr(speed_table, "SPEED", str(tmp_path))
    with pytest.raises(SystemExit, match="2 runs of ours, 1 of theirs"):
        speed_table.main()
