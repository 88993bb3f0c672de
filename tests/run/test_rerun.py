"""Rerunning ``train`` into an existing run directory (issue 26): a different recipe is
refused before anything is written, a finished run's files are never rewritten, and a run
interrupted mid-epoch resumes to exactly the epochs of an uninterrupted run (the random
state travels with the backup)."""

import json
import os

import keras
import pytest

# Heavy tier since 2026-11-29 (three CLI runs a test, ~60 s each on 2 cores; suite time:
# docs/notes/suite_time.md).
pytestmark = pytest.mark.heavy

from keras_hardneg import run
from keras_hardneg.run.resume import OutputDirError, check_output_dir, recipe_differences

TINY = {"encoder": {"name": "small_convnet", "width": 4}, "projection_dims": [8, 8],
        "data": {"name": "digits", "test_fraction": 0.75}, "batch_size": 64, "epochs": 2,
        "evaluation": {"monitor_every": 0, "linear_probe": False, "knn_k": 5}}


class _Interrupt(Exception):
    pass


class _KillAt(keras.callbacks.Callback):
    """Stands in for a kill: raises after batch ``batch`` of epoch ``epoch`` (the backup
    then holds the epochs before it, as after a SIGKILL)."""

    def __init__(self, epoch, batch):
        super().__init__()
        self.at, self.epoch = (epoch, batch), 0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if (self.epoch, batch) == self.at:
            raise _Interrupt()


def _files(out):
    return {name: (out / name).read_bytes() for name in ("recipe.json", "results.json")
            if (out / name).exists()}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    out = tmp_path_factory.mktemp("rerun") / "run"
    result = run.train(TINY, str(out), verbose=0, export=False)
    return out, result


def test_interrupted_run_resumes_to_the_uninterrupted_epochs(finished, tmp_path, capsys):
    out, uninterrupted = finished
    with pytest.raises(_Interrupt):
        run.train(TINY, str(tmp_path / "run"), verbose=0, export=False,
                  extra_callbacks=[_KillAt(1, 2)])
    capsys.readouterr()
    resumed = run.train(TINY, str(tmp_path / "run"), verbose=2, export=False)
    assert "resuming from epoch 1 (of 2)" in capsys.readouterr().out
    assert resumed["epochs_trained_now"] == 1
    # Same weights, optimizer, data order and augmentation draws: the same losses, bit for bit.
    assert resumed["history"]["loss"] == uninterrupted["history"]["loss"]


def test_other_recipe_is_refused_before_anything_is_written(finished):
    out, _ = finished
    before = _files(out)
    for change, key in (({"loss": {"name": "nt_xent"}}, "loss.name"),
                        ({"encoder": {"name": "small_convnet", "width": 8}}, "encoder.width"),
                        ({"epochs": 5}, "epochs")):
        with pytest.raises(OutputDirError, match=rf"differs in {key} \(.*resume=False.*another "
                                                 "output folder"):
            run.train({**TINY, **change}, str(out), verbose=0, export=False)
        assert _files(out) == before


def test_finished_run_is_not_rewritten(finished, capsys):
    out, first = finished
    before = _files(out)
    again = run.train(TINY, str(out), verbose=1, export=False)
    assert "the run is complete" in capsys.readouterr().out
    assert _files(out) == before  # results.json's seconds included
    assert again["seconds"] == first["seconds"] and again["epochs_trained_now"] == 0
    assert again["history"]["loss"] == first["history"]["loss"]


def test_no_resume_starts_over_with_the_new_recipe(tmp_path):
    out = tmp_path / "run"
    run.train({**TINY, "epochs": 1}, str(out), verbose=0, export=False)
    run.train({**TINY, "epochs": 1, "loss": {"name": "nt_xent"}}, str(out), resume=False,
              verbose=0, export=False)
    assert json.loads((out / "recipe.json").read_text())["loss"]["name"] == "nt_xent"


def test_no_resume_leaves_nothing_of_the_earlier_run(tmp_path):
    """Starting over removes the earlier run's outputs (a stale ``encoder/`` whose card
    described the earlier recipe), never a file of the user's beside them."""
    out = tmp_path / "run"
    run.train({**TINY, "epochs": 1}, str(out), verbose=0, export=False)
    (out / "encoder").mkdir()  # as an earlier exported run leaves it
    (out / "encoder" / "model_card.json").write_text('{"epochs_run": 1}')
    (out / "README.md").write_text("my notes\n")
    run.train({**TINY, "epochs": 1, "seed": 1}, str(out), resume=False, verbose=0,
              export=False)
    assert not (out / "encoder").exists()
    assert (out / "README.md").read_text() == "my notes\n"
    assert json.loads((out / "recipe.json").read_text())["seed"] == 1
    assert json.loads((out / "history.json").read_text())["loss"]  # the new run's


def test_recipe_differences_names_dotted_keys():
    assert recipe_differences({"a": {"b": 1, "c": [1, 2]}, "d": 0},
                              {"a": {"b": 2, "c": (1, 2)}, "d": 0, "e": 1}) == ["a.b", "e"]


def test_output_that_is_a_file_or_unwritable_is_one_line(tmp_path, monkeypatch):
    f = tmp_path / "notes.txt"
    f.write_text("mine")
    with pytest.raises(OutputDirError, match="is a file, not a folder"):
        check_output_dir(str(f))
    with pytest.raises(OutputDirError, match="lies under the file"):
        check_output_dir(str(f / "run"))

    def refuse(*args, **kwargs):
        raise PermissionError(30, "Read-only file system")

    monkeypatch.setattr(os, "makedirs", refuse)
    with pytest.raises(OutputDirError, match="cannot be written .Read-only file system"):
        check_output_dir(str(tmp_path / "new"))
    assert f.read_text() == "mine"
