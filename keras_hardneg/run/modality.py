"""Modalities: everything that differs between images, graphs and sentences, in one object.

The frameworks, losses and samplers do not care what an example is; the run layer and the
artifacts do, and a :class:`Modality` holds exactly what differs, so that no other module
tests a modality's name:

* the run's starting point (:attr:`Modality.default_recipe`: ``load_recipe``'s base for
  the modality's data);
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
  SentEval for sentences (SimCSE's protocol, on a benchmark folder:
  :attr:`Modality.benchmark_sets`, :meth:`Modality.evaluate_benchmark`);
* the run report's probe batch and sections (:meth:`Modality.probe_views`,
  :meth:`Modality.report_sections`: an image neighbour grid, a graph map, nearest
  sentences);
* the files a run keeps besides weights (:meth:`Modality.save_run_files`,
  :attr:`Modality.asset_names`: a text run's tokenizer);
* the artifacts, which ``keras_hardneg.export`` (a layer below this one) reads through
  :func:`keras_hardneg.registry.get_modality`: the SavedModel's input signature
  (:meth:`Modality.input_signature`, :meth:`Modality.resolve_signature`,
  :meth:`Modality.build_encoder`, :meth:`Modality.export_arguments`), the model card's
  defaults, checks and wording (:meth:`Modality.card_defaults`,
  :meth:`Modality.fill_card`, :meth:`Modality.card_problems`,
  :meth:`Modality.card_input_lines`, :meth:`Modality.card_usage`), how a loaded export
  takes its inputs (:meth:`Modality.prepare_export_input`), and what a preset records
  (:meth:`Modality.preset_spec`, :meth:`Modality.example_input`,
  :meth:`Modality.rebuild_spec`).

One class per modality, registered in :data:`keras_hardneg.registry.MODALITIES` under the
``modality`` tag of its datasets (``DATASETS.get(name).tags["modality"]``); ``import
keras_hardneg`` registers these three. A fourth is one module: a :class:`Modality`
subclass registered in ``MODALITIES``, with its dataset, encoder and view maker registered
under its tag (``tests/run/test_toy_modality.py`` does it for numeric rows).

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
from keras_hardneg.registry import (DATASETS, DEFAULT_MODALITY, MODALITIES,
                                    ConfigError as RecipeError, get_modality)
from keras_hardneg.run.recipe import DEFAULT_RECIPE, GRAPH_RECIPE, TEXT_RECIPE

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
    return get_modality(DATASETS.get(recipe["data"]["name"]).tags.get("modality",
                                                                    DEFAULT_MODALITY))


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
        knn_evaluation: whether :meth:`evaluate` is weighted kNN (``knn_accuracy``; and a
            linear probe) fit on the labelled train split and scored on the test split:
            a run then measures the random encoder's kNN accuracy first (epoch 0), a run
            whose training data has no labels evaluates on a labelled test folder split
            in two (or not at all), and the model card's ``knn_accuracy`` /
            ``linear_probe_accuracy`` lines are shown even when not measured (otherwise
            the figures are the card's ``metrics``, "not measured" when empty).
        uniform_drops_remainder: whether the single-process uniform feed drops the last
            partial batch (``N // B`` steps, epoch order
            :func:`~keras_hardneg.data.batches.epoch_permutation` off TensorFlow) or completes
            it (``ceil(N / B)`` steps); a sharded uniform feed across workers does the same.
    """

    name = "any"
    #: The recipe a run of this modality's data starts from (``load_recipe``'s base; the
    #: data's own keys and the caller's override it): its framework, encoder, view maker,
    #: loss and optimizer. ``None``: the image default (:data:`run.recipe.DEFAULT_RECIPE`).
    default_recipe: dict[str, Any] | None = None
    views_in_feed = False
    result_keys: tuple[str, ...] = ()
    knn_evaluation = False
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

    def probe_examples(self, x: Any, y: Any, indices: np.ndarray) -> tuple[str, list] | None:
        """The run report's hardest-negatives gallery: ``(kind, items)`` of the training
        examples ``indices`` as the page shows them, or None (the gallery then lists
        indices); see :func:`keras_hardneg.run.report_page.hardest_negatives_section`."""
        return None

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

    def baseline(self, encoder: Any, recipe: dict[str, Any], train: tuple,
                 test: tuple) -> dict[str, float] | None:
        """The untrained encoder's headline figure ("epoch 0": what pre-training bought),
        ``{result key: value}``, or ``None`` where the modality has none cheap enough."""
        return None

    def describe_evaluation(self, recipe: dict[str, Any]) -> str:
        return ""

    # ------------------------------------------------------------------ export
    def export_spec(self, encoder: Any, x: Any, run_dir: str | None = None) -> dict[str, Any]:
        """Keyword arguments of :func:`keras_hardneg.export.export_encoder` for this data
        (``input_shape`` or ``input_signature``, ``assets``): :meth:`export_arguments` of
        :meth:`preset_spec`."""
        return self.export_arguments(*self.preset_spec(encoder, x, run_dir))

    def preset_spec(self, encoder: Any, x: Any, run_dir: str | None = None
                    ) -> tuple[dict[str, Any], dict[str, str] | None]:
        """``(input_spec, assets)`` of :func:`keras_hardneg.export.save_preset` for this
        data: images ``{"input_shape": [H, W, C]}``, graphs ``{"feature_dim": F}``, text
        ``{"max_length": L}`` with the tokenizer as an asset (:meth:`run_assets`)."""
        return self.default_preset_spec(encoder), self.run_assets(run_dir)

    def save_run_files(self, x: Any, run_dir: str) -> None:
        """Writes what a run directory needs besides weights to embed new data (a text
        run's tokenizer: the files of :attr:`asset_names`)."""

    def restore_run_files(self, recipe: dict[str, Any], run_dir: str) -> bool:
        """Points ``recipe`` at the files :meth:`save_run_files` wrote in ``run_dir`` (a
        text run is rebuilt with its own tokenizer; a preset's ``assets/`` holds the same
        files); returns whether ``run_dir`` had them."""
        return False

    def run_assets(self, folder: str | None) -> dict[str, str] | None:
        """``{name: path}`` of the :attr:`asset_names` files present in ``folder`` (a run
        directory, a preset's ``assets/``), or ``None`` when there are none."""
        if folder is None:
            return None
        found = {name: os.path.join(folder, name) for name in self.asset_names
                 if os.path.isfile(os.path.join(folder, name))}
        return found or None

    # ------------------------------------------------------------- artifacts
    # What an exported encoder / preset / model card of this modality is. The export layer
    # (keras_hardneg/export/*) asks these through registry.get_modality(card.modality),
    # never the modality's name.

    #: Files an artifact of this modality ships besides its weights (export ``assets/``,
    #: preset ``assets/``, run directory): a text encoder's ``tokenizer.json``.
    asset_names: tuple[str, ...] = ()
    #: How ``export_encoder``'s error names the exported input ("images (input_shape)").
    input_description = "its input signature"
    #: How ``input_signature`` is written for this modality (``export_encoder``'s error).
    signature_form = ""
    #: Whether the export reads token ids that its tokenizer makes from strings
    #: (``SavedModelEncoder.tokenizer`` / ``embed_sentences``).
    reads_tokens = False
    #: The model card's name for the output's batch axis (``[batch, F]``).
    batch_axis = "batch"
    #: The model card's names of each input's unknown axes: ``{input: ("batch", "L")}``
    #: (default: the batch axis of a one-tensor input; ``?`` where none is named).
    axis_names: dict[str, Any] = {}
    #: What the final evaluation reads instead of the recipe's data: ``None`` (the recipe's
    #: splits, :meth:`evaluate`), or benchmark sets in a folder (text: "STS/SentEval sets",
    #: :meth:`evaluate_benchmark` on ``benchmark_dir``).
    benchmark_sets: str | None = None

    def card_defaults(self) -> dict[str, Any]:
        """A model card's defaults for this modality: ``input_dtype``, ``input_range``,
        ``preprocessing`` (a card created with the image defaults gets these)."""
        return {"input_dtype": None, "input_range": None,
                "preprocessing": "None: pass the tensors of the input signature."}

    def input_signature(self, value: Any) -> dict[str, tuple] | None:
        """``{name: (full shape, dtype)}`` when ``value`` (``export_encoder``'s
        ``input_signature``) describes this modality's input, ``None`` when it describes
        another's. Raises ``ValueError`` when it is this modality's form but wrong."""
        return None

    def resolve_signature(self, encoder: Any, signature: dict[str, tuple] | None,
                          input_shape: Any = None) -> dict[str, tuple]:
        """The exported signature: ``signature`` checked against ``encoder`` (and fixed
        where the encoder fixes what it leaves open)."""
        if signature is None:
            raise ValueError(f"export_encoder: a {self.name} encoder needs input_signature "
                             f"({self.signature_form}).")
        return signature

    def build_input(self, signature: dict[str, tuple]) -> Any:
        """A smallest valid input of ``signature`` (one example), to build an unbuilt
        encoder before export: zeros, unknown axes of length 1."""
        arrays = {name: np.zeros([1 if d is None else d for d in shape], dtype)
                  for name, (shape, dtype) in signature.items()}
        return next(iter(arrays.values())) if len(arrays) == 1 else arrays

    def build_encoder(self, encoder: Any, signature: dict[str, tuple]) -> None:
        """Builds an unbuilt ``encoder`` for ``signature`` (called once on
        :meth:`build_input`)."""
        encoder(self.build_input(signature), training=False)

    def fill_card(self, card: Any, signature: dict[str, tuple], asset_names: list[str],
                  encoder: Any) -> None:
        """Fills in (and checks) the fields of ``card`` that describe the exported input:
        ``input_signature`` (JSON form) by default."""
        from keras_hardneg.export.signatures import signature_to_json

        json_signature = signature_to_json(signature)
        if card.input_signature is not None and card.input_signature != json_signature:
            raise ValueError(f"export_encoder: model_card.input_signature="
                             f"{card.input_signature} but the exported input signature is "
                             f"{json_signature}")
        card.input_signature = json_signature

    def card_problems(self, card: Any) -> list[str]:
        """What is wrong with ``card``'s input fields for this modality (one string each):
        by default the input is described by ``input_signature`` alone."""
        problems = []
        for field in ("input_shape", "input_dtype", "input_range"):
            if getattr(card, field) is not None:
                problems.append(f"{field} must be None for modality {self.name!r} "
                                "(its inputs are described by input_signature)")
        if card.input_signature is not None:
            problems += self._json_signature_problems(card)
        problems += self._max_length_problems(card)
        return problems

    def _max_length_problems(self, card: Any) -> list[str]:
        problems = []
        if card.max_length is not None:
            problems.append(f"max_length must be None for modality {self.name!r}")
            if not (isinstance(card.max_length, int) and not isinstance(card.max_length, bool)
                    and card.max_length > 0):
                problems.append("max_length must be a positive int or None, "
                                f"got {card.max_length!r}")
        return problems

    def _json_signature_problems(self, card: Any) -> list[str]:
        """Problems of a card's ``input_signature`` (JSON form)."""
        from keras_hardneg.export.signatures import signature_from_json

        signature = card.input_signature
        if not isinstance(signature, dict) or not all(
                isinstance(v, dict) and set(v) == {"shape", "dtype"}
                and isinstance(v["shape"], (list, tuple)) and isinstance(v["dtype"], str)
                for v in signature.values()):
            return [f"input_signature must map names to {{'shape': [...], 'dtype': str}}, "
                    f"got {signature!r}"]
        try:
            return self.signature_problems(signature_from_json(signature), card)
        except ValueError as e:
            return [str(e)]

    def signature_problems(self, signature: dict[str, tuple], card: Any) -> list[str]:
        """Problems of a card's signature ``{name: (full shape, dtype)}``: it must be what
        ``export_encoder`` makes of this modality's ``input_signature`` (one input: one
        example's ``(shape, dtype)``; several: the dict). ``ValueError`` reads as one."""
        from keras_hardneg.export.signatures import normalize_input_signature

        value: Any = signature
        if len(signature) == 1:
            ((shape, dtype),) = signature.values()
            if not shape or shape[0] is not None:
                return [f"input_signature must have a batch axis None first, got {signature!r}"]
            value = (shape[1:], dtype)
        got, _ = normalize_input_signature(value)
        if got != self.name:
            return [f"input_signature describes a {got} input, but modality is {self.name!r}"]
        return []

    def card_input_lines(self, card: Any) -> list[str]:
        """The model card's "Input contract" lines: the signature's table by default."""
        if card.input_signature is None:
            return ["- input signature: not recorded"]
        lines = ["| input | shape | dtype |", "| --- | --- | --- |"]
        single = len(card.input_signature) == 1  # its first axis is the batch
        for name, spec in card.input_signature.items():
            axes = self.axis_names.get(name, ("batch",) if single else ())
            dims = [(axes[i] if i < len(axes) else "?") if d is None else str(d)
                    for i, d in enumerate(spec["shape"])]
            lines.append(f"| `{name}` | `[{', '.join(dims)}]` | {spec['dtype']} |")
        return lines + [""]

    def card_usage(self, card: Any) -> list[str]:
        """The model card's "Usage" lines (Markdown)."""
        from keras_hardneg.export.model_card import preset_usage

        return preset_usage("inputs") + [
            "Reusable TF2 SavedModel (TF Hub format). `serving_default` signature: inputs "
            "as the input contract below, output `features`.",
            "",
            "```python",
            "import keras_hardneg as khn                         # Keras 3",
            "encoder = khn.export.load_encoder(export_dir)       # keras Layer (TensorFlow backend)",
            "```",
        ]

    def prepare_export_input(self, inputs: Any, card: Any, where: str) -> Any:
        """``inputs`` of a loaded export (``SavedModelEncoder``) as its signature's dtypes
        (TensorFlow tensors)."""
        import tensorflow as tf

        signature = card.input_signature or {}
        if len(signature) == 1:
            return tf.cast(inputs, next(iter(signature.values()))["dtype"])
        if not isinstance(inputs, dict) or not set(signature) <= set(inputs):
            got = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
            raise ValueError(f"{where}: this {self.name} encoder takes a dict with the keys "
                             f"{list(signature)}; got {got}")
        return {name: tf.cast(inputs[name], spec["dtype"]) for name, spec in signature.items()}

    def output_batch(self, input_shape: Any) -> Any:
        """The batch size of a loaded export's output for inputs of ``input_shape``."""
        return input_shape[0]

    def default_preset_spec(self, encoder: Any) -> dict[str, Any]:
        """What ``save_preset`` records of the input when its ``input_spec`` leaves it out."""
        return {}

    def complete_preset_card(self, card: dict[str, Any], spec: dict[str, Any]) -> None:
        """Fills the fields of a preset's card (a dict) that its ``spec`` knows."""

    def example_input(self, input_spec: dict[str, Any], seed: int = 0) -> Any:
        """A small random input as ``input_spec`` (a preset's ``"input"``) describes it, for
        building a subclassed encoder and comparing two encoders' features."""
        raise NotImplementedError(f"modality {self.name!r} gives no example input")

    def export_arguments(self, input_spec: dict[str, Any],
                         assets: dict[str, str] | None = None) -> dict[str, Any]:
        """``export_encoder``'s keyword arguments for a preset's ``input_spec`` and
        ``assets`` (``{name: path}``)."""
        raise NotImplementedError(f"modality {self.name!r} has no SavedModel export")

    def rebuild_spec(self, card: Any, export_dir: str) -> dict[str, Any]:
        """What rebuilding the encoder of a SavedModel export needs, from its card:
        ``{"input_spec": ..., "input_shape": ..., "assets": ..., "context": ...}``
        (``context``: :meth:`encoder_context`'s arguments)."""
        raise NotImplementedError(f"modality {self.name!r}: a preset cannot be made "
                                  "from its SavedModel export")

    def input_mismatch(self, expected: tuple, x: Any, where: str) -> str | None:
        """Why data ``x`` does not fit an encoder that takes ``expected`` (one line), or
        ``None``."""
        return None

    def benchmark_embedder(self, encoder: Any, *, x_train: Any = None, preset: Any = None,
                           max_tokens: int | None = None) -> Any:
        """The function :meth:`evaluate_benchmark` scores, for ``encoder``: a loaded export
        (neither keyword), a run's (``x_train``) or a preset's (``preset``: its metadata)."""
        raise NotImplementedError(f"modality {self.name!r} is evaluated on its data")

    def evaluate_benchmark(self, embed: Any, benchmark_dir: str, *, senteval: bool = False,
                           seed: int = 0) -> dict[str, Any]:
        """The figures of ``embed`` on the benchmark sets in ``benchmark_dir``."""
        raise NotImplementedError(f"modality {self.name!r} is evaluated on its data")


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
    default_recipe = DEFAULT_RECIPE
    result_keys = ("knn_accuracy", "linear_probe_accuracy")
    knn_evaluation = True

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

    def probe_examples(self, x, y, indices):
        return "image", _image_arrays(x, y, indices)[0]

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

    def baseline(self, encoder, recipe, train, test):
        """The random encoder's kNN accuracy (the final protocol without the probe), when
        the run monitors kNN and its test split has labels."""
        labelled = test is not None and test[0] is not None and (
            test[1] is not None or is_random_access(test[0]))
        if not recipe["evaluation"].get("monitor_every") or not labelled:
            return None
        quick = {**recipe, "evaluation": {**recipe["evaluation"], "linear_probe": False}}
        return {"knn_accuracy": float(self.evaluate(encoder, quick, train, test)
                                      ["knn_accuracy"])}

    def describe_evaluation(self, recipe):
        ev = recipe["evaluation"]
        return (f"weighted kNN (k={ev['knn_k']}, t={ev['knn_temperature']})"
                + (" and logistic-regression linear probe" if ev["linear_probe"] else "")
                + " on frozen features, train split -> test split")

    # ------------------------------------------------------------- artifacts
    input_description = "images (input_shape)"
    signature_form = "images ((H, W, 3), 'float32')"

    def card_defaults(self):
        return {}  # a ModelCard's defaults are an image card's

    def input_signature(self, value):
        from keras_hardneg.export.signatures import IMAGE_INPUT, shape_and_dtype

        if isinstance(value, dict):
            return None
        shape, dtype = shape_and_dtype(value, "the single input")
        if len(shape) == 3 and shape[2] == 3 and dtype == "float32":
            return {IMAGE_INPUT: ((None,) + shape, dtype)}
        return None

    def resolve_signature(self, encoder, signature, input_shape=None):
        from keras_hardneg.export.signatures import IMAGE_INPUT

        shape = input_shape if signature is None else signature[IMAGE_INPUT][0][1:]
        return {IMAGE_INPUT: ((None,) + _resolve_input_shape(encoder, shape), "float32")}

    def build_encoder(self, encoder, signature):
        from keras_hardneg.export.signatures import IMAGE_INPUT

        encoder.build(signature[IMAGE_INPUT][0])

    def fill_card(self, card, signature, asset_names, encoder):
        from keras_hardneg.export.signatures import IMAGE_INPUT

        input_shape = signature[IMAGE_INPUT][0][1:]
        if card.input_shape is not None and tuple(card.input_shape) != tuple(input_shape):
            raise ValueError(f"export_encoder: model_card.input_shape={card.input_shape} but "
                             f"the exported input shape is {input_shape}")
        card.input_shape = tuple(input_shape)
        contract = _image_contract(encoder)
        if contract is not None and card.preprocessing in _image_preprocessing_texts():
            card.preprocessing = contract  # what the encoder's normalization accepts

    def card_problems(self, card):
        from keras_hardneg.export.model_card import DEFAULT_INPUT_RANGE

        problems = []
        shape = card.input_shape
        if shape is not None and (
                not isinstance(shape, tuple) or len(shape) != 3 or shape[2] != 3
                or not all(d is None or (isinstance(d, int) and not isinstance(d, bool)
                                         and d > 0) for d in shape)):
            problems.append("input_shape must be (H, W, 3) with positive ints or "
                            f"None, got {shape!r}")
        if card.input_dtype != "float32":
            problems.append(f"input_dtype must be 'float32', got {card.input_dtype!r}")
        if card.input_range is None or tuple(card.input_range) != DEFAULT_INPUT_RANGE:
            problems.append(f"input_range must be (0.0, 1.0), got {card.input_range!r}")
        for field in ("input_signature", "max_length"):
            if getattr(card, field) is not None:
                problems.append(f"{field} must be None for modality 'image' "
                                "(images are described by input_shape)")
        return problems

    def card_input_lines(self, card):
        def fmt(x, missing):
            return missing if x is None or x == "" else str(x)

        h, w = (card.input_shape or (None, None, 3))[:2]
        return [
            f"- shape: `[batch, {fmt(h, 'H')}, {fmt(w, 'W')}, 3]`",
            f"- dtype: `{card.input_dtype}`",
            f"- value range: `[{card.input_range[0]}, {card.input_range[1]}]` (RGB; what "
            "else is read, e.g. 0-255 pixels, the preprocessing line says)",
        ]

    def card_usage(self, card):
        from keras_hardneg.export.model_card import preset_usage

        return preset_usage("images") + [
            "Reusable TF2 SavedModel (TF Hub format). `serving_default` signature: "
            "input `images`, output `features`.",
            "",
            "```python",
            "import keras_hardneg as khn                         # Keras 3",
            "encoder = khn.export.load_encoder(export_dir)       # keras Layer (TensorFlow backend)",
            "",
            "import tensorflow_hub as hub                        # any TF2 program",
            "obj = hub.load(export_dir); features = obj(images, training=False)",
            "",
            "# tf_keras (TF_USE_LEGACY_KERAS=1): hub.KerasLayer(export_dir, trainable=True)",
            "# Keras 3 without keras-hardneg, inference only: keras.layers.TFSMLayer(export_dir)",
            "```",
        ]

    def prepare_export_input(self, inputs, card, where):
        import tensorflow as tf

        inputs = tf.cast(inputs, tf.float32)
        _check_image_shape(inputs.shape, card, where)
        return inputs

    def default_preset_spec(self, encoder):
        return {"input_shape": [None if d is None else int(d)
                                for d in encoder.input_shape[1:]]}

    def example_input(self, input_spec, seed=0):
        rng = np.random.default_rng(seed)
        shape = [d or 32 for d in input_spec.get("input_shape", [32, 32, 3])]
        return rng.random((3, *shape), dtype=np.float32)

    def export_arguments(self, input_spec, assets=None):
        return {"input_shape": tuple(input_spec["input_shape"])}

    def rebuild_spec(self, card, export_dir):
        shape = tuple(int(d) for d in card.input_shape)
        return {"input_spec": {"input_shape": list(shape)}, "input_shape": shape,
                "assets": None, "context": {}}

    def input_mismatch(self, expected, x, where):
        got = tuple(getattr(x, "shape", ())[1:])
        if not expected or len(got) != len(expected):
            return None
        if any(e is not None and int(e) != int(g) for e, g in zip(expected, got)):
            size = "x".join(str(v) for v in expected[:2])
            return (f"the encoder {where} takes {size} images, the data are "
                    f"{'x'.join(str(v) for v in got[:2])}: pass --image-size {expected[0]} (the "
                    f"images are then resized to {size}), or evaluate on data of that size.")
        return None


def _resolve_input_shape(encoder, input_shape):
    """``(H, W, 3)`` with ints or None for the traced input signature of an image export."""
    model_shape = None
    try:
        model_shape = tuple(encoder.input_shape)[1:]
    except (AttributeError, ValueError, TypeError):
        pass  # e.g. an unbuilt subclassed model
    if isinstance(model_shape, tuple) and model_shape and isinstance(model_shape[0], tuple):
        raise ValueError("export_encoder: encoder must take a single image input, "
                         f"got input_shape={encoder.input_shape}")
    shape = tuple(input_shape) if input_shape is not None else model_shape
    if shape is None:
        raise ValueError("export_encoder: cannot infer the input shape of the encoder; "
                         "pass input_shape=(H, W, 3).")
    if len(shape) != 3 or shape[2] != 3:
        raise ValueError(f"export_encoder: input shape must be (H, W, 3), got {shape}")
    if model_shape is not None and input_shape is not None:
        for given, have in zip(shape, model_shape):
            if have is not None and given != have:
                raise ValueError(f"export_encoder: input_shape={shape} does not match the "
                                 f"encoder's input shape {model_shape}")
    return tuple(None if d is None else int(d) for d in shape)


def _image_preprocessing_texts():
    """A card's image preprocessing texts that the export may replace by what the encoder's
    normalization accepts (the default, and the texts of each input range)."""
    from keras_hardneg.encoders.normalization import INPUT_RANGES, input_contract
    from keras_hardneg.export.model_card import DEFAULT_PREPROCESSING

    return (DEFAULT_PREPROCESSING, *(input_contract(r) for r in INPUT_RANGES))


def _image_contract(encoder):
    """What images ``encoder`` takes, in one sentence, when it normalizes them itself (an
    :class:`~keras_hardneg.encoders.ImageNormalization` layer, every keras-hardneg image
    encoder); ``None`` for another model (its card keeps the [0, 1] text)."""
    from keras_hardneg.encoders.normalization import ImageNormalization, input_contract

    for layer in encoder._flatten_layers(include_self=False):
        if isinstance(layer, ImageNormalization):
            return input_contract(layer.input_range)
    return None


def _check_image_shape(shape, card, where):
    """One line instead of TensorFlow's page on unmatched concrete functions: the images
    must have the card's ``input_shape`` (a ``None`` side takes any size)."""
    expected = tuple(card.input_shape or ())
    got = tuple(shape)[1:] if shape.rank is not None else None
    if not expected or got is None:
        return
    if len(got) != len(expected) or any(
            e is not None and g is not None and int(e) != int(g)
            for e, g in zip(expected, got)):
        want = "x".join("any" if e is None else str(e) for e in expected[:2])
        raise ValueError(
            f"{where}: this encoder takes images [B, {', '.join(map(str, expected))}]"
            f" (its model card's input_shape); got [B, {', '.join(map(str, got))}]. "
            f"Resize the images to {want} first (the CLI: --image-size "
            f"{expected[0]}).")


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
    default_recipe = GRAPH_RECIPE
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

    def probe_examples(self, x, y, indices):
        return "graph", [(len(f), e) for f, e in (x.graph(int(i)) for i in indices)]

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

    def baseline(self, encoder, recipe, train, test):
        """The random encoder's 10-fold SVM accuracy (the papers' protocol)."""
        return {"svm_accuracy": self.evaluate(encoder, recipe, train, test)["svm_accuracy"]}

    def describe_evaluation(self, recipe):
        return ("SVM (RBF, C by inner cross-validation) on frozen graph embeddings, "
                "10-fold cross-validation accuracy over all graphs (InfoGraph/GraphCL protocol)")

    def preset_spec(self, encoder, x, run_dir=None):
        return {"feature_dim": int(x.feature_dim) if x is not None
                else int(encoder.feature_dim)}, None

    # ------------------------------------------------------------- artifacts
    input_description = "a graph batch"
    signature_form = "a graph dict (graph_input_signature(F))"
    batch_axis = "B"
    axis_names = {"nodes": "NF", "edges": "E2", "node_graph": "N", "node_mask": "N",
                  "edge_mask": "E", "graph_mask": "B"}

    def card_defaults(self):
        return {**super().card_defaults(), "preprocessing": (
            "None: pass a padded batch of graphs (the tensors of the input signature; "
            "padding nodes and edges have mask 0, padding nodes belong to graph B).")}

    def input_signature(self, value):
        from keras_hardneg.export.signatures import GRAPH_INPUTS, shape_and_dtype

        if not isinstance(value, dict) or not set(value) & set(GRAPH_INPUTS):
            return None  # not a graph batch (another modality may take the dict)
        keys = set(value)
        if keys != set(GRAPH_INPUTS):
            missing = sorted(set(GRAPH_INPUTS) - keys)
            extra = sorted(keys - set(GRAPH_INPUTS))
            raise ValueError(
                "input_signature: a dict describes a graph batch and must have exactly the "
                f"keys {list(GRAPH_INPUTS)} (missing {missing}, unexpected {extra}); see "
                "graph_input_signature(feature_dim)")
        sig = {}
        for name, (rank, dtype) in GRAPH_INPUTS.items():
            shape, got = shape_and_dtype(value[name], repr(name))
            if len(shape) != rank or got != dtype:
                raise ValueError(f"input_signature: {name!r} must be {dtype} of rank {rank}, "
                                 f"got {got} of shape {shape}")
            sig[name] = (shape, dtype)
        if sig["edges"][0][1] != 2:
            raise ValueError(f"input_signature: 'edges' must have shape (E, 2), "
                             f"got {sig['edges'][0]}")
        return sig

    def build_input(self, signature):
        features = signature["nodes"][0][1]
        if features is None:
            raise ValueError("export_encoder: the encoder is not built and input_signature "
                             "leaves the node feature dimension F unknown; build the encoder "
                             "or give nodes=((None, F), 'float32')")
        return {"nodes": np.zeros((1, features), "float32"),
                "edges": np.zeros((1, 2), "int32"),
                "node_graph": np.zeros((1,), "int32"),
                "node_mask": np.ones((1,), "float32"),
                "edge_mask": np.zeros((1,), "float32"),
                "graph_mask": np.ones((1,), "float32")}

    def card_usage(self, card):
        from keras_hardneg.export.model_card import preset_usage

        return preset_usage("graph") + [
            "Reusable TF2 SavedModel (TF Hub format). `serving_default` signature: inputs "
            "`nodes`, `edges`, `node_graph`, `node_mask`, `edge_mask`, `graph_mask` (a padded "
            "batch of B graphs, any budget), output `features` `[B, F]`.",
            "",
            "```python",
            "# graph = {'nodes': ..., 'edges': ..., 'node_graph': ..., 'node_mask': ...,",
            "#          'edge_mask': ..., 'graph_mask': ...}   (keras_hardneg GraphSet.batch)",
            "import keras_hardneg as khn                         # Keras 3",
            "encoder = khn.export.load_encoder(export_dir)       # keras Layer (TensorFlow backend)",
            "features = encoder(graph)",
            "",
            "import tensorflow_hub as hub                        # any TF2 program",
            "obj = hub.load(export_dir); features = obj(graph, training=False)",
            "features = obj.signatures['serving_default'](**graph)['features']",
            "",
            "# inference only: keras.layers.TFSMLayer(export_dir)(graph)",
            "```",
        ]

    def prepare_export_input(self, inputs, card, where):
        import tensorflow as tf

        from keras_hardneg.export.signatures import GRAPH_INPUTS

        if not isinstance(inputs, dict) or not set(GRAPH_INPUTS) <= set(inputs):
            got = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
            raise ValueError(f"{where}: this graph encoder takes a dict with the "
                             f"keys {list(GRAPH_INPUTS)} (a padded graph batch); got {got}")
        return {name: tf.cast(inputs[name], dtype)
                for name, (_, dtype) in GRAPH_INPUTS.items()}

    def output_batch(self, input_shape):
        if isinstance(input_shape, dict) and "graph_mask" in input_shape:
            return tuple(input_shape["graph_mask"])[0]
        return None

    def example_input(self, input_spec, seed=0):
        rng = np.random.default_rng(seed)
        f = int(input_spec.get("feature_dim") or 1)
        return {"nodes": rng.random((5, f), dtype=np.float32),
                "edges": np.array([[0, 1], [1, 2], [3, 4]], "int32"),
                "node_graph": np.array([0, 0, 0, 1, 1], "int32"),
                "node_mask": np.ones(5, "float32"), "edge_mask": np.ones(3, "float32"),
                "graph_mask": np.ones(2, "float32")}

    def export_arguments(self, input_spec, assets=None):
        from keras_hardneg.export.signatures import graph_input_signature

        return {"input_signature": graph_input_signature(int(input_spec["feature_dim"]))}

    def rebuild_spec(self, card, export_dir):
        f = int(card.input_signature["nodes"]["shape"][-1])
        return {"input_spec": {"feature_dim": f}, "input_shape": (f,), "assets": None,
                "context": {}}


# ------------------------------------------------------------------------- text
#: File name of a text run's tokenizer inside its run directory (and export assets).
TOKENIZER_FILE = "tokenizer.json"


@MODALITIES.register("text")
class TextModality(Modality):
    """Sentences as token ids ``[N, L]`` (or adjacent pairs ``[N, 2, L]``): SimCSE /
    quick-thought views in the step, STS and SentEval on frozen sentence embeddings."""

    name = "text"
    default_recipe = TEXT_RECIPE
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

    def probe_examples(self, x, y, indices):
        sentences = getattr(x, "sentences", None)
        return None if sentences is None else ("text", [sentences[int(i)] for i in indices])

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
        from keras_hardneg.export.signatures import TEXT_INPUT

        return {TEXT_INPUT: ("batch", "L")}

    def card_defaults(self):
        return {**super().card_defaults(), "preprocessing": (
            f"Token ids from the tokenizer in assets/{TOKENIZER_FILE} (its special tokens "
            "added), truncated to max_length and right-padded with 0; "
            "load_encoder(dir).embed_sentences(sentences) does this.")}

    def input_signature(self, value):
        from keras_hardneg.export.signatures import TEXT_INPUT, shape_and_dtype

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
        from keras_hardneg.export.signatures import TEXT_INPUT

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
        from keras_hardneg.export.signatures import TEXT_INPUT

        return np.ones((1, signature[TEXT_INPUT][0][1] or 1), "int32")

    def fill_card(self, card, signature, asset_names, encoder):
        from keras_hardneg.export.signatures import TEXT_INPUT

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
        from keras_hardneg.export.signatures import TEXT_INPUT

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
        from keras_hardneg.export.model_card import preset_usage
        from keras_hardneg.export.signatures import TEXT_INPUT

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
        from keras_hardneg.export.signatures import text_input_signature

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
