"""The command line on a user's machine (issue 47 items 7 and 9, the zoo recipes without
network; issue 48 item 10): one clear line naming what to give, zoo names where a path was
expected, titles and notes that say what was trained. No test reaches the internet."""

import ast
import glob
import json
import os
import types

import numpy as np
import pytest

from keras_hardneg import cli
from keras_hardneg.data import fetch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEAD = "http://127.0.0.1:9"  # nothing listens there: a machine without network


@pytest.fixture
def offline(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras_home"))
    monkeypatch.setenv(fetch.MIRROR_ENV, DEAD)
    for key in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(key, "127.0.0.1")


@pytest.mark.parametrize("entry, words", [
    ("simclr-hard-cifar10", "image folder"),
    ("graphcl-hard-mutag", "--dataset DIR in the CLI"),
    ("simcse-ntxent-wiki", "--dataset FILE.txt"),
])
def test_a_zoo_recipe_without_network_says_how_to_give_local_data(entry, words, offline,
                                                                   tmp_path, capsys):
    recipe = os.path.join(ROOT, "models", entry, "recipe.json")
    code = cli.main(["train", "--recipe", recipe, "--output", str(tmp_path / "run"),
                     "--epochs", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert words in err[0] and fetch.MIRROR_ENV in err[0] and "cannot fetch" in err[0]


def test_no_zoo_recipe_names_a_folder_of_ours():
    for path in glob.glob(os.path.join(ROOT, "models", "*", "recipe.json")):
        text = open(path).read()
        assert "shared" not in text and "/work/" not in text, path


def test_data_dir_points_fetched_data_at_a_local_copy(tmp_path, monkeypatch, capsys):
    """`--data-dir`: a cache folder already holding the set needs no network."""
    from tests import _loopback

    monkeypatch.setenv(fetch.MIRROR_ENV, DEAD)
    cache = tmp_path / "my_data"
    _loopback.fill_cifar_cache(str(tmp_path / "unused"), per_batch=20)  # Keras's layout
    os.rename(tmp_path / "unused" / "datasets", cache)
    args = cli.build_parser().parse_args(["train", "--dataset", "cifar10", "--data-dir",
                                          str(cache)])
    assert cli._overrides(args)["data"]["data_dir"] == str(cache)
    assert cli.main(["train", "--dataset", str(tmp_path), "--data-dir", str(cache),
                     "--output", str(tmp_path / "r")]) == 2
    assert "--data-dir applies to data fetched by name" in capsys.readouterr().err


def test_tfds_names_the_data_dir_it_reads_and_the_flag(tmp_path, monkeypatch):
    """Item 7: with $TFDS_DATA_DIR set the message said "~/tensorflow_datasets (the default
    data_dir)" and suggested a Python call; it names the real folder and the flag."""
    pytest.importorskip("tensorflow_datasets")
    from keras_hardneg.data import tfds_loader

    monkeypatch.setenv("TFDS_DATA_DIR", str(tmp_path / "tfds"))
    message = tfds_loader._prepare_help("cifar10", None)
    assert str(tmp_path / "tfds") in message and "$TFDS_DATA_DIR" in message
    assert "--data-dir" in message and "~/tensorflow_datasets (the default" not in message
    args = cli.build_parser().parse_args(["train", "--dataset", "tfds:cifar10", "--data-dir",
                                          str(tmp_path / "d")])
    data = cli._overrides(args)["data"]
    assert data["data_dir"] == str(tmp_path / "d") and data["dataset"] == "cifar10"
    from keras_hardneg.run import load_recipe

    assert load_recipe({"data": data})["data"]["download"] is True  # as tfds.load


def test_evaluate_takes_a_zoo_entrys_name(capsys):
    """Item 9: `evaluate NAME` said "no such SavedModel or run directory"."""
    code = cli.main(["evaluate", "simclr-ntxent-cifar10-r18w8-cpu", "--dataset", "digits",
                     "--image-size", "32", "--no-linear-probe", "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert os.path.join("simclr-ntxent-cifar10-r18w8-cpu", "preset") in out.out
    assert 0.0 <= json.loads(out.out.strip().splitlines()[-1])["knn_accuracy"] <= 1.0
    assert cli.main(["evaluate", "simclr-ntxent-cifr10-r18w8-cpu"]) == 2
    assert "not a zoo entry" in capsys.readouterr().err


def test_a_default_runs_card_is_titled_by_what_was_trained():
    """Item 9: the model card of `train --output runs/digits` was titled "# run"."""
    import keras_hardneg as khn
    from keras_hardneg.run import load_recipe
    from keras_hardneg.run.artifacts import model_card

    recipe = load_recipe({})
    fake = types.SimpleNamespace(contrastive_loss=khn.losses.HardNegativeContrastiveLoss(),
                                 encoder=types.SimpleNamespace(output_shape=(None, 16)))
    card = model_card(fake, recipe, {"epochs_run": 1}, "digits")
    assert card.to_markdown().splitlines()[0] == "# simclr + hard on digits"
    named = model_card(fake, {**recipe, "name": "my-run"}, {"epochs_run": 1}, "digits")
    assert named.to_markdown().splitlines()[0] == "# my-run"


def test_a_grayscale_folder_is_said_to_be_grayscale(tmp_path):
    """Item 9: grayscale images became RGB without a word."""
    from PIL import Image

    from keras_hardneg.registry import DATASETS

    rng = np.random.default_rng(0)
    for c in ("a", "b"):
        os.makedirs(tmp_path / "grey" / c)
        for i in range(4):
            Image.fromarray(rng.integers(0, 255, (12, 12), dtype=np.uint8), mode="L").save(
                tmp_path / "grey" / c / f"{i}.png")
    _, _, desc = DATASETS.build("image_folder", 0, train=str(tmp_path / "grey"),
                                image_size=12, access="arrays")
    assert "all grayscale, their one channel repeated as R, G and B" in desc
    colour = tmp_path / "colour" / "a"
    os.makedirs(colour)
    for i in range(4):
        Image.fromarray(rng.integers(0, 255, (12, 12, 3), dtype=np.uint8)).save(
            colour / f"{i}.png")
    _, _, desc = DATASETS.build("image_folder", 0, train=str(tmp_path / "colour"),
                                image_size=12, access="arrays")
    assert "repeated as R, G and B" not in desc


def _user_strings(path):
    """String constants of a module that are not docstrings."""
    tree = ast.parse(open(path).read())
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr)
            and isinstance(n.body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                id(node) not in docs:
            yield node.value


def test_user_facing_text_names_no_folder_of_ours():
    """Issue 48, item 10: messages and help said `shared/data/text` and "this project's
    machines"; they say what a user has."""
    found = []
    for path in glob.glob(os.path.join(ROOT, "keras_hardneg", "**", "*.py"), recursive=True):
        for text in _user_strings(path):
            if "shared/data" in text or "project's machines" in text or \
                    "project's shared data" in text:
                found.append((os.path.relpath(path, ROOT), text[:80]))
    assert not found, found
    helps = [cli.build_parser()._subparsers._group_actions[0].choices[c].format_help()
             for c in ("train", "evaluate", "zoo", "tune")]
    assert not any("shared/data" in h for h in helps)
