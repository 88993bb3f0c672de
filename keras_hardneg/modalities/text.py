"""Sentences as token ids ``[N, L]`` (or adjacent pairs ``[N, 2, L]``): the text modality
and its default recipe.

SimCSE / quick-thought views are drawn in the step; the figures are STS Spearman and SentEval
on frozen sentence embeddings (SimCSE's protocol, on a benchmark folder:
:func:`evaluate_sentences`); the report shows the nearest sentences of a few queries; a run
keeps its tokenizer (:data:`TOKENIZER_FILE`), which its exports and presets ship.

Example:
>>> from keras_hardneg.modalities import get_modality
>>> text = get_modality("text")
>>> text.result_keys, text.throughput_key, text.asset_names
(('sts', 'senteval'), 'sentences_per_second', ('tokenizer.json',))
"""

from __future__ import annotations

import html
import os
import shutil
from typing import Any, Callable, Sequence

import keras
import numpy as np

from keras_hardneg.evaluation.features import _encoder_fn, compiles_each_shape
from keras_hardneg.modalities import report
from keras_hardneg.modalities.artifact import preset_usage
from keras_hardneg.modalities.base import Modality
from keras_hardneg.modalities.evaluation import Figure
from keras_hardneg.modalities.feed import INITIAL_EMBEDDING_DIM
from keras_hardneg.registry import MODALITIES, ConfigError as RecipeError

__all__ = ["TextModality", "TEXT_RECIPE", "TOKENIZER_FILE", "ANY_LENGTH_EVALUATION_TOKENS",
           "TEXT_PREPROCESSING_NO_TOKENIZER", "evaluation_length", "sentence_embedder",
           "evaluate_sentences", "copy_tokenizer", "nearest_sentences_section",
           "SENTENCE_QUERIES", "SENTENCE_NEIGHBOURS"]

#: The default text run: unsupervised SimCSE (Gao et al. 2021): the same sentence twice
#: through a small Transformer with dropout, NT-Xent at temperature 0.05. The encoder starts
#: as the bag-of-tokens average (ReZero gates at 0): from scratch on 12k sentences the
#: plain Transformer ended below that baseline (STS avg 35.7 vs 48.9, SentEval 65.2 vs
#: 67.1; docs/benchmarks/sentences.md), the gated one at 48.7 / 68.0.
TEXT_RECIPE: dict[str, Any] = {
    "framework": {"name": "simclr"},
    "encoder": {"name": "transformer", "rezero": True},
    "loss": {"name": "nt_xent", "temperature": 0.05},
    "sampler": {"name": "uniform"},
    "optimizer": {"name": "adam", "learning_rate": 5e-4},
    "schedule": {"name": "warmup_cosine"},
    "augmentation": {"name": "simcse"},
    "data": {"name": "text_file"},
    "annealing": {},
    "evaluation": {"monitor_every": 0, "linear_probe": False},
    "batch_size": 64,
    "epochs": 3,
    "projection_dims": [256, 128],
}

#: The method a text run's view maker names (the framework is SimCLR's step for both):
#: unsupervised SimCSE (Gao et al. 2021: dropout views) or quick-thought (Logeswaran & Lee
#: 2018: adjacent sentences).
METHOD_NAMES = {"simcse": "SimCSE", "quick_thought": "quick-thought"}

#: File name of a text run's tokenizer inside its run directory (and export assets).
TOKENIZER_FILE = "tokenizer.json"
#: Queries and neighbours of the report's nearest-sentence table.
SENTENCE_QUERIES = 5
SENTENCE_NEIGHBOURS = 5
#: Where the backend compiles an encoder once per input shape (JAX), encoded lengths are
#: rounded up to a multiple of this (at most ``L / 32`` compiles for ids of length ``L``).
LENGTH_STEP = 32
#: Encoding compiles (one trace, seconds) from this many batches on; fewer run eagerly.
#: Measured on SciFact's first 1,024 abstracts (16 batches of 64, MiniLM, 2 cores, fresh
#: process each): compiled 0.78x the wall of eager calls (docs/notes/retrieval.md).
COMPILE_FROM_BATCHES = 4


@MODALITIES.register("text")
class TextModality(Modality):
    """Sentences as token ids ``[N, L]`` (or adjacent pairs ``[N, 2, L]``): SimCSE /
    quick-thought views in the step, STS and SentEval on frozen sentence embeddings."""

    name = "text"
    default_recipe = TEXT_RECIPE
    examples = "sentences"
    figures = (Figure("sts", "STS", short="STS avg", group=True,
                      index_label="STS avg (Spearman x 100)"),
               Figure("senteval", "SentEval", short="SentEval avg", group=True,
                      index_label="SentEval avg (%)"))

    def input_shape(self, x):
        return (int(np.shape(x)[-1]),)

    def encoder_context(self, x):
        out = {"vocab_size": int(x.tokenizer.vocab_size)}
        if getattr(x, "initial_embeddings", None) is not None:
            out["initial_embeddings"] = x.initial_embeddings
        return out

    def check_encoder_features(self, x):
        pass

    def encoder_features(self, encoder, x):
        ids = np.asarray(x.ids if hasattr(x, "ids") else x, dtype="int32")
        return _encode_ids(encoder, ids.reshape(-1, ids.shape[-1]), 256,
                           trim=_any_length(encoder))

    def initial_embeddings(self, x, seed):
        # Bag of tokens through a fixed random table (padding id 0 excluded).
        ids = np.asarray(x.ids if hasattr(x, "ids") else x)
        ids = ids.reshape(len(ids), -1)
        rng = np.random.default_rng(seed)
        table = rng.normal(size=(int(ids.max()) + 1, INITIAL_EMBEDDING_DIM)).astype("float32")
        table[0] = 0.0
        counts = np.maximum((ids != 0).sum(axis=1, keepdims=True), 1)
        return table[ids].sum(axis=1) / counts

    def probe_batch(self, x, indices):
        return np.asarray(x.ids if hasattr(x, "ids") else x, dtype="int32")[indices]

    def probe_examples(self, x, y, indices):
        sentences = getattr(x, "sentences", None)
        return None if sentences is None else (None, [sentences[int(i)] for i in indices])

    def report_sections(self, encoder, recipe, train, test):
        x = train[0]
        ids = np.asarray(x.ids if hasattr(x, "ids") else x, dtype="int32")
        if ids.ndim == 3:  # adjacent pairs: each sentence once
            ids = ids[:, 0]
        sentences = list(getattr(x, "sentences", []))[:len(ids)]
        if not sentences:
            return []
        return [nearest_sentences_section(
            lambda rows: _encode_ids(encoder, ids[rows], 256, trim=_any_length(encoder)),
            sentences, recipe["seed"])]

    def feed(self, recipe, x, y, sampler, views):
        from keras_hardneg import sampling
        from keras_hardneg.data import ShuffledBatches
        from keras_hardneg.data._tf import tensorflow_backend

        ids = np.asarray(x.ids if hasattr(x, "ids") else x, dtype="int32")
        b, n = recipe["batch_size"], len(ids)
        on_tf = tensorflow_backend()
        if sampler is not None:
            feed = sampling.make_dataset if on_tf else sampling.make_py_dataset
            return feed(sampler, ids, y), {}
        if not on_tf:
            return ShuffledBatches(ids, y, b, seed=recipe["seed"]), {}
        import tensorflow as tf

        ds = tf.data.Dataset.from_tensor_slices(ids if y is None else (ids, y))
        ds = ds.shuffle(n, seed=recipe["seed"], reshuffle_each_iteration=True)
        return ds.batch(b, drop_remainder=True).prefetch(tf.data.AUTOTUNE).repeat(), {}

    def evaluate(self, encoder, recipe, train, test, extras=None):
        ev = recipe["evaluation"]
        if not ev.get("benchmark_dir"):
            return {}
        tokenizer = train[0].tokenizer
        length = evaluation_length(encoder, self.input_shape(train[0])[0])
        return evaluate_sentences(sentence_embedder(encoder, tokenizer, length),
                                  ev["benchmark_dir"], senteval=ev.get("senteval", False),
                                  seed=recipe["seed"])

    def missing_evaluation(self, recipe):
        if recipe["evaluation"].get("benchmark_dir"):
            return None
        return ("none: give evaluation.benchmark_dir (the command line: --benchmark-dir DIR), "
                "the STS/SICK sets in SentEval's layout (e.g. SimCSE's senteval.tar), to "
                "score STS")

    def method_name(self, recipe):
        views = (recipe.get("augmentation") or {}).get("name")
        return METHOD_NAMES.get(views, super().method_name(recipe))

    def describe_evaluation(self, recipe):
        return ("STS12-16, STS-B test and SICK-R: Spearman x 100 of cosine similarity "
                "(SimCSE's 'all' setting); SentEval classification where run")

    def preset_spec(self, encoder, x, run_dir=None):
        return {"max_length": self.input_shape(x)[0]}, self.run_assets(run_dir)

    def save_run_files(self, x, run_dir):
        x.tokenizer.save(os.path.join(run_dir, TOKENIZER_FILE))

    def restore_run_files(self, recipe, run_dir):
        tokenizer = os.path.join(run_dir, TOKENIZER_FILE)
        if os.path.isfile(tokenizer):
            recipe["data"]["tokenizer"] = tokenizer
            return True
        return False

    # ------------------------------------------------------------- artifacts
    asset_names = (TOKENIZER_FILE,)
    input_description = "token ids"
    signature_form = "token ids ((L,), 'int32') (text_input_signature(L))"
    reads_tokens = True
    benchmark_sets = "STS/SentEval sets"

    @property
    def axis_names(self):
        from keras_hardneg.modalities.signatures import TEXT_INPUT

        return {TEXT_INPUT: ("batch", "L")}

    def card_defaults(self):
        return {**super().card_defaults(), "preprocessing": (
            f"Token ids from the tokenizer in assets/{TOKENIZER_FILE} (its special tokens "
            "added), truncated to max_length and right-padded with 0; "
            "load_encoder(dir).embed_sentences(sentences) does this.")}

    def input_signature(self, value):
        from keras_hardneg.modalities.signatures import TEXT_INPUT, shape_and_dtype

        if isinstance(value, dict):
            return None
        shape, dtype = shape_and_dtype(value, "the single input")
        if not np.issubdtype(np.dtype(dtype), np.integer):
            return None
        if len(shape) != 1:
            raise ValueError("input_signature: token ids must be one example's shape (L,) "
                             f"(batch axis left out), got {shape}")
        if dtype != "int32":
            raise ValueError(f"input_signature: token ids must be int32, got {dtype}")
        return {TEXT_INPUT: ((None,) + shape, dtype)}

    def resolve_signature(self, encoder, signature, input_shape=None):
        from keras_hardneg.modalities.signatures import TEXT_INPUT

        length = signature[TEXT_INPUT][0][1]
        model_length = None
        try:
            model_shape = tuple(encoder.input_shape)
            if len(model_shape) == 2 and not isinstance(model_shape[0], tuple):
                model_length = model_shape[1]
        except (AttributeError, ValueError, TypeError):
            pass
        if length is not None and model_length is not None and length != model_length:
            raise ValueError(f"export_encoder: input_signature fixes L={length} but the "
                             f"encoder's input shape is {encoder.input_shape}")
        return {TEXT_INPUT: ((None, length if length is not None else model_length),
                             "int32")}

    def build_input(self, signature):
        from keras_hardneg.modalities.signatures import TEXT_INPUT

        return np.ones((1, signature[TEXT_INPUT][0][1] or 1), "int32")

    def fill_card(self, card, signature, asset_names, encoder):
        from keras_hardneg.modalities.signatures import TEXT_INPUT

        super().fill_card(card, signature, asset_names, encoder)
        length = signature[TEXT_INPUT][0][1]
        if card.max_length is not None and length is not None and card.max_length != length:
            raise ValueError(f"export_encoder: model_card.max_length={card.max_length} but "
                             f"the exported token ids have L={length}")
        if card.max_length is None:
            card.max_length = length
        if TOKENIZER_FILE in asset_names and card.max_length is None:
            raise ValueError(
                "export_encoder: a text export with a tokenizer needs max_length L (strings "
                "are truncated / padded to it as in training): give a fixed L in "
                "input_signature ((L,), 'int32') or ModelCard(max_length=L)")
        if (TOKENIZER_FILE not in asset_names
                and card.preprocessing == self.card_defaults()["preprocessing"]):
            card.preprocessing = TEXT_PREPROCESSING_NO_TOKENIZER

    def _max_length_problems(self, card):
        if card.max_length is not None and not (
                isinstance(card.max_length, int) and not isinstance(card.max_length, bool)
                and card.max_length > 0):
            return ["max_length must be a positive int or None, got "
                    f"{card.max_length!r}"]
        return []

    def signature_problems(self, signature, card):
        from keras_hardneg.modalities.signatures import TEXT_INPUT

        shape, _ = signature.get(TEXT_INPUT, ((), None))
        if set(signature) != {TEXT_INPUT} or len(shape) != 2 or shape[0] is not None:
            return [f"input_signature of a text encoder must be {{'{TEXT_INPUT}': {{'shape': "
                    f"[None, L], 'dtype': 'int32'}}}}, got {card.input_signature!r}"]
        problems = super().signature_problems(signature, card)
        if not problems and card.max_length is not None and shape[1] is not None \
                and shape[1] != card.max_length:
            return [f"max_length={card.max_length!r} but input_signature fixes L={shape[1]}"]
        return problems

    def card_input_lines(self, card):
        return super().card_input_lines(card) + [
            f"- max_length (L): {'not recorded' if card.max_length is None else card.max_length}"]

    def card_usage(self, card):
        from keras_hardneg.modalities.signatures import TEXT_INPUT

        has_tokenizer = TOKENIZER_FILE in card.assets
        lines = preset_usage("token_ids") + [
            "Reusable TF2 SavedModel (TF Hub format). `serving_default` signature: input "
            f"`{TEXT_INPUT}` (int32 `[batch, L]`, 0 = padding), output `features`."
            + (f" The tokenizer is `assets/{TOKENIZER_FILE}` (a `tokenizers` JSON file); "
               "strings are tokenized in Python, not inside the SavedModel." if has_tokenizer
               else " No tokenizer is shipped: pass token ids."),
            "",
            "```python",
            "import keras_hardneg as khn                         # Keras 3",
            "encoder = khn.export.load_encoder(export_dir)       # keras Layer (TensorFlow backend)",
            "features = encoder(token_ids)                       # int32 [batch, L]",
        ]
        if has_tokenizer:
            lines.append("features = encoder.embed_sentences(['a sentence', 'another one'])"
                         "  # needs `tokenizers`")
        lines += [
            "",
            "import tensorflow_hub as hub                        # any TF2 program",
            "obj = hub.load(export_dir); features = obj(token_ids, training=False)",
            "",
            "# inference only: keras.layers.TFSMLayer(export_dir)(token_ids)",
            "```",
        ]
        return lines

    def prepare_export_input(self, inputs, card, where):
        import tensorflow as tf

        return tf.cast(inputs, tf.int32)

    def complete_preset_card(self, card, spec):
        if card.get("max_length") is None and spec.get("max_length"):
            card["max_length"] = int(spec["max_length"])

    def example_input(self, input_spec, seed=0):
        rng = np.random.default_rng(seed)
        length = int(input_spec.get("max_length") or 8)
        ids = rng.integers(1, int(input_spec.get("vocab_size") or 50),
                           size=(3, length)).astype("int32")
        ids[:, max(1, length // 2):] = 0
        return ids

    def export_arguments(self, input_spec, assets=None):
        from keras_hardneg.modalities.signatures import text_input_signature

        out = {"input_signature": text_input_signature(int(input_spec["max_length"]))}
        if assets:
            out["assets"] = dict(assets)
        return out

    def rebuild_spec(self, card, export_dir):
        from keras_hardneg.data.tokenizer import load_tokenizer

        length = int(card.max_length)
        tokenizer = os.path.join(export_dir, "assets", TOKENIZER_FILE)
        return {"input_spec": {"max_length": length}, "input_shape": (length,),
                "assets": {TOKENIZER_FILE: tokenizer},
                "context": {"vocab_size": load_tokenizer(tokenizer).vocab_size}}

    def benchmark_embedder(self, encoder, *, x_train=None, preset=None, max_tokens=None):
        if x_train is not None:
            return sentence_embedder(encoder, x_train.tokenizer, evaluation_length(
                encoder, self.input_shape(x_train)[0], max_tokens))
        if preset is not None:
            from keras_hardneg.data.tokenizer import load_tokenizer

            tokenizer = os.path.join(preset["path"], "assets", TOKENIZER_FILE)
            if not os.path.isfile(tokenizer):
                raise RecipeError(f"preset {preset['path']!r} has no assets/{TOKENIZER_FILE}: "
                                  "a text encoder is scored with its own tokenizer.")
            length = evaluation_length(encoder, int(preset["input"]["max_length"]), max_tokens)
            return sentence_embedder(encoder, load_tokenizer(tokenizer), length)
        return encoder.embed_sentences  # a loaded SavedModel export with its tokenizer

    def evaluate_benchmark(self, embed, benchmark_dir, *, senteval=False, seed=0):
        return evaluate_sentences(embed, benchmark_dir, senteval=senteval, seed=seed)


#: A text export's preprocessing when it ships no tokenizer.
TEXT_PREPROCESSING_NO_TOKENIZER = (
    "Token ids (0 = padding, right-padded to max_length) from the tokenizer the encoder "
    "was trained with; it is not shipped with this export."
)


#: Token ids per sentence when an encoder that accepts any length (input ``(None,)``, e.g.
#: :func:`~keras_hardneg.encoders.pretrained_text`) is evaluated: above every STS/SICK
#: sentence's WordPiece length (93 at most), so none is truncated.
ANY_LENGTH_EVALUATION_TOKENS = 128


def _any_length(encoder: Any) -> bool:
    inputs = getattr(encoder, "inputs", None)
    return bool(inputs) and len(inputs[0].shape) == 2 and inputs[0].shape[1] is None


def evaluation_length(encoder: Any, length: int, max_tokens: int | None = None) -> int:
    """Token ids per sentence when ``encoder`` is scored on STS/SentEval: an encoder built
    for ``length`` ids reads exactly that many; one that reads any length (input
    ``(None,)``, e.g. a pretrained BERT) reads whole sentences
    (:data:`ANY_LENGTH_EVALUATION_TOKENS`), or ``max_tokens`` when given (e.g. the training
    length, to compare with figures made so).

    Raises:
        ValueError: ``max_tokens`` is not a positive integer, or is given for an encoder
            of fixed length other than ``length``.
    """
    if max_tokens is None:
        return max(int(length), ANY_LENGTH_EVALUATION_TOKENS) if _any_length(encoder) \
            else int(length)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, (int, np.integer)) \
            or max_tokens < 2:
        raise ValueError(f"`max_tokens` must be an integer >= 2 ([CLS] and one token); got "
                         f"{max_tokens!r}.")
    if not _any_length(encoder) and int(max_tokens) != int(length):
        raise ValueError(f"`max_tokens` ({max_tokens}): this encoder reads exactly {length} "
                         "token ids per sentence; leave max_tokens unset.")
    return int(max_tokens)


def sentence_embedder(encoder: Any, tokenizer: Any, max_length: int, batch_size: int = 256):
    """``embed_fn(list[str]) -> float32 [n, d]``: tokenize to ``max_length`` ids and encode
    with ``encoder`` in inference mode, ``batch_size`` sentences at a time (the last batch
    padded to the same shape, so a compiled encoder compiles once).

    An encoder whose input is ``(None,)`` (any length; padding never changes its output)
    gets the sentences sorted by length, each batch cut to its longest row (same
    embeddings, in the caller's order, without encoding padding)."""
    trim = _any_length(encoder)

    def embed(sentences):
        ids = np.asarray(tokenizer.encode(list(sentences), max_length), dtype="int32")
        return _encode_ids(encoder, ids, batch_size, trim=trim)
    return embed


def _encode_ids(encoder: Any, ids: np.ndarray, batch_size: int, trim: bool) -> np.ndarray:
    """``float32 [n, d]`` of token ids ``[n, L]`` in inference mode: eager calls for fewer
    than :data:`COMPILE_FROM_BATCHES` batches, else the encoder compiled for the running
    backend (``tf.function`` on TensorFlow, ``jax.jit`` on JAX:
    :mod:`keras_hardneg.evaluation.features`; the same features to float rounding).

    ``trim`` (an encoder that reads any length): rows sorted by length, each batch cut to
    its longest row (same features, no padding encoded), returned in the input order.
    Where the backend compiles once per input shape (JAX), a trimmed length is rounded up to
    a multiple of :data:`LENGTH_STEP` (at most ``L / LENGTH_STEP`` shapes compile);
    compiled, the last batch is padded to ``batch_size`` rows (one batch shape)."""
    if len(ids) == 0:
        return np.zeros((0, 0), "float32")
    batches = -(-len(ids) // batch_size)
    compiled = batches >= COMPILE_FROM_BATCHES
    run = _encoder_fn(encoder) if compiled else (lambda x: encoder(x, training=False))
    per_shape = compiled and compiles_each_shape()
    lengths = (ids != 0).sum(axis=1)
    order = np.argsort(lengths, kind="stable") if trim else np.arange(len(ids))
    out = [None] * len(order)
    for start in range(0, len(order), batch_size):
        rows = order[start:start + batch_size]
        if trim:
            width = max(int(lengths[rows].max()), 1)
            if per_shape:
                width = min(ids.shape[1], -(-width // LENGTH_STEP) * LENGTH_STEP)
            chunk = ids[rows, :width]
        else:
            chunk = ids[rows]
        if compiled and len(rows) < batch_size < len(ids):
            chunk = np.concatenate([chunk, np.zeros((batch_size - len(rows), chunk.shape[1]),
                                                    chunk.dtype)])
        vec = np.asarray(keras.ops.convert_to_numpy(run(chunk)), dtype="float32")
        for i, row in enumerate(rows):
            out[row] = vec[i]
    return np.stack(out)


def evaluate_sentences(embed_fn, benchmark_dir: str, senteval: bool = False,
                       seed: int = 0) -> dict[str, Any]:
    """``{"sts": {...}, "senteval": {...}}`` of ``embed_fn`` on the sets under
    ``benchmark_dir`` (SentEval's layout: ``STS/``, ``SICK/``, ...); ``senteval`` only when
    asked."""
    from keras_hardneg.evaluation.sts import sts_scores

    out = {"sts": sts_scores(embed_fn, benchmark_dir)}
    if senteval:
        from keras_hardneg.evaluation.senteval import senteval_scores

        out["senteval"] = senteval_scores(embed_fn, benchmark_dir, seed=seed)
    return out


def copy_tokenizer(src_dir: str, dst_dir: str) -> None:
    """Copies a text run's tokenizer between directories (no-op when absent)."""
    src = os.path.join(src_dir, TOKENIZER_FILE)
    if os.path.isfile(src):
        shutil.copyfile(src, os.path.join(dst_dir, TOKENIZER_FILE))


def nearest_sentences_section(embed_rows: Callable[[np.ndarray], np.ndarray],
                              sentences: Sequence[str], seed: int) -> tuple[str, str]:
    """``("Nearest sentences", html)``: for :data:`SENTENCE_QUERIES` sentences of the corpus,
    their nearest sentences (cosine of the trained encoder's embeddings) among at most
    :data:`report.NEIGHBOUR_POOL` of them. ``embed_rows(indices)`` embeds sentences by index."""
    pool = report.subset(len(sentences), report.NEIGHBOUR_POOL, seed)
    features = report.unit(embed_rows(pool))
    texts = [sentences[i] for i in pool]
    rng = np.random.default_rng(seed + 3)
    candidates = [i for i in rng.permutation(len(pool)) if len(texts[i].split()) >= 4]
    queries = candidates[:SENTENCE_QUERIES]
    rows = []
    for qi in queries:
        sims = features @ features[qi]
        sims[[j for j in range(len(texts)) if texts[j] == texts[qi]]] = -np.inf
        best = np.argsort(-sims, kind="stable")[:SENTENCE_NEIGHBOURS]
        items = "".join(f"<li><span class=\"cos\">{sims[j]:.3f}</span> "
                        f"{html.escape(report.short(texts[j]))}</li>" for j in best)
        rows.append((f"<b>{html.escape(report.short(texts[qi]))}</b>", f"<ol>{items}</ol>"))
    body = report.table(("query", f"{SENTENCE_NEIGHBOURS} nearest sentences (cosine)"), rows,
                  "sentences") + report.note(
        f"Queries: {len(queries)} sentences of the corpus (seeded, at least 4 words); "
        f"neighbours among {len(pool)} corpus sentences"
        f"{' (a seeded subset)' if len(pool) < len(sentences) else ''}, the query's own text "
        "excluded.")
    return "Nearest sentences", body
