"""benchmarks/report.py: the seed-paired arithmetic the docs' claim checks rest on, the
table's mean ± half-range, and that every plot renders from results of several seeds."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import report  # noqa: E402

EPOCHS = 3


def _run(cfg, seed, final, fn=0.1):
    rng = np.random.default_rng(seed)
    curve = list(np.linspace(0.3, final, EPOCHS))
    hist = {"knn_accuracy": curve, "false_negative_rate": [fn] * EPOCHS,
            "positive_cosine": [0.6] * EPOCHS, "negative_cosine": [0.0] * EPOCHS}
    if "hard" in cfg:
        hist["clamp_fraction"] = [0.0] * EPOCHS
    edges = list(np.linspace(-1, 1, 21))
    counts = lambda: list(rng.integers(0, 50, size=20))  # noqa: E731
    cos = {"edges": edges, "same_label": counts(), "different_label": counts(),
           "same_label_mean": 0.3, "different_label_mean": 0.2, "gap": 0.1}
    return {"run_id": f"{cfg}-s{seed}", "recipe": {"seed": seed}, "knn_accuracy": final,
            "linear_probe_accuracy": final + 0.05, "history": hist,
            "median_epoch_seconds": 30.0, "median_step_seconds": 0.75,
            "mean_false_negative_rate": fn,
            "cosine_histograms": {"encoder": cos, "projection": cos}}


@pytest.fixture
def runs():
    acc = {("simclr-nt_xent-uniform", 0): 0.40, ("simclr-nt_xent-uniform", 1): 0.42,
           ("simclr-hard_b1-uniform", 0): 0.43, ("simclr-hard_b1-uniform", 1): 0.44,
           ("simclr-hard_b1-batchsampler", 0): 0.44, ("simclr-hard_b1-batchsampler", 1): 0.43,
           ("moco_v2-nt_xent-uniform", 0): 0.30, ("moco_v2-nt_xent-uniform", 1): 0.31,
           ("moco_v2-ring-uniform", 0): 0.32}
    out = [_run(cfg, s, a) for (cfg, s), a in acc.items()]
    out += [{"run_id": f"random_init-s{s}", "recipe": {"seed": s}, "knn_accuracy": 0.29}
            for s in (0, 1)]
    return out


def test_paired_differences_subtract_the_same_seeds_reference(runs):
    d = report.paired_differences(runs)
    assert d["vs_reference"]["simclr-hard_b1-uniform"] == pytest.approx({0: 3.0, 1: 2.0})
    assert d["vs_reference"]["moco_v2-ring-uniform"] == pytest.approx({0: -8.0})
    assert "simclr-nt_xent-uniform" not in d["vs_reference"]
    assert d["batchsampler_vs_uniform"]["simclr-hard_b1"] == pytest.approx({0: 1.0, 1: -1.0})
    # Ring minus NT-Xent within MoCo: only seed 0 has both.
    assert d["moco_ring_vs_nt_xent"] == pytest.approx({0: 2.0})


def test_table_reports_mean_and_half_range_over_seeds(runs):
    table = report.summary_table(runs)
    row = next(line for line in table.splitlines() if line.startswith("| simclr-hard_b1-uniform "))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "0,1"
    assert cells[2] == "43.5 ± 0.5"  # kNN 43 and 44
    assert cells[3] == "48.5 ± 0.5"  # linear probe 48 and 49
    single = next(line for line in table.splitlines() if line.startswith("| moco_v2-ring-uniform "))
    assert "± " not in single.split("|")[3]  # one seed: no spread


def test_grouped_histories_stack_seeds_and_trim_to_the_shortest(runs):
    runs[0]["history"]["knn_accuracy"] = runs[0]["history"]["knn_accuracy"][:2]
    g = report._grouped(runs, "knn_accuracy")
    assert g["simclr-nt_xent-uniform"].shape == (2, 2)
    assert g["simclr-hard_b1-uniform"].shape == (2, EPOCHS)
    assert list(g)[0] == "simclr-nt_xent-uniform"  # table order


def test_merged_histograms_pool_the_seeds_counts(runs):
    merged = dict((cfg, (n, h)) for cfg, n, h in report._merged_histograms(runs, "encoder"))
    n, h = merged["simclr-hard_b1-uniform"]
    parts = [r["cosine_histograms"]["encoder"]["same_label"] for r in runs
             if r["run_id"].startswith("simclr-hard_b1-uniform")]
    assert n == 2
    np.testing.assert_array_equal(h["same_label"], np.sum(parts, axis=0))


def test_every_plot_renders(runs, tmp_path):
    for name, fn in (("curves", report.plot_curves), ("paired", report.plot_paired),
                     ("diagnostics", report.plot_diagnostics),
                     ("hist", report.plot_histograms)):
        path = tmp_path / f"{name}.png"
        fn(runs, str(path))
        assert path.stat().st_size > 10_000, name


def test_paired_bars_keep_table_order_and_loss_colours(runs):
    left, right = report._paired_bars(report.paired_differences(runs))
    assert [label for label, _, _ in left] == ["hard_b1-uniform", "hard_b1-batchsampler",
                                               "moco_v2-nt_xent-uniform", "moco_v2-ring-uniform"]
    colours = {label: colour for label, _, colour in left + right}
    assert colours["hard_b1-uniform"] == colours["hard_b1-batchsampler"] == "tab:red"
    assert colours["moco_v2-ring-uniform"] == colours["moco_v2 ring-nt_xent"] == "tab:purple"
    assert [label for label, _, _ in right] == ["hard_b1 BS-unif", "moco_v2 ring-nt_xent"]
    assert right[0][1] == pytest.approx({0: 1.0, 1: -1.0})
