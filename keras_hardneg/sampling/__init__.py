"""BatchSampler (Yang et al., KDD 2023): mini-batches of hard-to-distinguish examples.

Build a proximity graph of the data (``ProximityGraph``), draw each batch by random walk with
restart (``random_walk_with_restart``), iterate epochs with ``BatchSampler`` (or the baselines
``UniformSampler`` / ``KNNSampler``), feed Keras with ``make_dataset``, keep the graph fresh with
``GraphRefreshCallback`` and log batch hardness / false negatives with ``metrics``.

``make_dataset`` and ``GraphRefreshCallback`` import TensorFlow / Keras lazily.
"""

from keras_hardneg.sampling.graph import ProximityGraph, normalize_embeddings
from keras_hardneg.sampling.metrics import (batch_statistics, false_negative_fraction,
                                            mean_in_batch_cosine)
from keras_hardneg.sampling.samplers import BatchSampler, KNNSampler, UniformSampler
from keras_hardneg.sampling.walk import random_walk_with_restart, reachable_count

__all__ = ["ProximityGraph", "normalize_embeddings", "random_walk_with_restart",
           "reachable_count", "BatchSampler", "UniformSampler", "KNNSampler", "make_dataset",
           "GraphRefreshCallback", "linear_restart_prob", "mean_in_batch_cosine",
           "false_negative_fraction", "batch_statistics"]


def __getattr__(name):  # lazy: TensorFlow / Keras only when needed
    if name == "make_dataset":
        from keras_hardneg.sampling.dataset import make_dataset
        return make_dataset
    if name in ("GraphRefreshCallback", "linear_restart_prob"):
        from keras_hardneg.sampling import callbacks
        return getattr(callbacks, name)
    raise AttributeError(f"module 'keras_hardneg.sampling' has no attribute {name!r}")
