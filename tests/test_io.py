"""keras_hardneg._io: atomic JSON and directory replacement."""

import json
import os

import pytest

from keras_hardneg import _io


def _dir(path, text):
    os.makedirs(path)
    with open(os.path.join(path, "f.txt"), "w") as f:
        f.write(text)


def _read(path):
    with open(os.path.join(path, "f.txt")) as f:
        return f.read()


def test_atomic_write_json_replaces_whole_file(tmp_path):
    p = tmp_path / "a.json"
    _io.atomic_write_json(p, {"x": 1})
    _io.atomic_write_json(p, [1, 2], indent=1)
    assert json.loads(p.read_text()) == [1, 2]
    assert os.listdir(tmp_path) == ["a.json"]


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "two-renames"])
def test_atomic_replace_dir(tmp_path, monkeypatch, exchange):
    if not exchange:
        monkeypatch.setattr(_io, "_rename_exchange", lambda a, b: False)
    dst = tmp_path / "dst"
    _dir(tmp_path / "new1", "one")
    _io.atomic_replace_dir(tmp_path / "new1", dst)            # dst absent: plain rename
    assert _read(dst) == "one"
    _dir(tmp_path / "new2", "two")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        _io.atomic_replace_dir(tmp_path / "new2", dst)
    assert _read(dst) == "one"
    _io.atomic_replace_dir(tmp_path / "new2", dst, overwrite=True, old_prefix=".old-")
    assert _read(dst) == "two"
    assert sorted(os.listdir(tmp_path)) == ["dst"]           # src gone, no old copy left


def test_atomic_replace_dir_refuses_a_file(tmp_path):
    (tmp_path / "dst").write_text("x")
    _dir(tmp_path / "new", "n")
    with pytest.raises(FileExistsError, match="not a directory"):
        _io.atomic_replace_dir(tmp_path / "new", tmp_path / "dst", overwrite=True)
    assert (tmp_path / "dst").read_text() == "x"
