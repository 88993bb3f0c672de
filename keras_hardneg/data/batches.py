"""Shuffled mini-batches of in-memory arrays as a ``keras.utils.PyDataset`` (no TensorFlow).

The uniform training feed under every backend but TensorFlow (where ``tf.data`` stays the
path): epoch ``e`` is the permutation ``default_rng([seed, e])`` of the examples cut into
``len(x) // batch_size`` batches (the last partial batch is dropped, as the ``tf.data`` feed
does with ``drop_remainder=True``). Batch ``i`` is a pure function of ``i``, so Keras may
read a batch ahead to build the model, restart the iteration, or read with worker threads
without changing what is trained on.

Example:
>>> import numpy as np
>>> from keras_hardneg.data.batches import ShuffledBatches
>>> x, y = np.zeros((10, 8, 8, 3), "float32"), np.arange(10)
>>> feed = ShuffledBatches(x, y, batch_size=4, seed=0)
>>> feed.steps_per_epoch, feed[0][0].shape, feed[0][1].shape
(2, (4, 8, 8, 3), (4,))
"""

from __future__ import annotations

import numbers
from typing import Any

import keras
import numpy as np

__all__ = ["ShuffledBatches", "epoch_permutation"]


def epoch_permutation(seed: int, epoch: int, num_examples: int) -> np.ndarray:
    """The order of epoch ``epoch`` of seeded uniform batches: the permutation
    ``default_rng([seed, epoch])`` of ``range(num_examples)`` (int64). Shared by
    :class:`ShuffledBatches` and ``UniformSampler(drop_remainder=True)``, so the two
    produce the same batches."""
    return np.random.default_rng([int(seed), int(epoch)]).permutation(
        int(num_examples)).astype(np.int64)


class ShuffledBatches(keras.utils.PyDataset):
    """Endless shuffled batches ``(x[idx], y[idx])`` (or ``x[idx]``) of arrays.

    Args:
        x: array ``[N, ...]`` (any dtype; passed through as is).
        y: optional array ``[N, ...]`` (labels: monitors may read them, losses never do).
        batch_size: ``1 <= batch_size <= N``.
        seed: integer seed of the per-epoch permutations.
        **kwargs: ``workers``, ``use_multiprocessing``, ``max_queue_size`` of
            ``keras.utils.PyDataset``.

    ``num_batches`` is ``None`` (endless): pass ``steps_per_epoch=feed.steps_per_epoch`` to
    ``fit``. ``start_batch`` (an attribute, default 0) shifts the batches: ``self[i]`` is
    batch ``start_batch + i`` of the endless sequence (a resumed run starts where the
    interrupted one stopped, so its epochs see the same orders as an uninterrupted run).
    """

    def __init__(self, x: np.ndarray, y: np.ndarray | None = None, batch_size: int = 256,
                 seed: int = 0, **kwargs: Any):
        super().__init__(**kwargs)
        x = np.asarray(x)
        if x.ndim < 1 or x.shape[0] == 0:
            raise ValueError(f"`x` must be a non-empty array [N, ...]; got shape {x.shape}.")
        if y is not None:
            y = np.asarray(y)
            if y.shape[:1] != x.shape[:1]:
                raise ValueError(f"`y` has {y.shape[:1]} rows but `x` has {x.shape[0]}.")
        if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or not (
                1 <= batch_size <= x.shape[0]):
            raise ValueError(f"`batch_size` must be an integer in [1, {x.shape[0]}] (the "
                             f"number of examples); got {batch_size!r}.")
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
            raise ValueError(f"`seed` must be an integer >= 0; got {seed!r}.")
        self.x, self.y = x, y
        self.batch_size, self.seed = int(batch_size), int(seed)
        self.steps_per_epoch = x.shape[0] // self.batch_size
        self._perm = (-1, None)
        self.start_batch = 0

    @property
    def num_batches(self) -> None:
        return None

    def _permutation(self, epoch: int) -> np.ndarray:
        if self._perm[0] != epoch:  # one permutation per epoch, cached
            perm = epoch_permutation(self.seed, epoch, self.x.shape[0])
            self._perm = (epoch, perm)
        return self._perm[1]

    def indices(self, i: int) -> np.ndarray:
        """The example indices ``[batch_size]`` of batch ``i``."""
        epoch, j = divmod(int(i), self.steps_per_epoch)
        return self._permutation(epoch)[j * self.batch_size:(j + 1) * self.batch_size]

    def __getitem__(self, i: int):
        idx = self.indices(self.start_batch + int(i))
        if self.y is None:
            return self.x[idx]
        return self.x[idx], self.y[idx]
