"""Retrieval: (query, relevant document) pairs of a BEIR folder, hard negatives mined from the
corpus, a dual encoder fine-tuned on the tuples, BEIR's nDCG@10 / Recall@100 / MRR@10.

The fourth modality, registered here once (:data:`~keras_hardneg.registry.MODALITIES`
``"retrieval"``, with the ``"mined"`` sampler a retrieval recipe names); its data is the
``"beir"`` dataset (:mod:`keras_hardneg.data.retrieval.source`), its framework
``"dual_encoder"`` (:mod:`keras_hardneg.models.dual_encoder`), its view maker ``"none"``.
It reads token ids as the text modality does (its encoders are text encoders: a pretrained
BERT such as all-MiniLM-L6-v2, or our Transformer) and exports a text encoder (token ids ->
embedding, the tokenizer shipped beside it), so it extends :class:`TextModality` and changes
what differs: the feed, the evaluation, the report and the figures.

* **Feed.** Every training pair is a tuple (query, positive, ``K`` negatives), fed as one flat
  batch of ``B (2 + K)`` token-id rows (:func:`keras_hardneg.sampling.make_tuple_dataset` on
  TensorFlow, :class:`~keras_hardneg.sampling.TuplePyDataset` elsewhere), no query and no
  document twice in a batch (:class:`~keras_hardneg.sampling.TupleBatches`). Sampler
  ``"uniform"``: pairs (``K = 0``, in-batch negatives only). Sampler ``"mined"``: ``K``
  negatives mined once with the starting encoder when training begins
  (:func:`~keras_hardneg.sampling.mine_hard_negatives`: rank window, margins, top or random),
  and again every ``remine_every`` epochs with the encoder being trained
  (:class:`TupleMiner`, a :class:`~keras_hardneg.callbacks.ReminingCallback`); until the
  first mining the tuples hold seeded random negatives (only a build before training could
  read them). ``order``: ``"shuffle"`` (default, a uniform order every epoch) or ``"walk"``
  (:class:`~keras_hardneg.sampling.TupleBatchSampler`: BatchSampler's random walk over a
  graph of the positives' embeddings, those of each mining; ``num_candidates``,
  ``num_neighbors``, ``restart_prob`` as the ``"batchsampler"`` sampler's). A resumed run
  gets back its tuples and order (:class:`TupleState`) and does not mine before training.
* **Evaluation.** BEIR's protocol on the test split (:func:`evaluate_retrieval`: cosine over
  the whole corpus, the query's own id dropped): ``ndcg_at_10``, ``recall_at_100``,
  ``mrr_at_10``; the starting encoder's (zero-shot) figures are the run's "epoch 0".
* **Report.** For a few training queries: the positive and the top mined negatives with their
  scores (the mining's and the trained encoder's), and which the framework's guard masks
  (:func:`mined_negatives_section`).

Example:
>>> from keras_hardneg.modalities import get_modality
>>> retrieval = get_modality("retrieval")
>>> retrieval.result_keys, retrieval.throughput_key, retrieval.asset_names
(('ndcg_at_10', 'recall_at_100', 'mrr_at_10'), 'pairs_per_second', ('tokenizer.json',))
>>> retrieval.framework_context({"sampler": {"name": "mined", "num_negatives": 3}})
{'num_negatives': 3}
"""

from __future__ import annotations

import html
import json
import time
from dataclasses import dataclass
from typing import Any

import keras
import numpy as np

from keras_hardneg.callbacks.remining import ReminingCallback
from keras_hardneg.modalities import report
from keras_hardneg.modalities.evaluation import Figure
from keras_hardneg.modalities.text import TextModality, _any_length, _encode_ids
from keras_hardneg.registry import MODALITIES, SAMPLERS, Param, ConfigError as RecipeError
from keras_hardneg.sampling.mining import SAMPLING_STRATEGIES

__all__ = ["RetrievalModality", "RETRIEVAL_RECIPE", "MiningPlan", "TupleMiner",
           "TupleState", "evaluate_retrieval", "mined_negatives_section", "ENCODE_BATCH",
           "REPORT_QUERIES", "REPORT_NEGATIVES"]

#: The default retrieval run: the shared fine-tuning protocol of issue 57 (RETR.md) --
#: a pretrained BERT (all-MiniLM-L6-v2: give its folder as ``encoder.preset`` and
#: ``data.tokenizer``, or ``--preset``), mean pooling; NT-Xent at t 0.05 over the query's
#: positive, the batch's other documents and one negative mined once with the starting
#: encoder (NV-Retriever's TopK-PercPos 95 %: relative_margin 0.05, top, window 50);
#: batch 32, AdamW 2e-5 (weight decay 0.01), 10 % linear warm-up then linear decay, 3
#: epochs, 256 tokens.
RETRIEVAL_RECIPE: dict[str, Any] = {
    "framework": {"name": "dual_encoder"},
    "encoder": {"name": "pretrained_bert", "pooling": "mean"},
    "loss": {"name": "nt_xent", "temperature": 0.05},
    "sampler": {"name": "mined", "num_negatives": 1, "relative_margin": 0.05,
                "sampling_strategy": "top", "range_max": 50},
    "optimizer": {"name": "adamw", "learning_rate": 2e-5, "weight_decay": 0.01},
    "schedule": {"name": "warmup_linear", "warmup_fraction": 0.1},
    "augmentation": {"name": "none"},
    "data": {"name": "beir", "max_length": 256},
    "annealing": {},
    "evaluation": {"monitor_every": 0, "linear_probe": False},
    "batch_size": 32,
    "epochs": 3,
}

#: Texts encoded per batch by the miner, the evaluation and the report.
ENCODE_BATCH = 64
#: Training queries and negatives per query in the report's mined-negatives table.
REPORT_QUERIES = 5
REPORT_NEGATIVES = 3
#: How the report marks a negative the guard masks.
MASKED = " <b>[masked by the guard]</b>"


# ------------------------------------------------------------------------ sampler
@dataclass(frozen=True)
class MiningPlan:
    """The ``"mined"`` sampler's keys (see its registration): how the tuples' negatives
    are mined (:func:`~keras_hardneg.sampling.mine_hard_negatives`'s arguments) and how
    often again."""

    num_negatives: int = 1
    range_min: int = 0
    range_max: int | None = None
    absolute_margin: float | None = None
    relative_margin: float | None = 0.05
    sampling_strategy: str = "top"
    remine_every: int = 0
    source: str = "mine"
    order: str = "shuffle"
    num_candidates: int = 1000
    num_neighbors: int | None = None
    restart_prob: float = 0.2

    def miner_arguments(self, seed: int) -> dict[str, Any]:
        return {"num_negatives": self.num_negatives, "range_min": self.range_min,
                "range_max": self.range_max, "absolute_margin": self.absolute_margin,
                "relative_margin": self.relative_margin,
                "sampling_strategy": self.sampling_strategy, "seed": seed}


#: ``source`` of the ``"mined"`` sampler: mined from the corpus, or a pair file's own.
SOURCES = ("mine", "file")
#: ``order`` of the ``"mined"`` sampler: how an epoch orders the tuples before packing
#: (:class:`~keras_hardneg.sampling.TupleBatches` /
#: :class:`~keras_hardneg.sampling.TupleBatchSampler`).
ORDERS = ("shuffle", "walk")


def _check_window(c: dict[str, Any]) -> str | None:
    if c["range_max"] is not None and c["range_max"] - c["range_min"] < c["num_negatives"]:
        return ("'range_max' - 'range_min' must hold at least 'num_negatives' ranks")
    if c["order"] == "walk" and c["source"] != "mine":
        return ("'order' = 'walk' needs 'source' = 'mine' (the walk's graph is built from "
                "the embeddings the miner computes)")
    if c["num_neighbors"] is not None and c["num_neighbors"] >= c["num_candidates"]:
        return (f"'num_neighbors' must be < 'num_candidates'; got {c['num_neighbors']} and "
                f"{c['num_candidates']}")
    return None


@SAMPLERS.register("mined", graph=False, modality="retrieval", check=_check_window,
                   help="retrieval tuples: K hard negatives per (query, positive), mined "
                        "from the corpus with the encoder (no document twice in a batch)",
                   params={
    "num_negatives": Param(int, low=1, help="K mined negatives per tuple"),
    "range_min": Param(int, low=0, help="first rank of the mining window"),
    "range_max": Param(int, low=1, default=None,
                       help="end of the mining window (default 10 K with a margin)"),
    "absolute_margin": Param(float, low=0.0, default=None,
                             help="keep negatives scored <= positive - margin"),
    "relative_margin": Param(float, low=0.0,
                             help="keep negatives scored <= positive (1 - margin) "
                                  "(NV-Retriever's 0.05; 0: at most the positive's score)"),
    "sampling_strategy": Param(str, choices=SAMPLING_STRATEGIES,
                               help="top: the best survivors; random: drawn among them"),
    "remine_every": Param(int, low=0, help="mine again with the encoder being trained every "
                                           "N epochs (0: once, before training)"),
    "source": Param(str, choices=SOURCES, help="mine: from the corpus; file: the negatives "
                                               "of the data's pair file (no mining)"),
    "order": Param(str, choices=ORDERS,
                   help="shuffle: a uniform order every epoch; walk: BatchSampler's random "
                        "walk over a graph of the positives' embeddings (the miner's), so "
                        "tuples with neighbouring positives share a batch"),
    "num_candidates": Param(int, low=2, help="walk: M, candidates drawn per node to build "
                                             "the graph (M >= T - 1: the exact kNN graph)"),
    "num_neighbors": Param(int, low=1, default=None,
                           help="walk: K, neighbours kept per node (default: 100, or "
                                "min(num_candidates, T - 1) - 1 on fewer tuples)"),
    "restart_prob": Param(float, low=0.0, high=1.0, high_inclusive=False,
                          help="walk: the walks' restart probability alpha"),
})
def mined_sampler(num_negatives: int = 1, range_min: int = 0, range_max: int | None = None,
                  absolute_margin: float | None = None, relative_margin: float | None = 0.05,
                  sampling_strategy: str = "top", remine_every: int = 0,
                  source: str = "mine", order: str = "shuffle", num_candidates: int = 1000,
                  num_neighbors: int | None = None, restart_prob: float = 0.2) -> MiningPlan:
    """The ``"mined"`` sampler's keys as a :class:`MiningPlan` (the retrieval feed reads
    them; no index sampler is built)."""
    return MiningPlan(num_negatives, range_min, range_max, absolute_margin, relative_margin,
                      sampling_strategy, remine_every, source, order, num_candidates,
                      num_neighbors, restart_prob)


def _plan(recipe: dict[str, Any]) -> MiningPlan | None:
    spec = dict(recipe["sampler"])
    name = spec.pop("name")
    if name == "uniform":
        return None
    if name != "mined":
        raise RecipeError(f"recipe key 'sampler.name' = {name!r}: retrieval data is fed as "
                          "tuples; choose 'uniform' (pairs, in-batch negatives) or 'mined'.")
    return SAMPLERS.build("mined", **spec)


# -------------------------------------------------------------------------- state
class TupleState:
    """The feed's tuples, epoch count and order (a walk's graph and generator) as resumable
    state (``get_state`` / ``set_state`` for the run's backup), with the run's mining
    records: a resumed run trains on the tuples the interrupted one had, in the order it
    would have had, and its :class:`TupleMiner` does not mine again before training."""

    def __init__(self, batches: Any, runtime: dict | None = None):
        self.batches = batches
        self.runtime = {} if runtime is None else runtime

    def get_state(self) -> dict:
        state = dict(self.batches.get_state())
        state["minings"] = json.dumps(self.runtime.get("minings", []), default=_plain_number)
        return state

    def set_state(self, state: dict) -> None:
        self.batches.set_state(state)
        if "minings" in state:
            self.runtime["minings"] = json.loads(str(state["minings"]))
        self.runtime["restored"] = True


def _plain_number(value: Any) -> Any:
    """A NumPy scalar of a mining record as JSON writes it (its Python value)."""
    return value.item() if hasattr(value, "item") else str(value)


def _encode(encoder: Any, ids: np.ndarray) -> np.ndarray:
    """``float32 [n, d]`` of token ids in inference mode (length-sorted batches cut to
    their longest row when the encoder reads any length)."""
    return _encode_ids(encoder, np.asarray(ids, np.int32), ENCODE_BATCH,
                       trim=_any_length(encoder))


class TupleMiner(ReminingCallback):
    """The retrieval feed's miner: :class:`~keras_hardneg.callbacks.ReminingCallback` set
    up from the data and the ``"mined"`` sampler -- it mines when training begins (with the
    starting encoder; its corpus embeddings reused from the epoch-0 evaluation when that ran)
    and every ``plan.remine_every`` epochs after (the encoder being trained), encoding token
    ids in length-sorted batches. A walk order (``TupleBatchSampler``) gets the corpus
    embeddings of each mining for its graph (the same pass: nothing is encoded twice).

    The first mining runs at the first epoch's start, after the run's backup has been
    restored (``on_train_begin`` of the callbacks after this one): a resumed run
    (:class:`TupleState` restored) keeps the interrupted run's tuples and does not mine.

    The training data's ``runtime`` keeps what the run's results and report show:
    ``"mined"`` (the latest :class:`~keras_hardneg.sampling.MinedNegatives`) and
    ``"minings"`` (one record per mining: epoch, tuples, queries without enough
    candidates, what each filter removed, score quantiles, seconds).
    """

    def __init__(self, data: Any, plan: MiningPlan, seed: int):
        options = plan.miner_arguments(seed)
        super().__init__(data.runtime["batches"], data.query_ids, data.corpus_ids,
                         data.positives, every_n_epochs=plan.remine_every or _NEVER,
                         mining_options=options, encode_fn=self._encode_fn,
                         mine_on_train_begin=True)
        self.data = data
        self._first_epoch = False

    def on_train_begin(self, logs=None):
        self._first_epoch = True  # mined at the first epoch's start (class docstring)

    def on_epoch_begin(self, epoch: int, logs=None):
        if not self._first_epoch:
            return
        self._first_epoch = False
        if self.data.runtime.pop("restored", False):
            self.data.runtime.pop("start_corpus", None)  # the backup's tuples are kept
            return
        self.remine(-1)

    def _encode_fn(self, model: Any, ids: Any) -> np.ndarray:
        if ids is self.data.corpus_ids:  # the queries are encoded first: keep it till here
            cached = self.data.runtime.pop("start_corpus", None)
            if cached is not None and not self.history:
                return cached
        return _encode(model.encoder, ids)

    def _log(self, logs):
        """The records go to the data's runtime (the run's results), not into the epoch
        logs: a key present at some epochs only would leave ``history.json`` ragged."""

    def remine(self, epoch: int = -1):
        start = time.perf_counter()
        mined = super().remine(epoch)
        s = mined.summary
        record = {"epoch": int(epoch) + 1, "tuples": len(mined), "queries": s.num_queries,
                  "short": s.short, "without_positive": s.without_positive,
                  "window_candidates": s.window_candidates, "removed": dict(s.removed),
                  "range_max": s.range_max, "positive_scores": s.positive_scores,
                  "negative_scores": s.negative_scores,
                  "seconds": round(time.perf_counter() - start, 3)}
        self.data.runtime["mined"] = mined
        self.data.runtime.setdefault("minings", []).append(record)
        return mined


#: ``every_n_epochs`` of a miner that mines only before training.
_NEVER = 2 ** 31 - 1


# --------------------------------------------------------------------- evaluation
def evaluate_retrieval(encoder: Any, data: Any, corpus: np.ndarray | None = None
                       ) -> dict[str, Any]:
    """BEIR's figures of ``encoder`` on ``data`` (a test-side
    :class:`~keras_hardneg.data.retrieval.RetrievalData`): ``ndcg_at_10``,
    ``recall_at_100``, ``mrr_at_10`` and ``test_queries`` (cosine over the whole corpus,
    the query's own id dropped: :func:`keras_hardneg.evaluation.retrieval_scores`).
    ``corpus``: the documents' embeddings when already computed."""
    from keras_hardneg.evaluation.retrieval import retrieval_scores

    if corpus is None:
        corpus = _encode(encoder, data.corpus_ids)
    queries = _encode(encoder, data.query_ids)
    scores = retrieval_scores(queries, corpus, data.queries.ids, data.corpus.ids, data.qrels)
    return {"ndcg_at_10": scores["ndcg@10"], "recall_at_100": scores["recall@100"],
            "mrr_at_10": scores["mrr@10"], "test_queries": scores["num_queries"]}


def _guard_masks(recipe: dict[str, Any], pos: float, negs: np.ndarray,
                 guide_pos: float, guide_negs: np.ndarray) -> np.ndarray:
    """Which negatives the framework's guard masks: scored (by the guide: the trained
    encoder for ``"self"``, the starting encoder's mining scores for ``"guide"``) above the
    positive's score minus the margin (absolute, or relative to the positive's score)."""
    fw = recipe["framework"]
    guard = fw.get("guard")
    if guard is None:
        return np.zeros(len(negs), bool)
    p, n = (pos, negs) if guard == "self" else (guide_pos, guide_negs)
    margin = float(fw.get("guard_margin") or 0.0)
    if fw.get("guard_strategy") == "relative":
        return n > p - abs(p) * margin
    return n > p - margin


def mined_negatives_section(encoder: Any, recipe: dict[str, Any], data: Any
                            ) -> tuple[str, str] | None:
    """``("Mined negatives", html)``: for :data:`REPORT_QUERIES` training queries (seeded),
    the positive and the top :data:`REPORT_NEGATIVES` mined negatives, each with the
    mining's score (the encoder that mined them) and the trained encoder's cosine, and
    whether the framework's guard masks it. Without mined tuples at hand (a pairs run, or a
    report written later in a new process) the negatives are mined now, with the trained
    encoder, among the queries' positives and a seeded subset of the corpus."""
    mined = data.runtime.get("mined")
    rng = np.random.default_rng(int(recipe["seed"]) + 5)
    if mined is not None and len(mined):
        rows = np.sort(rng.choice(len(mined), size=min(REPORT_QUERIES, len(mined)),
                                  replace=False))
        items = [(int(mined.query[r]), int(mined.positive[r]),
                  mined.negatives[r][:REPORT_NEGATIVES], float(mined.positive_scores[r]),
                  mined.negative_scores[r][:REPORT_NEGATIVES]) for r in rows]
        where = "mined by the run (the latest mining)"
    else:
        items, where = _mine_for_report(encoder, data, rng), (
            "mined now with the trained encoder, among the positives and a seeded subset of "
            "the corpus")
    if not items:
        return None
    texts = data.documents
    docs = sorted({d for _, p, negs, _, _ in items for d in [p, *negs]})
    doc_emb = dict(zip(docs, report.unit(_encode(encoder, data.corpus_ids[docs]))))
    q_emb = report.unit(_encode(encoder, data.query_ids[[q for q, *_ in items]]))
    rows_html = []
    for (q, p, negs, mined_pos, mined_negs), qe in zip(items, q_emb):
        pos = float(doc_emb[p] @ qe)
        trained = np.array([float(doc_emb[int(d)] @ qe) for d in negs])
        masked = _guard_masks(recipe, pos, trained, mined_pos, np.asarray(mined_negs))
        cells = "".join(
            f"<li><span class=\"cos\">{ms:.3f} / {ts:.3f}</span>"
            f"{MASKED if m else ''} {html.escape(report.short(texts[int(d)]))}</li>"
            for d, ms, ts, m in zip(negs, mined_negs, trained, masked))
        rows_html.append((
            f"<b>{html.escape(report.short(data.queries.texts[q]))}</b>",
            f"<span class=\"cos\">{mined_pos:.3f} / {pos:.3f}</span> "
            f"{html.escape(report.short(texts[p]))}", f"<ol>{cells}</ol>"))
    guard = recipe["framework"].get("guard")
    body = report.table(("query", "positive (mining / trained cosine)",
                         f"top {max(len(negs) for _, _, negs, _, _ in items)} mined negatives "
                         "(mining / trained cosine)"),
                        rows_html, "sentences") + report.note(
        f"{len(items)} training queries (seeded); negatives {where}. Scores: the cosine "
        "given by the encoder that mined them, then the trained encoder's. "
        + (f"The guard ({guard}, margin {recipe['framework'].get('guard_margin')}, "
           f"{recipe['framework'].get('guard_strategy')}) masks a negative scored above the "
           "positive minus the margin." if guard else "No guard: every negative counts."))
    return "Mined negatives", body


def _mine_for_report(encoder: Any, data: Any, rng: np.random.Generator) -> list:
    from keras_hardneg.sampling.mining import mine_hard_negatives

    with_pos = [i for i, p in enumerate(data.positives) if len(p)]
    if not with_pos:
        return []
    queries = np.sort(rng.choice(with_pos, size=min(REPORT_QUERIES, len(with_pos)),
                                 replace=False))
    positives = sorted({int(d) for q in queries for d in data.positives[q]})
    pool = sorted(set(positives) | set(report.subset(len(data.corpus), report.NEIGHBOUR_POOL,
                                                     int(rng.integers(1 << 30))).tolist()))
    pool_emb = _encode(encoder, data.corpus_ids[pool])
    where = {d: j for j, d in enumerate(pool)}
    k = min(REPORT_NEGATIVES, len(pool) - max(len(data.positives[q]) for q in queries))
    if k < 1:
        return []
    mined = mine_hard_negatives(_encode(encoder, data.query_ids[queries]), pool_emb,
                                [[where[int(d)] for d in data.positives[q]] for q in queries],
                                num_negatives=k)
    seen, items = set(), []
    for r in range(len(mined)):
        q = int(queries[mined.query[r]])
        if q in seen:
            continue
        seen.add(q)
        items.append((q, pool[int(mined.positive[r])],
                      [pool[int(j)] for j in mined.negatives[r]],
                      float(mined.positive_scores[r]), mined.negative_scores[r]))
    return items


# ----------------------------------------------------------------------- modality
@MODALITIES.register("retrieval")
class RetrievalModality(TextModality):
    """(query, document) pairs of a BEIR folder: tuples with mined negatives, a dual
    encoder, BEIR's figures (module docstring). Its inputs and artifacts are text's."""

    name = "retrieval"
    default_recipe = RETRIEVAL_RECIPE
    examples = "pairs"
    views_in_feed = True  # the framework draws no views: the feed holds the tuples
    shares_components_with = ("text",)
    figures = (Figure("ndcg_at_10", "nDCG@10", short="nDCG@10", scale=100.0,
                      index_label="nDCG@10 (x 100)"),
               Figure("recall_at_100", "Recall@100", short="R@100", scale=100.0,
                      index_label="Recall@100 (x 100)"),
               Figure("mrr_at_10", "MRR@10", short="MRR@10", scale=100.0,
                      index_label="MRR@10 (x 100)"))
    benchmark_sets = None

    def card_usage(self, card):
        """Text's usage, then how to search with it: one encoder for both sides."""
        return super().card_usage(card) + [
            "",
            "Search: the same encoder embeds queries and documents (the recipe's "
            "`data.query_max_length` and `data.max_length` tokens); normalise the rows and rank "
            "the documents by their dot product (cosine) with each query. For a large corpus "
            "`khn.sampling.top_k_cosine` (exact, or ScaNN with `index=\"scann\"`) returns the "
            "best `k` without the whole score matrix.",
        ]

    # ----------------------------------------------------------------- building
    def input_shape(self, x):
        return (int(x.max_length),)

    def framework_context(self, recipe):
        plan = _plan(recipe) if recipe["sampler"]["name"] in ("uniform", "mined") else None
        out = {"num_negatives": 0 if plan is None else int(plan.num_negatives)}
        data = recipe.get("data") or {}
        if data.get("query_max_length") and data.get("max_length") and \
                data["query_max_length"] < data["max_length"]:
            out["query_length"] = int(data["query_max_length"])
        return out

    def preset_keys(self, preset):
        from keras_hardneg.encoders.pretrained_text import finetune_recipe

        keys = finetune_recipe(preset)  # the encoder and its tokenizer; the retrieval
        return {"encoder": keys["encoder"], "data": keys["data"]}  # recipe's own protocol

    def initial_embeddings(self, x, seed):
        raise RecipeError("recipe key 'sampler.name': retrieval data is fed as tuples; "
                          "choose 'uniform' (pairs) or 'mined', not a graph sampler.")

    def encoder_features(self, encoder, x):
        return _encode(encoder, x.corpus_ids)

    # --------------------------------------------------------------------- feed
    def feed(self, recipe, x, y, sampler, views):
        from keras_hardneg import sampling
        from keras_hardneg.data._tf import tensorflow_backend

        if sampler is not None:
            self.initial_embeddings(x, 0)  # refused, with the message
        plan = _plan(recipe)
        pairs = np.asarray(x.pairs, np.int64)
        if plan is None:
            tuples: Any = (pairs[:, 0], pairs[:, 1])
        elif plan.source == "file":
            if x.negatives is None or x.negatives.shape[1] != plan.num_negatives:
                have = 0 if x.negatives is None else x.negatives.shape[1]
                raise RecipeError(f"recipe key 'sampler.source' = 'file' needs a pair file "
                                  f"with {plan.num_negatives} negatives a row "
                                  f"('sampler.num_negatives'); the data has {have}.")
            tuples = (pairs[:, 0], pairs[:, 1], np.asarray(x.negatives, np.int64))
        else:
            tuples = (pairs[:, 0], pairs[:, 1], _placeholder_negatives(
                x, pairs, plan.num_negatives, recipe["seed"]))
        batches = _tuple_batches(plan, tuples, len(x.corpus), recipe)
        x.runtime.clear()
        x.runtime.update(batches=batches, plan=plan)
        make = (sampling.make_tuple_dataset if tensorflow_backend()
                else sampling.make_tuple_py_dataset)
        return make(batches, x.query_ids, x.corpus_ids), {"tuples": TupleState(batches,
                                                                               x.runtime)}

    def monitors(self, recipe, train, test):
        plan = _plan(recipe)
        if plan is None or plan.source == "file":
            return []
        return [TupleMiner(train[0], plan, recipe["seed"])]

    # ------------------------------------------------------------------- probe
    def probe_batch(self, x, indices):
        return np.asarray(x.query_ids)[np.asarray(x.pairs)[indices, 0]]

    def probe_views(self, x, y, indices, views, seed):
        pairs = np.asarray(x.pairs)[indices]
        return (np.asarray(x.query_ids)[pairs[:, 0]], np.asarray(x.corpus_ids)[pairs[:, 1]],
                None)

    def probe_examples(self, x, y, indices):
        pairs, documents = np.asarray(x.pairs)[indices], x.documents
        return None, [report.Views((x.queries.texts[int(q)], documents[int(d)]))  # view 1, 2
                      for q, d in pairs[:, :2]]

    def labels_of(self, x, y, indices):
        return None

    # --------------------------------------------------------------- evaluation
    def evaluate(self, encoder, recipe, train, test, extras=None):
        if test is None or test[0] is None:
            return {}
        x_test = test[0]
        out = evaluate_retrieval(encoder, x_test)
        out["test_split"] = x_test.split
        x = train[0] if train is not None else None
        runtime = getattr(x, "runtime", {}) or {}
        if runtime.get("minings"):
            out["mining"] = runtime["minings"]
        return out

    def baseline(self, encoder, recipe, train, test):
        if test is None or test[0] is None:
            return None
        x, x_test = train[0], test[0]
        corpus = _encode(encoder, x_test.corpus_ids)
        if x is not None and np.shares_memory(x.corpus_ids, x_test.corpus_ids) and \
                len(x.corpus_ids) == len(x_test.corpus_ids):
            x.runtime["start_corpus"] = corpus  # the miner's first corpus pass, done here
        out = evaluate_retrieval(encoder, x_test, corpus=corpus)
        return {key: out[key] for key in self.result_keys}

    def summary_rows(self, results, recipe=None):
        return [(label, text.replace("the random encoder", "the starting encoder"))
                for label, text in super().summary_rows(results, recipe)]

    def missing_evaluation(self, recipe):
        return None

    def describe_evaluation(self, recipe):
        data = recipe["data"]
        return (f"BEIR's protocol on the '{data.get('test_split', 'test')}' split: cosine over "
                f"the whole corpus at {data.get('max_length')} tokens (a document whose id is "
                "the query's dropped); nDCG@10, Recall@100, MRR@10")

    def report_sections(self, encoder, recipe, train, test):
        section = mined_negatives_section(encoder, recipe, train[0])
        return [section] if section is not None else []

    def benchmark_embedder(self, encoder, *, x_train=None, preset=None, max_tokens=None):
        raise NotImplementedError("modality 'retrieval' is evaluated on its data's test split")

    def evaluate_benchmark(self, embed, benchmark_dir, *, senteval=False, seed=0):
        raise NotImplementedError("modality 'retrieval' is evaluated on its data's test split")


def _tuple_batches(plan: MiningPlan | None, tuples: Any, num_docs: int,
                   recipe: dict[str, Any]) -> Any:
    """The epochs' batches of the tuples in the plan's order: ``"shuffle"``
    (:class:`~keras_hardneg.sampling.TupleBatches`) or ``"walk"``
    (:class:`~keras_hardneg.sampling.TupleBatchSampler` on the positives). The walk starts
    on seeded placeholder embeddings (as the tuples start on placeholder negatives): the
    first mining hands it the starting encoder's corpus embeddings before any epoch."""
    from keras_hardneg import sampling

    b, seed = recipe["batch_size"], recipe["seed"]
    if plan is None or plan.order == "shuffle":
        return sampling.TupleBatches(tuples, b, seed=seed)
    placeholder = np.random.default_rng(seed).normal(size=(num_docs, 2)).astype(np.float32)
    return sampling.TupleBatchSampler(tuples, b, embeddings=placeholder, on="positives",
                                      restart_prob=plan.restart_prob,
                                      num_candidates=plan.num_candidates,
                                      num_neighbors=plan.num_neighbors, seed=seed)


def _placeholder_negatives(x: Any, pairs: np.ndarray, k: int, seed: int) -> np.ndarray:
    """``[P, K]`` seeded random documents that are none of the query's positives: the tuples
    before the first mining (the miner replaces them when training begins)."""
    rng = np.random.default_rng(seed)
    n = len(x.corpus)
    out = rng.integers(0, n, size=(len(pairs), k))
    for i, (q, _) in enumerate(pairs.tolist()):
        bad = set(np.asarray(x.positives[q]).tolist())
        for j in range(k):
            while int(out[i, j]) in bad and len(bad) < n:
                out[i, j] = rng.integers(0, n)
    return out.astype(np.int64)
