"""Images ``[N, H, W, C]`` with class labels: the image modality and its default recipe.

Its figures are weighted kNN accuracy and a linear probe on frozen features
(:func:`evaluate_encoder`), measured by the kNN monitor during training too; its report
shows a nearest-neighbour grid and a 2-D map (:func:`image_sections`); its exports take
``images`` float32 ``[B, H, W, 3]`` in [0, 1].

Example:
>>> from keras_hardneg.modalities import get_modality
>>> image = get_modality("image")
>>> image.result_keys, image.throughput_key, image.default_recipe["encoder"]["name"]
(('knn_accuracy', 'linear_probe_accuracy'), 'images_per_second', 'small_convnet')
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from keras_hardneg.data.random_access import is_random_access
from keras_hardneg.modalities import report
from keras_hardneg.modalities.artifact import (DEFAULT_INPUT_RANGE, DEFAULT_PREPROCESSING,
                                             preset_usage)
from keras_hardneg.modalities.base import Modality
from keras_hardneg.modalities.evaluation import Figure
from keras_hardneg.registry import EVALUATIONS, MODALITIES

__all__ = ["ImageModality", "IMAGE_RECIPE", "evaluate_encoder", "image_sections",
           "MONITOR_TRAIN_LIMIT", "MONITOR_TEST_LIMIT", "EVALUATION_TRAIN_LIMIT",
           "EVALUATION_TEST_LIMIT", "INITIAL_GRAPH_NEIGHBORS", "GRID_QUERIES",
           "GRID_NEIGHBOURS"]

#: The default run (of the default modality): SimCLR + hard negatives on digits; only what
#: differs from the components' own defaults.
IMAGE_RECIPE: dict[str, Any] = {
    "framework": {"name": "simclr"},
    "encoder": {"name": "small_convnet"},
    "loss": {"name": "hard"},
    "sampler": {"name": "uniform"},
    "optimizer": {"name": "adam"},
    "schedule": {"name": "warmup_cosine"},
    "augmentation": {"name": "simclr", "strength": 0.5, "crop_scale": [0.2, 1.0]},
    "data": {"name": "digits"},
    "annealing": {},
    "evaluation": {},
}

#: Queries and neighbours of the report's image grid.
GRID_QUERIES = 6
GRID_NEIGHBOURS = 8
_SAME, _OTHER = "#1a9850", "#d73027"


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
    default_recipe = IMAGE_RECIPE
    examples = "images"
    figures = (
        Figure("knn_accuracy", "kNN accuracy", short="kNN", scale=100.0,
               detail="(weighted, k={knn_k}, t={knn_temperature})",
               index_label="kNN accuracy (%)"),
        Figure("linear_probe_accuracy", "linear probe", short="probe", scale=100.0,
               index_label="linear probe accuracy (%)"),
    )
    knn_evaluation = True

    def input_shape(self, x):
        if is_random_access(x):
            return tuple(int(d) for d in x.image_shape)
        return super().input_shape(x)

    def view_context(self, x):
        return self.shape_view_context(self.input_shape(x))

    def shape_view_context(self, input_shape):
        return {"image_size": int(input_shape[0])} if len(input_shape) == 3 else {}

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
        return report.draw_image, _image_arrays(x, y, indices)[0]

    def report_sections(self, encoder, recipe, train, test):
        from keras_hardneg.data.sources import class_names

        return image_sections(encoder, train, test, recipe["seed"], _image_arrays,
                              class_names(recipe["data"]))

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
        from keras_hardneg.modalities.signatures import IMAGE_INPUT, shape_and_dtype

        if isinstance(value, dict):
            return None
        shape, dtype = shape_and_dtype(value, "the single input")
        if len(shape) == 3 and shape[2] == 3 and dtype == "float32":
            return {IMAGE_INPUT: ((None,) + shape, dtype)}
        return None

    def resolve_signature(self, encoder, signature, input_shape=None):
        from keras_hardneg.modalities.signatures import IMAGE_INPUT

        shape = input_shape if signature is None else signature[IMAGE_INPUT][0][1:]
        return {IMAGE_INPUT: ((None,) + _resolve_input_shape(encoder, shape), "float32")}

    def build_encoder(self, encoder, signature):
        from keras_hardneg.modalities.signatures import IMAGE_INPUT

        encoder.build(signature[IMAGE_INPUT][0])

    def fill_card(self, card, signature, asset_names, encoder):
        from keras_hardneg.modalities.signatures import IMAGE_INPUT

        input_shape = signature[IMAGE_INPUT][0][1:]
        if card.input_shape is not None and tuple(card.input_shape) != tuple(input_shape):
            raise ValueError(f"export_encoder: model_card.input_shape={card.input_shape} but "
                             f"the exported input shape is {input_shape}")
        card.input_shape = tuple(input_shape)
        contract = _image_contract(encoder)
        if contract is not None and card.preprocessing in _image_preprocessing_texts():
            card.preprocessing = contract  # what the encoder's normalization accepts

    def card_problems(self, card):
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


def evaluate_encoder(encoder: Any, train: tuple[np.ndarray, np.ndarray],
                     test: tuple[np.ndarray, np.ndarray], k: int | None = None,
                     temperature: float | None = None, linear_probe: bool = True
                     ) -> dict[str, float]:
    """Weighted kNN (and linear-probe) accuracy of ``encoder``'s features, fit on ``train``
    and scored on ``test`` (labelled arrays).

    ``k`` and ``temperature`` default to the ``knn`` evaluation's registered defaults.
    Returns ``{"knn_accuracy": ..., "linear_probe_accuracy": ...}`` (fractions).
    """
    from keras_hardneg.evaluation import extract_features

    f_train = extract_features(encoder, train[0])
    f_test = extract_features(encoder, test[0])
    knn = {key: value for key, value in (("k", k), ("temperature", temperature))
           if value is not None}
    plan = [("knn", knn)] + ([("linear_probe", {})] if linear_probe else [])
    out = {}
    for name, config in plan:
        result = EVALUATIONS.get(name).tags["result"]
        out[result] = float(EVALUATIONS.build(name, f_train, train[1], f_test, test[1], **config))
    return out


def _extract_images(encoder: Any, images: np.ndarray) -> np.ndarray:
    from keras_hardneg.evaluation import extract_features

    return np.asarray(extract_features(encoder, images), np.float32)


def _short_label(label: Any, class_names: list[str] | None) -> str:
    """A grid cell's title: the class name (cut to 12 characters) or the label."""
    text = report.class_label(label, class_names)
    return text if len(text) <= 12 else text[:11] + "\u2026"


def image_sections(encoder: Any, train: tuple, test: tuple | None, seed: int,
                   arrays: Callable[[Any, Any, np.ndarray], tuple],
                   class_names: list[str] | None = None) -> list:
    """The nearest-neighbour grid and the 2-D map of an image run. ``arrays(x, y, indices)``
    gives ``(images float32 in [0, 1], labels or None)`` of a split; ``class_names`` (label
    ``i`` is ``class_names[i]``) names the classes in both, where the data names them."""
    x_train, y_train = train
    queries_split = test if test is not None and test[0] is not None else None
    pool_idx = report.subset(len(x_train), report.NEIGHBOUR_POOL, seed)
    pool_images, pool_labels = arrays(x_train, y_train, pool_idx)
    pool_features = _extract_images(encoder, pool_images)
    if queries_split is not None:
        q_idx = report.subset(len(queries_split[0]), report.MAP_POINTS, seed + 1)
        q_images, q_labels = arrays(queries_split[0], queries_split[1], q_idx)
        q_features = _extract_images(encoder, q_images)
        exclude_self = False
        source = "test"
    else:  # no test split: queries from the pool, themselves excluded
        q_idx = report.subset(len(pool_idx), report.MAP_POINTS, seed + 1)
        q_images, q_labels, q_features = pool_images[q_idx], (
            None if pool_labels is None else pool_labels[q_idx]), pool_features[q_idx]
        exclude_self = True
        source = "training"
    sims = report.unit(q_features) @ report.unit(pool_features).T
    if exclude_self:
        sims[np.arange(len(q_idx)), q_idx] = -np.inf
    k = min(GRID_NEIGHBOURS, sims.shape[1] - (1 if exclude_self else 0))
    nearest = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    # Queries: one per class first (in a seeded order), then the rest.
    order = np.random.default_rng(seed + 2).permutation(len(q_idx))
    chosen: list[int] = []
    if q_labels is not None:
        seen = set()
        for i in order:
            if q_labels[i] not in seen:
                seen.add(q_labels[i])
                chosen.append(int(i))
            if len(chosen) == GRID_QUERIES:
                break
    chosen += [int(i) for i in order if int(i) not in chosen][:GRID_QUERIES - len(chosen)]
    plt = report.pyplot()
    fig, axes = plt.subplots(len(chosen), k + 1, figsize=(1.15 * (k + 1), 1.25 * len(chosen)),
                             squeeze=False)
    agreement = None
    if q_labels is not None and pool_labels is not None:
        agreement = float(np.mean(pool_labels[nearest] == q_labels[:, None]))
    for row, qi in enumerate(chosen):
        cells = [(q_images[qi], None, "query" + ("" if q_labels is None else
                                                  f" ({_short_label(q_labels[qi], class_names)})"))]
        for j in nearest[qi]:
            same = None if q_labels is None or pool_labels is None else \
                bool(pool_labels[j] == q_labels[qi])
            cells.append((pool_images[j], same, "" if pool_labels is None
                          else _short_label(pool_labels[j], class_names)))
        for col, (image, same, title) in enumerate(cells):
            ax = axes[row][col]
            ax.imshow(np.clip(np.asarray(image, np.float32), 0.0, 1.0),
                      interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            color = "black" if same is None else (_SAME if same else _OTHER)
            width = 1.0 if col == 0 else 3.0
            for spine in ax.spines.values():
                spine.set_edgecolor(color)
                spine.set_linewidth(width if same is not None else 1.0)
            ax.set_title(title, fontsize=8, color=color if col else "black", pad=2)
    fig.subplots_adjust(wspace=0.08, hspace=0.35)
    grid = report.img(report.figure_uri(fig), "nearest-neighbour grid") + report.note(
        f"Left: {len(chosen)} {source} images (one per class first); right: their "
        f"{k} nearest training images by cosine of the trained encoder's features, among "
        f"{len(pool_idx)} training images{' (a seeded subset)' if len(pool_idx) < len(x_train) else ''}; "
        "green frame: same class, red: another class (titles: "
        + ("class names)." if class_names else "class ids).")
        + ("" if agreement is None else
           f" Over all {len(q_idx)} {source} queries shown in the map, "
           f"<b>{agreement:.1%}</b> of the top-{k} neighbours share the query's class."))
    sections = [("Nearest neighbours", grid)]
    sections.append(report.embedding_map_section(q_features, q_labels, seed, what=f"{source} images",
                                                 class_names=class_names))
    return sections
