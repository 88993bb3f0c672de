"""BatchSampler (Yang et al., KDD 2023): mini-batches of hard-to-distinguish examples.

Build a proximity graph of the data (``ProximityGraph``), draw each batch by random walk with
restart (``random_walk_with_restart``), iterate epochs with ``BatchSampler`` (or the baselines
``UniformSampler`` / ``KNNSampler``), feed Keras with ``make_dataset`` (``tf.data``) or
``make_py_dataset`` (a ``keras.utils.PyDataset``, any backend), split each global batch
across workers with ``WorkerShard`` (one global walk, a block per worker) and log batch hardness /
false negatives with ``metrics``. The graph is kept fresh during training by
``keras_hardneg.callbacks.GraphRefreshCallback``.

Retrieval: ``mine_hard_negatives`` (sentence-transformers' rank window and margins, exact or
ScaNN; :mod:`keras_hardneg.sampling.mining`) over ``top_k_cosine``
(:mod:`keras_hardneg.sampling.search`). Batches of the mined tuples with no query and no
document twice (``pack_without_duplicates``), by epoch in uniform or BatchSampler walk order
(``TupleBatches`` / ``TupleBatchSampler``), fed as flat ``B * (2 + K)``-row batches by
``make_tuple_dataset`` (``tf.data``) or ``make_tuple_py_dataset`` (``keras.utils.PyDataset``).

``make_dataset`` imports TensorFlow when called (and the ScaNN index when used); nothing else
here imports it.
"""

from keras_hardneg.sampling.graph import ProximityGraph, normalize_embeddings
from keras_hardneg.sampling.random_graph import random_graph
from keras_hardneg.sampling.mining import MinedNegatives, MiningSummary, mine_hard_negatives
from keras_hardneg.sampling.search import top_k_cosine
from keras_hardneg.sampling.metrics import (batch_statistics, false_negative_fraction,
                                            mean_in_batch_cosine)
from keras_hardneg.sampling.samplers import BatchSampler, KNNSampler, UniformSampler
from keras_hardneg.sampling.sharding import WorkerShard
from keras_hardneg.sampling.walk import random_walk_with_restart, reachable_count
from keras_hardneg.sampling.no_duplicates import Packing, pack_without_duplicates
from keras_hardneg.sampling.tuple_batches import TupleBatches, TupleBatchSampler

__all__ = ["ProximityGraph", "normalize_embeddings", "random_graph", "random_walk_with_restart",
           "reachable_count", "BatchSampler", "UniformSampler", "KNNSampler", "WorkerShard",
           "make_dataset",
           "make_py_dataset", "SamplerPyDataset",
           "mean_in_batch_cosine", "false_negative_fraction", "batch_statistics",
           "mine_hard_negatives", "MinedNegatives", "MiningSummary", "top_k_cosine",
           "Packing", "pack_without_duplicates", "TupleBatches", "TupleBatchSampler",
           "make_tuple_dataset", "make_tuple_py_dataset", "TuplePyDataset"]


def __getattr__(name):  # lazy: the feeds load keras only when used
    if name in ("make_dataset", "make_py_dataset", "SamplerPyDataset"):
        from keras_hardneg.sampling import dataset
        return getattr(dataset, name)
    if name in ("make_tuple_dataset", "make_tuple_py_dataset", "TuplePyDataset"):
        from keras_hardneg.sampling import tuple_feed
        return getattr(tuple_feed, name)
    raise AttributeError(f"module 'keras_hardneg.sampling' has no attribute {name!r}")
