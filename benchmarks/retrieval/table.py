"""The SciFact side-by-side table: our runs and sentence-transformers', mean +- std over the
seeds found, beside the zero-shot model and BM25's published figures.

    python benchmarks/retrieval/table.py      # reads benchmarks/results/retrieval/*.json

Plain json (any interpreter). Ours: ``ours_<recipe>_seed<N>.json`` (written by
``benchmarks/retrieval/ours_all.sh`` from each run's ``results.json``); theirs:
``st_<recipe>_seed<N>.json`` (``benchmarks/retrieval/st_side.py``). Columns: nDCG@10,
Recall@100, MRR@10 on the 300 test queries (sample std over the seeds present, as the
zoo's cards give it; the seeds are listed), and the training throughput in (query, positive[, negative]) tuples a second of
wall time, each run's own figure (the two sides' runs were not interleaved: the ratio that
holds is the one measured side by side, docs/notes/retrieval.md).
"""

from __future__ import annotations

import glob
import json
import os
import re
import statistics

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(ROOT, "benchmarks", "results", "retrieval")
#: SciFact test nDCG@10 published for BM25 (BEIR's multifield Elasticsearch; bm25s), as
#: ../shared/data/retrieval/scifact/SOURCE.txt gives them.
BM25 = (("BM25 (BEIR, published)", 0.665), ("BM25 (bm25s, published)", 0.687))


def fmt(values, digits=4):
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} +- {statistics.stdev(values):.{digits}f}"


def _runs(prefix: str, recipe: str) -> list:
    runs = []
    for path in sorted(glob.glob(os.path.join(RESULTS, f"{prefix}_{recipe}_seed*.json"))):
        if re.fullmatch(rf"{prefix}_{recipe}_seed\d+\.json", os.path.basename(path)):
            with open(path) as f:
                runs.append(json.load(f))
    return [r for r in runs if r.get("results")]


def _ours(run: dict) -> tuple:
    r = run["results"]
    return (int(run["step"].split(":")[1]), r["ndcg_at_10"], r["recall_at_100"],
            r["mrr_at_10"], r.get("pairs_per_second"))


def _theirs(run: dict) -> tuple:
    r = run["results"]
    return (run["seed"], r["ndcg@10"], r["recall@100"], r["mrr@10"],
            run["training"]["tuples_per_second"])


def rows() -> list:
    """``(label, seeds, [ndcg], [recall], [mrr], [tuples/s])`` per row, in table order."""
    out = [(label, "-", [v], [], [], []) for label, v in BM25]
    zs = os.path.join(RESULTS, "st_zeroshot.json")
    if os.path.isfile(zs):
        with open(zs) as f:
            s = json.load(f)["results"]
        out.append(("all-MiniLM-L6-v2 zero-shot (sentence-transformers)", "-",
                    [s["ndcg@10"]], [s["recall@100"]], [s["mrr@10"]], []))
    ours = os.path.join(RESULTS, "zero_shot_scifact_test.json")
    if os.path.isfile(ours):
        with open(ours) as f:
            s = json.load(f)
        s = s.get("results", s)
        keys = ("ndcg_at_10", "recall_at_100", "mrr_at_10") if "ndcg_at_10" in s else \
            ("ndcg@10", "recall@100", "mrr@10")
        out.append(("all-MiniLM-L6-v2 zero-shot (ours)", "-", *[[s[k]] for k in keys], []))
    for side, prefix, read in (("ours: NT-Xent t 0.05", "ours", _ours),
                               ("sentence-transformers: MNRL scale 20", "st", _theirs)):
        for recipe, what in (("inbatch", "in-batch negatives"),
                             ("mined", "+ 1 mined negative")):
            got = [read(r) for r in _runs(prefix, recipe)]
            cols = list(zip(*got)) if got else [[]] * 5
            out.append((f"{side}, {what}", ",".join(map(str, cols[0])) or "0",
                        list(cols[1]), list(cols[2]), list(cols[3]),
                        [v for v in cols[4] if v is not None]))
    return out


def comparison() -> list:
    """Per recipe with at least two seeds a side: ``(recipe, ours' nDCG@10 list, theirs,
    difference of the means, Welch's t, its two-sided p, verdict)``. The verdict reads the
    seeds: "ahead" / "behind" where Welch's test gives p < 0.05, else "level" (the issue's
    bar is "at least level")."""
    from scipy import stats

    out = []
    for recipe in ("mined", "inbatch"):
        ours = [_ours(r)[1] for r in _runs("ours", recipe)]
        theirs = [_theirs(r)[1] for r in _runs("st", recipe)]
        if len(ours) < 2 or len(theirs) < 2:
            continue
        gap = statistics.mean(ours) - statistics.mean(theirs)
        test = stats.ttest_ind(ours, theirs, equal_var=False)
        t, p = float(test.statistic), float(test.pvalue)
        verdict = "level" if not p < 0.05 else ("ahead" if gap > 0 else "behind")
        out.append((recipe, ours, theirs, gap, t, p, verdict))
    return out


def main() -> str:
    lines = ["| run | seeds | nDCG@10 | Recall@100 | MRR@10 | train tuples/s (wall) |",
             "| --- | --- | --- | --- | --- | --- |"]
    for label, seeds, ndcg, recall, mrr, tps in rows():
        lines.append(f"| {label} | {seeds} | {fmt(ndcg)} | {fmt(recall)} | {fmt(mrr)} | "
                     f"{fmt(tps, 2)} |")
    for recipe, ours, theirs, gap, t, p, verdict in comparison():
        lines.append(f"\n{recipe}: ours - sentence-transformers = {gap:+.4f} nDCG@10 "
                     f"({len(ours)} and {len(theirs)} seeds; Welch t {t:.2f}, p {p:.3f}): "
                     f"{verdict}")
    text = "\n".join(lines)
    print(text)
    return text


if __name__ == "__main__":
    main()
