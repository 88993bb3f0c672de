"""BatchSampler (Yang et al., KDD 2023): mini-batches of hard-to-distinguish examples.

Build a proximity graph of the data (``ProximityGraph``), draw each batch by random walk with
restart (``random_walk_with_restart``), iterate epochs with ``BatchSampler`` (or the baselines
``UniformSampler`` / ``KNNSampler``), feed Keras with ``make_dataset`` and log batch hardness /
false negatives with ``metrics``. The graph is kept fresh during training by
``keras_hardneg.callbacks.GraphRefreshCallback``.

``make_dataset`` imports TensorFlow lazily.
"""

from keras_hardneg.sampling.graph import ProximityGraph, normalize_embeddings
from keras_hardneg.sampling.metrics import (batch_statistics, false_negative_fraction,
                                            mean_in_batch_cosine)
from keras_hardneg.sampling.samplers import BatchSampler, KNNSampler, UniformSampler
from keras_hardneg.sampling.walk import random_walk_with_restart, reachable_count

__all__ = ["ProximityGraph", "normalize_embeddings", "random_walk_with_restart",
           "reachable_count", "BatchSampler", "UniformSampler", "KNNSampler", "make_dataset",
           "mean_in_batch_cosine", "false_negative_fraction", "batch_statistics"]


def __getattr__(name):  # lazy: TensorFlow only when needed
    if name == "make_dataset":
        from keras_hardneg.sampling.dataset import make_dataset
        return make_dataset
    raise AttributeError(f"module 'keras_hardneg.sampling' has no attribute {name!r}")
