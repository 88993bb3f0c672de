"""BatchSampler (Yang et al., KDD 2023): mini-batches of hard-to-distinguish examples.

Build a proximity graph of the data (``ProximityGraph``), draw each batch by random walk with
restart (``random_walk_with_restart``), iterate epochs with ``BatchSampler`` (or the baselines
``UniformSampler`` / ``KNNSampler``), feed Keras with ``make_dataset`` and keep the graph fresh
with ``GraphRefreshCallback``.
"""

from keras_hardneg.sampling.graph import ProximityGraph, normalize_embeddings
from keras_hardneg.sampling.walk import random_walk_with_restart, reachable_count

__all__ = ["ProximityGraph", "normalize_embeddings", "random_walk_with_restart",
           "reachable_count"]
