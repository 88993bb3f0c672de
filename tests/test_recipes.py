import glob
import json
import os

import pytest

from keras_hardneg.recipes import DEFAULTS, RecipeError, load_recipe

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_defaults_fill_missing_keys():
    r = load_recipe({"epochs": 3, "loss": {"beta": 0.5}})
    assert r["epochs"] == 3 and r["loss"]["beta"] == 0.5
    assert r["loss"]["tau_plus"] == DEFAULTS["loss"]["tau_plus"]


def test_changing_a_section_name_starts_it_blank():
    r = load_recipe({"loss": {"name": "ring", "lower_percentile": 1, "upper_percentile": 10}})
    assert "beta" not in r["loss"]


@pytest.mark.parametrize("given,match", [
    ({"epoch": 3}, "unknown recipe key 'epoch'"),
    ({"loss": {"betta": 1}}, "unknown recipe key 'loss.betta'"),
    ({"loss": {"tau_plus": 1.0}}, r"'loss.tau_plus' = 1.0 is out of range"),
    ({"loss": {"temperature": 0}}, "loss.temperature"),
    ({"batch_size": 1}, "batch_size"),
    ({"epochs": 2.5}, "epochs"),
    ({"framework": "byol"}, "framework"),
    ({"loss": {"name": "ring", "lower_percentile": 50, "upper_percentile": 10}}, "lower_percentile"),
    ({"sampler": {"name": "batchsampler", "num_candidates": 10, "num_neighbors": 10}},
     "num_neighbors"),
    ({"data": {"name": "image_folder"}}, "data.train"),
    ({"data": "digits"}, "'data' must be a mapping"),
])
def test_bad_recipes_name_the_key(given, match):
    with pytest.raises(RecipeError, match=match):
        load_recipe(given)


def test_file_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_recipe(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(RecipeError, match="not valid JSON"):
        load_recipe(str(bad))


def test_relative_data_paths_resolve_against_the_recipe_file(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"data": {"name": "image_folder", "train": "imgs/train"}}))
    assert load_recipe(str(path))["data"]["train"] == str(tmp_path / "imgs" / "train")


def test_every_zoo_recipe_is_valid():
    paths = sorted(glob.glob(os.path.join(ROOT, "models", "*", "recipe.json")))
    assert len(paths) >= 20
    for path in paths:
        load_recipe(path)
