"""What a new user ran into (issue 26), as the user sees it: one line on stderr and exit
status 2 instead of a traceback or a silent change, and nothing of theirs or of a finished
run rewritten. The refusals a user reads in a terminal run in a subprocess."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from keras_hardneg import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ["--width", "4", "--batch-size", "256", "--no-export", "--verbose", "0"]


def _cli(*argv, cwd=None):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "keras_hardneg.cli", *argv], cwd=cwd or ROOT,
                          capture_output=True, text=True, env=env, timeout=600)


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


def test_other_recipe_on_a_run_is_refused_naming_keys_and_way_out(run_dir):
    before = (run_dir / "recipe.json").read_bytes(), (run_dir / "results.json").read_bytes()
    proc = _cli("train", "--loss", "nt_xent", "--epochs", "2", *TINY, "--output", str(run_dir))
    _one_line_error(proc, "loss.name ('hard' -> 'nt_xent')", "--no-resume", "another --output")
    assert ((run_dir / "recipe.json").read_bytes(),
            (run_dir / "results.json").read_bytes()) == before


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
    proc = _cli("export", str(run_dir), "--output", str(mine), "--overwrite")
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


def test_quick_start_runs_twice(tmp_path, monkeypatch):
    """The README's quick start, run a second time in the same folder, exports again
    (it used to train and then fail on the existing export, losing the model)."""
    text = open(os.path.join(ROOT, "README.md")).read()
    block = re.search(r"## Quick start\n\n```python\n(.*?)```", text, re.S).group(1)
    block = block.replace("epochs=10", "epochs=1")
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        exec(compile(block, "README.md", "exec"), {})
    assert os.path.isfile(tmp_path / "my_encoder" / "saved_model.pb")
