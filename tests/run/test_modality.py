"""The run path for graphs and sentences: `keras-hardneg train --dataset TU_FOLDER` and
`--dataset FILE.txt` train the modality's default recipe end to end (uniform and
BatchSampler batches), write the modality's figures, export, resume, and `evaluate`
reproduces the figures from the run directory and from the exported encoder."""

import json
import os
import shutil

import keras
import numpy as np
import pytest

from keras_hardneg import cli, run
from keras_hardneg.data import dataset_spec
from keras_hardneg.evaluation.sts import STS_SUBSETS
from keras_hardneg.modalities import modality_of

# ------------------------------------------------------------------ fixtures


def write_tu(folder, graphs=24, seed=0):
    """A small TU-format folder: two classes (rings vs stars), node labels."""
    rng = np.random.default_rng(seed)
    os.makedirs(folder, exist_ok=True)
    edges, indicator, node_labels, labels = [], [], [], []
    offset = 1
    for g in range(graphs):
        n = int(rng.integers(4, 9))
        star = g % 2
        pairs = [(0, i) for i in range(1, n)] if star else [(i, (i + 1) % n) for i in range(n)]
        for a, b in pairs:
            edges += [(offset + a, offset + b), (offset + b, offset + a)]
        indicator += [g + 1] * n
        node_labels += [int(x) for x in rng.integers(0, 3, size=n)]
        labels.append(star)
        offset += n
    name = os.path.basename(folder)

    def write(suffix, rows):
        with open(os.path.join(folder, f"{name}_{suffix}.txt"), "w") as f:
            f.write("\n".join(rows) + "\n")

    write("A", [f"{a}, {b}" for a, b in edges])
    write("graph_indicator", [str(i) for i in indicator])
    write("graph_labels", [str(y) for y in labels])
    write("node_labels", [str(x) for x in node_labels])
    return folder


WORDS = ("the cat dog bird sat ran sang on a mat in park tree big small red blue "
         "house car road river").split()


def write_sentences(path, n=160, seed=0):
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        for _ in range(n):
            f.write(" ".join(rng.choice(WORDS, size=int(rng.integers(3, 9)))) + ".\n")
    return path


def write_sts_layout(root, seed=0):
    """A tiny benchmark folder in the layout of shared/data/text (every STS task)."""
    rng = np.random.default_rng(seed)

    def pairs(n):
        rows = []
        for _ in range(n):
            a = " ".join(rng.choice(WORDS, size=5))
            b = " ".join(rng.choice(WORDS, size=5))
            rows.append((a, b, float(rng.uniform(0, 5))))
        return rows

    def write(path, lines):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")

    for task in ("STS12", "STS13", "STS14", "STS15", "STS16"):
        folder = os.path.join(root, "STS", f"{task}-en-test")
        for subset in STS_SUBSETS[task]:
            rows = pairs(4)
            write(os.path.join(folder, f"STS.input.{subset}.txt"),
                  [f"{a}\t{b}" for a, b, _ in rows])
            write(os.path.join(folder, f"STS.gs.{subset}.txt"), [f"{g:.2f}" for _, _, g in rows])
    write(os.path.join(root, "STS", "STSBenchmark", "sts-test.csv"),
          [f"main-captions\tMSRvid\t2012test\t{i:04d}\t{g:.3f}\t{a}\t{b}"
           for i, (a, b, g) in enumerate(pairs(12))])
    write(os.path.join(root, "SICK", "SICK_test_annotated.txt"),
          ["pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment"]
          + [f"{i}\t{a}\t{b}\t{g:.1f}\tNEUTRAL" for i, (a, b, g) in enumerate(pairs(12))])
    return root


# ---------------------------------------------------------------------- graphs


def test_a_tu_folder_is_a_graph_dataset_with_the_graphcl_recipe(tmp_path):
    folder = write_tu(str(tmp_path / "TOY"))
    spec = dataset_spec(folder)
    assert spec == {"name": "tu", "folder": folder}
    recipe = run.load_recipe({"data": spec})
    assert modality_of(recipe).name == "graph"
    assert (recipe["framework"]["name"], recipe["encoder"]["name"],
            recipe["augmentation"]["name"]) == ("graphcl", "gin", "graphcl")
    with pytest.raises(ValueError, match="graph"):  # an image encoder on graphs is refused
        run.load_recipe({"data": spec, "encoder": "small_convnet"})


def test_graph_batches_take_ceil_n_over_b_steps_whatever_the_sampler(tmp_path):
    # Uniform graph batches complete the last one (every graph each epoch), as BatchSampler's
    # epochs do: both samplers get the same number of updates (they once ran N // B vs
    # ceil(N / B), 1 vs 2 steps an epoch on MUTAG).
    from keras_hardneg.data import load_tu

    folder = write_tu(str(tmp_path / "TOY"), graphs=20)
    graphs = load_tu(folder)
    n = len(graphs)
    for sampler in ({"name": "uniform"}, {"name": "batchsampler", "num_candidates": 8,
                                          "num_neighbors": 4, "refresh_every": 2}):
        recipe = run.load_recipe({"data": dataset_spec(folder), "batch_size": 8,
                                  "sampler": sampler})
        feed = run.make_train_feed(recipe, graphs, None)
        assert feed.steps_per_epoch == -(-n // 8) and n % 8, (sampler, n)


@pytest.fixture(scope="module")
def graph_run(tmp_path_factory):
    """`keras-hardneg train --dataset TU_FOLDER` with BatchSampler batches (the uniform
    path is the resume test's)."""
    root = tmp_path_factory.mktemp("graph")
    folder = write_tu(str(root / "TOY"))
    out = root / "run"
    argv = ["train", "--dataset", folder, "--output", str(out), "--epochs", "2",
            "--batch-size", "8", "--sampler", "batchsampler", "--verbose", "0"]
    assert cli.main(argv) == 0
    return out


def test_cli_trains_graphcl_on_a_tu_folder(graph_run):
    results = json.loads((graph_run / "results.json").read_text())
    assert 0.0 <= results["svm_accuracy"] <= 1.0 and results["svm_accuracy_std"] >= 0.0
    assert results["modality"] == "graph" and results["epochs_run"] == 2
    assert results["graphs_per_second"] > 0 and "images_per_second" not in results
    card = json.loads((graph_run / "encoder" / "model_card.json").read_text())
    assert card["modality"] == "graph"
    assert card["metrics"]["svm_accuracy"] == pytest.approx(results["svm_accuracy"])


def test_a_graph_run_reports_the_untrained_encoders_svm_accuracy(graph_run):
    """Issue 47, item 9: the image summary puts the random encoder's kNN beside the trained
    one; a graph run had no such baseline. Now its random encoder's SVM accuracy."""
    results = json.loads((graph_run / "results.json").read_text())
    assert 0.0 <= results["svm_accuracy_epoch0"] <= 1.0
    rows = dict(cli._figure_rows(results, None))
    assert rows["SVM before training"].startswith(f"{results['svm_accuracy_epoch0']:.4f}")
    assert json.loads((graph_run / "baseline.json").read_text()) == {
        "svm_accuracy": results["svm_accuracy_epoch0"]}


@pytest.mark.parametrize("where", ["run", "export"])
def test_evaluate_reproduces_a_graph_run(graph_run, where, capsys):
    results = json.loads((graph_run / "results.json").read_text())
    path = graph_run if where == "run" else graph_run / "encoder"
    capsys.readouterr()
    assert cli.main(["evaluate", str(path), "--json"]) == 0
    measured = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert measured["svm_accuracy"] == pytest.approx(results["svm_accuracy"], abs=1e-9)


@pytest.mark.heavy  # two graph runs (~24 CPU-s); by default: the feed's state round trip
# (tests/data/test_graph_feed.py) and an interrupted run's resume (tests/run/test_rerun.py)
def test_graph_runs_resume_with_the_feed_state(tmp_path):
    folder = write_tu(str(tmp_path / "TOY"))
    recipe = {"data": dataset_spec(folder), "epochs": 1, "batch_size": 8}
    out = str(tmp_path / "run")

    class StopAfterOneEpoch(keras.callbacks.Callback):  # an interrupted 2-epoch run
        def on_epoch_end(self, epoch, logs=None):
            self.model.stop_training = True

    recipe["epochs"] = 2
    first = run.train(recipe, out, verbose=0, export=False,
                      extra_callbacks=[StopAfterOneEpoch()])
    again = run.train(recipe, out, verbose=0, export=False)
    assert first["epochs_run"] == 1
    assert again["epochs_trained_now"] == 1 and again["epochs_run"] == 2
    assert first["history"]["loss"][0] == again["history"]["loss"][0]


# ----------------------------------------------------------------------- text


def test_a_txt_file_is_a_text_dataset_with_the_simcse_recipe(tmp_path):
    path = write_sentences(str(tmp_path / "corpus.txt"))
    spec = dataset_spec(path)
    assert spec == {"name": "text_file", "path": path}
    recipe = run.load_recipe({"data": spec})
    assert modality_of(recipe).name == "text"
    assert (recipe["encoder"]["name"], recipe["augmentation"]["name"],
            recipe["loss"]["temperature"]) == ("transformer", "simcse", 0.05)


@pytest.fixture(scope="module")
def text_run(tmp_path_factory):
    """`keras-hardneg train --dataset FILE.txt --benchmark-dir DIR` with BatchSampler
    batches (uniform batches: tests/models/test_text_simclr.py)."""
    root = tmp_path_factory.mktemp("text")
    corpus = write_sentences(str(root / "corpus.txt"))
    bench = write_sts_layout(str(root / "bench"))
    out = root / "run"
    argv = ["train", "--dataset", corpus, "--output", str(out), "--epochs", "1",
            "--batch-size", "16", "--sampler", "batchsampler", "--width", "16",
            "--verbose", "0", "--benchmark-dir", bench]
    assert cli.main(argv) == 0
    return out, bench


def test_cli_trains_simcse_on_a_text_file_and_evaluates_on_sts(text_run):
    out, _ = text_run
    results = json.loads((out / "results.json").read_text())
    assert results["modality"] == "text"
    assert set(results["sts"]) >= {"STS12", "STS16", "STSBenchmark", "SICKRelatedness", "avg"}
    assert (out / "tokenizer.json").exists()
    assert (out / "encoder" / "assets" / "tokenizer.json").exists()


@pytest.mark.parametrize("where", ["run", "export"])
def test_evaluate_reproduces_a_text_run(text_run, where, capsys):
    out, bench = text_run
    results = json.loads((out / "results.json").read_text())
    path = out if where == "run" else out / "encoder"
    capsys.readouterr()
    assert cli.main(["evaluate", str(path), "--benchmark-dir", bench, "--json"]) == 0
    measured = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert measured["sts"]["avg"] == pytest.approx(results["sts"]["avg"], abs=1e-4)


def test_text_evaluate_without_benchmark_dir_is_one_clear_line(text_run, tmp_path, capsys):
    out, _ = text_run
    alone = tmp_path / "encoder"  # an exported encoder away from its run (no recipe)
    shutil.copytree(out / "encoder", alone)
    capsys.readouterr()
    assert cli.main(["evaluate", str(alone)]) == 2
    assert "--benchmark-dir" in capsys.readouterr().err


MUTAG = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data",
                     "tudataset", "MUTAG")


@pytest.mark.heavy  # heavy tier since 2026-11-29 (suite time: docs/notes/suite_time.md)
@pytest.mark.skipif(not os.path.isdir(MUTAG), reason="needs ../shared/data/tudataset")
def test_graphcl_fits_mutag_end_to_end(tmp_path):
    """GraphCL on the real MUTAG (188 graphs) for 3 epochs: the loss falls and the SVM
    accuracy is that of a real embedding (chance is 66.5 %, the majority class)."""
    out = run.train({"data": dataset_spec(MUTAG), "epochs": 3}, str(tmp_path / "run"),
                    verbose=0, export=False)
    loss = out["history"]["loss"]
    assert np.isfinite(loss).all() and loss[-1] < loss[0]
    assert 0.7 < out["svm_accuracy"] <= 1.0


def test_evaluation_length_reads_whole_sentences_only_where_the_encoder_can():
    from keras_hardneg.modalities.text import ANY_LENGTH_EVALUATION_TOKENS, evaluation_length

    fixed = keras.Sequential([keras.Input((32,), dtype="int32"), keras.layers.Embedding(9, 2)])
    ids = keras.Input((None,), dtype="int32")
    any_length = keras.Model(ids, keras.layers.Embedding(9, 2)(ids))
    assert evaluation_length(fixed, 32) == 32
    assert evaluation_length(any_length, 32) == ANY_LENGTH_EVALUATION_TOKENS
    assert evaluation_length(any_length, 32, max_tokens=32) == 32
    assert evaluation_length(fixed, 32, max_tokens=32) == 32
    with pytest.raises(ValueError, match=r"`max_tokens` \(16\): this encoder reads exactly 32"):
        evaluation_length(fixed, 32, max_tokens=16)
    for bad in (1, 2.5, True):
        with pytest.raises(ValueError, match=r"`max_tokens` must be an integer >= 2"):
            evaluation_length(any_length, 32, max_tokens=bad)
