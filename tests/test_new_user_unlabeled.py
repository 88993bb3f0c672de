"""A folder of unlabeled images (no class subfolders) trains (issue 26): no evaluation, the
header states the size images are resized to; a labelled folder given as ``test`` is what
the run evaluates on (split into kNN reference and queries). The CLI runs in this process
(``tests/cli_user.py``)."""

import json
import os

import numpy as np
import pytest

import cli_user

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def flat(tmp_path_factory):
    from PIL import Image

    folder = tmp_path_factory.mktemp("flat")
    rng = np.random.default_rng(0)
    for i in range(96):
        Image.fromarray(rng.integers(0, 255, (20, 24, 3), dtype=np.uint8)).save(
            folder / f"img{i:03d}.png")
    (folder / "notes.txt").write_text("not an image")
    return folder


def test_flat_folder_trains_without_evaluation_and_states_the_image_size(flat, tmp_path, capsys):
    out = tmp_path / "run"
    proc = cli_user.run(capsys, "train", "--dataset", str(flat), "--image-size", "16",
                        "--epochs", "1", "--width", "4", "--batch-size", "32", "--no-export",
                        "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    header = proc.stdout.splitlines()[0]
    assert "images resized to 16x16" in header, header
    results = json.loads((out / "results.json").read_text())
    assert results["epochs_run"] == 1 and "knn_accuracy" not in results
    assert "unlabeled" in results["data"] and "96 unlabeled images" in results["data"]
    assert results["evaluation"].startswith("off: the training images are unlabeled")
    assert "keras-hardneg evaluate" in proc.stdout
    assert "knn_accuracy" not in json.loads((out / "history.json").read_text())


def test_limit_per_class_limits_an_unlabeled_folder(flat):
    from keras_hardneg.data.sources import image_folder

    (x, y), test, description = image_folder(0, train=str(flat), image_size=8,
                                             limit_per_class=40)
    assert x.shape == (40, 8, 8, 3) and y is None and test is None
    assert "40 unlabeled images, limited" in description


def test_unlabeled_images_evaluate_on_a_labelled_folder_given_separately(flat, tmp_path,
                                                                        capsys):
    labelled = tmp_path / "labelled"
    for k, name in enumerate(("a", "b")):
        (labelled / name).mkdir(parents=True)
        for i in range(20):
            value = np.full((16, 16, 3), 40 + 150 * k + i, np.uint8)
            from PIL import Image

            Image.fromarray(value).save(labelled / name / f"{i}.png")
    recipe = tmp_path / "recipe.json"
    recipe.write_text(json.dumps({"data": {"name": "image_folder", "train": str(flat),
                                           "test": str(labelled), "image_size": 16},
                                  "encoder": {"name": "small_convnet", "width": 4},
                                  "batch_size": 32, "epochs": 1}))
    out = tmp_path / "run"
    proc = cli_user.run(capsys, "train", "--recipe", str(recipe), "--no-export",
                        "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    results = json.loads((out / "results.json").read_text())
    assert 0.0 <= results["knn_accuracy"] <= 1.0 and "knn_accuracy_epoch0" in results
    assert "evaluated on the labelled folder" in results["data"]
    assert "32 kNN/probe reference, 8 queries" in results["data"]


def test_a_flat_test_folder_or_folder_labels_on_a_flat_folder_are_one_line(flat, tmp_path,
                                                                          capsys):
    recipe = tmp_path / "recipe.json"
    recipe.write_text(json.dumps({"data": {"name": "image_folder", "train": str(flat),
                                           "test": str(flat), "image_size": 16},
                                  "epochs": 1}))
    proc = cli_user.run(capsys, "train", "--recipe", str(recipe), "--output", str(tmp_path / "a"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "data.test" in proc.stderr and "no class subfolders" in proc.stderr
    recipe.write_text(json.dumps({"data": {"name": "image_folder", "train": str(flat),
                                           "labels": "folders"}, "epochs": 1}))
    proc = cli_user.run(capsys, "train", "--recipe", str(recipe), "--output", str(tmp_path / "b"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "data.labels = 'folders'" in proc.stderr


def test_labels_key_is_checked():
    from keras_hardneg.data import dataset_spec

    with pytest.raises(ValueError, match="data.labels"):
        dataset_spec(ROOT, labels="maybe")
