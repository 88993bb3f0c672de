"""benchmarks/parity/report.py: the group table compares each Keras group of two or more
seeds with lightly's by the difference of means, its Welch 95 % interval, and the seeds a
side that an interval of ± 0.5 points would need; partial cells stay out of the groups."""

import importlib.util
import os

import pytest
from scipy import stats

# Loaded under its own name: benchmarks/report.py is imported as ``report`` by
# tests/benchmarks/test_report.py in the same worker.
_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "parity", "report.py")
_SPEC = importlib.util.spec_from_file_location("parity_cpu_report", _PATH)
report = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(report)


def test_welch_interval_equals_the_pooled_interval_for_equal_spreads():
    diff, low, high = report.welch_interval([0.1, 0.2, 0.3], [0.2, 0.3, 0.4])
    # Equal variances (0.01) and sizes: df = 4, se = sqrt(2 * 0.01 / 3).
    half = 2.7764451 * (2 * 0.01 / 3) ** 0.5
    assert diff == pytest.approx(-0.1)
    assert (low, high) == (pytest.approx(-0.1 - half, abs=1e-6),
                           pytest.approx(-0.1 + half, abs=1e-6))


def test_welch_interval_of_two_groups_without_spread_is_the_difference():
    assert report.welch_interval([0.4, 0.4], [0.5, 0.5]) == pytest.approx((-0.1,) * 3)


def test_seeds_for_half_width_is_the_first_n_that_reaches_it():
    a, b = [0.0, 0.1, 0.2], [0.1, 0.2, 0.3]          # sd 0.1 each
    n = report.seeds_for_half_width(a, b, 0.05)

    def half(k):
        return stats.t.ppf(0.975, 2 * k - 2) * 0.1 * (2 / k) ** 0.5

    assert half(n) <= 0.05 < half(n - 1)
    assert 30 < n < 36                                # ~ 2 (1.96 * 0.1 / 0.05)^2


def _cell(side, seed, last, partial=False, **keys):
    r = {"side": side, "knn": {"5": 0.4, "30": last}, "loss": [5.0],
         "epoch_seconds": [1.0], **keys}
    if partial:
        r.update(partial=True, stopped_at_epoch=25)
    return r


def test_table_compares_groups_of_two_or_more_seeds_with_lightly():
    results = {f"lightly:separate:s{s}": _cell("lightly", s, v, views="separate")
               for s, v in enumerate([0.47, 0.48, 0.475])}
    for s, v in enumerate([0.46, 0.49]):
        results[f"keras:tensorflow:all:s{s}"] = _cell("keras", s, v, variant="all",
                                                      backend="tensorflow")
    results["keras:jax:one:s0"] = _cell("keras", 0, 0.45, variant="one", backend="jax")
    results["keras:tensorflow:all:s2"] = _cell("keras", 2, 0.10, partial=True,
                                               variant="all", backend="tensorflow")
    text = report.table(results)
    rows = [line for line in text.splitlines() if line.startswith("| keras-hardneg all ")]
    assert rows[0].startswith("| keras-hardneg all (tensorflow) | 2 | 0.4750 ±")
    diff, low, high = report.welch_interval([0.46, 0.49], [0.47, 0.48, 0.475])
    assert rows[1] == (f"| keras-hardneg all (tensorflow) | {100 * diff:+.2f} | "
                       f"[{100 * low:+.2f}, {100 * high:+.2f}] | "
                       f"{report.seeds_for_half_width([0.46, 0.49], [0.47, 0.48, 0.475], 0.005)} |")
    assert "| keras-hardneg one (jax) | -" not in text  # one seed: no interval
