"""The run report's pieces on hand-made data (no training): the uniform-batch baseline, the
histogram's range, the collapse check, the gallery's choice of negatives, the projector
files, and the page's words where a panel would be constant by construction."""

import os

import numpy as np
import pytest

from keras_hardneg.losses import NTXentLoss
from keras_hardneg.run.report import probe as probe_lib
from keras_hardneg.modalities import report as modality_report
from keras_hardneg.run.report import page as report_page
from keras_hardneg.run.report import run_report


def test_uniform_false_negative_rate_is_the_chance_of_a_shared_label():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, size=50)
    same = sum(labels[i] == labels[j] for i in range(50) for j in range(50) if i != j)
    assert report_page.uniform_false_negative_rate(labels) == pytest.approx(same / (50 * 49))
    assert report_page.uniform_false_negative_rate(None) is None
    assert report_page.uniform_false_negative_rate([0, -1, 0, -1]) == 1.0  # unknowns left out


def test_cosine_range_covers_the_data_and_adapts_to_it():
    for cos in (np.array([0.86, 0.97]), np.array([-0.3, 0.42]), np.array([0.99, 1.0]),
                np.array([-1.0, -0.95])):
        lo, hi = probe_lib.cosine_range(cos)
        assert -1.0 <= lo <= cos.min() and cos.max() <= hi <= 1.0
        assert hi - lo >= 0.2 - 1e-9
        assert hi - lo <= cos.max() - cos.min() + 0.2 + 1e-9


def test_collapse_statistics_tell_a_collapse_from_a_spread():
    rng = np.random.default_rng(1)
    spread = probe_lib.collapse_statistics(rng.normal(size=(4000, 16)))
    assert spread["std"] == pytest.approx(1 / np.sqrt(16), rel=0.02)
    assert spread["effective_rank"] > 15.0
    collapsed = probe_lib.collapse_statistics(np.ones((50, 16)) + 1e-9 * rng.normal(
        size=(50, 16)))
    assert collapsed["std"] < 1e-6 and collapsed["effective_rank"] == pytest.approx(1.0,
                                                                                  abs=1e-3)


def _record(beta=1.0):
    from keras_hardneg.losses import HardNegativeContrastiveLoss

    rng = np.random.default_rng(2)
    z1, z2 = rng.normal(size=(2, 12, 8)).astype("float32")
    labels = np.arange(12) % 3
    loss = HardNegativeContrastiveLoss(beta=beta) if beta else NTXentLoss()
    arrays = {k: np.asarray(v) for k, v in probe_lib.pair_arrays(z1, z2, loss).items()}
    return probe_lib.score_pairs(None, None, loss, labels, arrays=arrays), arrays, labels


def test_hardest_negatives_are_each_anchors_heaviest():
    record, arrays, labels = _record()
    mask = arrays["mask"].astype(bool)
    y = np.concatenate([labels, labels])
    for h in record["hardest"]:
        a = h["anchor"]
        w = np.where(mask[a], arrays["weights"][a], -np.inf)
        top = np.argsort(-w, kind="stable")[:probe_lib.GALLERY_NEGATIVES]
        assert [n[0] for n in h["negatives"]] == top.tolist()
        for j, wj, c, same in h["negatives"]:
            assert wj == pytest.approx(arrays["weights"][a, j], rel=1e-4)
            assert c == pytest.approx(arrays["negative_cos"][a, j], abs=1e-4)
            assert same == int(y[a] == y[j])
    assert record["anchor_effective"] == pytest.approx(arrays["effective"].tolist(), rel=1e-3)


def test_identical_views_are_listed_once():
    """SimCSE's two views are the same ids: in inference mode both rows of an example score
    alike, and the gallery lists the example once."""
    from keras_hardneg.losses import HardNegativeContrastiveLoss

    z = np.random.default_rng(3).normal(size=(10, 8)).astype("float32")
    a = {k: np.asarray(v) for k, v in probe_lib.pair_arrays(
        z, z, HardNegativeContrastiveLoss(beta=1.0)).items()}
    gallery = probe_lib.hardest_negatives(a["weights"], a["negative_cos"],
                                          a["mask"].astype(bool), a["positive_cos"], None, 0)
    for h in gallery:
        examples = [j % 10 for j, *_ in h["negatives"]]
        assert len(examples) == probe_lib.GALLERY_NEGATIVES == len(set(examples))
        assert all(same is None for *_, same in h["negatives"])


def test_projector_files_hold_both_views(tmp_path):
    z = np.arange(24, dtype=float).reshape(6, 4)
    folder = probe_lib.write_projector(str(tmp_path / "proj"), z, np.array([7, 3, 9]),
                                       np.array([1, 0, 1]), epoch=5)
    np.testing.assert_allclose(np.loadtxt(os.path.join(folder, "tensors.tsv")), z)
    meta = open(os.path.join(folder, "metadata.tsv")).read().splitlines()
    assert meta == ["example\tview\tlabel", "7\t1\t1", "3\t1\t0", "9\t1\t1", "7\t2\t1",
                    "3\t2\t0", "9\t2\t1"]
    assert "epoch 5" in open(os.path.join(folder, "projector_config.pbtxt")).read()
    with pytest.raises(ValueError, match="embeddings"):
        probe_lib.write_projector(str(tmp_path / "p2"), z[:5], np.arange(3), None, 0)


def test_constant_panels_are_said_not_drawn():
    """NT-Xent: every weight 1 and every effective number N: no scatter, no flat curve."""
    first, _, _ = _record(beta=0)
    last = dict(first, epoch=1)
    first = dict(first, epoch=0)
    html = report_page.negatives_section({"records": [first, last], "probe_size": 12},
                                         "NTXentLoss", ["Pairing: differs."])
    assert "constant by construction" in html
    assert "weight against similarity" not in html  # the alt text of the scatter
    assert "Pairing: differs." in html and "probe.json" in html
    hard, harder = _record(beta=1.0)[0], _record(beta=2.0)[0]
    html = report_page.negatives_section({"records": [dict(hard, epoch=0),
                                                      dict(harder, epoch=1)]},
                                         "HardNegativeContrastiveLoss")
    assert "weight against similarity" in html and "Effective negatives of each anchor" in html


def test_curves_name_a_quiet_clamp_a_constant_rate_and_one_epoch():
    history = {"loss": [2.0, 1.5, 1.2], "false_negative_rate": [0.1, 0.12, 0.13],
               "clamp_fraction": [0.0, 0.0, 0.0], "positive_cosine": [0.5, 0.6, 0.7],
               "negative_cosine": [0.2, 0.3, 0.3]}
    rate = {"schedule": "constant", "epochs": [0.0, 1.0, 2.0], "values": [0.001] * 3}
    html = report_page.curves_section(history, None, uniform_fn=0.1, has_clamp=True,
                                      learning_rate=rate)
    assert "clamp never engaged" in html and "constant at 0.001" in html
    assert "0.1000" in html and "<img" in html
    quiet = report_page.curves_section(history, None, has_clamp=False)
    assert "clamp" not in quiet  # a loss without a clamp: nothing to say
    one = report_page.curves_section({k: v[:1] for k, v in history.items()}, None,
                                     uniform_fn=0.1)
    assert "One epoch" in one and "<img" not in one


def test_figures_give_the_spread_beside_the_change():
    results = {"svm_accuracy": 0.85, "svm_accuracy_std": 0.0619}
    html = report_page.figures_section([("svm_accuracy", "SVM accuracy", 0.85)],
                                       {"svm_accuracy": 0.8497}, results=results)
    assert "+0.0003 &plusmn; 0.0619" in html and "folds" in html


def test_a_graph_is_drawn_and_the_gallery_lists_sentences():
    plt = report_page._pyplot()
    fig, ax = plt.subplots()
    modality_report.draw_graph(ax, (5, np.array([[0, 1], [1, 0], [1, 2], [2, 3], [3, 4]])))
    assert len(ax.lines) == 4  # an edge listed both ways is drawn once
    plt.close(fig)
    record, _, _ = _record()
    probe = {"indices": list(range(100, 112)), "records": [dict(record, epoch=3)]}
    items = {100 + i: f"sentence {i}" for i in range(12)}
    html = report_page.hardest_negatives_section(probe, (None, items))
    assert html.count("<li>") == probe_lib.GALLERY_ANCHORS * probe_lib.GALLERY_NEGATIVES
    assert "sentence" in html and "weighted most" in html
    assert report_page.hardest_negatives_section({"records": [{}]}, None) is None


def test_examples_whose_views_differ_show_the_view_each_row_names():
    # retrieval: view 1 is the query, view 2 its positive document
    probe = {"indices": [10, 11], "records": [{"epoch": 1, "hardest": [
        {"anchor": 0, "positive_cosine": 0.9,
         "negatives": [[3, 1.3, 0.4, None], [1, 0.7, 0.2, None]]}]}]}
    items = {i: modality_report.Views((f"query {i}", f"document {i}")) for i in (10, 11)}
    html = report_page.hardest_negatives_section(probe, (None, items))
    assert "<b>query 10</b>" in html  # the anchor, row 0: example 10, view 1
    assert "document 11 <small>#11 v2" in html and "query 11 <small>#11 v1" in html
    assert "document 10" not in html


def test_the_dual_encoder_probe_says_how_its_pairing_differs_from_training():
    recipe = {"framework": {"name": "dual_encoder"}, "batch_size": 32}
    notes = run_report.probe_view_notes(recipe, None, {}, [])
    assert len(notes) == 1 and "B &minus; 1 = 31" in notes[0] and "query" in notes[0]


def test_environment_names_versions_backend_and_commit():
    env = report_page.environment()
    assert "keras" in env["versions"] and env["backend"]
    line = report_page.environment_line(dict(env, commit=None))
    assert "no git checkout" in line
    assert "abc123" in report_page.environment_line(dict(env, commit="abc123"))


def test_a_probe_file_from_before_still_draws():
    """Records without the newer keys (range, per-anchor numbers, gallery, collapse): the
    histogram over [-1, 1], no gallery, no collapse panel, no error."""
    record, _, _ = _record()
    old = {k: v for k, v in record.items() if k not in (
        "cosine_range", "anchor_effective", "hardest", "collapse")}
    old["cosine_histogram"] = np.histogram([0.1, 0.2], bins=40, range=(-1, 1))[0].tolist()
    probe = {"records": [dict(old, epoch=0), dict(old, epoch=1)], "probe_size": 12}
    html = report_page.negatives_section(probe, "HardNegativeContrastiveLoss")
    assert "Collapse check" not in html and "<img" in html
    assert report_page.hardest_negatives_section(probe, None) is None


def test_the_recipe_table_keeps_a_small_learning_rate():
    html = report_page.recipe_table({"optimizer": {"learning_rate": 2e-5, "weight_decay": 0.01},
                                     "loss": {"temperature": 0.05, "tau_plus": 0.0}})
    assert "= 2e-05" in html and "= 0.0100" in html and "= 0.0500" in html
    assert "= 0.0000" in html  # a zero stays a zero
