"""benchmarks/retrieval/table.py (issue 57): the SciFact table's rows are the runs' result
files, seeds a side averaged with the sample std, and the ours-against-sentence-transformers
verdict is read off the seeds' spread."""

import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks", "retrieval"))
import table  # noqa: E402


def _write(folder, ours, theirs):
    for seed, v in enumerate(ours):
        (folder / f"ours_mined_seed{seed}.json").write_text(json.dumps(
            {"step": f"mined:{seed}", "results": {"ndcg_at_10": v, "recall_at_100": 0.9,
                                                  "mrr_at_10": 0.6, "pairs_per_second": 2.0}}))
    for seed, v in enumerate(theirs):
        (folder / f"st_mined_seed{seed}.json").write_text(json.dumps(
            {"seed": seed, "results": {"ndcg@10": v, "recall@100": 0.9, "mrr@10": 0.6},
             "training": {"tuples_per_second": 1.0}}))


@pytest.mark.parametrize("ours,theirs,verdict", [
    ([0.70, 0.71, 0.72], [0.705, 0.715, 0.725], "level"),   # gap -0.005, spread 0.01
    ([0.74, 0.75, 0.76], [0.70, 0.71, 0.72], "ahead"),
    ([0.66, 0.67, 0.68], [0.70, 0.71, 0.72], "behind")])
def test_the_verdict_reads_the_gap_against_the_seeds_spread(tmp_path, monkeypatch, ours,
                                                            theirs, verdict):
    _write(tmp_path, ours, theirs)
    monkeypatch.setattr(table, "RESULTS", str(tmp_path))
    (recipe, got_ours, got_theirs, gap, spread, got), = table.comparison()
    assert recipe == "mined" and got_ours == ours and got_theirs == theirs
    assert gap == pytest.approx(sum(ours) / 3 - sum(theirs) / 3)
    assert spread == pytest.approx(0.01) and got == verdict
    text = table.main()
    assert f"+ 1 mined negative | 0,1,2 | {sum(ours) / 3:.4f} +- 0.0100" in text
    assert text.rstrip().endswith(verdict)


def test_one_seed_a_side_gives_no_verdict(tmp_path, monkeypatch):
    _write(tmp_path, [0.70, 0.71], [0.70])
    monkeypatch.setattr(table, "RESULTS", str(tmp_path))
    assert table.comparison() == []
