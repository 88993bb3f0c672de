"""Weighted k-nearest-neighbour classification of frozen features (Wu et al., 2018).

The classifier used by InstDisc ("Unsupervised Feature Learning via Non-Parametric Instance
Discrimination", CVPR 2018) and reported by lightly and solo-learn as "kNN accuracy":

1. L2-normalise train and test features; similarity = cosine ``s_ij = x_i . t_j``.
2. For each test point take its ``k`` most similar train points (``k`` clipped to ``n_train``).
3. Neighbour weight ``w = exp(s / temperature)``; class score = sum of the weights of the
   neighbours of that class; prediction = argmax (lowest class id on ties).

Implementation: NumPy (float32 BLAS matmul), test points in chunks so that the
``[chunk, n_train]`` similarity block stays under ~128 MB; the weights are computed as
``exp((s - s_max) / temperature)`` (same argmax, no overflow for small temperatures). Any
backend, no TensorFlow.
"""

from __future__ import annotations

import numbers

import numpy as np
from numpy.typing import ArrayLike

from keras_hardneg.registry import EVALUATIONS, Param

__all__ = ["weighted_knn_predict", "weighted_knn_accuracy"]

_BLOCK_ELEMENTS = 2**25  # floats per similarity block (128 MB)


def _check_inputs(train_features, train_labels, test_features, test_labels, k, temperature,
                  num_classes):
    train_features = np.asarray(train_features, dtype=np.float32)
    test_features = np.asarray(test_features, dtype=np.float32)
    for name, f in (("train_features", train_features), ("test_features", test_features)):
        if f.ndim != 2 or f.shape[0] == 0:
            raise ValueError(f"`{name}` must be a non-empty [n, F] array; got shape {f.shape}.")
        if not np.all(np.isfinite(f)):
            raise ValueError(f"`{name}` contains NaN or infinite values.")
    if train_features.shape[1] != test_features.shape[1]:
        raise ValueError(
            f"`test_features` has {test_features.shape[1]} dimensions but `train_features` "
            f"has {train_features.shape[1]}."
        )
    labels = {}
    for name, lab, feat in (("train_labels", train_labels, train_features),
                            ("test_labels", test_labels, test_features)):
        if lab is None and name == "test_labels":
            labels[name] = None
            continue
        lab = np.asarray(lab)
        if lab.ndim == 2 and lab.shape[1] == 1:
            lab = lab[:, 0]
        if lab.ndim != 1 or lab.shape[0] != feat.shape[0]:
            raise ValueError(
                f"`{name}` must have shape [{feat.shape[0]}] to match the features; got "
                f"{lab.shape}."
            )
        if not np.issubdtype(lab.dtype, np.integer):
            if not np.all(np.equal(np.mod(lab, 1), 0)):
                raise ValueError(f"`{name}` must be integer class ids.")
        labels[name] = lab.astype(np.int64)
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise ValueError(f"`k` must be an integer >= 1; got {k!r}.")
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real) or not (
        np.isfinite(temperature) and temperature > 0
    ):
        raise ValueError(f"`temperature` must be a finite number > 0; got {temperature!r}.")
    all_labels = [v for v in labels.values() if v is not None]
    max_label = int(max(v.max() for v in all_labels))
    if min(int(v.min()) for v in all_labels) < 0:
        raise ValueError("`train_labels`/`test_labels` must be >= 0.")
    if num_classes is None:
        num_classes = max_label + 1
    elif isinstance(num_classes, bool) or not isinstance(num_classes, numbers.Integral) or (
        num_classes <= max_label
    ):
        raise ValueError(
            f"`num_classes` must be an integer > the largest label ({max_label}); "
            f"got {num_classes!r}."
        )
    return (train_features, labels["train_labels"], test_features, labels["test_labels"],
            int(k), float(temperature), int(num_classes))


def _l2_normalize(x):
    # as tf.math.l2_normalize: x / sqrt(max(sum(x^2), 1e-12))
    return x / np.sqrt(np.maximum(np.sum(x * x, axis=1, keepdims=True), np.float32(1e-12)))


def _predict_chunk(train_norm, train_labels, test_chunk, k, temperature, num_classes):
    test_norm = _l2_normalize(test_chunk)
    similarity = test_norm @ train_norm.T                               # [c, n_train]
    # top-k, sorted by similarity (descending); ties by lower train index, as tf.math.top_k
    part = np.argpartition(-similarity, k - 1, axis=1)[:, :k] if k < similarity.shape[1] \
        else np.broadcast_to(np.arange(similarity.shape[1]), similarity.shape)
    part_sim = np.take_along_axis(similarity, part, axis=1)
    order = np.lexsort((part, -part_sim), axis=1)
    top_idx = np.take_along_axis(part, order, axis=1)                   # [c, k]
    top_sim = np.take_along_axis(part_sim, order, axis=1)               # [c, k]
    weights = np.exp((top_sim - top_sim[:, :1]) / np.float32(temperature))   # [c, k]
    neighbour_labels = train_labels[top_idx]                            # [c, k]
    rows = test_chunk.shape[0]
    # Sum the weights per (row, class) without materialising a [c, k, C] one-hot.
    cell = np.arange(rows)[:, None] * num_classes + neighbour_labels   # [c, k]
    scores = np.bincount(cell.ravel(), weights.ravel(), minlength=rows * num_classes)
    scores = scores.reshape(rows, num_classes).astype(np.float32)       # [c, C]
    return np.argmax(scores, axis=1).astype(np.int64), scores


def weighted_knn_predict(train_features: ArrayLike, train_labels: ArrayLike,
                         test_features: ArrayLike, k: int = 200, temperature: float = 0.1,
                         num_classes: int | None = None, return_scores: bool = False
                         ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Weighted-kNN predictions for ``test_features``; see the module docstring.

    Args:
        train_features: ``[n_train, F]``.
        train_labels: int ``[n_train]`` in ``0..C-1``.
        test_features: ``[n_test, F]``.
        k: neighbours, ``>= 1`` (clipped to ``n_train``).
        temperature: ``> 0``.
        num_classes: ``C``; ``None`` uses ``max(train_labels) + 1``.
        return_scores: also return the class scores ``[n_test, C]`` (each row scaled by
            ``exp(-s_max / temperature)``, ``s_max`` the row's largest similarity).

    Returns:
        int64 ``[n_test]`` predictions (and float32 scores if ``return_scores``).
    """
    (train_features, train_labels, test_features, _, k, temperature,
     num_classes) = _check_inputs(train_features, train_labels, test_features, None, k,
                                  temperature, num_classes)
    n_train = train_features.shape[0]
    k = min(k, n_train)
    chunk = max(1, min(test_features.shape[0], _BLOCK_ELEMENTS // n_train))
    train_norm = _l2_normalize(train_features)
    predictions, scores = [], []
    for start in range(0, test_features.shape[0], chunk):
        pred, score = _predict_chunk(train_norm, train_labels,
                                     test_features[start:start + chunk], k, temperature,
                                     num_classes)
        predictions.append(pred)
        if return_scores:
            scores.append(score)
    predictions = np.concatenate(predictions)
    if return_scores:
        return predictions, np.concatenate(scores)
    return predictions


@EVALUATIONS.register(
    "knn", result="knn_accuracy",
    params={"k": Param(int, low=1, help="neighbours of the weighted kNN classifier"),
            "temperature": Param(float, low=0.0, low_inclusive=False,
                                 help="temperature of the kNN vote weights exp(cos / t)")})
def weighted_knn_accuracy(train_features: ArrayLike, train_labels: ArrayLike,
                          test_features: ArrayLike, test_labels: ArrayLike, k: int = 200,
                          temperature: float = 0.1, num_classes: int | None = None) -> float:
    """Top-1 accuracy of the weighted kNN classifier of Wu et al. (2018).

    Args:
        train_features: float ``[n_train, F]`` (any scale; L2-normalised here).
        train_labels: int ``[n_train]``.
        test_features: float ``[n_test, F]``.
        test_labels: int ``[n_test]``.
        k: neighbours (default 200, as InstDisc/solo-learn), clipped to ``n_train``.
        temperature: weight temperature ``> 0`` (default 0.1).
        num_classes: ``None`` infers ``max(label) + 1`` over train and test labels.

    Returns:
        Python float in ``[0, 1]``.

    Example:
        >>> import numpy as np
        >>> x = np.array([[1, 0], [0.9, 0.1], [0, 1], [0.1, 0.9]], "float32")
        >>> y = np.array([0, 0, 1, 1])
        >>> weighted_knn_accuracy(x, y, x[::-1], y[::-1], k=2)
        1.0
    """
    (train_features, train_labels, test_features, test_labels, k, temperature,
     num_classes) = _check_inputs(train_features, train_labels, test_features, test_labels, k,
                                  temperature, num_classes)
    predictions = weighted_knn_predict(train_features, train_labels, test_features, k=k,
                                       temperature=temperature, num_classes=num_classes)
    return float(np.mean(predictions == test_labels))
