"""run.report.progress: the end-of-training clamp warning (the debiasing clamp at its floor)."""

from keras_hardneg.run.report.progress import CLAMP_WARNING_FRACTION, clamp_warning


def test_clamp_warning_only_when_the_clamp_holds_most_anchors_in_the_last_epoch():
    assert clamp_warning({}) is None
    assert clamp_warning({"loss": [1.0]}) is None  # a loss without a clamp
    assert clamp_warning({"clamp_fraction": [1.0, CLAMP_WARNING_FRACTION / 2]}) is None
    line = clamp_warning({"clamp_fraction": [0.0, 1.0]})
    assert line is not None and "\n" not in line
    assert "100%" in line and "tau_plus" in line and "temperature" in line
