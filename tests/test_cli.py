"""The command line: the README's main job on the embedded default, evaluate reproducing the
model card, export, and one-line errors for bad input."""

import json
import os
import re

import pytest

from keras_hardneg import cli


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "run"
    code = cli.main(["train", "--epochs", "1", "--width", "8", "--output", str(out),
                     "--verbose", "0"])
    assert code == 0
    return out


def test_train_writes_run_export_and_card(trained_run, capsys):
    for name in ("recipe.json", "history.json", "results.json", "backup",
                 "encoder/saved_model.pb", "encoder/model_card.json", "encoder/model_card.md"):
        assert os.path.exists(trained_run / name), name
    results = json.loads((trained_run / "results.json").read_text())
    assert 0.1 < results["knn_accuracy"] <= 1.0  # 10 classes: far above chance after 1 epoch
    # Cost bookkeeping the benchmarks read: a fresh run trains every epoch it reports.
    batch = json.loads((trained_run / "recipe.json").read_text())["batch_size"]
    assert results["epochs_run"] == results["epochs_trained_now"] == 1
    assert results["steps_per_epoch"] >= 1
    assert results["images_per_second"] == pytest.approx(
        results["steps_per_epoch"] * batch / results["seconds"])


def test_evaluate_reproduces_the_model_card(trained_run, capsys):
    capsys.readouterr()
    assert cli.main(["evaluate", str(trained_run / "encoder"), "--json"]) == 0
    measured = json.loads(capsys.readouterr().out)  # stdout is one JSON document
    assert measured["encoder"] == str(trained_run / "encoder")
    card = json.loads((trained_run / "encoder" / "model_card.json").read_text())
    assert measured["knn_accuracy"] == pytest.approx(card["knn_accuracy"], abs=1e-6)
    assert measured["linear_probe_accuracy"] == pytest.approx(card["linear_probe_accuracy"], abs=1e-6)


def test_evaluate_applies_data_flags_to_the_runs_recipe(trained_run, capsys):
    """--limit-per-class / --image-size change the recipe's data (they used to be ignored
    without --dataset): on digits, --limit-per-class is refused by name."""
    capsys.readouterr()
    assert cli.main(["evaluate", str(trained_run / "encoder"), "--limit-per-class", "5"]) == 2
    assert "--limit-per-class" in capsys.readouterr().err


def test_export_from_a_run_directory(trained_run, tmp_path):
    out = tmp_path / "exported"
    assert cli.main(["export", str(trained_run), "--output", str(out)]) == 0
    assert (out / "saved_model.pb").exists()
    assert cli.main(["export", str(trained_run), "--output", str(out)]) == 2  # exists: refused


@pytest.mark.parametrize("argv,needle", [
    (["train", "--beta", "-1"], "--beta"),
    (["train", "--epochs", "0"], "--epochs"),
    (["train", "--tau-plus", "1.5"], "tau_plus"),
    (["train", "--recipe", "/nonexistent/recipe.json"], "--recipe"),
    (["train", "--dataset", "/nonexistent/folder"], "--dataset"),
    (["train", "--loss", "triplet"], "--loss"),
    (["evaluate", "/nonexistent/encoder"], "/nonexistent/encoder"),
    (["export", "/nonexistent/run", "--output", "OUT"], "/nonexistent/run"),
    (["tune", "--trials", "0", "--output", "OUT"], "--trials"),
])
def test_bad_input_is_one_clear_line(argv, needle, capsys, tmp_path):
    argv = [str(tmp_path / "out") if a == "OUT" else a for a in argv]  # a folder not there
    try:
        code = cli.main(argv)
    except SystemExit as e:  # argparse's own type errors
        code = e.code
    assert code == 2
    assert needle in capsys.readouterr().err


def test_every_subcommand_has_help(capsys):
    for command in ("train", "evaluate", "export", "tune"):
        with pytest.raises(SystemExit) as e:
            cli.main([command, "--help"])
        assert e.value.code == 0
        assert "usage: keras-hardneg " + command in capsys.readouterr().out


def test_rerunning_a_finished_run_resumes_without_training(trained_run, capsys):
    capsys.readouterr()
    assert cli.main(["train", "--epochs", "1", "--width", "8", "--output", str(trained_run),
                     "--verbose", "0"]) == 0
    out = capsys.readouterr().out
    assert "nothing left to train" in out, out
    assert re.search(r"epochs run\s+1\n", out), out


@pytest.mark.heavy  # a fresh process (~30 CPU-s): TensorFlow's start-up lines show only there
def test_a_cli_run_prints_no_error_level_lines(tmp_path):
    """On a machine without a GPU, TensorFlow's start-up `E ... failed call to cuInit` line
    reads like a failure; the CLI keeps stderr free of error-level lines."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    proc = subprocess.run(
        [sys.executable, "-m", "keras_hardneg.cli", "train", "--epochs", "1", "--width", "4",
         "--batch-size", "256", "--no-export", "--verbose", "0", "--output",
         str(tmp_path / "run")], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    error_lines = [line for line in proc.stderr.splitlines()
                   if re.search(r"(^|\s)E\d{4} |\d: E |\bERROR\b|\bF\d{4} ", line)]
    assert error_lines == [], proc.stderr
