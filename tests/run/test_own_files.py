"""``train`` never replaces a file it did not write (issue 33): a user's ``results.json``,
``history.json``, ``recipe.json`` or ``preset/`` in the output folder is refused in one line
naming it and the way out, with nothing in the folder touched; a run that fails before its
first epoch leaves the folder as it found it."""

import json
import os

import keras
import pytest

from keras_hardneg import cli, run
from keras_hardneg.run.resume import (RUN_FILES, RUN_MARKER, OutputDirError,
                                      check_own_files, is_own_run)

TRAIN = ["train", "--epochs", "1", "--width", "4", "--no-export", "--verbose", "0"]


def _snapshot(folder):
    """Every path under ``folder`` with its bytes (None for a folder)."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for d in dirs:
            out[os.path.relpath(os.path.join(root, d), folder)] = None
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                out[os.path.relpath(os.path.join(root, f), folder)] = fh.read()
    return out


@pytest.mark.parametrize("item", ["results.json", "history.json", "recipe.json", "preset"])
def test_a_users_file_of_a_run_name_is_refused_and_nothing_is_touched(item, tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "README.md").write_text("my notes\n")
    if item == "preset":
        (out / "preset").mkdir()
        (out / "preset" / "weights.bin").write_bytes(b"\x00\x01")
    else:
        (out / item).write_text('{"mine": true}\n')
    before = _snapshot(out)
    assert cli.main([*TRAIN, "--output", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"'{item}'" in err and "keras-hardneg did not write" in err, err
    assert "give another --output" in err and f"move '{item}' out of it" in err, err
    assert "overwrite=True" not in err
    assert _snapshot(out) == before


def test_train_beside_a_users_files_keeps_them_and_marks_its_run(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "README.md").write_text("my notes\n")
    assert cli.main([*TRAIN, "--output", str(out)]) == 0
    assert (out / "README.md").read_text() == "my notes\n"
    assert (out / RUN_MARKER).is_file() and is_own_run(str(out))
    written = set(os.listdir(out)) - {"README.md", RUN_MARKER}
    assert written <= set(RUN_FILES), written  # RUN_FILES names everything a run writes
    assert {"recipe.json", "results.json", "history.json", "backup", "preset"} <= written
    # Rerun: the folder is this package's run (complete: nothing rewritten).
    results = (out / "results.json").read_bytes()
    assert cli.main([*TRAIN, "--output", str(out)]) == 0
    assert (out / "results.json").read_bytes() == results
    # A run of a version before the marker (recipe.json beside backup/) is still its own.
    os.remove(out / RUN_MARKER)
    assert is_own_run(str(out))
    check_own_files(str(out))
    assert cli.main([*TRAIN, "--output", str(out)]) == 0


def test_a_users_recipe_equal_to_the_run_recipe_is_left_as_it_is(tmp_path):
    recipe = run.load_recipe({"epochs": 1})
    out = tmp_path / "mine"
    out.mkdir()
    (out / "recipe.json").write_text(json.dumps(json.loads(json.dumps(recipe, default=str))))
    check_own_files(str(out), recipe)  # the same recipe: nothing would change
    with pytest.raises(OutputDirError, match="'recipe.json', which keras-hardneg did not"):
        check_own_files(str(out), run.load_recipe({"epochs": 2}))


class _Fail(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        raise RuntimeError("boom")


@pytest.mark.parametrize("existed", [False, True])
def test_a_failed_train_leaves_the_folder_as_it_found_it(existed, tmp_path):
    out = tmp_path / "run"
    if existed:
        out.mkdir()
        (out / "README.md").write_text("my notes\n")
    before = _snapshot(out) if existed else None
    recipe = {"epochs": 1, "encoder": {"name": "small_convnet", "width": 4},
              "data": {"name": "digits"}}
    with pytest.raises(RuntimeError, match="boom"):
        run.train(recipe, str(out), verbose=0, export=False, extra_callbacks=[_Fail()])
    if existed:
        assert _snapshot(out) == before
    else:
        assert not out.exists()
