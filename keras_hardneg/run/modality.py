"""Modalities: what the run layer does differently for images, graphs and sentences.

The frameworks, losses and samplers do not care what an example is; the run layer does, in
six places, and a :class:`Modality` holds exactly those:

* the encoder's input shape and build context (:meth:`Modality.input_shape`,
  :meth:`Modality.encoder_context`; a text encoder needs the tokenizer's vocabulary);
* the training feed (:meth:`Modality.feed`): images as arrays (``tf.data`` on TensorFlow,
  a ``PyDataset`` elsewhere), graphs as padded disjoint unions whose two views are drawn on
  the host (GraphCL's views remove nodes and edges, which a static-shape step cannot do),
  sentences as token ids;
* the first embedding a graph sampler (BatchSampler) sees, before the model has computed any
  (:meth:`Modality.initial_embeddings`): a fixed random projection of each example (images
  read by index: a random graph instead, so no image is decoded before the first step);
* the monitors during training (:meth:`Modality.monitors`: the kNN monitor for images);
* the final evaluation (:meth:`Modality.evaluate`): weighted kNN and linear probe for images;
  10-fold SVM accuracy for graphs (the protocol of InfoGraph and GraphCL); STS Spearman and
  SentEval for sentences (SimCSE's protocol; only where a benchmark folder is given);
* the export (:meth:`Modality.export_spec`): the SavedModel's input signature and assets.

One class per modality, registered in :data:`keras_hardneg.registry.MODALITIES` under the
``modality`` tag of its datasets (``DATASETS.get(name).tags["modality"]``).

Example:
>>> from keras_hardneg.run.modality import modality_of
>>> modality_of({"data": {"name": "digits"}}).name
'image'
"""

from __future__ import annotations

import os
import shutil
from typing import Any

import keras
import numpy as np

from keras_hardneg.data.random_access import is_random_access
from keras_hardneg.registry import DATASETS, MODALITIES, ConfigError as RecipeError

__all__ = ["Modality", "ImageModality", "GraphModality", "TextModality", "TrainFeed",
           "modality_of", "INITIAL_EMBEDDING_DIM", "INITIAL_GRAPH_NEIGHBORS",
           "EVALUATION_TRAIN_LIMIT", "EVALUATION_TEST_LIMIT"]

#: Width of the fixed random projection that seeds a graph sampler's first graph.
INITIAL_EMBEDDING_DIM = 64


class TrainFeed(tuple):
    """``(dataset, steps_per_epoch, callbacks, sampler)``: what
    :func:`~keras_hardneg.run.make_train_feed` returns. The attribute ``state`` (not a
    tuple item) holds the feed's own resumable objects (``get_state``/``set_state``)
    besides the sampler, e.g. the graph feed's view draws."""

    def __new__(cls, dataset, steps_per_epoch, callbacks, sampler, state=None):
        feed = super().__new__(cls, (dataset, steps_per_epoch, callbacks, sampler))
        feed.state = dict(state or {})
        return feed

    dataset = property(lambda self: self[0])
    steps_per_epoch = property(lambda self: self[1])
    callbacks = property(lambda self: self[2])
    sampler = property(lambda self: self[3])


def modality_of(recipe: dict[str, Any]) -> "Modality":
    """The :class:`Modality` of a recipe's ``data`` section."""
    name = DATASETS.get(recipe["data"]["name"]).tags.get("modality", "image")
    return MODALITIES.get(name).factory()


def _random_projection(flat: np.ndarray, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    proj = rng.normal(size=(flat.shape[1], INITIAL_EMBEDDING_DIM)).astype("float32")
    return flat.astype("float32") @ proj


class Modality:
    """What the run layer needs to know about one kind of data (see the module docstring).

    Attributes:
        name: the modality (``"image"``, ``"graph"``, ``"text"``).
        views_in_feed: whether the training feed draws the two views (the framework then
            gets ``augmentation=None`` and the feed gets the recipe's view maker).
        result_keys: the figures :meth:`evaluate` puts in ``results.json``.
        uniform_drops_remainder: whether the single-process uniform feed drops the last
            partial batch (``N // B`` steps, epoch order
            :func:`~keras_hardneg.data.batches.epoch_permutation` off TensorFlow) or completes
            it (``ceil(N / B)`` steps); a sharded uniform feed across workers does the same.
    """

    name = "any"
    views_in_feed = False
    result_keys: tuple[str, ...] = ()
    uniform_drops_remainder = True

    # ----------------------------------------------------------------- building
    def input_shape(self, x: Any) -> tuple:
        """The encoder's input shape (without the batch axis) for training data ``x``."""
        return tuple(int(d) for d in np.shape(x)[1:])

    def encoder_context(self, x: Any) -> dict[str, Any]:
        """Arguments the encoder factory takes from the data (not recipe keys)."""
        return {}

    def view_context(self, x: Any) -> dict[str, Any]:
        """Arguments the view maker factory takes from the data (not recipe keys)."""
        return {}

    def num_examples(self, x: Any) -> int:
        return len(x)

    # --------------------------------------------------------------------- feed
    def initial_embeddings(self, x: Any, seed: int) -> Any:
        """``[N, 64]`` float32: the fixed random projection a graph sampler starts from (or,
        where that would read all the data, a first graph the sampler takes as is: a
        :class:`~keras_hardneg.sampling.ProximityGraph`)."""
        n = self.num_examples(x)
        return _random_projection(np.asarray(x).reshape(n, -1), seed)

    def check_encoder_features(self, x: Any) -> None:
        """Raises ``RecipeError`` when :meth:`encoder_features` cannot encode ``x``."""
        if is_random_access(x):
            raise RecipeError("recipe key 'sampler.initial_graph' = 'encoder' needs the "
                              "training data in memory; this data is read from files as "
                              "needed: use 'inputs'.")

    def encoder_features(self, encoder: Any, x: Any) -> np.ndarray:
        """``float32 [N, F]``: ``encoder``'s features of every training example (inference
        mode): the first graph of a sampler with ``initial_graph = "encoder"``."""
        from keras_hardneg.evaluation import extract_features

        return np.asarray(extract_features(encoder, np.asarray(x)), "float32")

    def feed(self, recipe: dict[str, Any], x: Any, y: Any, sampler: Any,
             views: Any) -> tuple[Any, dict[str, Any]]:
        """``(dataset, state)``: the training feed, ``sampler`` (None for uniform shuffled
        batches) drawn into batches of ``x`` (and ``y``; ``views`` is the view maker when
        :attr:`views_in_feed`), and the feed's own objects to back up with the run
        (``{"name": obj}`` with ``get_state``/``set_state``)."""
        raise NotImplementedError

    # ---------------------------------------------------------------- report
    def probe_batch(self, x: Any, indices: np.ndarray) -> Any:
        """The raw examples ``indices`` of ``x``, as the view maker takes them."""
        return np.asarray(x)[indices]

    def labels_of(self, x: Any, y: Any, indices: np.ndarray) -> np.ndarray | None:
        """The labels of examples ``indices`` (None without labels)."""
        return None if y is None else np.asarray(y).reshape(-1)[indices]

    def probe_views(self, x: Any, y: Any, indices: np.ndarray, views: Any,
                    seed: int) -> tuple[Any, Any, np.ndarray | None]:
        """``(view1, view2, labels)`` of the run report's fixed probe batch (the examples
        ``indices``), drawn once by ``views`` (a view maker of the recipe's own, seeded
        apart from the model's) as the model's step takes them."""
        view1, view2 = views(self.probe_batch(x, indices), training=True)
        return (keras.ops.convert_to_numpy(view1), keras.ops.convert_to_numpy(view2),
                self.labels_of(x, y, indices))

    def report_sections(self, encoder: Any, recipe: dict[str, Any], train: tuple,
                        test: tuple | None) -> list:
        """The run report's sections of this modality (``[(title, html)]``: see
        :mod:`keras_hardneg.run.report_page`), from the trained ``encoder``."""
        return []

    # ------------------------------------------------------------ evaluation
    def monitors(self, recipe: dict[str, Any], train: tuple, test: tuple) -> list:
        """Callbacks that measure the encoder during training."""
        return []

    def evaluate(self, encoder: Any, recipe: dict[str, Any], train: tuple, test: tuple,
                 extras: Any = None) -> dict[str, Any]:
        """The final evaluation's figures (keys of :attr:`result_keys`)."""
        raise NotImplementedError

    def describe_evaluation(self, recipe: dict[str, Any]) -> str:
        return ""

    # ------------------------------------------------------------------ export
    def export_spec(self, encoder: Any, x: Any, run_dir: str | None = None) -> dict[str, Any]:
        """Keyword arguments of :func:`keras_hardneg.export.export_encoder` for this data
        (``input_shape`` or ``input_signature``, ``assets``)."""
        return {"input_shape": tuple(encoder.input_shape[1:])}

    def preset_spec(self, encoder: Any, x: Any, run_dir: str | None = None
                    ) -> tuple[dict[str, Any], dict[str, str] | None]:
        """``(input_spec, assets)`` of :func:`keras_hardneg.export.save_preset` for this
        data: images ``{"input_shape": [H, W, C]}``, graphs ``{"feature_dim": F}``, text
        ``{"max_length": L}`` with the tokenizer as an asset."""
        return {"input_shape": [None if d is None else int(d)
                                for d in encoder.input_shape[1:]]}, None

    def save_run_files(self, x: Any, run_dir: str) -> None:
        """Writes what a run directory needs besides weights to embed new data (a text
        run's tokenizer)."""


# ------------------------------------------------------------------------ images
@MODALITIES.register("image")
class ImageModality(Modality):
    """Images ``[N, H, W, C]`` with class labels: kNN monitor, kNN + linear probe.

    The images are arrays, or a
    :class:`~keras_hardneg.data.random_access.RandomAccessImages` read by index (its labels
    inside; ``y`` is ``None``). For a random-access source: the feed reads each sampler batch
    by index (:func:`keras_hardneg.sampling.make_dataset` / ``make_py_dataset``; uniform
    batches through a :class:`~keras_hardneg.sampling.UniformSampler`, saved with the run);
    a graph sampler starts from a random graph (:func:`keras_hardneg.sampling.random_graph`,
    :data:`INITIAL_GRAPH_NEIGHBORS` per node: uniform batches until the first refresh from
    the embedding bank); the monitor reads at most :data:`MONITOR_TRAIN_LIMIT` /
    :data:`MONITOR_TEST_LIMIT` examples and the final evaluation at most
    :data:`EVALUATION_TRAIN_LIMIT` / :data:`EVALUATION_TEST_LIMIT` (fixed seeded subsets,
    ``results["evaluation_examples"]``), in batches, never all ``N``.
    """

    name = "image"
    result_keys = ("knn_accuracy", "linear_probe_accuracy")

    def input_shape(self, x):
        if is_random_access(x):
            return tuple(int(d) for d in x.image_shape)
        return super().input_shape(x)

    def view_context(self, x):
        return {"image_size": int(self.input_shape(x)[0])}

    def initial_embeddings(self, x, seed):
        if is_random_access(x):
            from keras_hardneg.sampling import random_graph

            return random_graph(len(x), min(INITIAL_GRAPH_NEIGHBORS, len(x) - 1), seed)
        return super().initial_embeddings(x, seed)

    def probe_batch(self, x, indices):
        if is_random_access(x):
            return x.images(indices)  # uint8: the view maker scales it
        return np.asarray(x[indices], "float32")

    def labels_of(self, x, y, indices):
        if is_random_access(x):
            return x.labels_of(indices)
        return super().labels_of(x, y, indices)

    def report_sections(self, encoder, recipe, train, test):
        from keras_hardneg.run import report_page

        return report_page.image_sections(encoder, train, test, recipe["seed"],
                                          _image_arrays)

    def feed(self, recipe, x, y, sampler, views):
        from keras_hardneg import sampling
        from keras_hardneg.data import ShuffledBatches
        from keras_hardneg.data._tf import tensorflow_backend

        b, n = recipe["batch_size"], len(x)
        on_tf = tensorflow_backend()
        if is_random_access(x):  # read by index: uniform batches come from a sampler too
            state = {}
            if sampler is None:
                sampler = sampling.UniformSampler(n, b, seed=recipe["seed"],
                                                  drop_remainder=True)
                state = {"uniform": sampler}
            feed = sampling.make_dataset if on_tf else sampling.make_py_dataset
            return feed(sampler, x, None), state
        if sampler is not None:
            feed = sampling.make_dataset if on_tf else sampling.make_py_dataset
            return feed(sampler, x.astype("float32"), y), {}
        if not on_tf:
            return ShuffledBatches(x.astype("float32"), y, b, seed=recipe["seed"]), {}
        import tensorflow as tf

        ds = tf.data.Dataset.from_tensor_slices(  # unlabeled images: x alone
            x.astype("float32") if y is None else (x.astype("float32"), y))
        ds = ds.shuffle(n, seed=recipe["seed"], reshuffle_each_iteration=True)
        return ds.batch(b, drop_remainder=True).prefetch(tf.data.AUTOTUNE).repeat(), {}

    def monitors(self, recipe, train, test):
        from keras_hardneg import callbacks

        ev = recipe["evaluation"]
        if not ev["monitor_every"]:
            return []
        return [callbacks.KNNMonitor(
            _monitor_data(train, MONITOR_TRAIN_LIMIT, recipe["seed"]),
            _monitor_data(test, MONITOR_TEST_LIMIT, recipe["seed"]),
            k=ev["knn_k"], temperature=ev["knn_temperature"],
            every_n_epochs=ev["monitor_every"])]

    def evaluate(self, encoder, recipe, train, test, extras=None):
        from keras_hardneg.run.evaluate import evaluate_encoder

        ev = recipe["evaluation"]
        counts = None
        if is_random_access(train[0]):
            train = _source_subset(train[0], EVALUATION_TRAIN_LIMIT, recipe["seed"])
            test = _source_subset(test[0], EVALUATION_TEST_LIMIT, recipe["seed"])
            counts = {"train": len(train[1]), "test": len(test[1])}
        out = evaluate_encoder(encoder, train, test, k=ev["knn_k"],
                               temperature=ev["knn_temperature"],
                               linear_probe=ev["linear_probe"])
        if counts is not None:
            out["evaluation_examples"] = counts
        return out

    def describe_evaluation(self, recipe):
        ev = recipe["evaluation"]
        return (f"weighted kNN (k={ev['knn_k']}, t={ev['knn_temperature']})"
                + (" and logistic-regression linear probe" if ev["linear_probe"] else "")
                + " on frozen features, train split -> test split")


#: The kNN monitor scores at most this many train / test examples per epoch.
MONITOR_TRAIN_LIMIT = 10000
MONITOR_TEST_LIMIT = 2000
#: The final evaluation of a random-access image source reads at most this many train /
#: test examples (arrays are evaluated whole).
EVALUATION_TRAIN_LIMIT = 50000
EVALUATION_TEST_LIMIT = 10000
#: Neighbours per node of the random first graph of a random-access image source.
INITIAL_GRAPH_NEIGHBORS = 16


def _image_arrays(x, y, indices):
    """``(images float32 [n, H, W, C] in [0, 1], labels [n] or None)`` of ``indices`` of
    arrays or of a random-access source."""
    if is_random_access(x):
        return x.arrays(indices)
    images = np.asarray(x[indices], "float32")
    return images, None if y is None else np.asarray(y).reshape(-1)[indices]


def _subset_indices(n, limit, seed):
    if n <= limit:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=limit, replace=False))


def _monitor_data(split, limit, seed):
    """A monitor's labelled data: arrays (a subset), or batches read from a source."""
    from keras_hardneg.data.random_access import SourceBatches

    x = split[0]
    if not is_random_access(x):
        return _subset(split, limit, seed)
    return SourceBatches(x, _subset_indices(len(x), limit, seed), 256)


def _source_subset(source, limit, seed):
    """``(finite image batches, labels [n])`` of a seeded subset of a random-access source."""
    from keras_hardneg.data.random_access import SourceBatches

    idx = _subset_indices(len(source), limit, seed)
    return SourceBatches(source, idx, 256, labelled=False), source.labels_of(idx)


def _subset(arrays, limit, seed):
    x, y = arrays
    if len(x) <= limit:
        return x, y
    idx = np.random.default_rng(seed).permutation(len(x))[:limit]
    return x[idx], y[idx]


# ------------------------------------------------------------------------ graphs
@MODALITIES.register("graph")
class GraphModality(Modality):
    """Graphs (:class:`keras_hardneg.data.graphs.GraphSet`): padded disjoint unions, views
    drawn on the host (GraphCL), 10-fold SVM accuracy on frozen graph embeddings."""

    name = "graph"
    views_in_feed = True
    result_keys = ("svm_accuracy", "svm_accuracy_std")
    uniform_drops_remainder = False

    def input_shape(self, x):
        return (int(x.feature_dim),)

    def check_encoder_features(self, x):
        raise RecipeError("recipe key 'sampler.initial_graph' = 'encoder' is not available "
                          "for graphs; use 'inputs'.")

    def initial_embeddings(self, x, seed):
        # Per graph: summed node features, node and edge counts (log), projected.
        feats = np.stack([
            np.concatenate([x.graph(i)[0].sum(axis=0),
                            [np.log1p(x.num_nodes[i]), np.log1p(x.num_edges[i])]])
            for i in range(len(x))]).astype("float32")
        return _random_projection(feats, seed)

    def probe_views(self, x, y, indices, views, seed):
        from keras_hardneg.data.graphs import pad_graphs

        graphs = [x.graph(int(i)) for i in indices]
        view1, view2 = views.make_views(graphs, np.random.default_rng(seed))
        budgets, b = x.budgets(len(indices)), len(indices)
        return (pad_graphs(view1, budgets, b, x.feature_dim),
                pad_graphs(view2, budgets, b, x.feature_dim), self.labels_of(x, y, indices))

    def report_sections(self, encoder, recipe, train, test):
        from keras_hardneg.evaluation.svm import embed_graphs
        from keras_hardneg.run import report_page

        graphs, labels = train
        features = embed_graphs(encoder, graphs)
        return [report_page.embedding_map_section(features, labels, recipe["seed"],
                                                  what="graphs")]

    def feed(self, recipe, x, y, sampler, views):
        from keras_hardneg.data._tf import tensorflow_backend
        from keras_hardneg.data.graph_feed import GraphFeed, graph_tf_dataset
        from keras_hardneg.sampling import UniformSampler

        if sampler is None:
            sampler = UniformSampler(len(x), recipe["batch_size"], seed=recipe["seed"])
        feed = GraphFeed(x, sampler, views, seed=recipe["seed"])
        return (graph_tf_dataset(feed) if tensorflow_backend() else feed), {"views": feed}

    def evaluate(self, encoder, recipe, train, test, extras=None):
        from keras_hardneg.evaluation.svm import embed_graphs, svm_cross_validation

        graphs, labels = train
        features = embed_graphs(encoder, graphs)
        out = svm_cross_validation(features, np.asarray(labels), seed=recipe["seed"])
        return {"svm_accuracy": float(out["svm_accuracy"]),
                "svm_accuracy_std": float(out["svm_accuracy_std"])}

    def describe_evaluation(self, recipe):
        return ("SVM (RBF, C by inner cross-validation) on frozen graph embeddings, "
                "10-fold cross-validation accuracy over all graphs (InfoGraph/GraphCL protocol)")

    def preset_spec(self, encoder, x, run_dir=None):
        return {"feature_dim": int(x.feature_dim) if x is not None
                else int(encoder.feature_dim)}, None

    def export_spec(self, encoder, x, run_dir=None):
        from keras_hardneg.export import graph_input_signature

        return {"input_signature": graph_input_signature(
            int(x.feature_dim) if x is not None else None)}


# ------------------------------------------------------------------------- text
#: File name of a text run's tokenizer inside its run directory (and export assets).
TOKENIZER_FILE = "tokenizer.json"


@MODALITIES.register("text")
class TextModality(Modality):
    """Sentences as token ids ``[N, L]`` (or adjacent pairs ``[N, 2, L]``): SimCSE /
    quick-thought views in the step, STS and SentEval on frozen sentence embeddings."""

    name = "text"
    result_keys = ("sts", "senteval")

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

    def report_sections(self, encoder, recipe, train, test):
        from keras_hardneg.run import report_page

        x = train[0]
        ids = np.asarray(x.ids if hasattr(x, "ids") else x, dtype="int32")
        if ids.ndim == 3:  # adjacent pairs: each sentence once
            ids = ids[:, 0]
        sentences = list(getattr(x, "sentences", []))[:len(ids)]
        if not sentences:
            return []
        return [report_page.nearest_sentences_section(
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

    def describe_evaluation(self, recipe):
        return ("STS12-16, STS-B test and SICK-R: Spearman x 100 of cosine similarity "
                "(SimCSE's 'all' setting); SentEval classification where run")

    def export_spec(self, encoder, x, run_dir=None):
        from keras_hardneg.export import text_input_signature

        spec = {"input_signature": text_input_signature(self.input_shape(x)[0])}
        path = _tokenizer_path(x, run_dir)
        if path is not None:
            spec["assets"] = {TOKENIZER_FILE: path}
        return spec

    def preset_spec(self, encoder, x, run_dir=None):
        path = _tokenizer_path(x, run_dir)
        return ({"max_length": self.input_shape(x)[0]},
                {TOKENIZER_FILE: path} if path is not None else None)

    def save_run_files(self, x, run_dir):
        x.tokenizer.save(os.path.join(run_dir, TOKENIZER_FILE))


def _tokenizer_path(x, run_dir):
    if run_dir is not None and os.path.isfile(os.path.join(run_dir, TOKENIZER_FILE)):
        return os.path.join(run_dir, TOKENIZER_FILE)
    return None


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
    if _any_length(encoder):
        return _trimmed_embedder(encoder, tokenizer, max_length, batch_size)

    def embed(sentences):
        ids = np.asarray(tokenizer.encode(list(sentences), max_length), dtype="int32")
        out = []
        for start in range(0, len(ids), batch_size):
            chunk = ids[start:start + batch_size]
            real = len(chunk)
            if real < batch_size and len(ids) > batch_size:
                chunk = np.concatenate([chunk, np.zeros((batch_size - real, ids.shape[1]),
                                                        "int32")])
            vec = keras.ops.convert_to_numpy(encoder(chunk, training=False))
            out.append(np.asarray(vec, dtype="float32")[:real])
        return np.concatenate(out) if out else np.zeros((0, 0), "float32")
    return embed


def _trimmed_embedder(encoder: Any, tokenizer: Any, max_length: int, batch_size: int):
    def embed(sentences):
        ids = np.asarray(tokenizer.encode(list(sentences), max_length), dtype="int32")
        return _encode_ids(encoder, ids, batch_size, trim=True)
    return embed


def _encode_ids(encoder: Any, ids: np.ndarray, batch_size: int, trim: bool) -> np.ndarray:
    """``float32 [n, d]`` of token ids ``[n, L]`` in inference mode. ``trim`` (an encoder
    that reads any length): rows sorted by length, each batch cut to its longest row (same
    features, no padding encoded), returned in the input order."""
    if len(ids) == 0:
        return np.zeros((0, 0), "float32")
    lengths = (ids != 0).sum(axis=1)
    order = np.argsort(lengths, kind="stable") if trim else np.arange(len(ids))
    out = [None] * len(order)
    for start in range(0, len(order), batch_size):
        rows = order[start:start + batch_size]
        chunk = ids[rows, :max(int(lengths[rows].max()), 1)] if trim else ids[rows]
        vec = np.asarray(keras.ops.convert_to_numpy(encoder(chunk, training=False)),
                         dtype="float32")
        for i, row in enumerate(rows):
            out[row] = vec[i]
    return np.stack(out)


def evaluate_sentences(embed_fn, benchmark_dir: str, senteval: bool = False,
                       seed: int = 0) -> dict[str, Any]:
    """``{"sts": {...}, "senteval": {...}}`` of ``embed_fn`` on the sets under
    ``benchmark_dir`` (the layout of ``shared/data/text``); ``senteval`` only when asked."""
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
