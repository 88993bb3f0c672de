"""BEIR sets by name: fetched once from a loopback server standing in for BEIR's host
($KERAS_HARDNEG_DATA_MIRROR), the zip's MD5 and (where recorded) each file's SHA-256
checked, only the set's own files extracted, cached; one clear line without network. The
tiny set is added to ``public.BEIR_SETS`` for each test (monkeypatch). No test reaches the
internet."""

import hashlib
import io
import os
import shutil
import zipfile

import numpy as np
import pytest

from keras_hardneg.data import dataset_spec, fetch, public
from keras_hardneg.registry import DATASETS, ConfigError
from tests import _loopback

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCIFACT = os.environ.get("KHN_SCIFACT", os.path.join(REPO, "..", "shared", "data", "retrieval",
                                                  "scifact"))


def _md5(path):
    return hashlib.md5(open(path, "rb").read()).hexdigest()


def _publish(monkeypatch, zip_path, sha256=True, **extra):
    """The tiny set in BEIR_SETS with ``zip_path``'s MD5 (and its files' SHA-256)."""
    spec = {"md5": _md5(zip_path), **extra}
    if sha256:
        spec["sha256"] = {rel: hashlib.sha256(data).hexdigest()
                          for rel, data in _loopback.beir_files().items()}
    monkeypatch.setitem(public.BEIR_SETS, "tiny", spec)
    return spec


def _beir_root():
    return os.path.join(fetch.data_home(), "beir")


def test_a_beir_set_by_name_is_fetched_once_checked_and_cached(mirror, monkeypatch, capsys):
    archive = _loopback.beir_zip(str(mirror.www), "tiny")
    _publish(monkeypatch, archive, counts={"documents": 6, "splits": {
        "train": {"queries": 3, "judgements": 3}, "test": {"queries": 1, "judgements": 2}}})
    assert dataset_spec("beir:tiny") == {"name": "beir", "dataset": "tiny"}
    folder = public.beir_folder("tiny")
    assert folder == os.path.join(_beir_root(), "tiny")
    files = sorted(os.path.relpath(os.path.join(d, f), folder).replace(os.sep, "/")
                   for d, _, names in os.walk(folder) for f in names)
    assert files == ["corpus.jsonl", fetch.STAMP_FILE, "qrels/test.tsv", "qrels/train.tsv",
                     "queries.jsonl"]
    for rel, data in _loopback.beir_files().items():
        assert open(os.path.join(folder, *rel.split("/")), "rb").read() == data
    stamp = fetch.read_stamp(folder)
    assert stamp["md5"] == _md5(archive) and stamp["source"] == f"{mirror.url}/tiny.zip"
    assert stamp["sha256"] == hashlib.sha256(open(archive, "rb").read()).hexdigest()
    assert "MD5" in stamp["check"] and "SHA-256" in stamp["check"]
    assert "published counts" in stamp["check"]
    assert stamp["counts"]["splits"]["test"] == {"queries": 1, "judgements": 2}
    assert mirror.requests == ["/tiny.zip"]
    out = capsys.readouterr().out  # a plain line in a pipe, no bar
    assert out.count("fetching BEIR tiny from") == 1 and "\r" not in out
    assert public.beir_folder("tiny") == folder
    assert mirror.requests == ["/tiny.zip"]  # cached: no second request
    assert sorted(os.listdir(_beir_root())) == ["tiny"]  # no lock file, no temporary folder


def test_a_zip_whose_md5_differs_is_refused_and_nothing_cached(mirror, monkeypatch):
    archive = _loopback.beir_zip(str(mirror.www), "tiny")
    spec = _publish(monkeypatch, archive)
    monkeypatch.setitem(spec, "md5", "0" * 32)
    with pytest.raises(fetch.FetchError) as err:
        public.beir_folder("tiny")
    message = str(err.value)
    assert len(message.splitlines()) == 1
    assert "does not match its published MD5" in message and "nothing was cached" in message
    assert os.listdir(_beir_root()) == []


def test_a_file_whose_sha256_or_counts_differ_is_refused_and_nothing_cached(mirror, monkeypatch):
    archive = _loopback.beir_zip(str(mirror.www), "tiny")
    spec = _publish(monkeypatch, archive)
    good = dict(spec["sha256"])
    monkeypatch.setitem(spec, "sha256", {**good, "qrels/test.tsv": "f" * 64})
    with pytest.raises(fetch.FetchError, match=r"qrels/test.tsv .* not the recorded .*nothing "
                                               r"was cached"):
        public.beir_folder("tiny")
    assert os.listdir(_beir_root()) == []
    # a recorded file the zip lacks is refused too
    monkeypatch.setitem(spec, "sha256", {**good, "qrels/dev.tsv": "f" * 64})
    with pytest.raises(fetch.FetchError, match="qrels/dev.tsv from .* is missing"):
        public.beir_folder("tiny")
    # counts that differ from the published ones are refused too
    monkeypatch.setitem(spec, "sha256", good)
    monkeypatch.setitem(spec, "counts", {"documents": 7, "splits": {}})
    with pytest.raises(fetch.FetchError, match="has .*'documents': 6.*, not the published"):
        public.beir_folder("tiny")
    assert os.listdir(_beir_root()) == []


def test_only_the_sets_own_files_are_extracted_nothing_outside(mirror, monkeypatch, tmp_path):
    archive = _loopback.beir_zip(str(mirror.www), "tiny", extra={
        "tiny/../evil.txt": b"escaped\n", "tiny/qrels/../../evil.tsv": b"a\tb\t1\n",
        "tiny/../../../evil_far.txt": b"escaped\n", "__MACOSX/tiny/._corpus.jsonl": b"x",
        "tiny/notes.txt": b"not read\n", "tiny/qrels/nested/x.tsv": b"a\tb\t1\n"})
    _publish(monkeypatch, archive)
    folder = public.beir_folder("tiny")
    assert sorted(os.listdir(folder)) == ["corpus.jsonl", fetch.STAMP_FILE, "qrels",
                                          "queries.jsonl"]
    assert sorted(os.listdir(os.path.join(folder, "qrels"))) == ["test.tsv", "train.tsv"]
    written = [os.path.join(d, f) for d, _, names in os.walk(tmp_path) for f in names]
    assert not [p for p in written if "evil" in os.path.basename(p)]


def test_a_zip_that_is_not_a_beir_set_or_is_truncated_is_refused(mirror, monkeypatch):
    with zipfile.ZipFile(mirror.www / "tiny.zip", "w") as z:
        z.writestr("other/corpus.jsonl", b"{}\n")
    _publish(monkeypatch, str(mirror.www / "tiny.zip"), sha256=False)
    with pytest.raises(fetch.FetchError, match="holds no tiny/corpus.jsonl"):
        public.beir_folder("tiny")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("tiny/corpus.jsonl", '{"_id": "d", "text": "x"}\n' * 2000)
    (mirror.www / "tiny.zip").write_bytes(buffer.getvalue()[:-300])  # its end cut off
    _publish(monkeypatch, str(mirror.www / "tiny.zip"), sha256=False)
    with pytest.raises(fetch.FetchError) as err:
        public.beir_folder("tiny")
    assert len(str(err.value).splitlines()) == 1
    assert "not a complete zip archive" in str(err.value)
    assert os.listdir(_beir_root()) == []


def test_a_complete_folder_or_the_zip_put_in_the_cache_by_hand_needs_no_request(
        mirror, monkeypatch):
    archive = _loopback.beir_zip(str(mirror.www), "tiny")
    _publish(monkeypatch, archive)
    folder = os.path.join(_beir_root(), "tiny")
    for rel, data in _loopback.beir_files().items():
        os.makedirs(os.path.dirname(os.path.join(folder, rel)), exist_ok=True)
        with open(os.path.join(folder, rel), "wb") as f:
            f.write(data)
    assert public.beir_folder("tiny") == folder
    assert fetch.read_stamp(folder) is None  # used as it is, not stamped
    assert public.describe_cache(folder) == f"in {folder}"
    # the zip as its host names it, in DATA_HOME/beir: MD5-checked, extracted, no request
    os.replace(archive, os.path.join(_beir_root(), "tiny.zip"))
    shutil.rmtree(folder)
    folder = public.beir_folder("tiny")
    assert fetch.read_stamp(folder)["source"] == os.path.join(_beir_root(), "tiny.zip")
    assert mirror.requests == []
    # a zip put there that is not the published one is refused by name
    shutil.rmtree(folder)
    monkeypatch.setitem(public.BEIR_SETS["tiny"], "md5", "0" * 32)
    with pytest.raises(fetch.FetchError, match="Remove it or replace it"):
        public.beir_folder("tiny")
    assert mirror.requests == []


def test_without_network_the_error_is_one_line_naming_path(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    monkeypatch.setenv(fetch.MIRROR_ENV, "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with pytest.raises(fetch.FetchError) as err:
        public.beir_folder("scifact")
    message = str(err.value)
    assert len(message.splitlines()) == 1, message
    assert "cannot fetch http://127.0.0.1:9/scifact.zip" in message
    assert "`path`" in message and "BEIR folder" in message
    assert os.path.join(str(tmp_path), "datasets", "beir") in message  # where to put it
    assert "scifact.zip" in message and "in the mirror" in message
    monkeypatch.delenv(fetch.MIRROR_ENV)
    hint = public.offline_hint("scifact.zip", "give a BEIR folder", "/c", "scifact.zip")
    assert f"set {fetch.MIRROR_ENV} to a URL or file:// folder holding scifact.zip" in hint


def test_an_unknown_name_is_one_line_listing_the_sets():
    def load_data(section):  # the check a recipe's data section gets (load_recipe's)
        return DATASETS.check("beir", section, where="recipe key", prefix="data.")

    with pytest.raises(ValueError) as err:
        public.beir_folder("msmarco")
    message = str(err.value)
    assert len(message.splitlines()) == 1
    assert "`dataset`" in message and "scifact" in message and "nfcorpus" in message
    with pytest.raises(ConfigError, match=r"'data.dataset' must be a BEIR set by name, one "
                                          r"of scifact"):
        load_data({"dataset": "../scifact"})
    with pytest.raises(ConfigError, match=r"'data.path' .* or 'data.dataset' .* is required"):
        load_data({})
    with pytest.raises(ConfigError, match="beir:scifact"):
        dataset_spec("beir:")
    data = load_data({"dataset": "scifact"})
    assert data["dataset"] == "scifact" and data["path"] is None and data["data_dir"] is None


def test_the_beir_dataset_by_name_builds_retrieval_data(mirror, monkeypatch):
    archive = _loopback.beir_zip(str(mirror.www), "tiny")
    _publish(monkeypatch, archive)
    (x, y), (xt, yt), desc = DATASETS.build("beir", 0, dataset="tiny", max_length=8,
                                            vocab_size=300)
    assert y is None and yt is None
    assert len(x.corpus) == 6 and len(x.queries) == 3 and len(x) == 3
    assert x.corpus_ids.shape == (6, 8) and x.query_ids.shape == (3, 8)
    assert len(xt.queries) == 1 and xt.pairs.tolist() == [[0, 3], [0, 4]]
    assert x.folder == os.path.join(_beir_root(), "tiny")
    assert desc.startswith(f"BEIR tiny fetched from {mirror.url}/tiny.zip (train: split "
                           "'train', 3 queries, 3 pairs; test: split 'test', 1 queries; "
                           "6 documents")
    assert mirror.requests == ["/tiny.zip"]
    # `path` wins over `dataset`: the given folder, no request
    (x2, _), _, desc2 = DATASETS.build("beir", 0, path=x.folder, dataset="nfcorpus",
                                       max_length=8, vocab_size=300)
    assert desc2.startswith(f"BEIR folder {x.folder}") and len(x2) == 3
    np.testing.assert_array_equal(x2.corpus_ids, x.corpus_ids)
    assert mirror.requests == ["/tiny.zip"]


def test_scifact_s_recorded_hashes_and_counts_are_those_of_the_provenance_copy():
    """BEIR_SETS' SHA-256 and counts for SciFact equal the files of the copy whose provenance
    ../shared/data/retrieval/scifact/SOURCE.txt records (skipped where it is absent)."""
    if not os.path.isdir(SCIFACT):
        pytest.skip(f"no SciFact copy at {SCIFACT} (KHN_SCIFACT)")
    spec = public.BEIR_SETS["scifact"]
    for rel, want in spec["sha256"].items():
        assert hashlib.sha256(open(os.path.join(SCIFACT, *rel.split("/")),
                                   "rb").read()).hexdigest() == want, rel
    assert public.is_beir_folder(SCIFACT)
    assert public._beir_counts(SCIFACT) == spec["counts"]
