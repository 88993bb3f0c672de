"""Builders: each turns one section of a checked recipe into its component, through the
section's registry. Each takes a recipe (dict or path) and checks it first, so a direct
call refuses what :func:`~keras_hardneg.run.load_recipe` refuses.

Example:
>>> from keras_hardneg.run import build_loss
>>> type(build_loss({"loss": {"name": "ring"}})).__name__
'RingContrastiveLoss'
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any

import keras

from keras_hardneg.registry import (DATASETS, ENCODERS, FRAMEWORKS, LOSSES, OPTIMIZERS,
                                    SAMPLERS, SCHEDULES, VIEW_MAKERS)
from keras_hardneg.modalities import TrainFeed, modality_of
from keras_hardneg.run.recipe import RecipeError, load_recipe

if TYPE_CHECKING:
    from keras_hardneg.run.distribution.base import WorkerPlace

__all__ = ["load_data", "build_loss", "build_encoder", "build_view_maker", "build_optimizer",
           "build_model", "make_train_feed", "TrainFeed"]


def _recipe(recipe: Any) -> dict[str, Any]:
    # A complete recipe from load_recipe is re-checked cheaply; a partial one is completed.
    return load_recipe(recipe)


def _section(recipe: dict[str, Any], section: str) -> tuple[str, dict[str, Any]]:
    spec = dict(recipe[section])
    return spec.pop("name"), spec


def load_data(recipe: Any):
    """``((x_train, y_train), (x_test, y_test), description)`` of the recipe's ``data``.

    Images come as arrays, or (the ``synthetic`` dataset; an image folder or a tfds dataset
    with ``access`` ``"random"``, or ``"auto"`` beyond
    :data:`~keras_hardneg.data.sources.ARRAY_BUDGET_BYTES`) as a
    :class:`~keras_hardneg.data.random_access.RandomAccessImages` read by index, with
    ``None`` for its labels (the source carries them): nothing proportional to ``N`` is
    decoded here, and the rest of the run layer reads the source by index
    (:class:`~keras_hardneg.modalities.ImageModality`)."""
    recipe = _recipe(recipe)
    name, spec = _section(recipe, "data")
    return DATASETS.make(name, spec, recipe["seed"])


def build_loss(recipe: Any):
    """The recipe's contrastive loss."""
    name, spec = _section(_recipe(recipe), "loss")
    return LOSSES.build(name, **spec)


def build_encoder(recipe: Any, input_shape: tuple[int, ...], **context: Any) -> keras.Model:
    """The recipe's encoder for inputs of ``input_shape`` (without the batch axis);
    ``context`` adds what the encoder takes from the data (a text encoder's
    ``vocab_size``: see :meth:`~keras_hardneg.modalities.Modality.encoder_context`)."""
    name, spec = _section(_recipe(recipe), "encoder")
    return ENCODERS.make(name, spec, input_shape=tuple(input_shape), **context)


def _accepted(registry, name: str, context: dict[str, Any]) -> dict[str, Any]:
    component = registry.get(name)
    return {k: v for k, v in context.items() if component.accepts(k)}


def build_view_maker(recipe: Any, input_shape: tuple[int, ...] | None = None, **context: Any):
    """The recipe's view maker (``augmentation`` section). The data's modality says what
    the factory takes from ``input_shape`` (images: ``image_size``:
    :meth:`~keras_hardneg.modalities.Modality.shape_view_context`); every factory gets the
    recipe's ``seed`` and the ``context`` arguments it accepts."""
    recipe = _recipe(recipe)
    name, spec = _section(recipe, "augmentation")
    if input_shape is not None:
        context = {**modality_of(recipe).shape_view_context(tuple(input_shape)), **context}
    context.setdefault("seed", recipe["seed"])
    return VIEW_MAKERS.make(name, spec, **_accepted(VIEW_MAKERS, name, context))


def build_optimizer(recipe: Any, steps_per_epoch: int) -> keras.optimizers.Optimizer:
    """The recipe's optimizer, its learning rate scheduled by the recipe's ``schedule``."""
    recipe = _recipe(recipe)
    name, spec = _section(recipe, "optimizer")
    spec = OPTIMIZERS.check(name, spec)
    sched_name, sched = _section(recipe, "schedule")
    schedule = SCHEDULES.make(sched_name, sched, spec["learning_rate"], steps_per_epoch,
                              recipe["epochs"])
    return OPTIMIZERS.make(name, spec, learning_rate=schedule)


def _steps_per_epoch(modality: Any, graph_sampler: bool, n: int, b: int) -> int:
    """Training steps an epoch: ``ceil(N / B)`` for graph samplers and for uniform batches
    that complete the last one (``Modality.uniform_drops_remainder`` False), else ``N // B``
    -- what the samplers' own ``steps_per_epoch`` give."""
    if graph_sampler or not modality.uniform_drops_remainder:
        return -(-n // b)
    return max(n // b, 1)


def build_model(recipe: Any, input_shape: tuple[int, ...] | None = None,
                num_examples: int | None = None, *, x_train: Any = None):
    """The recipe's framework (e.g. SimCLR, MoCo v2, GraphCL), compiled with its loss and
    optimizer.

    Give ``x_train`` (the training data of :func:`load_data`) or ``input_shape`` (the
    encoder's input without the batch axis; enough for images). With ``x_train`` the
    data's modality supplies the input shape and what the encoder takes from the data.
    ``num_examples`` (the training set size; taken from ``x_train`` when that is given)
    sizes the steps of the learning-rate schedule (``epochs`` epochs of the feed's steps)
    and the embedding bank that graph samplers read; without it or ``x_train`` there is no
    epoch length, and ``build_model`` refuses (``ValueError``).
    """
    recipe = _recipe(recipe)
    modality = modality_of(recipe)
    context: dict[str, Any] = {}
    if x_train is not None:
        input_shape = modality.input_shape(x_train)
        context = modality.encoder_context(x_train)
        if num_examples is None:
            num_examples = modality.num_examples(x_train)
    if input_shape is None:
        raise ValueError("build_model needs `x_train` or `input_shape`.")
    if num_examples is None:
        raise ValueError("build_model needs `num_examples` (the training set size, which "
                         "sizes the learning-rate schedule) or `x_train`.")
    if isinstance(num_examples, bool) or not isinstance(num_examples, numbers.Integral) \
            or num_examples < 1:
        raise ValueError(f"`num_examples` must be an int >= 1; got {num_examples!r}.")
    num_examples = int(num_examples)
    keras.utils.set_random_seed(recipe["seed"])
    encoder = build_encoder(recipe, input_shape, **context)
    # Views drawn by the feed (graphs) never reach the framework.
    views = None if modality.views_in_feed else build_view_maker(
        recipe, input_shape, **(modality.view_context(x_train) if x_train is not None else {}))
    graph = SAMPLERS.get(recipe["sampler"]["name"]).tags.get("graph", False)
    name, spec = _section(recipe, "framework")
    # A framework with random state of its own (MoCo's initial queue) takes the run's seed.
    seed = {"seed": recipe["seed"]} if FRAMEWORKS.get(name).accepts("seed") else {}
    # What the framework takes from the recipe's other sections (the data's modality says).
    seed.update(_accepted(FRAMEWORKS, name, modality.framework_context(recipe)))
    model = FRAMEWORKS.make(name, spec, encoder, projection_dims=tuple(recipe["projection_dims"]),
                            augmentation=views, memory_bank_size=num_examples if graph else None,
                            **seed)
    # The schedule's steps per epoch are the feed's (make_train_feed).
    steps = _steps_per_epoch(modality, graph, num_examples, recipe["batch_size"])
    model.compile(optimizer=build_optimizer(recipe, steps), loss=build_loss(recipe))
    return model


def make_train_feed(recipe: Any, x_train: Any, y_train: Any, *,
                    place: "WorkerPlace | None" = None) -> TrainFeed:
    """The training batches of the recipe's ``sampler``, in the input format of the running
    Keras backend: ``tf.data`` on TensorFlow, a ``keras.utils.PyDataset`` (NumPy, no
    TensorFlow) on every other backend; what a batch holds is the data's modality's
    (:meth:`~keras_hardneg.modalities.Modality.feed`). ``x_train`` holds the ``n``
    training rows (images ``[n, H, W, C]``, token ids ``[n, L]`` or a graph set),
    ``y_train`` their labels ``[n]`` (or ``None``), which reach the monitors, never the loss.

    ``uniform``: shuffled batches, a new order every epoch (seeded), the last partial batch
    dropped (graphs: completed; ``Modality.uniform_drops_remainder``). Graph samplers
    (``batchsampler``, ``knn``): index batches from :mod:`keras_hardneg.sampling`, with a
    :class:`~keras_hardneg.callbacks.GraphRefreshCallback` that rebuilds the graph from the
    embeddings the model computes in training. The first graph comes from a fixed random
    projection of the inputs (no forward pass;
    :meth:`~keras_hardneg.modalities.Modality.initial_embeddings`), or with
    ``sampler.initial_graph = "encoder"`` from the encoder's features before the first step
    (:meth:`~keras_hardneg.modalities.Modality.encoder_features`). The sampler is always
    a :class:`~keras_hardneg.sampling.WorkerShard` (one worker: all rows), whose step clock
    makes a refreshed graph reach the walk at a fixed batch whatever the feed's prefetch.

    ``place`` (a :class:`~keras_hardneg.run.distribution.WorkerPlace`; None or one worker:
    the single-process feed above): with several workers every worker draws the same global
    walk of ``batch_size`` indices -- uniform batches too, through a
    :class:`~keras_hardneg.sampling.UniformSampler` that yields the single-process uniform
    batches (exactly so off TensorFlow) -- and its feed yields only its block of rows
    ``place.local_rows(batch_size)`` (``feed.sampler`` is the shard, whose state is the
    global walk's). Graphs are then built exactly (``backend`` ``"brute"``; ``"scann"`` is
    refused: its graph differs between processes).
    """
    recipe = _recipe(recipe)
    modality = modality_of(recipe)
    b, n = recipe["batch_size"], modality.num_examples(x_train)
    if b > n:
        raise RecipeError(f"recipe key 'batch_size' = {b} is larger than the dataset "
                          f"({n} examples).")
    views = (build_view_maker(recipe, **modality.view_context(x_train))
             if modality.views_in_feed else None)
    name, spec = _section(recipe, "sampler")
    workers = 1 if place is None else int(place.num_workers)
    if workers > 1:
        place.local_rows(b)  # the global batch must split evenly (clear error otherwise)
    if not SAMPLERS.get(name).tags.get("graph"):
        return _uniform_feed(recipe, modality, x_train, y_train, views, place, workers)
    return _graph_feed(recipe, modality, name, spec, x_train, y_train, views, place, workers)


def _uniform_feed(recipe, modality, x_train, y_train, views, place, workers) -> TrainFeed:
    """Shuffled batches: the modality's own feed on one worker; with several, the global
    walk of a :class:`~keras_hardneg.sampling.UniformSampler`, sharded."""
    from keras_hardneg.sampling import UniformSampler, WorkerShard

    b, n = recipe["batch_size"], modality.num_examples(x_train)
    if workers == 1:
        dataset, state = modality.feed(recipe, x_train, y_train, None, views)
        return TrainFeed(dataset, _steps_per_epoch(modality, False, n, b), [], None, state)
    sampler = WorkerShard(UniformSampler(n, b, seed=recipe["seed"],
                                         drop_remainder=modality.uniform_drops_remainder),
                          workers, place.index)
    dataset, state = modality.feed(recipe, x_train, y_train, sampler, views)
    return TrainFeed(dataset, sampler.steps_per_epoch, [], sampler, state)


def _graph_feed(recipe, modality, name, spec, x_train, y_train, views, place,
                workers) -> TrainFeed:
    """A graph sampler's batches (sharded by worker) and the callback that refreshes its
    graph; the first graph from the inputs' projection or the encoder's features."""
    from keras_hardneg import callbacks
    from keras_hardneg.sampling import WorkerShard

    initial = modality.initial_embeddings(x_train, recipe["seed"])
    first_from_encoder = None
    if spec["initial_graph"] == "encoder":
        if workers > 1:
            raise RecipeError("recipe key 'sampler.initial_graph' = 'encoder' is not "
                              "available with several workers (each would encode the data "
                              "itself; untested); use 'inputs'.")
        modality.check_encoder_features(x_train)
        first_from_encoder = lambda model: modality.encoder_features(  # noqa: E731
            model.encoder, x_train)
    if workers > 1:
        # Every worker builds the graph itself: the build must be bit-identical everywhere.
        # The exact one is; ScaNN's is not across processes (docs/notes/sampling_workers.md).
        if spec.get("backend") == "scann":
            raise RecipeError("recipe key 'sampler.backend' = 'scann' cannot be used with "
                              "several workers: ScaNN's graph differs between processes, so "
                              "the workers' walks would part. Use 'brute' (or 'auto', which "
                              "then builds exactly).")
        spec["backend"] = "brute"
    # Clocked on one process too: a graph update then reaches the walk at a fixed batch
    # (the refresh step + the shard's lookahead), not wherever the feed's prefetch happens to
    # be, so a run is reproducible and equals the same run across workers.
    graph_sampler = SAMPLERS.make(name, spec, initial, recipe["batch_size"], seed=recipe["seed"])
    sampler = WorkerShard(graph_sampler, workers, 0 if place is None else place.index)
    dataset, state = modality.feed(recipe, x_train, y_train, sampler, views)
    refresh = callbacks.GraphRefreshCallback(
        sampler, every_n_steps=graph_sampler.refresh_every,
        num_candidates=spec.get("num_candidates"),
        num_neighbors=spec.get("num_neighbors"), backend=spec.get("backend", "auto"),
        reencode_on_train_begin=first_from_encoder)
    return TrainFeed(dataset, sampler.steps_per_epoch, [refresh], sampler, state)
