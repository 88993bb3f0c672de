"""Public datasets by name (issue 47): fetched once from a loopback server standing in for
the public hosts ($KERAS_HARDNEG_DATA_MIRROR), checked, cached, and one clear line without
network. No test reaches the internet."""

import hashlib
import io
import time
import os
import zipfile

import numpy as np
import pytest

from keras_hardneg.data import dataset_spec, fetch, public
from keras_hardneg.registry import DATASETS
from tests import _loopback


def test_the_mirror_replaces_the_host_and_the_cache_is_keras_s(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    monkeypatch.delenv(fetch.MIRROR_ENV, raising=False)
    assert fetch.data_home() == str(tmp_path / "datasets")
    url = f"{public.TU_HOST}/MUTAG.zip"
    assert fetch.source_url(url) == url
    monkeypatch.setenv(fetch.MIRROR_ENV, "file:///srv/data/")
    assert fetch.source_url(url) == "file:///srv/data/MUTAG.zip"
    monkeypatch.setenv(fetch.MIRROR_ENV, "/srv/data")
    with pytest.raises(fetch.FetchError, match="not a URL"):
        fetch.source_url(url)


def test_a_tu_set_by_name_is_fetched_once_checked_and_cached(mirror, capsys):
    _loopback.published_tu_zip(str(mirror.www), "MUTAG")
    spec = dataset_spec("tu:MUTAG")
    assert spec["dataset"] == "MUTAG" and not spec.get("folder")
    (graphs, labels), _, desc = DATASETS.build("tu", 0, dataset="MUTAG")
    assert len(graphs) == 188 and sorted(np.bincount(labels).tolist()) == [63, 125]
    assert int(graphs.num_nodes.sum()) == 3371
    folder = os.path.join(fetch.data_home(), "tudataset", "MUTAG")
    stamp = fetch.read_stamp(folder)
    want = hashlib.sha256((mirror.www / "MUTAG.zip").read_bytes()).hexdigest()
    assert stamp["sha256"] == want and "published statistics" in stamp["check"]
    assert mirror.requests == ["/MUTAG.zip"]
    # a plain line in a pipe (pytest captures stdout: not a terminal), no bar, no \r
    out = capsys.readouterr().out
    assert out.count("fetching TU MUTAG from") == 1 and "\r" not in out and "\x1b" not in out
    DATASETS.build("tu", 0, dataset="MUTAG")
    assert mirror.requests == ["/MUTAG.zip"]  # cached: no request
    # nothing but the set and its lock beside it
    assert sorted(os.listdir(os.path.dirname(folder))) == ["MUTAG"]  # no lock file left


def test_a_tu_set_that_differs_from_the_published_counts_is_refused(mirror):
    _loopback.tu_zip(str(mirror.www / "PROTEINS.zip"), "PROTEINS", 100, [50, 50], 400)
    with pytest.raises(fetch.FetchError, match=r"not the published .*nothing was cached"):
        public.tu_folder("PROTEINS")
    root = os.path.join(fetch.data_home(), "tudataset")
    assert sorted(os.listdir(root)) == []  # nothing cached, no lock file left
    # a set without published statistics is taken, its hash recorded
    _loopback.tu_zip(str(mirror.www / "TOY.zip"), "TOY", 10, [5, 5], 40)
    assert fetch.read_stamp(public.tu_folder("TOY"))["check"].startswith("none published")


def test_a_zip_that_is_not_a_tu_set_or_escapes_is_refused(mirror):
    with zipfile.ZipFile(mirror.www / "EVIL.zip", "w") as z:
        z.writestr("../EVIL_A.txt", "1, 2\n")
        z.writestr("EVIL/notes.txt", "x\n")
    with pytest.raises(fetch.FetchError, match="holds no EVIL/EVIL_A.txt"):
        public.tu_folder("EVIL")
    assert not os.path.exists(os.path.join(fetch.data_home(), "EVIL_A.txt"))
    with pytest.raises(ValueError, match="TU set name"):
        public.tu_folder("../x")


def test_without_network_the_error_is_one_line_naming_what_to_give(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    monkeypatch.setenv(fetch.MIRROR_ENV, "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    for call, words in ((lambda: public.tu_folder("MUTAG"), "--data DIR in the examples"),
                        (lambda: public.load_cifar("cifar10"), "image folder"),
                        (lambda: public.sentence_corpus("wiki1m"), "--dataset FILE.txt")):
        with pytest.raises(fetch.FetchError) as err:
            call()
        message = str(err.value)
        assert len(message.splitlines()) == 1, message
        assert "cannot fetch http://127.0.0.1:9/" in message and words in message
        assert fetch.MIRROR_ENV in message and str(tmp_path) in message
        # the mirror is set: the line says it lacks the file, not "set the mirror"
        assert "in the mirror" in message
        assert f"set {fetch.MIRROR_ENV}" not in message


def test_fetches_leave_no_lock_files(mirror):
    with pytest.raises(fetch.FetchError):
        public.tu_folder("MUTAG")  # nothing at the mirror: a failed fetch
    with zipfile.ZipFile(mirror.www / "TOY.zip", "w") as z:
        z.writestr("TOY/TOY_A.txt", "1, 2\n2, 1\n")
        z.writestr("TOY/TOY_graph_indicator.txt", "1\n1\n")
        z.writestr("TOY/TOY_graph_labels.txt", "1\n")
    public.tu_folder("TOY")  # and one that succeeds
    left = [os.path.join(d, f) for d, _, files in os.walk(fetch.data_home()) for f in files
            if f.endswith(".lock")]
    assert left == []


def test_a_waiter_relocks_when_the_holder_removed_the_lock_file(tmp_path):
    """The lock is removed while held; a second holder after it locks a fresh file, and
    the two holders never overlap."""
    import threading

    target, inside, overlaps = str(tmp_path / "item"), [], []

    def hold():
        with fetch.locked(target):
            inside.append(1)
            if len(inside) > 1:
                overlaps.append(1)
            time.sleep(0.05)
            inside.pop()

    threads = [threading.Thread(target=hold) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlaps == [] and not os.path.exists(target + ".lock")


def test_without_a_mirror_the_error_says_to_set_one(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    monkeypatch.delenv(fetch.MIRROR_ENV, raising=False)
    hint = public.offline_hint("a MUTAG/ folder", "give a TU folder", str(tmp_path),
                               "MUTAG.zip")
    assert f"set {fetch.MIRROR_ENV} to a URL or file:// folder holding MUTAG.zip" in hint


def test_a_truncated_tu_archive_is_one_line_and_caches_nothing(mirror):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr("MUTAG/MUTAG_A.txt", "1, 2\n" * 2000)
        z.writestr("MUTAG/MUTAG_graph_indicator.txt", "1\n1\n")
    (mirror.www / "MUTAG.zip").write_bytes(buffer.getvalue()[:-300])  # cut off its end
    with pytest.raises(fetch.FetchError) as err:
        public.tu_folder("MUTAG")
    assert len(str(err.value).splitlines()) == 1
    assert "not a complete zip archive" in str(err.value)
    assert not os.path.exists(os.path.join(fetch.data_home(), "tudataset", "MUTAG"))


def test_a_script_ends_a_failed_fetch_in_one_line(capsys):
    with pytest.raises(SystemExit) as stop:
        with fetch.exit_on_fetch_error("example.py"):
            raise fetch.FetchError("CIFAR-10: cannot fetch it.\nWithout network: give X.")
    assert stop.value.code == 2
    assert capsys.readouterr().err == ("example.py: error: CIFAR-10: cannot fetch it. "
                                       "Without network: give X.\n")


def test_cifar_from_a_keras_cache_needs_no_request(tmp_path, monkeypatch):
    """A CIFAR-10 that keras.datasets fetched before (its extracted cache layout) is used."""
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    monkeypatch.setenv(fetch.MIRROR_ENV, "http://127.0.0.1:9")
    _loopback.fill_cifar_cache(str(tmp_path), per_batch=20)
    (x, y), (xt, yt) = public.load_cifar("cifar10")
    assert x.shape == (100, 32, 32, 3) and x.dtype == np.uint8 and xt.shape == (20, 32, 32, 3)
    assert y.dtype == np.int64 and set(y.tolist()) == set(range(10))
    (xs, ys), (xts, _), desc = DATASETS.build("cifar10", 0, limit_per_class=2,
                                              test_limit_per_class=1)
    assert xs.shape == (20, 32, 32, 3) and xs.dtype == np.float32 and xts.shape == (10, 32,
                                                                                  32, 3)
    assert xs.max() <= 1.0 and np.array_equal(np.bincount(ys), [2] * 10)
    np.testing.assert_allclose(xs[0], x[0] / 255.0, atol=1e-7)
    assert "CIFAR-10" in desc
    (x16, _), _, _ = DATASETS.build("cifar10", 0, image_size=16, limit_per_class=1)
    assert x16.shape == (10, 16, 16, 3)


def test_cifar_is_fetched_checked_by_its_sha256_and_extracted(mirror, monkeypatch):
    archive = _loopback.cifar_archive(str(mirror.www / "cifar-10-python.tar.gz"))
    digest = hashlib.sha256(open(archive, "rb").read()).hexdigest()
    # the published hash refuses the fake archive: nothing cached
    with pytest.raises(fetch.FetchError, match="does not match its published SHA-256"):
        public.load_cifar("cifar10")
    assert [f for f in os.listdir(fetch.data_home()) if not f.endswith(".lock")] == []
    monkeypatch.setitem(public.CIFAR["cifar10"], "sha256", digest)
    (x, y), (xt, yt) = public.load_cifar("cifar10")
    assert x.shape == (100, 32, 32, 3) and xt.shape == (20, 32, 32, 3)
    # Keras's names: the archive and the extracted folder keras.datasets.cifar10 uses
    home = fetch.data_home()
    assert os.path.isfile(os.path.join(home, "cifar-10-batches-py-target_archive"))
    assert os.path.isdir(os.path.join(home, "cifar-10-batches-py-target",
                                      "cifar-10-batches-py"))
    count = len(mirror.requests)
    public.load_cifar("cifar10")
    assert len(mirror.requests) == count == 2  # the refused fetch and this one


def test_a_cifar_batch_with_code_in_its_pickle_is_refused(tmp_path, monkeypatch):
    import pickle

    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    folder = _loopback.fill_cifar_cache(str(tmp_path))

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    with open(os.path.join(folder, "test_batch"), "wb") as f:
        pickle.dump({b"data": Evil(), b"labels": []}, f, protocol=2)
    with pytest.raises(pickle.UnpicklingError, match="not allowed"):
        public.load_cifar("cifar10")


def test_a_sentence_corpus_by_name_is_fetched_once_and_its_hash_recorded(mirror):
    lines = [f"Sentence number {i} of the fake corpus." for i in range(50)]
    (mirror.www / "wiki1m_for_simcse.txt").write_text("\n".join(lines) + "\n")
    assert dataset_spec("text:wiki1m") == {"name": "text_file", "corpus": "wiki1m"}
    path = public.sentence_corpus("wiki1m")
    assert open(path).read().splitlines() == lines
    record = open(path + ".source.json").read()
    assert hashlib.sha256(open(path, "rb").read()).hexdigest() in record
    public.sentence_corpus("wiki1m")
    assert mirror.requests == ["/wiki1m_for_simcse.txt"]
    with pytest.raises(ValueError, match="corpus"):
        dataset_spec("text:nope")


def test_the_tu_recipe_keys_and_the_folder_override(tmp_path):
    from keras_hardneg.run import RecipeError, load_recipe

    with pytest.raises(RecipeError, match="'data.dataset' .* or 'data.folder'"):
        load_recipe({"data": {"name": "tu"}})
    recipe = load_recipe({"data": {"name": "tu", "dataset": "MUTAG"}})
    assert recipe["data"]["dataset"] == "MUTAG" and recipe["encoder"]["name"] == "gin"


def test_fetches_of_one_set_at_once_fetch_it_once(mirror):
    """Four fetches of one set at once (threads, each with its own lock file handle, as
    processes have: ``flock`` treats them alike; the server holds each file half-sent for
    a moment): one request, one complete copy, every caller gets it. Processes: the zoo's
    heavy test (tests/test_zoo_fetch_processes.py)."""

    _loopback.published_tu_zip(str(mirror.www), "MUTAG")
    slow = _loopback.Server(str(mirror.www), delay=0.5)
    os.environ[fetch.MIRROR_ENV] = slow.url  # restored by the fixture's monkeypatch
    try:
        got, errors = _loopback.in_threads(lambda: public.tu_folder("MUTAG"), 4, 120)
    finally:
        slow.close()
    assert not errors and len(got) == 4 and len(set(got)) == 1, errors
    assert slow.requests == ["/MUTAG.zip"]
    assert fetch.read_stamp(got[0])["counts"]["graphs"] == 188
    assert sorted(os.listdir(os.path.dirname(got[0]))) == ["MUTAG"]  # no lock file left


def test_a_cifar_archive_put_in_the_cache_by_hand_is_checked_and_used(tmp_path, monkeypatch):
    """`cifar-10-python.tar.gz` (the host's name) in $KERAS_HOME/datasets serves without
    a request when its SHA-256 is the published one, and is refused by name otherwise."""
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    monkeypatch.setenv(fetch.MIRROR_ENV, "http://127.0.0.1:9")  # any request would fail
    root = fetch.data_home()
    os.makedirs(root)
    archive = _loopback.cifar_archive(os.path.join(root, "cifar-10-python.tar.gz"))
    with pytest.raises(fetch.FetchError, match="is not the published archive"):
        public.load_cifar("cifar10")
    digest = hashlib.sha256(open(archive, "rb").read()).hexdigest()
    monkeypatch.setitem(public.CIFAR["cifar10"], "sha256", digest)
    (x, y), (xt, yt) = public.load_cifar("cifar10")
    assert x.shape[1:] == (32, 32, 3) and len(x) == len(y) > 0 and len(xt) == len(yt) > 0


def test_class_names_come_from_the_data_without_a_fetch(tmp_path, monkeypatch):
    """CIFAR's names are read from the cached archive's meta file (none without it, and no
    request); an image folder's are its class subfolders; the digits' labels are their
    names."""
    import pickle

    from keras_hardneg.data.sources import class_names

    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    monkeypatch.setenv(fetch.MIRROR_ENV, "http://127.0.0.1:9")  # a fetch would fail
    assert class_names({"name": "cifar10"}) is None
    folder = _loopback.fill_cifar_cache(str(tmp_path), per_batch=2)
    assert class_names({"name": "cifar10"}) is None  # batches without their meta file
    names = [f"class{i}" for i in range(10)]
    with open(os.path.join(folder, "batches.meta"), "wb") as f:
        pickle.dump({b"label_names": [n.encode() for n in names], b"num_vis": 3072}, f,
                    protocol=2)
    assert class_names({"name": "cifar10"}) == names
    for sub in ("b_dog", "a_cat", ".git"):
        os.makedirs(tmp_path / "imgs" / sub)
    assert class_names({"name": "image_folder", "train": str(tmp_path / "imgs")}) == [
        "a_cat", "b_dog"]
    assert class_names({"name": "digits"}) is None


def test_the_report_grid_and_map_name_the_classes():
    import keras

    from keras_hardneg.modalities import image, report

    rng = np.random.default_rng(0)
    x, y = rng.uniform(size=(40, 8, 8, 3)).astype("float32"), np.arange(40) % 4
    encoder = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Flatten()])
    names = ["airplane", "automobile", "a_very_long_class_name", "cat"]
    sections = image.image_sections(encoder, (x, y), (x[:8], y[:8]), 0,
                                    lambda a, b, i: (a[i], b[i]), names)
    assert "titles: class names" in sections[0][1]
    assert report.class_label(2, names) == "a_very_long_class_name"
    assert image._short_label(2, names) == "a_very_long\u2026"
    assert report.class_label(np.int64(3), names) == "cat" and report.class_label(7, names) == "7"
    assert "titles: class ids" in image.image_sections(
        encoder, (x, y), (x[:8], y[:8]), 0, lambda a, b, i: (a[i], b[i]))[0][1]
