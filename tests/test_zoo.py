"""Zoo entries trained here: `keras-hardneg evaluate` reproduces their model cards."""

import glob
import json
import os

import pytest

from keras_hardneg import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAINED = sorted(os.path.dirname(p) for p in glob.glob(
    os.path.join(ROOT, "models", "*", "encoder", "model_card.json")))
DATA = os.path.join(ROOT, "..", "shared", "data", "cifar10-jpg")
TU = os.path.join(ROOT, "..", "shared", "data", "tudataset")


def _modality(encoder):
    with open(os.path.join(encoder, "model_card.json")) as f:
        return json.load(f).get("modality", "image")


IMAGE = [e for e in TRAINED if _modality(e) == "image"]
GRAPH = [e for e in TRAINED if _modality(e) == "graph"]
TEXT = [e for e in TRAINED if _modality(e) == "text"]


def test_at_least_two_entries_were_trained_here():
    assert len(TRAINED) >= 2, TRAINED


@pytest.mark.skipif(not os.path.isdir(DATA), reason="needs ../shared/data/cifar10-jpg")
def test_evaluate_an_entry_folder_scores_its_keras_preset(capsys):
    """``keras-hardneg evaluate models/ENTRY``: the entry's preset (any backend) on the
    entry recipe's data with its kNN settings, here on 40 images per class of each split
    (a 400-image bank, so the recipe's k of 200 is not the whole bank and a wrong k would
    show): the figure equals the preset's own features through the kNN.
    (Re-scoring the card's figure runs all 60k images, ~36 CPU-s for a width-8 entry and
    ~60x that for a width-64 one: a benchmark, ``python models/remeasure.py``.)"""
    from keras_hardneg import export, run
    from keras_hardneg.evaluation import extract_features, weighted_knn_accuracy

    from keras_hardneg.data import dataset_spec

    entry = os.path.dirname(IMAGE[0])
    # the data the entry was trained on, given explicitly (its recipe names CIFAR-10 by name)
    assert cli.main(["evaluate", entry, "--dataset", DATA, "--no-linear-probe",
                     "--limit-per-class", "40", "--json"]) == 0
    measured = json.loads(capsys.readouterr().out)  # --json: stdout is one JSON document
    assert os.path.join(entry, "preset") in measured["encoder"]
    recipe = run.load_recipe(os.path.join(entry, "recipe.json"),
                             {"data": dataset_spec(DATA, limit_per_class=40)})
    (x, y), (x_test, y_test), _ = run.load_data(recipe)
    assert len(x) == len(x_test) == 400
    k, t = recipe["evaluation"]["knn_k"], recipe["evaluation"]["knn_temperature"]
    assert k < len(x)
    preset = export.load_preset(os.path.join(entry, "preset"))
    bank, queries = extract_features(preset, x), extract_features(preset, x_test)
    want = weighted_knn_accuracy(bank, y, queries, y_test, k=k, temperature=t)
    # the data tells k apart: the whole bank as neighbours scores otherwise
    assert weighted_knn_accuracy(bank, y, queries, y_test, k=len(x),
                                 temperature=t) != pytest.approx(want, abs=1e-6)
    assert measured["knn_accuracy"] == pytest.approx(want, abs=1e-6)  # the recipe's k and t


@pytest.mark.parametrize("encoder", GRAPH, ids=[os.path.basename(os.path.dirname(e))
                                                for e in GRAPH])
def test_every_shipped_graph_encoder_loads_and_embeds(encoder):
    """Cheap: each exported GIN loads on CPU and maps a padded batch of two graphs to finite
    [2, F] features (accuracy is reproduced by `keras-hardneg evaluate`, below)."""
    import numpy as np

    from keras_hardneg import export
    from keras_hardneg.data import pad_graphs

    card = json.load(open(os.path.join(encoder, "model_card.json")))
    f = card["input_signature"]["nodes"]["shape"][-1]
    rng = np.random.default_rng(0)
    graphs = [(np.eye(f, dtype="float32")[rng.integers(0, f, size=n)],
               np.array([[i, (i + 1) % n] for i in range(n)] + [[(i + 1) % n, i]
                                                                for i in range(n)], "int32"))
              for n in (4, 6)]
    batch = pad_graphs(graphs, (16, 32), num_graphs=2)
    out = np.asarray(export.load_encoder(encoder)(batch))
    assert out.shape == (2, card["output_dim"]) and np.isfinite(out).all()


@pytest.mark.parametrize("encoder", TEXT, ids=[os.path.basename(os.path.dirname(e))
                                               for e in TEXT])
def test_every_shipped_text_encoder_embeds_sentences(encoder):
    """Cheap: each exported sentence encoder loads on CPU with its tokenizer and maps
    strings to finite [n, F] vectors, different sentences to different vectors (accuracy is
    checked by `keras-hardneg evaluate`)."""
    pytest.importorskip("tokenizers")
    import numpy as np

    from keras_hardneg import export

    card = json.load(open(os.path.join(encoder, "model_card.json")))
    enc = export.load_encoder(encoder)
    out = enc.embed_sentences(["The cat sat on the mat.", "Stock markets fell on Monday."])
    assert out.shape == (2, card["output_dim"]) and np.isfinite(out).all()
    assert not np.allclose(out[0], out[1])


@pytest.mark.skipif(not os.path.isdir(TU), reason="needs ../shared/data/tudataset")
def test_evaluate_reproduces_the_svm_accuracy_of_the_mutag_entry(capsys):
    entry = os.path.join(ROOT, "models", "graphcl-ntxent-mutag")
    results = json.load(open(os.path.join(entry, "results.json")))
    assert cli.main(["evaluate", os.path.join(entry, "encoder"), "--dataset",
                     os.path.join(TU, "MUTAG"), "--json"]) == 0
    measured = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert measured["svm_accuracy"] == pytest.approx(results["svm_accuracy"], abs=1e-9)


# ------------------------------------------------------------ the zoo API (issue 24)
import numpy as np  # noqa: E402

import keras_hardneg as khn  # noqa: E402


def _probe(meta):
    from keras_hardneg.export.preset import example_input

    return example_input(meta["modality"], meta["input"])


def _loadable(name):
    """Whether this installation can rebuild the entry: a pretrained-BERT entry needs the
    optional keras-hub extra (CI installs without it)."""
    import importlib.util

    config = os.path.join(ROOT, "models", name, "preset", "config.json")
    with open(config) as f:
        needs_hub = '"keras_hub' in f.read()
    return not needs_hub or importlib.util.find_spec("keras_hub") is not None


@pytest.mark.heavy  # heavy tier since 2026-11-29 (suite time: docs/notes/suite_time.md)
def test_zoo_list_names_the_entries_with_weights_and_each_loads():
    names = khn.zoo.list()
    assert set(names) >= {"graphcl-ntxent-mutag", "quickthought-ntxent-wiki",
                          "simclr-ntxent-cifar10-r18w8-cpu"}, names
    for name in filter(_loadable, names):
        model = khn.zoo.load(name, trainable=False)
        meta = model.preset_metadata
        out = np.asarray(model(_probe(meta), training=False))
        assert out.shape == (len(out), meta["output_dim"]) and len(out) in (2, 3) and np.isfinite(out).all(), name
        assert not model.trainable


def test_zoo_refuses_unknown_and_untrained_entries_in_one_line(tmp_path, monkeypatch):
    with pytest.raises(khn.zoo.ZooError, match="not a zoo entry. Did you mean .*simclr-ntxent-cifar10,"):
        khn.zoo.load("simclr-ntxent")
    with pytest.raises(khn.zoo.ZooError, match="no trained weights yet.*keras-hardneg train"):
        khn.zoo.load("simclr-ring-stl10")
    monkeypatch.setenv(khn.zoo.ZOO_ENV, str(tmp_path / "absent"))
    with pytest.raises(khn.zoo.ZooError, match="KERAS_HARDNEG_ZOO"):
        khn.zoo.list()
    monkeypatch.setenv(khn.zoo.ZOO_ENV, str(tmp_path))
    assert khn.zoo.list() == []


def test_zoo_show_and_the_command_line(capsys, tmp_path):
    info = khn.zoo.show("graphcl-ntxent-mutag")
    assert info["preset"]["modality"] == "graph" and info["results"]["epochs_run"] >= 1
    assert cli.main(["zoo", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == khn.zoo.list()
    assert cli.main(["zoo", "show", "graphcl-ntxent-mutag"]) == 0
    shown = capsys.readouterr().out
    assert "keras_hardneg.zoo.load('graphcl-ntxent-mutag')" in shown
    assert "SVM accuracy" in shown and "(10-fold CV)" in shown  # the figures, formatted
    assert cli.main(["zoo", "show", "nope"]) == 2
    assert "not a zoo entry" in capsys.readouterr().err


@pytest.mark.parametrize("name", [
    # a GPU entry (ResNet-18, float16 preset): ~14 CPU-s, the heavy tier; the smallest image
    # entry's export is checked by default in tests/test_zoo_export.py
    pytest.param("simclr-hard-cifar10", marks=pytest.mark.heavy),
    pytest.param("quickthought-ntxent-wiki", marks=pytest.mark.heavy),
    pytest.param("simcse-minilm-ntxent-wiki", marks=pytest.mark.heavy)])
def test_zoo_export_loads_in_hub_with_the_same_features(name, tmp_path, capsys):
    hub = pytest.importorskip("tensorflow_hub")
    if not _loadable(name):
        pytest.skip(f"{name} needs the [pretrained] extra (keras-hub)")
    out = str(tmp_path / "export")
    assert cli.main(["zoo", "export", name, out]) == 0
    model = khn.zoo.load(name)
    probe = _probe(model.preset_metadata)
    want = np.asarray(model(probe, training=False))
    got = np.asarray(hub.load(out)(probe, training=False))
    assert np.abs(got - want).max() <= 1e-5
    assert os.path.isfile(os.path.join(out, "preset", "model.weights.h5"))
    assert cli.main(["zoo", "export", name, out]) == 2  # exists: refused, not replaced
    assert "exists" in capsys.readouterr().err
