"""The command line in a new user's first hour: ``train --help`` names the data it fetches by
name, a recipe error names where the bad key came from, ``zoo list`` keeps its columns for
long names, ``train --tensorboard`` reaches :func:`keras_hardneg.run.train`."""

import json
import re

import pytest

from keras_hardneg import cli
from keras_hardneg.cli import zoo as cli_zoo


def _train_help():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sub.choices["train"].format_help()


def test_train_help_lists_the_datasets_fetched_by_name():
    dataset = _train_help().split("\n  --dataset", 1)[1].split("\n  --data-dir", 1)[0]
    for name in ("digits", "cifar10", "cifar100", "tu:NAME", "text:NAME", "tfds:NAME"):
        assert name in dataset, name


def test_a_recipe_file_error_names_the_file_not_a_flag_never_given(tmp_path, capsys):
    recipe = tmp_path / "recipe.json"
    recipe.write_text(json.dumps({"epochs": 0}))
    assert cli.main(["train", "--recipe", str(recipe), "--output", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert f"--recipe {recipe}" in err and "'epochs'" in err
    assert "--epochs" not in err


def test_a_flag_error_names_the_flag_over_the_recipe_file(tmp_path, capsys):
    recipe = tmp_path / "recipe.json"
    recipe.write_text(json.dumps({"epochs": 3}))
    assert cli.main(["train", "--recipe", str(recipe), "--epochs", "0"]) == 2
    assert "--epochs: " in capsys.readouterr().err


class _FakeZoo:
    """What ``zoo list`` reads of :mod:`keras_hardneg.zoo`."""

    ZOO_ENV = "KERAS_HARDNEG_ZOO"

    def __init__(self, names, modalities=None):
        self.names = names
        self.modalities = modalities or ["image"] * len(names)

    def zoo_source(self):
        return "folder", "/zoo"

    def catalog(self):
        return [{"name": n, "modality": m, "output_dim": 128, "parameter_count": 1000,
                 "weights_dtype": "float32", "size": 2e6, "where": "local",
                 "status": "weights"} for n, m in zip(self.names, self.modalities)]


def test_zoo_list_columns_hold_for_long_names(capsys):
    names = ["short", "x" * 60, "an-entry-with-a-name-longer-than-the-old-column-of-38"]
    cli_zoo._print_zoo_list(_FakeZoo(names), recipes=False)
    lines = capsys.readouterr().out.splitlines()
    column = lines[0].index("modality")
    for name, line in zip(names, lines[1:]):
        assert line.startswith(name) and line.index(" image ") + 1 == column, line
        assert re.match(rf"{name} +image", line)


def test_zoo_list_columns_hold_for_long_modality_names(capsys):
    zoo = _FakeZoo(["a", "b"], ["retrieval", "image"])
    cli_zoo._print_zoo_list(zoo, recipes=False)
    lines = capsys.readouterr().out.splitlines()
    features = lines[0].index("features") + len("features")
    assert [line[features - 3:features] for line in lines[1:3]] == ["128", "128"]


class _Called(Exception):
    pass


@pytest.mark.parametrize("flags,expected", [(["--tensorboard"], True), ([], False)])
def test_train_tensorboard_flag_reaches_run_train(flags, expected, tmp_path, monkeypatch):
    from keras_hardneg import run

    def fake_train(recipe, output, **kwargs):
        raise _Called(kwargs)

    monkeypatch.setattr(run, "train", fake_train)
    with pytest.raises(_Called) as called:
        cli.main(["train", "--output", str(tmp_path / "run")] + flags)
    assert called.value.args[0].get("tensorboard", False) is expected
