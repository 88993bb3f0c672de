"""Tables of the sentence grid (``benchmarks/text/sts_grid.py``) from
``benchmarks/results/text/*.json``: markdown on stdout.

Usage::

    python benchmarks/text/report.py
"""

from __future__ import annotations

import glob
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "benchmarks", "results", "text")
STS = ("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness", "avg")
SENTEVAL = ("MR", "CR", "SUBJ", "MPQA", "TREC", "MRPC", "avg")


def rows():
    out = []
    for path in sorted(glob.glob(os.path.join(RESULTS, "*.json"))):
        with open(path) as f:
            r = json.load(f)
        if "id" in r:
            variant, loss, sampler, seed = r["id"].split("__")
            out.append((f"{variant} {loss} {sampler} {seed}", r["sts"], r["senteval"],
                        r.get("train_seconds"), r.get("total_seconds")))
        else:  # baselines file
            variant = os.path.basename(path).split("__")[0].replace("baselines_", "")
            for name, res in r.items():
                out.append((f"baseline ({variant} start): {name}", res["sts"], res["senteval"],
                            None, res.get("seconds")))
    return out


def main() -> None:
    data = rows()
    print("| run | " + " | ".join(STS) + " | train s | total s |")
    print("|---|" + "---|" * (len(STS) + 2))
    for name, sts, _, train, total in data:
        cells = [f"{sts[k]:.2f}" for k in STS]
        print(f"| {name} | " + " | ".join(cells) + f" | {train or 0:.0f} | {total or 0:.0f} |")
    print()
    print("| run | " + " | ".join(SENTEVAL) + " |")
    print("|---|" + "---|" * len(SENTEVAL))
    for name, _, senteval, _, _ in data:
        print(f"| {name} | " + " | ".join(f"{senteval[k]:.2f}" for k in SENTEVAL) + " |")


if __name__ == "__main__":
    main()
