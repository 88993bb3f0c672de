"""The zoo index shipped in the package (issue 35): it agrees with models/, is package data,
and the cache / fetch rules of keras_hardneg.zoo_store (loopback only)."""

import configparser
import os

import pytest

from keras_hardneg import zoo_store

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(ROOT, "models")


def test_the_shipped_index_agrees_with_models():
    """Regenerated in memory from models/ (every file hashed), the index equals the one in
    the package; when it does not, `python models/make_index.py` rewrites it."""
    shipped = zoo_store.read_index()
    built = zoo_store.build_index(MODELS)["entries"]
    assert sorted(built) == sorted(shipped), "run python models/make_index.py"
    for name, record in built.items():
        assert record == shipped[name], f"{name}: run python models/make_index.py"
    with_weights = [n for n, r in shipped.items() if r["status"] == "weights"]
    assert len(with_weights) >= 9 and len(shipped) > 40
    for name in with_weights:
        files = shipped[name]["files"]
        assert {"preset/config.json", "preset/metadata.json", "preset/model.weights.h5",
                "results.json"} <= set(files), name
        assert not any(f.startswith("encoder/") for f in files), name  # rebuilt by export
    assert shipped["moco_v2-ntxent-stl10"]["why_no_weights"].startswith("needs a GPU; data not")


def test_the_index_is_package_data():
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(ROOT, "setup.cfg"))
    assert "zoo_index.json" in cfg["options.package_data"]["keras_hardneg"].split()
    assert os.path.dirname(zoo_store.INDEX_PATH) == os.path.join(ROOT, "keras_hardneg")
