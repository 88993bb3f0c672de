"""benchmarks/retrieval/table.py (issue 57): the SciFact table's rows are the runs' result
files, seeds a side averaged with the sample std, and the ours-against-sentence-transformers
verdict is Welch's test on the seeds (p < 0.05 for ahead / behind)."""

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


@pytest.mark.parametrize("ours,theirs,t,verdict", [
    # equal spreads s = 0.01, n = 3 a side: Welch's t = gap / (s * sqrt(2 / 3))
    ([0.70, 0.71, 0.72], [0.705, 0.715, 0.725], -0.005 / (0.01 * (2 / 3) ** 0.5), "level"),
    ([0.72, 0.73, 0.74], [0.70, 0.71, 0.72], 0.02 / (0.01 * (2 / 3) ** 0.5), "level"),
    ([0.74, 0.75, 0.76], [0.70, 0.71, 0.72], 0.04 / (0.01 * (2 / 3) ** 0.5), "ahead"),
    ([0.66, 0.67, 0.68], [0.70, 0.71, 0.72], -0.04 / (0.01 * (2 / 3) ** 0.5), "behind")])
def test_the_verdict_is_welchs_test_on_the_seeds(tmp_path, monkeypatch, ours, theirs, t,
                                                 verdict):
    """t 2.45 (gap 0.02) is p ~0.07 on 4 degrees of freedom: level; t 4.9 is p < 0.01."""
    _write(tmp_path, ours, theirs)
    monkeypatch.setattr(table, "RESULTS", str(tmp_path))
    (recipe, got_ours, got_theirs, gap, got_t, p, got), = table.comparison()
    assert recipe == "mined" and got_ours == ours and got_theirs == theirs
    assert gap == pytest.approx(sum(ours) / 3 - sum(theirs) / 3)
    assert got_t == pytest.approx(t) and got == verdict
    assert (p < 0.05) == (verdict != "level")
    text = table.main()
    assert f"+ 1 mined negative | 0,1,2 | {sum(ours) / 3:.4f} +- 0.0100" in text
    assert text.rstrip().endswith(verdict)


def test_one_seed_a_side_gives_no_verdict(tmp_path, monkeypatch):
    _write(tmp_path, [0.70, 0.71], [0.70])
    monkeypatch.setattr(table, "RESULTS", str(tmp_path))
    assert table.comparison() == []
