"""Regenerates the r18 subsection of docs/benchmarks.md from the stored results.

    python3 benchmarks/update_r18_docs.py      # runs `run_all.py --report` first

Everything between the heading "### The issue's budget: `--budget r18`" and the marker
``<!-- end of generated r18 section -->`` is rewritten: the setup, the run status, the table
(mean ± half-range over seeds), the seed-paired differences, the paper claims checked against
them, and the per-epoch cost of BatchSampler vs uniform batches. The hand-written reading
that follows the marker is left alone.
"""
import os
import subprocess
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))
import report  # noqa: E402

START = "### The issue's budget: `--budget r18`"
END = "<!-- end of generated r18 section -->"
ANCHOR = "### Small budget (session 1): setup"
QUALITY = os.path.join(REPO, "benchmarks", "results", "quality_r18")
# Where and how each seed ran (the machine's state is part of the timing columns).
CONDITIONS = {
    0: "session 2, one worker; our own test suite ran `nice`d beside 6 of the runs",
    1: "session 3, one worker; our test suite ran `nice`d beside the hard, Ring and UnReMix uniform runs",
    2: "sessions 3 and 4, one worker on an otherwise quiet machine, only the configurations "
       "with small differences",
}
REF = "simclr-nt_xent-uniform"


def _seeds(d):
    return ", ".join(f"s{s} {v:+.1f}" for s, v in sorted(d.items()))


def _verdict(d, positive=True):
    """'in k of n seeds' for the sign a claim predicts."""
    n = len(d)
    k = sum((v > 0) if positive else (v < 0) for v in d.values())
    if n == 0:
        return "not run"
    if k == n:
        return f"held in {'both' if n == 2 else f'all {n}'} seeds" if n > 1 else "held (1 seed)"
    if k == 0:
        return f"did not hold in any of {n} seeds" if n > 1 else "did not hold (1 seed)"
    return f"held in {k} of {n} seeds"


def _mean(d):
    return float(np.mean(list(d.values()))) if d else float("nan")


def main():
    os.chdir(REPO)
    subprocess.run([sys.executable, "benchmarks/run_all.py", "--report"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    table = open(os.path.join(QUALITY, "summary.md")).read().strip()
    listing = subprocess.run([sys.executable, "benchmarks/run_all.py", "--list"],
                             capture_output=True, text=True).stdout.split("\n")
    status = [line.split() for line in listing if line.startswith(("done", "pending"))]
    done = [r for s, r in status if s == "done"]
    pending = [r for s, r in status if s != "done"]
    runs = report.load(QUALITY)
    listed = {r for _, r in status}
    extra = sorted(r["run_id"] for r in runs if r["run_id"] not in listed)
    trained = [r for r in runs if "history" in r]
    by = {r["run_id"]: r for r in runs}
    seeds = sorted({r["recipe"]["seed"] for r in trained})

    # Minutes per training run, per seed; a resumed run's seconds cover only the epochs it
    # trained after the restart, so it is left out of the timing.
    def whole(r):
        return r.get("epochs_trained_now", r["epochs_run"]) == r["epochs_run"]

    timing = []
    for s in seeds:
        m = [r["seconds"] / 60 for r in trained if r["recipe"]["seed"] == s and whole(r)]
        resumed = [r["run_id"] for r in trained if r["recipe"]["seed"] == s and not whole(r)]
        timing.append(f"seed {s} ({CONDITIONS.get(s, 'conditions not recorded')}): "
                      f"{len(m)} runs, {min(m):.1f}-{max(m):.1f} min (mean {np.mean(m):.1f})"
                      + (f", not counting {', '.join(resumed)} (resumed after a restart)"
                         if resumed else ""))
    all_min = [r["seconds"] / 60 for r in trained if whole(r)]

    d = report.paired_differences(runs, REF)
    vs = d["vs_reference"]
    rows = ["| configuration | " + " | ".join(f"seed {s}" for s in seeds) + " | mean |",
            "|---|" + "---|" * (len(seeds) + 1)]
    for cfg in sorted(vs, key=report._order):
        rows.append(f"| {cfg} | " + " | ".join(
            f"{vs[cfg][s]:+.1f}" if s in vs[cfg] else "-" for s in seeds) +
            f" | {_mean(vs[cfg]):+.1f} |")
    ref_acc = {r["recipe"]["seed"]: 100 * r["knn_accuracy"] for r in trained
               if report.config_of(r["run_id"]) == REF}
    paired_table = "\n".join(rows)

    def epoch_reached(cfg, s, target):
        rid = f"{cfg}-s{s}"
        for i, v in enumerate(by.get(rid, {}).get("history", {}).get("knn_accuracy", []), 1):
            if 100 * v >= target:
                return i
        return None

    def get(cfg):
        return vs.get(cfg, {})

    def minus(a, b):
        """Paired difference a - b (both from the same seed), via the reference."""
        da, db = get(a), get(b)
        return {s: da[s] - db[s] for s in da if s in db}

    claims = []
    for cfg, name in (("simclr-hard_b1-uniform", "hard, beta 1"),
                      ("simclr-hard_b0.5-uniform", "hard, beta 0.5")):
        reach = [epoch_reached(cfg, s, ref_acc[s]) for s in seeds if s in ref_acc]
        claims.append(
            f"* **Hard negatives learn faster and end higher than SimCLR (Robinson et al.)**, "
            f"{name}: {_seeds(get(cfg))} points (mean {_mean(get(cfg)):+.1f}), "
            f"{_verdict(get(cfg))}; reaches NT-Xent's final kNN at epoch "
            + ", ".join("-" if e is None else str(e) for e in reach) + " of 15 (per seed).")
    claims.append(
        f"* **Debiasing helps (Chuang et al.)**: debiased minus NT-Xent "
        f"{_seeds(get('simclr-debiased-uniform'))}, {_verdict(get('simclr-debiased-uniform'))}.")
    for other, name in (("simclr-hard_b1-uniform", "hard beta 1"),
                        ("simclr-hard_b0.5-uniform", "hard beta 0.5")):
        diff = minus("simclr-unremix-uniform", other)
        claims.append(f"* **UnReMix beats HCL (Tabassum et al.)**, vs {name}: {_seeds(diff)} "
                      f"(mean {_mean(diff):+.1f}), {_verdict(diff)}.")
    claims.append(
        f"* **Ring beats its base loss (Wu et al.)**: MoCo v2 Ring minus MoCo v2 NT-Xent "
        f"{_seeds(d['moco_ring_vs_nt_xent'])}, {_verdict(d['moco_ring_vs_nt_xent'])}; SimCLR "
        f"Ring minus NT-Xent {_seeds(get('simclr-ring-uniform'))}, "
        f"{_verdict(get('simclr-ring-uniform'))}.")
    bs = d["batchsampler_vs_uniform"]
    pairs = [v for dd in bs.values() for v in dd.values()]
    claims.append(
        "* **BatchSampler improves every loss (Yang et al.)**: BatchSampler minus uniform, same "
        "loss and seed: " + "; ".join(f"{k.replace('simclr-', '')} {_seeds(v)}"
                                      for k, v in sorted(bs.items(), key=lambda kv: report._order(kv[0])))
        + f". Positive in {sum(v > 0 for v in pairs)} of {len(pairs)} pairs, mean "
        f"{np.mean(pairs) if pairs else float('nan'):+.2f} points.")
    small = [f"{cfg} ({len(dd)} seeds)" for cfg, dd in sorted(vs.items())
             if abs(_mean(dd)) < 2.0]

    # Step seconds, BatchSampler vs uniform, paired by loss and seed.  Per step, not per
    # epoch: a BatchSampler epoch has ceil(N/B) = 40 steps, a uniform one floor(N/B) = 39.
    cost_rows = []
    for s in seeds:
        ratios = []
        for loss in ("nt_xent", "debiased", "hard_b0.5", "hard_b1", "ring", "unremix"):
            u, b = by.get(f"simclr-{loss}-uniform-s{s}"), by.get(f"simclr-{loss}-batchsampler-s{s}")
            if u and b:
                ratios.append((loss, 1000 * b["median_step_seconds"],
                               1000 * u["median_step_seconds"]))
        if ratios:
            r = [b / u for _, b, u in ratios]
            cost_rows.append(
                f"seed {s}: median ms per step BatchSampler / uniform = "
                + ", ".join(f"{l} {b:.0f}/{u:.0f}" for l, b, u in ratios)
                + f"; ratio median {np.median(r):.2f} (range {min(r):.2f}-{max(r):.2f})")

    per_seed = {s: sum(r["recipe"]["seed"] == s for r in trained) for s in seeds}
    seed_label = ", ".join(f"{s}" + (f" ({per_seed[s]} of {max(per_seed.values())} configurations)"
                                      if per_seed[s] < max(per_seed.values()) else "")
                           for s in seeds)
    section = f"""{START} (seeds {seed_label})

| | |
|---|---|
| data | CIFAR-10 JPEG, first **1,000 train images per class (10,000)**, first 200 test images per class (2,000), 32x32 |
| encoder | `resnet18_cifar` **width 16** (ResNet-18 CIFAR stem, 128-d features) with the fused batch norm, head [512, 128], **`mixed_bfloat16`** |
| training | batch 256 (39 steps/epoch), **15 epochs**, Adam 1e-3 with cosine decay, augmentation v1 strength 0.5, crop scale [0.2, 1] |
| losses, MoCo, BatchSampler, evaluation | as in the small budget below |

Minutes per training run (wall, including the per-epoch kNN monitor and the final linear
probe) -- {'; '.join(timing)}. Over these {len(all_min)} training runs: mean {np.mean(all_min):.1f} min,
i.e. the issue's ~10 min; the 28 training runs of a two-seed grid come to
~{28 * np.mean(all_min) / 60:.1f} h (the issue planned ~4 h).

```bash
python3 benchmarks/run_all.py --suites quality              # both seeds; finished runs are skipped
python3 benchmarks/run_all.py --suites quality --seeds 2 --only simclr-nt_xent-uniform-s2,...   # a third seed
python3 benchmarks/run_all.py --report                      # table + docs/img/quality_r18_*.png
python3 benchmarks/update_r18_docs.py                       # this subsection, regenerated
```

**Done: {len(done)} of {len(done) + len(pending)} runs of the two-seed grid{f", plus {len(extra)} third-seed runs" if extra else ""}.**{' Pending: ' + ', '.join(pending) + '.' if pending else ''}

{table}

"±" is half the range over the seeds listed (so with two seeds it is half their difference).
Columns as in the small-budget table below.

**Seed-paired differences in final kNN accuracy** (points; each configuration minus
{REF} *of the same seed*, which shares the initial weights, data order seed and test
split; NT-Xent's own final kNN: {', '.join(f's{s} {v:.1f} %' for s, v in sorted(ref_acc.items()))}):

{paired_table}

![Seed-paired differences, r18 budget](img/quality_r18_paired.png)

**The papers' claims, checked on these runs** (kNN, final epoch; "held" means the sign the paper
predicts):

{chr(10).join(claims)}

Configurations whose mean difference from NT-Xent is under 2 points, with the seeds each has
(the issue asks for a third seed there): {', '.join(small) if small else 'none'}.

**Cost of BatchSampler batches** (same loss, same seed; per step, because a BatchSampler
epoch has ceil(N/B) = 40 steps and a uniform one floor(N/B) = 39): {'; '.join(cost_rows) if cost_rows else 'no pairs yet'}.

![kNN accuracy per epoch, r18 budget](img/quality_r18_knn_curves.png)

![Test-pair cosine histograms, r18 budget](img/quality_r18_cosine_hist.png)

![Clamp rate, false-negative rate, cosines per epoch, r18 budget](img/quality_r18_diagnostics.png)

Projection-space histograms: [img/quality_r18_cosine_hist_projection.png](img/quality_r18_cosine_hist_projection.png).

{END}
"""
    p = os.path.join(REPO, "docs", "benchmarks.md")
    s = open(p).read()
    if START in s and END in s:
        a, b = s.index(START), s.index(END) + len(END) + 1
    elif START in s:  # older layout: the generated block ran up to the small-budget heading
        a, b = s.index(START), s.index(ANCHOR)
    else:
        a = b = s.index(ANCHOR)
    s = s[:a] + section + s[b:]
    with open(p, "w") as f:
        f.write(s)
    print(f"updated {p}: {len(done)} of {len(done) + len(pending)} runs done")


if __name__ == "__main__":
    main()
