"""Batch statistics of BatchSampler (Yang et al., KDD 2023, Sec. 5.3, Fig. 5 / 6 / 9).

* hardness: mean cosine similarity over the ordered pairs ``(i, j), i != j`` of a batch;
* false negatives: fraction of those ordered pairs whose two examples share a label (with
  instance discrimination every other example is a negative, so same-label pairs are the false
  negatives); computed by the package's one false-negative statistic,
  :func:`keras_hardneg.losses.false_negatives.false_negative_rate`.

Both work on numpy arrays or backend tensors (via ``keras.ops``) and return a float scalar
(tensor for tensor inputs).  ``batch_statistics`` evaluates a sampler's batches against fixed
embeddings and labels.

Example
-------
>>> import numpy as np
>>> from keras_hardneg.sampling.metrics import mean_in_batch_cosine, false_negative_fraction
>>> float(mean_in_batch_cosine(np.eye(3)))
0.0
>>> round(false_negative_fraction(np.array([0, 0, 1, 1])), 6)   # 4 of the 12 ordered pairs
0.333333
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

__all__ = ["mean_in_batch_cosine", "false_negative_fraction", "batch_statistics"]


def mean_in_batch_cosine(embeddings):
    """Mean cosine similarity of distinct pairs in a batch. ``embeddings``: ``[B, d]``."""
    if isinstance(embeddings, np.ndarray) or isinstance(embeddings, (list, tuple)):
        x = np.asarray(embeddings, dtype=np.float64)
        if x.ndim != 2 or x.shape[0] < 2:
            raise ValueError(f"`embeddings` must be [B, d] with B >= 2, got {x.shape}.")
        norms = np.linalg.norm(x, axis=1, keepdims=True)
        x = x / np.where(norms == 0, 1.0, norms)
        s = x.sum(axis=0)
        b = x.shape[0]
        # sum_{i != j} cos = |sum x|^2 - sum |x_i|^2
        total = float(s @ s - np.einsum("ij,ij->", x, x))
        return total / (b * (b - 1))
    from keras import ops

    x = ops.convert_to_tensor(embeddings, dtype="float32")
    x = x / ops.maximum(ops.norm(x, axis=1, keepdims=True), 1e-12)
    b = ops.cast(ops.shape(x)[0], "float32")
    s = ops.sum(x, axis=0)
    total = ops.sum(s * s) - ops.sum(x * x)
    return total / (b * (b - 1.0))


def false_negative_fraction(labels):
    """Fraction of ordered pairs ``i != j`` of a batch with equal labels. ``labels``: ``[B]``.

    :func:`keras_hardneg.losses.false_negatives.false_negative_rate` of the batch (the one
    implementation; labels ``< 0`` are unknown and not counted), returned as a Python float for
    NumPy / list input. Raises ``ValueError`` for a batch of fewer than two examples.
    """
    from keras import ops

    from keras_hardneg.losses.false_negatives import false_negative_rate

    numpy_input = isinstance(labels, (np.ndarray, list, tuple))
    shape = np.shape(labels) if numpy_input else tuple(ops.convert_to_tensor(labels).shape)
    if None not in shape and int(np.prod(shape)) < 2:
        raise ValueError(f"`labels` must hold B >= 2 entries, got shape {shape}.")
    rate = false_negative_rate(labels)
    return float(ops.convert_to_numpy(rate)) if numpy_input else rate


def batch_statistics(batches: Iterable[Any], embeddings: np.ndarray,
                     labels: np.ndarray | None = None) -> dict[str, float]:
    """Mean hardness / false-negative fraction over index batches.

    Args:
        batches: iterable of int ``[B]`` index batches (e.g. ``sampler.epoch()``).
        embeddings: ``[N, d]``.
        labels: ``[N]`` or None.

    Returns:
        dict ``{"mean_cosine", "false_negative_fraction" (if labels), "num_batches"}``.
    """
    emb = np.asarray(embeddings, dtype=np.float32)
    cos, fn, count = 0.0, 0.0, 0
    for idx in batches:
        idx = np.asarray(idx)
        cos += mean_in_batch_cosine(emb[idx])
        if labels is not None:
            fn += false_negative_fraction(np.asarray(labels)[idx])
        count += 1
    if count == 0:
        raise ValueError("`batches` is empty.")
    out = {"mean_cosine": cos / count, "num_batches": count}
    if labels is not None:
        out["false_negative_fraction"] = fn / count
    return out
