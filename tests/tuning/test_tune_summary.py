"""The tuner's summary (issue 26): trials numbered from 1 as Keras Tuner prints them, the
best values and the `keras-hardneg train` command that uses them (the CLI runs in this
process: ``tests/cli_user.py``)."""

import json
import re
import shlex

import pytest

import cli_user
from keras_hardneg import cli
from keras_hardneg.tuning import records

def test_trial_numbers_and_commands():
    assert records.trial_number("00") == "1" and records.trial_number("0011") == "12"
    assert records.trial_number("abc") == "abc"
    rec = {"hyperparameters": {"beta": 0.93456789, "tau_plus": 0.05}}
    settings = {"dataset": "my images", "recipe": {"framework": {"name": "simclr"},
                                                    "loss": {"name": "hard"},
                                                    "batch_size": 64, "data": {}}}
    values, command = records.train_command(rec, settings)
    assert values == "beta 0.9346, tau_plus 0.05"
    assert command == ("keras-hardneg train --dataset 'my images' --framework simclr --loss "
                       "hard --batch-size 64 --beta 0.934568 --tau-plus 0.05")
    _, command = records.train_command({"hyperparameters": {"restart_prob": 0.2}}, settings)
    assert command is None  # a sampler knob has no flag


def test_tune_prints_trials_from_one_the_best_values_and_the_train_command(tmp_path, capsys):
    """`keras-hardneg tune` on digits (the default data) writes one record per trial to
    results.json and prints the trials, the best values and the command that trains them."""
    out = tmp_path / "tune"
    proc = cli_user.run(capsys, "tune", "--trials", "2", "--epochs", "1", "--batch-size", "256",
                        "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    trials = json.loads((out / "results.json").read_text())
    assert len(trials) == 2                     # results.json: one record per trial
    for trial in trials:
        assert {"beta", "tau_plus", "objective"} <= set(trial)
        assert 0.0 < trial["objective"] <= 1.0
    table = text[text.index("rank"):].splitlines()[2:4]
    assert sorted(line.split()[1] for line in table) == ["1", "2"], table
    best = max(trials, key=lambda t: t["objective"])
    number = int(best["trial_id"]) + 1
    assert re.search(rf"best trial\s+#{number}: ", text), text
    values = next(line for line in text.splitlines() if "best values" in line)
    assert f"beta {best['beta']:.4g}" in values and f"tau_plus {best['tau_plus']:.4g}" in values
    command = next(line for line in text.splitlines() if "train with" in line)
    command = command.split("train with", 1)[1].strip()
    argv = shlex.split(command)
    assert argv[:2] == ["keras-hardneg", "train"], command
    args = cli.build_parser().parse_args(argv[1:])
    assert args.beta == pytest.approx(best["beta"], rel=1e-5)
    assert args.tau_plus == pytest.approx(best["tau_plus"], rel=1e-5, abs=1e-9)
    assert args.loss == "hard" and args.dataset == "digits" and args.batch_size == 256
