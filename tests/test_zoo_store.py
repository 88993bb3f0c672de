"""The zoo index shipped in the package (issue 35): it agrees with models/, is package data,
and the cache / fetch rules of keras_hardneg.zoo_store (loopback only)."""

import configparser
import json
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
    assert shipped["moco_v2-ntxent-stl10"]["why_no_weights"] == "needs a GPU"
    assert shipped["moco_v2-ntxent-imagenet"]["why_no_weights"] == (
        "needs a GPU; data: a manual download (tfds imagenet2012)")


def test_the_index_is_package_data():
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(ROOT, "setup.cfg"))
    assert "zoo_index.json" in cfg["options.package_data"]["keras_hardneg"].split()
    assert os.path.dirname(zoo_store.INDEX_PATH) == os.path.join(ROOT, "keras_hardneg")


# ---------------------------------------------------------------- loopback zoo (issue 35)
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

from tests import _loopback  # noqa: E402

GRAPH, IMAGE = "graphcl-ntxent-mutag", "simclr-ntxent-cifar10-r18w8-cpu"


@pytest.fixture
def served(tmp_path, monkeypatch):
    """``www/models`` (the two smallest entries with weights, copied from models/) and
    ``www/tampered`` (the graph entry with one byte of its weights changed), served on
    loopback; ``KERAS_HOME`` in ``tmp_path``."""
    www = tmp_path / "www"
    for name in (GRAPH, IMAGE):
        _loopback.copy_entry(name, str(www / "models"))
    _loopback.copy_entry(GRAPH, str(www / "tampered"))
    weights = www / "tampered" / GRAPH / "preset" / "model.weights.h5"
    data = bytearray(weights.read_bytes())
    data[-100] ^= 0xFF  # same size: only the SHA-256 tells
    weights.write_bytes(bytes(data))
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras_home"))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    zoo = _loopback.Server(str(www))
    yield zoo
    zoo.close()


@pytest.mark.heavy  # two child processes (~31 CPU-s); in one process: tests/test_zoo_fetch.py
@pytest.mark.timeout(1700)  # two children: 129 s here once; a starved TF import took 8 min
def test_a_non_editable_install_fetches_verifies_and_caches_entries(served, tmp_path):
    """The package copied alone into a site folder (no models/ beside it, as `pip install .`
    leaves it) with KERAS_HARDNEG_ZOO=http://127.0.0.1:PORT/models: list, load under TF
    (fetched once, equal to models/; the second load, show, list and export make no
    request; offline with a warm cache; a damaged cache fetched again; a tampered host file
    refused in one line with nothing cached) and load under JAX (its own fetch, the same
    features, no TensorFlow imported). See tests/_zoo_remote_child.py."""
    site = tmp_path / "site"
    shutil.copytree(os.path.join(ROOT, "keras_hardneg"), site / "keras_hardneg",
                    ignore=shutil.ignore_patterns("__pycache__"))
    assert not (site / "models").exists()
    out = tmp_path / "out"
    out.mkdir()
    child = os.path.join(ROOT, "tests", "_zoo_remote_child.py")
    env = dict(os.environ, PYTHONPATH=str(site), KERAS_HARDNEG_ZOO=served.url + "/models",
               ZOO_TEST_SITE=str(site), ZOO_TEST_MODELS=MODELS, TF_CPP_MIN_LOG_LEVEL="3",
               JAX_PLATFORMS="cpu")
    for mode, home in (("tf", "home_tf"), ("jax", "home_jax")):
        env.update(KERAS_BACKEND="tensorflow" if mode == "tf" else "jax",
                   KERAS_HOME=str(tmp_path / home))
        done = subprocess.run([sys.executable, child, mode, str(out)], cwd=str(tmp_path),
                              env=env, capture_output=True, text=True, timeout=800)
        assert done.returncode == 0 and f"OK {mode}" in done.stdout, (
            f"{mode}: {done.stdout[-2000:]}\n{done.stderr[-4000:]}")
        print(mode, *[line for line in done.stderr.splitlines() if line.startswith("[")],
              sep="\n  ")  # where the child's time went (pytest -s shows it)
    # What the server saw: each file of the two entries fetched by TF (the image entry twice:
    # once more after its cache was damaged), the image entry by JAX, the tampered try.
    files = {n: len(zoo_store.read_index()[n]["files"]) for n in (GRAPH, IMAGE)}
    fetched = [p for p in served.requests if p.startswith("/models/")]
    assert len(fetched) == files[GRAPH] + 3 * files[IMAGE], served.requests
    assert any(p.startswith("/tampered/") for p in served.requests)


def test_publish_writes_a_hosting_folder_that_serves_as_a_zoo(tmp_path, monkeypatch, capsys):
    """`zoo publish NAME DIR` writes DIR/NAME (the fetched files + zoo_record.json, the
    index record); DIR served over loopback is a zoo URL the entry loads from. A DIR with
    the user's files is refused, untouched; publishing again needs --overwrite."""
    import numpy as np

    import keras_hardneg as khn
    from keras_hardneg import cli
    from keras_hardneg.export.preset import example_input, load_preset

    hub = tmp_path / "hub"
    assert cli.main(["zoo", "publish", GRAPH, str(hub)]) == 0
    record = json.loads((hub / GRAPH / zoo_store.RECORD_FILE).read_text())["record"]
    assert record == zoo_store.read_index()[GRAPH]
    assert sorted(p.name for p in hub.iterdir()) == [GRAPH]
    assert cli.main(["zoo", "publish", GRAPH, str(hub)]) == 2
    assert "already published" in capsys.readouterr().err
    assert cli.main(["zoo", "publish", GRAPH, str(hub), "--overwrite"]) == 0
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="did not publish .*notes.txt"):
        khn.zoo.publish(GRAPH, str(mine))
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    assert (mine / "notes.txt").read_text() == "mine"

    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras_home"))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    zoo = _loopback.Server(str(hub))
    try:
        model = khn.zoo.load(GRAPH, trainable=False, zoo=zoo.url)
        assert len(zoo.requests) == len(record["files"])
        khn.zoo.load(GRAPH, zoo=zoo.url)
        assert len(zoo.requests) == len(record["files"])  # cached
    finally:
        zoo.close()
    probe = example_input("graph", model.preset_metadata["input"])
    want = load_preset(os.path.join(MODELS, GRAPH, "preset"))(probe, training=False)
    assert np.array_equal(np.asarray(model(probe, training=False)), np.asarray(want))


def test_zoo_list_all_puts_the_recipes_in_a_second_table(capsys):
    from keras_hardneg import cli

    assert cli.main(["zoo", "list", "--all"]) == 0
    out = capsys.readouterr().out
    weights, recipes = out.split("Recipes without weights")
    assert f"{GRAPH} " in weights and "here" in weights.splitlines()[1]
    assert "moco_v2-ntxent-stl10" not in weights
    line = next(x for x in recipes.splitlines() if x.startswith("moco_v2-ntxent-stl10 "))
    assert line.endswith("needs a GPU")


def test_a_zoo_that_is_neither_a_folder_nor_a_url_is_refused_in_one_line(tmp_path):
    import keras_hardneg as khn

    with pytest.raises(khn.zoo.ZooError, match="no such folder, and not a URL"):
        khn.zoo.load(GRAPH, zoo=str(tmp_path / "absent"))
    assert zoo_store.is_url("https://example.org/models") and zoo_store.is_url("file:///m")
    assert not zoo_store.is_url("models") and not zoo_store.is_url("ftp://h/m")


def test_listing_the_cache_hashes_each_file_once_until_it_changes(tmp_path, monkeypatch):
    """``zoo.list()`` (and ``load``) check a cached entry by SHA-256; a file already hashed
    at the same path, size, mtime, ctime and inode is not read again, so listing the zoo
    does not re-hash every cached file on each call. A changed file (same size) is hashed
    again and the entry is no longer intact."""
    from keras_hardneg import zoo

    name = GRAPH
    record = zoo_store.read_index()[name]
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "home"))
    root = zoo_store.cache_root()
    _loopback.copy_entry(name, root)
    with open(os.path.join(root, name, zoo_store.RECORD_FILE), "w") as f:
        json.dump({"format": 1, "name": name, "source": "test", "record": record}, f)
    hashed = []
    real = zoo_store.sha256_file
    monkeypatch.setattr(zoo_store, "sha256_file", lambda p: hashed.append(p) or real(p))
    monkeypatch.setattr(zoo, "zoo_source", lambda z=None: ("cache", None))

    assert name in zoo.list(available=True)
    first = len(hashed)
    assert first == len(record["files"])
    assert name in zoo.list(available=True) and zoo_store.cached_entry(name, record)
    assert len(hashed) == first  # nothing read again

    weights = os.path.join(root, name, "preset", "model.weights.h5")
    data = bytearray(open(weights, "rb").read())
    data[-100] ^= 0xFF  # same size: only the hash tells
    with open(weights, "wb") as f:
        f.write(bytes(data))
    assert zoo_store.cached_entry(name, record) is None
    assert name not in zoo.list(available=True) and name in zoo.list()
    assert hashed[first:] and all(p == weights for p in hashed[first:])


def test_on_a_fresh_machine_list_names_every_entry_with_weights(tmp_path, monkeypatch, capsys):
    """No zoo set, nothing cached: ``zoo.list()`` and ``zoo list --json`` name the entries
    the table shows (every one with weights in the shipped index); ``available=True``
    none, since ``load`` would need a zoo to fetch them from."""
    from keras_hardneg import cli, zoo

    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(zoo, "zoo_source", lambda z=None: ("cache", None))
    weights = sorted(n for n, r in zoo_store.read_index().items() if r["status"] == "weights")
    assert zoo.list() == weights and len(weights) > 2
    assert zoo.list(available=True) == []
    assert cli.main(["zoo", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == weights
