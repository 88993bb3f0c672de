"""What a new user sees (issue 26, output): log-file friendly lines that fit 80 columns,
the random encoder's kNN ("epoch 0") beside the trained one, ``history.png``, and --help
with a text and a default for every flag. The CLI runs in this process (``tests/cli_user.py``)."""

import argparse
import io
import json
import sys

import pytest

import cli_user
from keras_hardneg import cli
from keras_hardneg.run.report import progress as report

def test_train_into_a_log_file_shows_short_plain_lines_a_baseline_and_a_plot(tmp_path, capsys):
    out = tmp_path / "run"
    proc = cli_user.run(capsys, "train", "--epochs", "2", "--width", "4", "--no-export",
                        "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert "\r" not in text and "\x1b[" not in text  # stdout is a pipe: verbose 2
    progress = [line for line in text.splitlines() if "/step" in line]
    assert len(progress) == 2, text
    for line in progress:
        assert len(line) <= 80, line
        assert "loss:" in line and "knn_accuracy:" in line, line
    assert "clamp_fraction" not in text and "nonfinite_steps" not in text
    assert "epoch 0 (before training): kNN accuracy" in text
    results = json.loads((out / "results.json").read_text())
    assert 0.0 <= results["knn_accuracy_epoch0"] <= 1.0
    row = next(line for line in text.splitlines() if "kNN before training" in line)
    assert f"{results['knn_accuracy_epoch0']:.4f} (the random encoder, epoch 0)" in row
    history = json.loads((out / "history.json").read_text())
    assert "clamp_fraction" in history and "nonfinite_steps" in history  # all kept there
    plot = out / "history.png"
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert str(plot) in text


def test_verbose_auto_follows_the_terminal():
    class Stream(io.StringIO):
        def __init__(self, tty):
            super().__init__()
            self.tty = tty

        def isatty(self):
            return self.tty

    assert report.resolve_verbose("auto", Stream(True)) == 1
    assert report.resolve_verbose("auto", Stream(False)) == 2
    assert report.resolve_verbose(0) == 0
    with pytest.raises(ValueError, match="`verbose` must be 0, 1, 2 or 'auto'"):
        report.resolve_verbose(3)


def test_progress_hides_constant_counters_and_keeps_nonzero_ones():
    shown = report._shown({"loss": 5.0, "clamp_fraction": 0.0, "nonfinite_steps": 0.0,
                           "positive_cosine": 0.4, "epoch_seconds": 1.0, "knn_accuracy": 0.5})
    assert shown == {"loss": 5.0, "knn_accuracy": 0.5}
    assert report._shown({"nonfinite_steps": 2.0})["nonfinite_steps"] == 2.0


def test_history_plot_is_skipped_without_matplotlib(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    path = tmp_path / "history.png"
    assert report.plot_history({"loss": [1.0, 0.5]}, str(path)) is None
    assert not path.exists()


def test_every_flag_has_help_and_model_flags_say_their_default():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, p in sub.choices.items():
        for action in p._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help, (name, action.option_strings or action.dest)
            if name == "train" and action.option_strings and action.nargs != 0 \
                    and action.dest not in ("recipe", "dataset", "benchmark_dir", "preset",
                                            "distribution", "output"):
                assert "default" in action.help, (name, action.option_strings)


def test_width_help_covers_every_encoder_in_the_terminal(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")  # a terminal's width, as argparse reads it
    proc = cli_user.run(capsys, "train", "--help")
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split("options:")[-1].split())
    width = text[text.index("--width WIDTH"):text.index("--learning-rate LEARNING_RATE")]
    for needle in ("GIN layer", "channel width multiplier", "resnet18_cifar", "transformer",
                   "default: the recipe's"):
        assert needle in width, width
