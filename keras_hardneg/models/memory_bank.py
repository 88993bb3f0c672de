"""The embedding bank: one unit-norm projection per dataset example, refreshed in training.

A memory bank of embeddings (Wu et al. 2018, "Unsupervised Feature Learning via
Non-Parametric Instance Discrimination") kept as a by-product of training: each step
writes the projections it computed at the examples' dataset positions. BatchSampler
(:mod:`keras_hardneg.sampling`) rebuilds its proximity graph from it without an extra
pass over the data.

Example:
>>> check_bank_size(None), check_bank_size(100)
(None, 100)
"""

from __future__ import annotations

from typing import Any, Callable

import keras
from keras import ops

from keras_hardneg.losses import core

__all__ = ["EmbeddingBank", "check_bank_size"]


def check_bank_size(size: Any) -> int | None:
    """``size`` as an int >= 2 (the dataset size), or None (no bank)."""
    if size is None:
        return None
    if isinstance(size, bool) or int(size) < 2:
        raise ValueError(f"`memory_bank_size` must be an int >= 2 (the dataset size); got {size!r}.")
    return int(size)


class EmbeddingBank:
    """A ``[size, dim]`` non-trainable weight of ``owner`` (zeros until written).

    The weight is created with ``owner.add_weight`` (name ``embedding_bank``), so it
    is saved, restored and distributed with the model's other weights.

    Args:
        owner: the layer that owns the weight.
        size: number of dataset examples ``N``.
        dim: embedding size ``d``.
    """

    def __init__(self, owner: keras.layers.Layer, size: int, dim: int):
        self.size = int(size)
        self.variable = owner.add_weight(
            shape=(self.size, int(dim)), initializer="zeros", trainable=False,
            name="embedding_bank", aggregation="only_first_replica")

    def write(self, index: Any, z: Any, gather: Callable[[Any], Any] = lambda t: t) -> None:
        """Writes unit-norm ``z [B, d]`` at dataset positions ``index [B]``.

        ``gather`` collects rows from all replicas (the identity on one device).
        """
        index = gather(ops.cast(ops.reshape(index, (-1,)), "int32"))
        z = gather(ops.stop_gradient(core.l2_normalize(z)))
        self.variable.assign(ops.scatter_update(self.variable.value, index[:, None], z))
