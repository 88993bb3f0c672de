"""The results table of the sentence-transformers side (mean +- std over the seeds found).

    python benchmarks/retrieval/st_table.py      # reads benchmarks/results/retrieval/st_*.json

Plain json (any interpreter). Rows: zero-shot, then each recipe with its seeds' nDCG@10,
Recall@100, MRR@10 (population std over the seeds present; the seed count is printed), the
training tuples/s (wall) and tuples per CPU-second, and the encoding docs/s.
"""

from __future__ import annotations

import glob
import json
import os
import re
import statistics

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(ROOT, "benchmarks", "results", "retrieval")


def fmt(values, digits=4):
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} +- {statistics.pstdev(values):.{digits}f}"


def main() -> str:
    lines = ["| run | seeds | nDCG@10 | Recall@100 | MRR@10 | train tuples/s (wall) | "
             "tuples / CPU-s | encode docs/s (wall) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    zs = os.path.join(RESULTS, "st_zeroshot.json")
    if os.path.isfile(zs):
        r = json.load(open(zs))
        s = r["results"]
        lines.append(f"| zero-shot | - | {s['ndcg@10']:.5f} | {s['recall@100']:.4f} | "
                     f"{s['mrr@10']:.4f} | - | - | "
                     f"{r.get('encode_docs_per_second_in_mining', 0):.2f} (mining pass) |")
    for recipe in ("inbatch", "mined"):
        runs = []
        for path in sorted(glob.glob(os.path.join(RESULTS, f"st_{recipe}_seed*.json"))):
            if re.fullmatch(rf"st_{recipe}_seed\d+\.json", os.path.basename(path)):
                runs.append(json.load(open(path)))
        runs = [r for r in runs if r.get("results")]
        if not runs:
            lines.append(f"| {recipe} | 0 | - | - | - | - | - | - |")
            continue
        col = lambda key: [r["results"][key] for r in runs]  # noqa: E731
        tps = [r["training"]["tuples_per_second"] for r in runs]
        cps = [r["training"]["tuples_seen"] / r["training"]["train_cpu_seconds"]
               if "tuples_seen" in r["training"] else
               r["training"]["tuples"] * r["settings"]["epochs"]
               / r["training"]["train_cpu_seconds"] for r in runs]
        enc = [r["results"]["encode_docs_per_second"] for r in runs]
        seeds = ",".join(str(r["seed"]) for r in runs)
        lines.append(f"| {recipe} | {seeds} | {fmt(col('ndcg@10'))} | {fmt(col('recall@100'))} | "
                     f"{fmt(col('mrr@10'))} | {fmt(tps, 2)} | {fmt(cps, 2)} | {fmt(enc, 2)} |")
    text = "\n".join(lines)
    print(text)
    return text


if __name__ == "__main__":
    main()
