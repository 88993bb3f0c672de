"""Training and encoding throughput, ours beside sentence-transformers (issue 57, item 8),
from the logs under ``benchmarks/results/retrieval/speed/``: each is what one command printed
over its runs, the two commands of a pair run in turn (ours, theirs, ours, theirs) on the
same machine at the same time, so the ratio holds when the machine's speed drifts.

Training (the protocol's mined recipe: batch 32 of (query, positive, mined negative),
documents at 256 tokens; 6 steps a run, the first left out: ours traces its step there)::

    python benchmarks/retrieval/time_steps.py 6 --recipe mined >> speed/train_ours.log
    PEER/bin/python benchmarks/retrieval/st_side.py --recipe mined --seed 0 --epochs 1 \\
        --no-eval --max-steps 6 --out /tmp/tp_st --tag _tp --force >> speed/train_st.log

Encoding (the corpus's first 1,024 documents at 256 tokens, each side's own batching)::

    python benchmarks/retrieval/time_steps.py 0 --encode 1024 >> speed/encode_ours.log
    PEER/bin/python benchmarks/retrieval/st_side.py --recipe mined --encode 1024 \\
        --out /tmp/tp_st --tag _tp >> speed/encode_st.log

The encoding pair again after our encoding was compiled (``tf.function`` from four batches
on; 2026-11-29), both sides measured anew in one call::

    python benchmarks/retrieval/time_steps.py 0 --encode 1024 >> speed/encode_ours_compiled.log
    PEER/bin/python benchmarks/retrieval/st_side.py --recipe mined --encode 1024 \
        --out /tmp/tp_st --tag _tp >> speed/encode_st_compiled.log

    python benchmarks/retrieval/speed_table.py        # prints the tables, writes speed.json
"""

from __future__ import annotations

import json
import os
import re
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))
SPEED = os.path.join(os.path.dirname(HERE), "results", "retrieval", "speed")
BATCH = 32


def _runs(values: list[float], per_run: int) -> list[list[float]]:
    return [values[i:i + per_run] for i in range(0, len(values), per_run)]


def train_steps(path: str, pattern: str, per_run: int = 6) -> list[list[float]]:
    """Each run's step seconds, in run order."""
    with open(path, encoding="utf-8") as f:
        return _runs([float(v) for v in re.findall(pattern, f.read(), re.M)], per_run)


def encode_rates(path: str) -> list[float]:
    with open(path, encoding="utf-8") as f:
        return [float(v) for v in re.findall(r"^ENCODE \d+ documents [\d.]+ s \(([\d.]+) docs/s\)",
                                             f.read(), re.M)]


def main() -> dict:
    ours = train_steps(os.path.join(SPEED, "train_ours.log"), r"^step \d+ ([\d.]+) ")
    theirs = train_steps(os.path.join(SPEED, "train_st.log"), r"^  step \d+ ([\d.]+) s$")
    if not ours or len(ours) != len(theirs):
        raise SystemExit(f"{SPEED}: {len(ours)} runs of ours, {len(theirs)} of theirs: "
                         "the logs must hold the same number of paired runs")
    pairs = []
    for a, b in zip(ours, theirs):
        sa, sb = statistics.median(a[1:]), statistics.median(b[1:])
        pairs.append({"ours_step_s": sa, "theirs_step_s": sb,
                      "ours_tuples_per_s": BATCH / sa, "theirs_tuples_per_s": BATCH / sb,
                      "ours_over_theirs": sb / sa})
    enc = _encoding_pairs("encode_ours.log", "encode_st.log")
    out = {"training": {"what": "median seconds a step after the first, per run; batch 32 "
                                "triplets, 256-token documents (queries: ours 128 ids padded, "
                                "theirs padded to each batch's longest)", "pairs": pairs},
           "encoding": {"what": "documents a second, the corpus's first 1,024 at 256 tokens "
                                "(ours length-sorted batches of 64, theirs model.encode batch "
                                "32)", "pairs": enc}}
    compiled = _encoding_pairs("encode_ours_compiled.log", "encode_st_compiled.log")
    if compiled:
        out["encoding_compiled"] = {
            "what": "as 'encoding', ours compiled (tf.function from four batches on) and "
                    "both sides measured anew, in turn, in one call", "pairs": compiled}
    with open(os.path.join(SPEED, "speed.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)
    print("| pair | training tuples/s, ours | theirs | ours / theirs | encoding docs/s, ours "
          "| theirs | ours / theirs |\n|---|---|---|---|---|---|---|")
    for i, p in enumerate(pairs):
        e = enc[i] if i < len(enc) else None
        tail = (f"{e['ours_docs_per_s']:.1f} | {e['theirs_docs_per_s']:.1f} | "
                f"{e['ours_over_theirs']:.2f}x" if e else "| |")
        print(f"| {i + 1} | {p['ours_tuples_per_s']:.2f} | {p['theirs_tuples_per_s']:.2f} | "
              f"{p['ours_over_theirs']:.2f}x | {tail} |")
    if compiled:
        print("\n| pair | encoding docs/s, ours compiled | theirs | ours / theirs |\n"
              "|---|---|---|---|")
        for i, e in enumerate(compiled):
            print(f"| {i + 1} | {e['ours_docs_per_s']:.1f} | {e['theirs_docs_per_s']:.1f} | "
                  f"{e['ours_over_theirs']:.2f}x |")
    return out


def _encoding_pairs(ours_log: str, theirs_log: str) -> list[dict]:
    """The encoding pairs of two logs (``[]`` when ours is absent)."""
    if not os.path.isfile(os.path.join(SPEED, ours_log)):
        return []
    a = encode_rates(os.path.join(SPEED, ours_log))
    b = encode_rates(os.path.join(SPEED, theirs_log))
    if len(a) != len(b):
        raise SystemExit(f"{SPEED}: {len(a)} encoding runs in {ours_log}, {len(b)} in "
                         f"{theirs_log}: the logs must hold the same number of paired runs")
    return [{"ours_docs_per_s": x, "theirs_docs_per_s": y, "ours_over_theirs": x / y}
            for x, y in zip(a, b)]


if __name__ == "__main__":
    main()
