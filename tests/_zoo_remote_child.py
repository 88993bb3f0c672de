"""Child process of tests/test_zoo_store.py (issue 35): the zoo as a non-editable install
sees it -- ``keras_hardneg`` imported from a copy of the package folder with no ``models/``
beside it -- fetching from a loopback ``http.server`` that counts requests.

    python tests/_zoo_remote_child.py tf|jax OUT

Environment: ``KERAS_HARDNEG_ZOO`` (``http://127.0.0.1:PORT/models``), ``KERAS_HOME``,
``ZOO_TEST_SITE`` (the folder the package copy is in), ``ZOO_TEST_MODELS`` (the repository's
``models/``, read only as the reference the fetched entries must equal). ``GET /_count`` on
the server answers the number of requests so far (itself not counted). Prints ``OK MODE``.
"""

import contextlib
import io
import json
import os
import sys
import urllib.request

import time

import numpy as np

START = time.time()


def step(label):
    """Elapsed seconds to stderr (where the time of this child goes)."""
    print(f"[{time.time() - START:6.1f} s] {label}", file=sys.stderr, flush=True)


MODE, OUT = sys.argv[1], sys.argv[2]
URL = os.environ["KERAS_HARDNEG_ZOO"]
SERVER = URL.rsplit("/", 1)[0]
MODELS = os.environ["ZOO_TEST_MODELS"]
GRAPH, IMAGE = "graphcl-ntxent-mutag", "simclr-ntxent-cifar10-r18w8-cpu"


def requests():
    with urllib.request.urlopen(SERVER + "/_count") as r:
        return int(r.read())


import keras  # noqa: E402

import keras_hardneg as khn  # noqa: E402
from keras_hardneg import cli, zoo_store  # noqa: E402
from keras_hardneg.export.preset import example_input, load_preset  # noqa: E402

step("imported")
assert khn.__file__.startswith(os.environ["ZOO_TEST_SITE"]), khn.__file__
assert khn.zoo.zoo_source() == ("url", URL)
INDEX = zoo_store.read_index()
CACHE = zoo_store.cache_root()
assert CACHE == os.path.join(os.environ["KERAS_HOME"], "keras_hardneg", "zoo")


def features(model):
    meta = model.preset_metadata
    return keras.ops.convert_to_numpy(model(example_input(meta["modality"], meta["input"]),
                                            training=False))


def same_as_repository(name, model):
    want = features(load_preset(os.path.join(MODELS, name, "preset"), trainable=False))
    assert np.array_equal(features(model), want), name


def load_fetches(name):
    before = requests()
    model = khn.zoo.load(name, trainable=False)
    assert requests() - before == len(INDEX[name]["files"]), (name, requests() - before)
    assert model.preset_metadata["path"] == os.path.join(CACHE, name, "preset")
    same_as_repository(name, model)
    return model


if MODE == "tf":
    # list: every entry of the index with weights, without a request.
    assert khn.zoo.list() == sorted(n for n, r in INDEX.items() if r["status"] == "weights")
    assert requests() == 0
    assert {r["where"] for r in khn.zoo.catalog() if r["status"] == "weights"} == {"fetch"}
    load_fetches(GRAPH)
    step("graph entry fetched")
    image = load_fetches(IMAGE)
    step("image entry fetched")
    np.save(os.path.join(OUT, "tf_features.npy"), features(image))
    # the second load (and show) make no request
    before = requests()
    for name in (GRAPH, IMAGE):
        same_as_repository(name, khn.zoo.load(name, trainable=False))
    assert khn.zoo.show(GRAPH)["results"]["svm_accuracy"] > 0.5
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        assert cli.main(["zoo", "list"]) == 0
    where = {line.split()[0]: line.split()[-1] for line in shown.getvalue().splitlines()
             if line.split() and line.split()[0] in INDEX}
    assert where[GRAPH] == where[IMAGE] == "cached" and where["simclr-hard-cifar10"] == "fetch"
    # zoo export from the cache: the TF Hub SavedModel gives the entry's features
    import tensorflow as tf

    export = os.path.join(OUT, "export")
    step("second loads, show, list")
    assert cli.main(["zoo", "export", GRAPH, export]) == 0
    step("exported")
    model = khn.zoo.load(GRAPH, trainable=False)
    probe = example_input("graph", model.preset_metadata["input"])
    got = np.asarray(tf.saved_model.load(export)(probe, training=False))
    assert np.abs(got - features(model)).max() <= 1e-5
    assert requests() == before, "a cached entry was requested again"
    step("export checked")
    # offline with a warm cache: the URL unreachable, then no zoo at all (cache only)
    os.environ["KERAS_HARDNEG_ZOO"] = "http://127.0.0.1:9/models"
    same_as_repository(GRAPH, khn.zoo.load(GRAPH, trainable=False))
    del os.environ["KERAS_HARDNEG_ZOO"]
    assert khn.zoo.zoo_source() == ("cache", None)
    assert khn.zoo.list(available=True) == [GRAPH, IMAGE]
    assert len(khn.zoo.list()) > 2  # every entry with weights, cached or not
    same_as_repository(IMAGE, khn.zoo.load(IMAGE, trainable=False))
    try:
        khn.zoo.load("simclr-hard-cifar10")
        raise AssertionError("an entry neither cached nor reachable loaded")
    except khn.zoo.ZooError as e:
        assert "not in the cache" in str(e) and "KERAS_HARDNEG_ZOO" in str(e), e
    assert requests() == before
    # a damaged cache is not intact: fetched again
    os.environ["KERAS_HARDNEG_ZOO"] = URL
    weights = os.path.join(CACHE, IMAGE, "preset", "model.weights.h5")
    with open(weights, "r+b") as f:
        f.seek(-100, 2)
        byte = f.read(1)
        f.seek(-100, 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    load_fetches(IMAGE)
    step("offline, cache-only, damaged cache")
    # a tampered file on the host: one error, nothing cached for the entry
    os.environ["KERAS_HOME"] = os.path.join(OUT, "home_tampered")
    os.environ["KERAS_HARDNEG_ZOO"] = SERVER + "/tampered"
    before = requests()
    try:
        khn.zoo.load(GRAPH)
        raise AssertionError("a tampered entry loaded")
    except khn.zoo.ZooError as e:
        message = str(e)
    assert "does not match the SHA-256" in message and "nothing was cached" in message, message
    assert len(message.splitlines()) == 1
    assert requests() > before
    root = zoo_store.cache_root()
    left = [f for f in os.listdir(root) if not f.endswith(".lock")] if os.path.isdir(
        root) else []  # a lock file stays (one per entry): no entry, no partial files
    assert left == [], left
    print(json.dumps({"tampered_error": message}))
elif MODE == "jax":
    assert keras.backend.backend() == "jax"
    image = load_fetches(IMAGE)
    want = np.load(os.path.join(OUT, "tf_features.npy"))
    assert np.abs(features(image) - want).max() <= 1e-5
    before = requests()
    khn.zoo.load(IMAGE)
    assert requests() == before
    assert image.trainable is False and khn.zoo.load(IMAGE).trainable
    assert "tensorflow" not in sys.modules, "fetching under JAX imported TensorFlow"
step("done")
print(f"OK {MODE}")
