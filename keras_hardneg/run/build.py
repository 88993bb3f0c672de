"""Builders: each turns one section of a checked recipe into its component, through the
section's registry. Each takes a recipe (dict or path) and checks it first, so a direct
call refuses what :func:`~keras_hardneg.run.load_recipe` refuses.

Example:
>>> from keras_hardneg.run import build_loss
>>> type(build_loss({"loss": {"name": "ring"}})).__name__
'RingContrastiveLoss'
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np

from keras_hardneg.registry import (DATASETS, ENCODERS, FRAMEWORKS, LOSSES, OPTIMIZERS,
                                    SAMPLERS, SCHEDULES, VIEW_MAKERS)
from keras_hardneg.run.recipe import RecipeError, load_recipe

__all__ = ["load_data", "build_loss", "build_encoder", "build_view_maker", "build_optimizer",
           "build_model", "make_train_feed", "TrainFeed"]


def _recipe(recipe: Any) -> dict[str, Any]:
    # A complete recipe from load_recipe is re-checked cheaply; a partial one is completed.
    return load_recipe(recipe)


def _section(recipe: dict[str, Any], section: str) -> tuple[str, dict[str, Any]]:
    spec = dict(recipe[section])
    return spec.pop("name"), spec


def load_data(recipe: Any):
    """``((x_train, y_train), (x_test, y_test), description)`` of the recipe's ``data``."""
    recipe = _recipe(recipe)
    name, spec = _section(recipe, "data")
    return DATASETS.make(name, spec, recipe["seed"])


def build_loss(recipe: Any):
    """The recipe's contrastive loss."""
    name, spec = _section(_recipe(recipe), "loss")
    return LOSSES.build(name, **spec)


def build_encoder(recipe: Any, input_shape: tuple[int, ...]) -> keras.Model:
    """The recipe's encoder for inputs of ``input_shape`` (without the batch axis)."""
    name, spec = _section(_recipe(recipe), "encoder")
    return ENCODERS.make(name, spec, input_shape=tuple(input_shape))


def build_view_maker(recipe: Any, input_shape: tuple[int, ...]):
    """The recipe's view maker (``augmentation`` section) for inputs of ``input_shape``."""
    recipe = _recipe(recipe)
    name, spec = _section(recipe, "augmentation")
    return VIEW_MAKERS.make(name, spec, image_size=int(input_shape[0]), seed=recipe["seed"])


def build_optimizer(recipe: Any, steps_per_epoch: int) -> keras.optimizers.Optimizer:
    """The recipe's optimizer, its learning rate scheduled by the recipe's ``schedule``."""
    recipe = _recipe(recipe)
    name, spec = _section(recipe, "optimizer")
    spec = OPTIMIZERS.check(name, spec)
    sched_name, sched = _section(recipe, "schedule")
    spec["learning_rate"] = SCHEDULES.make(sched_name, sched, spec["learning_rate"],
                                           steps_per_epoch, recipe["epochs"])
    return OPTIMIZERS.get(name).factory(**spec)


def build_model(recipe: Any, input_shape: tuple[int, ...], num_examples: int | None = None):
    """The recipe's framework (e.g. SimCLR, MoCo v2), compiled with its loss and optimizer.

    ``num_examples`` (the training set size) sizes the embedding bank that graph
    samplers read, and the steps of the learning-rate schedule.
    """
    recipe = _recipe(recipe)
    keras.utils.set_random_seed(recipe["seed"])
    encoder = build_encoder(recipe, input_shape)
    views = build_view_maker(recipe, input_shape)
    graph = SAMPLERS.get(recipe["sampler"]["name"]).tags.get("graph", False)
    name, spec = _section(recipe, "framework")
    # A framework with random state of its own (MoCo's initial queue) takes the run's seed.
    seed = {"seed": recipe["seed"]} if FRAMEWORKS.get(name).accepts("seed") else {}
    model = FRAMEWORKS.make(name, spec, encoder, projection_dims=tuple(recipe["projection_dims"]),
                            augmentation=views, memory_bank_size=num_examples if graph else None,
                            **seed)
    steps = max((num_examples or recipe["batch_size"]) // recipe["batch_size"], 1)
    model.compile(optimizer=build_optimizer(recipe, steps), loss=build_loss(recipe))
    return model


class TrainFeed(tuple):
    """``(dataset, steps_per_epoch, callbacks, sampler)``: what :func:`make_train_feed` returns."""

    __slots__ = ()

    def __new__(cls, dataset, steps_per_epoch, callbacks, sampler):
        return super().__new__(cls, (dataset, steps_per_epoch, callbacks, sampler))

    dataset = property(lambda self: self[0])
    steps_per_epoch = property(lambda self: self[1])
    callbacks = property(lambda self: self[2])
    sampler = property(lambda self: self[3])


def make_train_feed(recipe: Any, x_train: np.ndarray, y_train: np.ndarray) -> TrainFeed:
    """The training batches of the recipe's ``sampler``, in the input format of the running
    Keras backend: ``tf.data`` on TensorFlow, a ``keras.utils.PyDataset`` (NumPy, no
    TensorFlow) on every other backend.

    ``uniform``: shuffled batches, a new order every epoch (seeded), the last partial batch
    dropped (:class:`~keras_hardneg.data.ShuffledBatches` off TensorFlow). Graph samplers
    (``batchsampler``, ``knn``): index batches from :mod:`keras_hardneg.sampling`
    (``make_dataset`` / ``make_py_dataset``), with a
    :class:`~keras_hardneg.callbacks.GraphRefreshCallback` that rebuilds the graph from the
    embeddings the model computes in training. The first graph comes from a fixed random
    projection of the inputs (no forward pass).
    """
    from keras_hardneg import callbacks, sampling
    from keras_hardneg.data import ShuffledBatches
    from keras_hardneg.data._tf import tensorflow_backend

    recipe = _recipe(recipe)
    b, n = recipe["batch_size"], len(x_train)
    if b > n:
        raise RecipeError(f"recipe key 'batch_size' = {b} is larger than the dataset "
                          f"({n} examples).")
    name, spec = _section(recipe, "sampler")
    on_tf = tensorflow_backend()
    if not SAMPLERS.get(name).tags.get("graph"):
        if not on_tf:
            return TrainFeed(ShuffledBatches(x_train.astype("float32"), y_train, b,
                                             seed=recipe["seed"]), n // b, [], None)
        import tensorflow as tf

        ds = tf.data.Dataset.from_tensor_slices((x_train.astype("float32"), y_train))
        ds = ds.shuffle(n, seed=recipe["seed"], reshuffle_each_iteration=True)
        ds = ds.batch(b, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
        return TrainFeed(ds.repeat(), n // b, [], None)
    rng = np.random.default_rng(recipe["seed"])
    flat = x_train.reshape(n, -1).astype("float32")
    initial = flat @ rng.normal(size=(flat.shape[1], 64)).astype("float32")
    every = spec.pop("refresh_every")
    # The graph cannot ask for more candidates or neighbours than the dataset has.
    if "num_candidates" in spec:
        spec["num_candidates"] = min(spec["num_candidates"], n - 1)
    if spec.get("num_neighbors") is not None:
        spec["num_neighbors"] = min(spec["num_neighbors"],
                                    spec.get("num_candidates", n - 1) - 1)
    sampler = SAMPLERS.get(name).factory(initial, b, seed=recipe["seed"], **spec)
    feed = sampling.make_dataset if on_tf else sampling.make_py_dataset
    ds = feed(sampler, x_train.astype("float32"), y_train)
    refresh = callbacks.GraphRefreshCallback(
        sampler, every_n_steps=every, num_candidates=spec.get("num_candidates"),
        num_neighbors=spec.get("num_neighbors"))
    return TrainFeed(ds, sampler.steps_per_epoch, [refresh], sampler)
