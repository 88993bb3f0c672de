"""Tables of the sentence grid (``benchmarks/text/sts_grid.py``) from
``benchmarks/results/text/*.json``: markdown on stdout. By default one row per setting
(variant, loss, sampler) with the mean ± standard deviation over its seeds and, in
parentheses, the number of seeds; ``--runs`` lists every run instead.

Usage::

    python benchmarks/text/report.py
    python benchmarks/text/report.py --runs
"""

from __future__ import annotations

import argparse
import glob
import json
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "benchmarks", "results", "text")
STS = ("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness", "avg")
SENTEVAL = ("MR", "CR", "SUBJ", "MPQA", "TREC", "MRPC", "avg")


def rows():
    """``[(setting, seed, sts, senteval, train_s, total_s)]``; baselines have seed ``None``."""
    out = []
    for path in sorted(glob.glob(os.path.join(RESULTS, "*.json"))):
        with open(path) as f:
            r = json.load(f)
        if "id" in r:
            variant, loss, sampler, seed = r["id"].split("__")
            out.append((f"{variant} {loss} {sampler}", seed, r["sts"], r["senteval"],
                        r.get("train_seconds"), r.get("total_seconds")))
        else:  # baselines file
            variant = os.path.basename(path).split("__")[0].replace("baselines_", "")
            for name, res in r.items():
                out.append((f"baseline ({variant} start): {name}", None, res["sts"],
                            res["senteval"], None, res.get("seconds")))
    return out


def _cell(values):
    values = np.asarray(values, dtype=float)
    if len(values) == 1:
        return f"{values[0]:.2f} (1)"
    return f"{values.mean():.2f} ± {values.std(ddof=1):.2f} ({len(values)})"


def table(data, key, columns, per_run):
    print(f"| {'run' if per_run else 'setting'} | " + " | ".join(columns) + " |")
    print("|---|" + "---|" * len(columns))
    groups: dict[str, list] = {}
    for setting, seed, sts, senteval, _, _ in data:
        name = f"{setting} {seed}" if per_run and seed is not None else setting
        groups.setdefault(name, []).append(sts if key == "sts" else senteval)
    for name, results in groups.items():
        cells = [(f"{results[0][k]:.2f}" if per_run else _cell([r[k] for r in results]))
                 for k in columns]
        print(f"| {name} | " + " | ".join(cells) + " |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", action="store_true", help="one row per run (seed)")
    args = p.parse_args()
    data = rows()
    table(data, "sts", STS, args.runs)
    print()
    table(data, "senteval", SENTEVAL, args.runs)
    print()
    train = [r[4] for r in data if r[1] is not None and r[4]]
    total = [r[5] for r in data if r[1] is not None and r[5]]
    print(f"Runs: {len(train)}; train seconds per run {min(train):.0f}-{max(train):.0f} "
          f"(median {np.median(train):.0f}); with evaluation {min(total):.0f}-{max(total):.0f} "
          f"(median {np.median(total):.0f}).")


if __name__ == "__main__":
    main()
