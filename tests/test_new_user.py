"""What a new user ran into (issue 26), as the user sees it: one line on stderr and exit
status 2 instead of a traceback or a silent change, and nothing of theirs or of a finished
run rewritten. The CLI runs in this process (``tests/cli_user.py``)."""

import json
import os
import shutil

import pytest

import cli_user
from keras_hardneg import cli

TINY = ["--width", "4", "--batch-size", "256", "--no-export", "--verbose", "0"]


def _one_line_error(proc, *needles):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("newuser") / "run"
    assert cli.main(["train", "--epochs", "2", *TINY, "--output", str(out)]) == 0
    return out


def test_other_recipe_on_a_run_is_refused_naming_keys_and_way_out(run_dir, capsys):
    before = (run_dir / "recipe.json").read_bytes(), (run_dir / "results.json").read_bytes()
    proc = cli_user.run(capsys, "train", "--loss", "nt_xent", "--epochs", "2", *TINY,
                        "--output", str(run_dir))
    _one_line_error(proc, "loss.name ('hard' -> 'nt_xent')", "--no-resume", "another --output")
    assert ((run_dir / "recipe.json").read_bytes(),
            (run_dir / "results.json").read_bytes()) == before


@pytest.mark.heavy  # heavy tier since 2026-11-29 (suite time: docs/notes/suite_time.md)
def test_damaged_checkpoints_name_no_resume(run_dir, tmp_path, capsys):
    broken = tmp_path / "broken"
    shutil.copytree(run_dir, broken)
    meta = json.loads((broken / "backup" / "training_metadata.json").read_text())
    for entry in (meta, meta["previous"]):  # both the latest backup and the one before it
        (broken / "backup" / entry["weights"]).write_bytes(b"garbage")
    code = cli.main(["train", "--epochs", "3", *TINY, "--output", str(broken), "--no-resume"])
    assert code == 0  # --no-resume starts over whatever the backup holds
    meta = json.loads((broken / "backup" / "training_metadata.json").read_text())
    (broken / "backup" / meta["weights"]).write_bytes(b"garbage")
    (broken / "backup" / meta["previous"]["weights"]).write_bytes(b"garbage")
    (broken / "results.json").unlink()  # an interrupted run: it has to resume
    capsys.readouterr()
    assert cli.main(["train", "--epochs", "3", *TINY, "--output", str(broken)]) == 2
    err = capsys.readouterr().err.strip()
    assert "cannot be loaded" in err and "--no-resume" in err and "\n" not in err


def test_export_defaults_to_run_encoder_and_never_deletes_a_users_folder(run_dir, tmp_path,
                                                                         capsys):
    assert cli.main(["export", str(run_dir)]) == 0  # the hint a JAX run prints, as printed
    assert (run_dir / "encoder" / "saved_model.pb").is_file()
    assert cli.main(["export", str(run_dir), "--overwrite"]) == 0  # our own export: replaced
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    proc = cli_user.run(capsys, "export", str(run_dir), "--output", str(mine), "--overwrite")
    _one_line_error(proc, "not an encoder exported by keras-hardneg", "notes.txt")
    assert (mine / "notes.txt").read_text() == "keep me"


@pytest.mark.parametrize("command", [["train", *TINY], ["tune", "--trials", "1"]])
def test_output_that_is_a_file_is_one_line(command, tmp_path, capsys):
    f = tmp_path / "file.txt"
    f.write_text("x")
    for output, needle in ((f, "is a file, not a folder"), (f / "run", "lies under the file")):
        capsys.readouterr()
        assert cli.main([*command, "--output", str(output)]) == 2
        err = capsys.readouterr().err
        assert needle in err and "--output" in err and err.count("\n") == 1, err


def test_export_output_under_a_file_is_one_line(run_dir, tmp_path, capsys):
    f = tmp_path / "file.txt"
    f.write_text("x")
    assert cli.main(["export", str(run_dir), "--output", str(f / "enc")]) == 2
    err = capsys.readouterr().err
    assert "is a file" in err and err.count("\n") == 1, err
    assert cli.main(["export", str(run_dir), "--output", str(f), "--overwrite"]) == 2
    assert "is not a folder" in capsys.readouterr().err and f.read_text() == "x"


# The quick start run twice in one folder: tests/test_readme.py.


def _image_folder(root, size=32):
    from PIL import Image
    import numpy as np

    for split in ("train", "test"):
        for label in ("a", "b"):
            os.makedirs(root / split / label)
            for i in range(3):
                pixels = np.random.default_rng(i).integers(0, 255, (size, size, 3), "uint8")
                Image.fromarray(pixels).save(root / split / label / f"{i}.png")
    return root


def test_small_encoder_on_larger_images_suggests_image_size(run_dir, tmp_path, capsys):
    images = _image_folder(tmp_path / "imgs")
    exported = tmp_path / "enc"
    assert cli.main(["export", str(run_dir), "--output", str(exported)]) == 0
    for encoder in (run_dir, exported):  # rebuilt from the checkpoint, and the SavedModel
        capsys.readouterr()
        assert cli.main(["evaluate", str(encoder), "--dataset", str(images)]) == 2
        err = capsys.readouterr().err
        assert "takes 8x8 images, the data are 32x32: pass --image-size 8" in err, err
        assert err.count("\n") == 1, err
    assert cli.main(["evaluate", str(exported), "--dataset", str(images), "--image-size", "8",
                     "--no-linear-probe"]) == 0


def test_saved_model_refuses_other_image_sizes_in_one_line(run_dir, tmp_path):
    import numpy as np

    from keras_hardneg import export

    exported = tmp_path / "enc"
    assert cli.main(["export", str(run_dir), "--output", str(exported)]) == 0
    encoder = export.load_encoder(str(exported))
    assert encoder(np.zeros((2, 8, 8, 3), "float32")).shape[0] == 2
    with pytest.raises(ValueError, match=r"takes images \[B, 8, 8, 3\] .*got \[B, 32, 32, 3\]"
                                         r".*--image-size 8"):
        encoder(np.zeros((2, 32, 32, 3), "float32"))


def test_zoo_entry_folder_says_what_to_pass(tmp_path, capsys):
    trained = tmp_path / "trained"
    (trained / "encoder").mkdir(parents=True)
    (trained / "encoder" / "saved_model.pb").write_bytes(b"")
    recipe_only = tmp_path / "recipe_only"
    recipe_only.mkdir()
    for entry in (trained, recipe_only):
        (entry / "recipe.json").write_text("{}")
    assert cli.main(["evaluate", str(trained)]) == 2
    assert f"model zoo entry: pass its encoder, '{trained / 'encoder'}'" in capsys.readouterr().err
    assert cli.main(["evaluate", str(recipe_only)]) == 2
    err = capsys.readouterr().err
    assert "not trained" in err and "keras-hardneg train --recipe" in err


def test_tu_folder_without_graph_indicator_names_the_file(tmp_path, capsys):
    tu = tmp_path / "MUTAG"
    tu.mkdir()
    for part in ("A", "graph_labels"):
        (tu / f"MUTAG_{part}.txt").write_text("1, 2\n")
    assert cli.main(["train", "--dataset", str(tu), "--epochs", "1"]) == 2
    err = capsys.readouterr().err
    assert "looks like a TU graph folder" in err and "no MUTAG_graph_indicator.txt" in err, err


def test_version_flag(capsys):
    from keras_hardneg import __version__

    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"keras-hardneg {__version__}"
