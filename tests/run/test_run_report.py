"""The run report (issue 50): ``train`` writes ``report.html`` for images, graphs and
sentences; the page is self-contained and renders every section; the negatives it plots are
the loss's own weights (checked against the NumPy transcription of the hard-negative loss on
the same probe batch); the probe does not change training; ``keras-hardneg report`` works on
a run directory and on a zoo entry and refuses anything else in one line."""

import json
import os
from html import escape as html_escape
import re
import shutil

import numpy as np
import pytest

from keras_hardneg import cli, run
from keras_hardneg.data import dataset_spec
from keras_hardneg.run.report import probe as probe_lib
from keras_hardneg.modalities import report as modality_report
from keras_hardneg.run.report import page as report_page
from keras_hardneg.modalities import modality_of
from keras_hardneg.run.report.run_report import _probe_view_maker, learning_rate_curve
from tests.losses import numpy_reference as ref

IMAGE_SECTIONS = ("figures", "curves-per-epoch", "negatives", "hardest-negatives",
                  "nearest-neighbours", "2-d-map-of-the-embeddings", "recipe")
GRAPH_SECTIONS = ("figures", "curves-per-epoch", "negatives", "hardest-negatives",
                  "2-d-map-of-the-embeddings", "recipe")
TEXT_SECTIONS = ("figures", "curves-per-epoch", "negatives", "hardest-negatives",
                 "nearest-sentences", "recipe")

DIGITS = {"epochs": 2, "batch_size": 64,
          "loss": {"name": "hard", "temperature": 0.5, "tau_plus": 0.1, "beta": 1.0}}


@pytest.fixture(autouse=True)
def _small_maps(monkeypatch):
    monkeypatch.setattr(modality_report, "MAP_POINTS", 120)  # t-SNE time


def _sections(page):
    return re.findall(r'<section data-section="([^"]+)">', page)


def assert_self_contained(page):
    """No script, no URL to fetch: every src / href is a data URI or an in-page anchor."""
    assert "<script" not in page.lower()
    refs = re.findall(r'(?:src|href)\s*=\s*["\']?([^"\'\s>]+)', page, flags=re.I)
    assert refs, "the page has no figures"
    for value in refs:
        assert value.startswith("data:image/png;base64,") or value.startswith("#"), value
    assert not re.search(r"https?://", page)
    assert "url(" not in page  # no stylesheet fetch either


def _body(page, name):
    return page.split(f'<section data-section="{name}">', 1)[1].split("</section>", 1)[0]


def _check_page(path, sections):
    page = open(path, encoding="utf-8").read()
    assert_self_contained(page)
    assert set(sections) <= set(_sections(page)), _sections(page)
    for name in sections:  # every section has content
        body = _body(page, name)
        assert "<img" in body or "<table" in body or "<code>" in body, name
    assert os.path.getsize(path) < 2 * 1024 * 1024
    return page


@pytest.fixture(scope="module")
def digits_run(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("report") / "digits")
    result = run.train(DIGITS, out, verbose=0, export=False)
    return out, result


def test_an_image_run_writes_a_self_contained_report(digits_run):
    out, result = digits_run
    assert result["report"] == os.path.join(out, "report.html")
    page = _check_page(result["report"], IMAGE_SECTIONS + ("embeddings-for-tensorboard",))
    # the figures beside the starting encoder's, and the neighbour grid's agreement
    assert "starting encoder (epoch 0)" in page and "share the query" in page
    records = json.load(open(os.path.join(out, "probe.json")))["records"]
    assert [r["epoch"] for r in records] == [0, 1, 2]
    assert "scatter" in records[0] and "scatter" in records[-1]
    assert "scatter" not in records[1]  # only the first and the last keep their sample


def _numpy_probe(out, full=False):
    """The run's probe batch rebuilt, its projections by the trained model, and the
    hard-negative weights of the NumPy transcription (per anchor, over its negatives)."""
    model, recipe, _, _, (x, y) = run.restore_run(out, with_data=True)
    modality = modality_of(recipe)
    batch = probe_lib.make_probe_batch(recipe, modality, x, y,
                                       _probe_view_maker(recipe, modality, x))
    z1, z2 = (np.asarray(v, np.float64) for v in
              model.probe_projections(batch.view1, batch.view2))
    z, triples = ref.in_batch_triples(z1, z2)
    t, beta = recipe["loss"]["temperature"], recipe["loss"]["beta"]
    weights = {}
    effective = []
    for a, _, negs in triples:
        w = ref.hard_weights(z[negs] @ z[a] / t, beta)
        weights.update({(a, j): wj for j, wj in zip(negs, w)})
        effective.append(ref.effective_number(w))
    if full:
        return {"recipe": recipe, "z": z, "raw": np.concatenate([z1, z2]), "weights": weights,
                "effective": np.array(effective), "triples": triples, "batch": batch,
                "labels": modality.labels_of(x, y, np.arange(len(x)))}
    return recipe, z, weights, float(np.mean(effective))


def test_hard_negative_weights_on_the_page_are_the_numpy_weights(digits_run):
    """The weight-against-similarity plot's points and the effective number of negatives of
    the last epoch agree with a NumPy computation of HCL's weights on the same probe batch."""
    out, _ = digits_run
    recipe, z, weights, effective = _numpy_probe(out)
    last = json.load(open(os.path.join(out, "probe.json")))["records"][-1]
    assert last["epoch"] == recipe["epochs"]
    # the plotted points: a fixed sample of the (anchor, negative) positions
    a2 = len(z)
    mask = ~np.eye(a2, dtype=bool)
    mask[np.arange(a2), (np.arange(a2) + a2 // 2) % a2] = False
    rows, cols = np.nonzero(mask)
    pick = np.sort(np.random.default_rng(recipe["seed"]).permutation(len(rows))
                   [:probe_lib.SCATTER_POINTS])
    expected_w = np.array([weights[(r, c)] for r, c in zip(rows[pick], cols[pick])])
    expected_cos = np.array([z[r] @ z[c] for r, c in zip(rows[pick], cols[pick])])
    np.testing.assert_allclose(last["scatter"]["weight"], expected_w, rtol=1e-3, atol=2e-5)
    np.testing.assert_allclose(last["scatter"]["cosine"], expected_cos, atol=2e-4)
    assert last["effective_negatives"] == pytest.approx(effective, rel=1e-4)
    # the page's table shows that number for the last epoch
    page = open(os.path.join(out, "report.html"), encoding="utf-8").read()
    shown = re.findall(r'<span class="eff">([0-9.]+)</span>', page)
    assert float(shown[-1]) == pytest.approx(effective, abs=2e-3)
    assert effective < last["num_negatives"]  # beta > 0 concentrates the weight


def test_new_probe_figures_are_the_numpy_recomputation(digits_run):
    """Each figure the page adds, recomputed in NumPy from the run's probe batch: every
    anchor's effective number (and the quartiles), the hardest negatives of the gallery
    (rows, weights, cosines, same-class flags), the collapse check, the adaptive histogram,
    the projector files and the learning rate."""
    out, _ = digits_run
    ref_ = _numpy_probe(out, full=True)
    z, weights, labels = ref_["z"], ref_["weights"], ref_["batch"].labels
    probe = json.load(open(os.path.join(out, "probe.json")))
    last = probe["records"][-1]
    assert probe["indices"] == ref_["batch"].indices.tolist()
    # the per-anchor distribution
    np.testing.assert_allclose(last["anchor_effective"], ref_["effective"], rtol=2e-4)
    np.testing.assert_allclose(last["effective_negatives_quartiles"],
                               np.percentile(ref_["effective"], [25, 50, 75]), rtol=2e-4)
    # the gallery: each chosen anchor's most-weighted negatives
    p = len(labels)
    y2 = np.concatenate([labels, labels])
    assert len(last["hardest"]) == probe_lib.GALLERY_ANCHORS
    for h in last["hardest"]:
        a = h["anchor"]
        assert 0 <= a < p  # a view-1 anchor
        negs = [j for j in range(2 * p) if j not in (a, (a + p) % (2 * p))]
        expected = sorted(negs, key=lambda j: -weights[(a, j)])[:probe_lib.GALLERY_NEGATIVES]
        got = [n[0] for n in h["negatives"]]
        # equal weights may swap places: compare the weights in order, then the rows' values
        np.testing.assert_allclose([n[1] for n in h["negatives"]],
                                   [weights[(a, j)] for j in expected], rtol=2e-3)
        for j, w, c, same in h["negatives"]:
            assert w == pytest.approx(weights[(a, j)], rel=2e-3)
            assert c == pytest.approx(z[a] @ z[j], abs=2e-4)
            assert same == int(y2[a] == y2[j])
        assert set(got) <= set(negs)
        assert h["positive_cosine"] == pytest.approx(z[a] @ z[(a + p) % (2 * p)], abs=2e-4)
    # the collapse check
    d = z.shape[1]
    s = np.linalg.svd(z, compute_uv=False)
    q = s / s.sum()
    assert last["collapse"]["dim"] == d
    assert last["collapse"]["std"] == pytest.approx(z.std(axis=0).mean(), rel=1e-3)
    assert last["collapse"]["effective_rank"] == pytest.approx(
        np.exp(-(q * np.log(q)).sum()), rel=1e-3)
    # the histogram over the data's range
    mask = ~np.eye(2 * p, dtype=bool)
    mask[np.arange(2 * p), (np.arange(2 * p) + p) % (2 * p)] = False
    cos = (z @ z.T)[mask]
    lo, hi = last["cosine_range"]
    assert lo <= cos.min() + 1e-4 and cos.max() - 1e-4 <= hi and hi - lo < 2.0
    counts, _ = np.histogram(cos, bins=probe_lib.COSINE_BINS, range=(lo, hi))
    assert sum(last["cosine_histogram"]) == mask.sum()
    assert np.abs(np.asarray(last["cosine_histogram"]) - counts).sum() <= 0.002 * mask.sum()
    # the projector files: both views' projections, their index, view and label
    folder = os.path.join(out, probe_lib.PROJECTOR_DIR)
    tensors = np.loadtxt(os.path.join(folder, "tensors.tsv"), delimiter="\t")
    np.testing.assert_allclose(tensors, ref_["raw"], rtol=1e-3, atol=1e-4)
    meta = [line.split("\t") for line in
            open(os.path.join(folder, "metadata.tsv")).read().splitlines()]
    assert meta[0] == ["example", "view", "label"] and len(meta) == 2 * p + 1
    assert [int(m[2]) for m in meta[1:]] == y2.tolist()
    assert [int(m[0]) for m in meta[1:p + 1]] == probe["indices"]
    config = open(os.path.join(folder, "projector_config.pbtxt")).read()
    assert 'tensor_path: "tensors.tsv"' in config and 'metadata_path: "metadata.tsv"' in config
    # the learning rate the optimizer had after each epoch, and the page's curve: the
    # recipe's cosine decay (no warm-up) over epochs x steps
    recipe = ref_["recipe"]
    assert recipe["schedule"] == {"name": "warmup_cosine", "warmup_epochs": 0,
                                  "per_epoch": False}
    rate, epochs = recipe["optimizer"]["learning_rate"], recipe["epochs"]
    steps = json.load(open(os.path.join(out, "results.json")))["steps_per_epoch"]

    def cosine(step):
        return rate * 0.5 * (1 + np.cos(np.pi * np.asarray(step) / (steps * epochs)))

    assert [r["learning_rate"] for r in probe["records"]] == pytest.approx(
        cosine(np.arange(epochs + 1) * steps), rel=1e-5, abs=1e-9)
    curve = learning_rate_curve(recipe, steps)
    np.testing.assert_allclose(curve["values"], cosine(np.asarray(curve["epochs"]) * steps),
                               rtol=1e-5, atol=1e-9)


def test_the_page_shows_what_it_measured(digits_run):
    """The uniform-batch baseline (recomputed from the labels), the clamp that never
    engaged, the constant learning rate, the gallery, the definitions and the footer."""
    out, _ = digits_run
    page = open(os.path.join(out, "report.html"), encoding="utf-8").read()
    history = json.load(open(os.path.join(out, "history.json")))
    labels = _numpy_probe(out, full=True)["labels"]
    counts = np.unique(labels, return_counts=True)[1].astype(float)
    uniform = (counts * (counts - 1)).sum() / (len(labels) * (len(labels) - 1))
    curves = _body(page, "curves-per-epoch")
    assert f"{uniform:.4f}" in curves
    if not any(history["clamp_fraction"]):
        assert "clamp never engaged" in curves
    assert "Learning rate" in curves and "warmup_cosine" in curves
    negatives = _body(page, "negatives")
    assert "probe.json" in negatives and "Effective number of negatives" in negatives
    assert "Collapse check" in negatives and "<img" in negatives
    assert "Batch norm" not in negatives or "inference mode" in negatives
    gallery = _body(page, "hardest-negatives")
    assert "<img" in gallery and "weighted most" in gallery
    # one sentence under the title says what the figures show, with the probe's numbers
    records = json.load(open(os.path.join(out, "probe.json")))["records"]
    first, last = records[0], records[-1]
    summary = page.split('<p class="summary">', 1)[1].split("</p>", 1)[0]
    assert f"{first['effective_negatives']:.1f} then {last['effective_negatives']:.1f}" in summary
    assert (f"from {first['false_negatives']['most_weighted']:.2f} to "
            f"{last['false_negatives']['most_weighted']:.2f}") in summary
    assert f"N = {last['num_negatives']}" in summary
    footer = page.split("<footer>", 1)[1]
    assert "backend tensorflow" in footer or "backend jax" in footer
    assert "keras-hardneg" in footer and "CPUs" in footer
    assert "git commit" in footer or "no git checkout" in footer


def test_the_probe_does_not_change_training(digits_run, tmp_path):
    out, result = digits_run
    off = run.train(DIGITS, str(tmp_path / "off"), verbose=0, export=False, report=False)
    assert off["history"]["loss"] == result["history"]["loss"]
    assert off["knn_accuracy"] == result["knn_accuracy"]
    assert not os.path.exists(tmp_path / "off" / "report.html")
    assert not os.path.exists(tmp_path / "off" / "probe.json")


def test_report_command_rewrites_a_run_page(digits_run, tmp_path, capsys):
    out, _ = digits_run
    copy = tmp_path / "run"
    shutil.copytree(out, copy)
    os.remove(copy / "report.html")
    assert cli.main(["report", str(copy)]) == 0
    assert "report.html" in capsys.readouterr().out
    _check_page(copy / "report.html", IMAGE_SECTIONS)


@pytest.mark.heavy  # heavy tier since 2026-11-29 (suite time: docs/notes/suite_time.md)
def test_report_command_on_a_zoo_entry_with_data_given(digits_run, tmp_path, capsys):
    out, _ = digits_run
    entry = tmp_path / "zoo" / "simclr-hard-digits"
    entry.mkdir(parents=True)
    shutil.copytree(os.path.join(out, "preset"), entry / "preset")
    for name in ("recipe.json", "history.json", "results.json"):
        shutil.copy(os.path.join(out, name), entry / name)
    page_path = tmp_path / "entry.html"
    assert cli.main(["report", str(entry), "--dataset", "digits",
                     "--output", str(page_path)]) == 0
    page = _check_page(page_path, IMAGE_SECTIONS)
    assert "Zoo entry" in page and "encoder&#x27;s features" in page
    # by name, through KERAS_HARDNEG_ZOO
    os.environ["KERAS_HARDNEG_ZOO"] = str(tmp_path / "zoo")
    try:
        cwd = os.getcwd()
        os.chdir(tmp_path)
        try:
            assert cli.main(["report", "simclr-hard-digits", "--dataset", "digits"]) == 0
        finally:
            os.chdir(cwd)
    finally:
        del os.environ["KERAS_HARDNEG_ZOO"]
    assert (tmp_path / "simclr-hard-digits-report.html").is_file()


def test_report_refuses_a_folder_that_is_neither_in_one_line(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    assert cli.main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "neither a run directory" in err
    assert cli.main(["report", "no-such-entry"]) == 2
    assert "neither a run directory" in capsys.readouterr().err


def test_report_names_a_damaged_history_and_keeps_the_page(digits_run, tmp_path, capsys):
    out, _ = digits_run
    copy = tmp_path / "run"
    shutil.copytree(out, copy)
    before = (copy / "report.html").read_text()
    text = (copy / "history.json").read_text()
    (copy / "history.json").write_text(text[: len(text) // 2])  # truncated mid-write
    assert cli.main(["report", str(copy)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "history.json is damaged" in err[0], err
    assert (copy / "report.html").read_text() == before


def test_a_user_file_named_report_html_is_not_replaced(tmp_path):
    path = tmp_path / "report.html"
    path.write_text("<html>my own page</html>")
    with pytest.raises(FileExistsError, match="not a keras-hardneg report"):
        report_page.write_page(str(path), report_page.render_page("x", []))
    assert path.read_text() == "<html>my own page</html>"


@pytest.mark.heavy  # heavy tier since 2026-11-29 (suite time: docs/notes/suite_time.md)
def test_a_moco_run_probes_its_query_projections(tmp_path):
    recipe = {"epochs": 1, "batch_size": 64,
              "framework": {"name": "moco_v2", "queue_size": 256},
              "loss": {"name": "ring", "lower_percentile": 5, "upper_percentile": 50}}
    result = run.train(recipe, str(tmp_path / "moco"), verbose=0, export=False)
    page = _check_page(result["report"], IMAGE_SECTIONS)
    assert "Ring keeps the negatives" in page
    record = json.load(open(tmp_path / "moco" / "probe.json"))["records"][-1]
    # Ring's weights: 1 inside its band of floor(0.5 N) - floor(0.05 N) negatives
    n = record["num_negatives"]
    assert record["effective_negatives"] == pytest.approx(n // 2 - int(0.05 * n))


# ---------------------------------------------------------------------- graphs
def test_a_graph_run_writes_its_report(tmp_path):
    from tests.run.test_modality import write_tu

    folder = write_tu(str(tmp_path / "TOY"), graphs=40)
    recipe = {"data": dataset_spec(folder), "epochs": 2, "batch_size": 16,
              "loss": {"name": "hard", "beta": 1.0},
              "sampler": {"name": "batchsampler", "refresh_every": 2}}
    out = str(tmp_path / "run")
    result = run.train(recipe, out, verbose=0, export=False)
    page = _check_page(result["report"], GRAPH_SECTIONS)
    assert "SVM accuracy" in page
    # BatchSampler: batch hardness and false-negative rate against uniform batches
    assert "sampler-batches-against-uniform" in _sections(page)
    record = json.load(open(os.path.join(out, "probe.json")))["records"][-1]
    assert set(record["batches"]) == {"sampler", "uniform"}
    assert set(record["batches"]["sampler"]) == {"hardness", "false_negative_rate"}
    # the SVM's spread over folds beside the change; GraphCL's pairing named; graphs drawn
    results = json.load(open(os.path.join(out, "results.json")))
    figures = _body(page, "figures")
    assert f"&plusmn; {results['svm_accuracy_std']:.4f}" in figures
    assert "cross-view" in _body(page, "negatives")
    assert "<img" in _body(page, "hardest-negatives")


# ------------------------------------------------------------------------ text
def test_a_text_run_writes_its_report(tmp_path):
    pytest.importorskip("tokenizers")
    from tests.run.test_modality import write_sentences, write_sts_layout

    corpus = write_sentences(str(tmp_path / "corpus.txt"), n=120)
    bench = write_sts_layout(str(tmp_path / "bench"))
    recipe = {"data": dataset_spec(corpus), "epochs": 1, "batch_size": 16,
              "encoder": {"name": "transformer", "width": 16},
              "evaluation": {"benchmark_dir": bench}}
    out = str(tmp_path / "run")
    result = run.train(recipe, out, verbose=0, export=False)
    page = _check_page(result["report"], TEXT_SECTIONS)
    assert "nearest sentences" in page and "STS avg" in page
    assert "<h1>SimCSE + nt_xent on corpus.txt: what the negatives did</h1>" in page
    assert "same class" not in page.split('<p class="summary">', 1)[1].split("</p>", 1)[0]
    record = json.load(open(os.path.join(out, "probe.json")))["records"][-1]
    assert "false_negatives" not in record  # sentences have no labels
    # one epoch: numbers, not a curve of one point; the gallery shows sentences
    assert "One epoch" in _body(page, "curves-per-epoch")
    gallery = _body(page, "hardest-negatives")
    shown = re.findall(r"<li>.*?</li>", gallery)
    assert len(shown) == sum(len(h["negatives"]) for h in record["hardest"])
    sentences = open(corpus).read().splitlines()
    assert any(html_escape(s) in gallery for s in sentences if s)
