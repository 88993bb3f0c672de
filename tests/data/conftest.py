"""Fixtures for the data tests: a small image folder with deliberately bad files; a loopback
server as the public hosts' mirror."""

import io

import numpy as np
import pytest
from PIL import Image

from keras_hardneg.data import fetch
from tests import _loopback


def _jpeg_bytes(rng, size=(12, 10)):
    array = rng.integers(0, 256, size=(size[1], size[0], 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


@pytest.fixture
def messy_folder(tmp_path):
    """root/{cat,dog}: 3 good JPEGs each (12x10), plus in ``dog``: a truncated JPEG, a text
    file named .jpg, a grayscale PNG, an RGBA PNG; plus a non-image notes.txt in ``cat``.

    Usable images: cat 3, dog 3 + gray + rgba = 5; bad: 2.
    """
    rng = np.random.default_rng(0)
    root = tmp_path / "messy"
    for name in ("cat", "dog"):
        (root / name).mkdir(parents=True)
        for i in range(3):
            (root / name / f"{i:02d}.jpg").write_bytes(_jpeg_bytes(rng))
    good = _jpeg_bytes(rng)
    (root / "dog" / "10_truncated.jpg").write_bytes(good[: len(good) // 2])
    (root / "dog" / "11_text.jpg").write_text("this is not an image\n")
    gray = rng.integers(0, 256, size=(10, 12), dtype=np.uint8)
    Image.fromarray(gray, mode="L").save(root / "dog" / "12_gray.png")
    rgba = rng.integers(0, 256, size=(10, 12, 4), dtype=np.uint8)
    Image.fromarray(rgba, mode="RGBA").save(root / "dog" / "13_rgba.png")
    (root / "cat" / "notes.txt").write_text("not an image either")
    return root


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    """An empty served folder ``www`` as the data mirror; KERAS_HOME in tmp_path."""
    www = tmp_path / "www"
    www.mkdir()
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras_home"))
    for key in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(key, "127.0.0.1")
    server = _loopback.Server(str(www))
    monkeypatch.setenv(fetch.MIRROR_ENV, server.url)
    server.www = www
    yield server
    server.close()
