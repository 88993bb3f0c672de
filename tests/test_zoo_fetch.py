"""The zoo on a user's machine (issue 47 items 3-6, 8, 9; issue 48 item 1): what an entry
needs is checked before fetching, a damaged cache is named and fetched again, `zoo show`
reads the index, fetches write plain lines into logs, concurrent fetches give one copy, a
typo gets "did you mean", and only our own models/ is taken for the zoo. Loopback only."""

import os

import pytest

import keras_hardneg as khn
from keras_hardneg import cli, zoo_store
from tests import _loopback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(ROOT, "models")
GRAPH = "graphcl-ntxent-mutag"


@pytest.fixture
def no_clone(tmp_path, monkeypatch):
    """The zoo as a site-packages install sees it: no models/ beside the package, no
    $KERAS_HARDNEG_ZOO, an empty cache in tmp_path."""
    monkeypatch.setattr(khn.zoo, "_beside_package", lambda: str(tmp_path / "site" / "models"))
    monkeypatch.delenv(khn.zoo.ZOO_ENV, raising=False)
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras_home"))
    for key in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(key, "127.0.0.1")
    assert khn.zoo.zoo_source() == ("cache", None)


@pytest.fixture
def host(tmp_path, no_clone):
    www = tmp_path / "www"
    _loopback.copy_entry(GRAPH, str(www / "models"))
    server = _loopback.Server(str(www))
    server.zoo = server.url + "/models"
    yield server
    server.close()


def test_another_packages_models_folder_is_not_taken_for_the_zoo(tmp_path, monkeypatch):
    """Issue 48, item 1: in site-packages, ``models/`` beside the package may be another
    distribution's package; only a folder holding entries of our index is the zoo."""
    monkeypatch.delenv(khn.zoo.ZOO_ENV, raising=False)
    foreign = tmp_path / "site" / "models"
    (foreign / "resnet").mkdir(parents=True)
    (foreign / "__init__.py").write_text("")
    (foreign / "resnet" / "recipe.json").write_text("{}")  # not a name of our index
    monkeypatch.setattr(khn.zoo, "_beside_package", lambda: str(foreign))
    assert khn.zoo.zoo_source() == ("cache", None)
    assert not khn.zoo.is_zoo_folder(str(foreign))
    monkeypatch.setattr(khn.zoo, "_beside_package", lambda: MODELS)
    assert khn.zoo.zoo_source() == ("folder", MODELS) and khn.zoo.is_zoo_folder(MODELS)


def test_an_entry_that_needs_an_extra_is_refused_before_any_fetch(host, monkeypatch):
    """Item 3: without keras-hub, the MiniLM entry names the [pretrained] extra at once;
    nothing is requested (it fetched 45 MB, then failed to deserialize)."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "keras_hub" else real(name, *a))
    name = "simcse-minilm-ntxent-wiki"
    assert zoo_store.read_index()[name]["needs"] == ["keras_hub"]
    with pytest.raises(khn.zoo.ZooError, match=r"needs keras-hub.*\[pretrained\]"):
        khn.zoo.load(name, zoo=host.zoo)
    assert host.requests == []
    with pytest.raises(khn.zoo.ZooError, match=r"\[pretrained\]"):  # from a zoo folder too
        khn.zoo.load(name, zoo=MODELS)


def _damage(path):
    with open(path, "r+b") as f:
        f.seek(-100, 2)
        byte = f.read(1)
        f.seek(-100, 2)
        f.write(bytes([byte[0] ^ 0xFF]))


def test_a_damaged_cached_entry_is_named_and_fetched_again(host, capsys):
    """Item 4: one byte changed in the cached weights: the error says the cached copy is
    damaged and what to do (it said "not in the cache ... no zoo is set"); `zoo list` says
    "damaged" (it said "not here"); with a zoo URL the entry is fetched again."""
    khn.zoo.load(GRAPH, zoo=host.zoo)
    cached = os.path.join(zoo_store.cache_root(), GRAPH)
    _damage(os.path.join(cached, "preset", "model.weights.h5"))
    with pytest.raises(khn.zoo.ZooError) as err:
        khn.zoo.load(GRAPH)
    message = str(err.value)
    assert "is damaged (preset/model.weights.h5: SHA-256 differs)" in message, message
    assert khn.zoo.ZOO_ENV in message and cached in message and "not in the cache" not in message
    assert {r["name"]: r["where"] for r in khn.zoo.catalog()}[GRAPH] == "damaged"
    capsys.readouterr()
    assert cli.main(["zoo", "list"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith(GRAPH))
    assert row.endswith("damaged") and "damaged:" in out
    count = len(host.requests)
    model = khn.zoo.load(GRAPH, zoo=host.zoo)  # fetched again, replacing the damaged copy
    assert len(host.requests) == count + len(zoo_store.read_index()[GRAPH]["files"])
    assert model.preset_metadata["path"] == os.path.join(cached, "preset")
    assert zoo_store.cached_entry(GRAPH, zoo_store.read_index()[GRAPH]) == cached


def test_zoo_show_reads_the_index_without_a_host_or_a_fetch(host, capsys, monkeypatch):
    """Item 5: `zoo show` exited 2 without a host and fetched 22.7 MB with one; the index
    holds what it prints."""
    assert cli.main(["zoo", "show", GRAPH]) == 0
    out = capsys.readouterr().out
    assert "SVM" in out and "not here" in out and "graph" in out
    monkeypatch.setenv(khn.zoo.ZOO_ENV, host.zoo)
    assert cli.main(["zoo", "show", GRAPH]) == 0
    out = capsys.readouterr().out
    assert "not fetched yet" in out and "SVM" in out and "parameters" in out
    assert host.requests == []
    info = khn.zoo.show(GRAPH)
    assert info["path"] is None and info["where"] == "fetch"
    assert info["preset"]["modality"] == "graph" and info["figures"].startswith("SVM")
    khn.zoo.load(GRAPH)
    assert khn.zoo.show(GRAPH)["where"] == "cached"  # then from the cached files


def test_a_fetch_into_a_log_writes_one_plain_line(host, capsys):
    """Item 6: in a pipe or a log, no progress bars, no \\r or colour codes, and not one
    "Downloading data from" line per file: one line for the entry."""
    khn.zoo.load(GRAPH, zoo=host.zoo)
    out = capsys.readouterr().out
    assert "\r" not in out and "\x1b" not in out and "Downloading data from" not in out
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"fetching zoo entry {GRAPH} ("), lines
    # the entry's files as the guide lists them: history.json with the figures
    cached = os.path.join(zoo_store.cache_root(), GRAPH)
    for name in ("history.json", "results.json", "recipe.json", "model_card.md"):
        assert os.path.isfile(os.path.join(cached, name)), name


def test_loads_of_one_entry_at_once_fetch_it_once(tmp_path, no_clone):
    """Item 8 (threads; processes and SIGKILL: tests/test_zoo_fetch_processes.py, heavy):
    four loads at once while the server holds each file half-sent: each file requested
    once, every load gets the one verified copy."""
    www = tmp_path / "www"
    _loopback.copy_entry(GRAPH, str(www / "models"))
    slow = _loopback.Server(str(www), delay=0.2)
    try:
        got, errors = _loopback.in_threads(
            lambda: khn.zoo.load(GRAPH, zoo=slow.url + "/models").preset_metadata["path"])
    finally:
        slow.close()
    files = zoo_store.read_index()[GRAPH]["files"]
    assert not errors and len(got) == 4 and len(set(got)) == 1, errors
    assert len(slow.requests) == len(files) == len(set(slow.requests))
    root = zoo_store.cache_root()
    assert sorted(os.listdir(root)) == [GRAPH]


def test_a_typo_gets_did_you_mean_and_list_has_no_empty_legend(no_clone, capsys):
    """Item 9: a mistyped name gets the closest entries; `zoo list` prints a "cached:"
    legend only when something is cached."""
    with pytest.raises(khn.zoo.ZooError, match="Did you mean simclr-hard-cifar10"):
        khn.zoo.load("simclr-hard-cifr10")
    assert cli.main(["zoo", "show", "graphcl-ntxnet-mutag"]) == 2
    assert "Did you mean graphcl-ntxent-mutag" in capsys.readouterr().err
    assert cli.main(["zoo", "list"]) == 0
    out = capsys.readouterr().out
    assert "cached:" not in out and "not here:" in out
