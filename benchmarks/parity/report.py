"""Table and curves of the parity cells (``benchmarks/parity/run.py report [--write]``)."""

import os
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DOC = os.path.join(ROOT, "docs", "benchmarks", "parity.md")
PLOT = os.path.join(ROOT, "docs", "img", "parity_knn.png")
BEGIN, END = "<!-- parity:begin -->", "<!-- parity:end -->"
COMMAND = "python benchmarks/parity/run.py report --write"
REFERENCE = "lightly (separate views)"


def group_of(result: dict) -> str:
    if result["side"] == "lightly":
        return f"lightly ({result['views']} views)"
    return f"keras-hardneg {result['variant']} ({result['backend']})"


def table(results: dict) -> str:
    epochs = sorted({int(e) for r in results.values() for e in r["knn"]})
    head = ("| cell | " + " | ".join(str(e) for e in epochs) +
            " | loss (last) | s / epoch (mean) | CPU s / epoch (mean) |")
    lines = [head, "|---" * (len(epochs) + 4) + "|"]
    for cell, r in sorted(results.items(), key=lambda kv: (group_of(kv[1]), kv[0])):
        knn = [f"{r['knn'][str(e)]:.3f}" if str(e) in r["knn"] else "" for e in epochs]
        seconds = statistics.mean(r["epoch_seconds"]) if r.get("epoch_seconds") else float("nan")
        # CPU time is what compares on a shared machine (wall time waits for other work);
        # logged since session 12, so older cells leave it blank.
        cpu = (f"{statistics.mean(r['epoch_cpu_seconds']):.0f}"
               if r.get("epoch_cpu_seconds") else "")
        stopped = (f" (stopped after epoch {r['stopped_at_epoch']})" if r.get("partial")
                   else "")
        lines.append(f"| `{cell}`{stopped} | " + " | ".join(knn) +
                     f" | {r['loss'][-1]:.3f} | {seconds:.0f} | {cpu} |")
    lines += ["", "| group | seeds | kNN at the last epoch, mean ± sd |", "|---|---|---|"]
    groups: dict[str, list[float]] = {}
    for r in results.values():
        if r.get("partial"):
            continue                                   # no last epoch to compare
        last = max(r["knn"], key=int)
        groups.setdefault(group_of(r), []).append(r["knn"][last])
    for name, values in sorted(groups.items()):
        spread = f" ± {statistics.stdev(values):.4f}" if len(values) > 1 else " (one seed)"
        lines.append(f"| {name} | {len(values)} | {statistics.mean(values):.4f}{spread} |")
    reference = groups.get(REFERENCE, [])
    compared = [(name, values) for name, values in sorted(groups.items())
                if name != REFERENCE and len(values) > 1]
    if len(reference) > 1 and compared:
        lines += ["", f"| group - {REFERENCE} | difference (points) | Welch 95 % interval "
                      "(points) | seeds a side for a ± 0.5-point interval |", "|---|---|---|---|"]
        for name, values in compared:
            diff, low, high = welch_interval(values, reference)
            lines.append(f"| {name} | {100 * diff:+.2f} | [{100 * low:+.2f}, {100 * high:+.2f}] "
                         f"| {seeds_for_half_width(values, reference, 0.005)} |")
    return "\n".join(lines)


def welch_interval(a: list, b: list, level: float = 0.95) -> tuple:
    """mean(a) - mean(b) and its Welch (unequal variances) ``level`` interval."""
    from scipy import stats

    diff = statistics.mean(a) - statistics.mean(b)
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    se = (va + vb) ** 0.5
    if se == 0:  # no spread on either side: the difference is exact
        return diff, diff, diff
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    half = stats.t.ppf(0.5 + level / 2, df) * se
    return diff, diff - half, diff + half


def seeds_for_half_width(a: list, b: list, half_width: float, level: float = 0.95) -> int:
    """Seeds per side for a ``level`` interval of the difference no wider than
    ± ``half_width``, at the two groups' pooled standard deviation (equal seeds a side)."""
    from scipy import stats

    sd = ((statistics.variance(a) + statistics.variance(b)) / 2) ** 0.5
    n = 2
    while stats.t.ppf(0.5 + level / 2, 2 * n - 2) * sd * (2 / n) ** 0.5 > half_width:
        n += 1
    return n


def plot(results: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    colours: dict[str, str] = {}
    for cell, r in sorted(results.items()):
        g = group_of(r)
        colour = colours.setdefault(g, f"C{len(colours)}")
        xs = sorted(int(e) for e in r["knn"])
        ax.plot(xs, [r["knn"][str(e)] for e in xs], "o--" if r.get("partial") else "o-",
                color=colour,
                label=g if g not in ax.get_legend_handles_labels()[1] else None)
    ax.set_xlabel("epoch")
    ax.set_ylabel("kNN accuracy (k 200, t 0.1; 10k bank, 2k test)")
    ax.set_title("SimCLR ResNet-18 w16, B 256, CIFAR-10 10k: lightly vs keras-hardneg")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def report(results: dict, write: bool = False) -> None:
    if not results:
        raise SystemExit("no parity cells yet (benchmarks/results/parity/ is empty)")
    text = table(results)
    print(text)
    if not write:
        return
    plot(results, PLOT)
    with open(DOC) as f:
        doc = f.read()
    block = (f"{BEGIN}\n<!-- written by `{COMMAND}`; do not edit by hand -->\n\n{text}\n\n"
             f"![parity curves](img/{os.path.basename(PLOT)})\n{END}")
    if BEGIN in doc and END in doc:
        doc = doc[:doc.index(BEGIN)] + block + doc[doc.index(END) + len(END):]
    else:
        raise SystemExit(f"{DOC}: add the markers {BEGIN} / {END} where the table goes")
    with open(DOC + ".part", "w") as f:
        f.write(doc)
    os.replace(DOC + ".part", DOC)
    print(f"wrote {DOC} and {PLOT}")
