"""SVM cross-validation accuracy of frozen graph embeddings: the evaluation protocol of the
graph papers (InfoGraph, Sun et al. 2020; GraphCL, You et al. 2020; HCL, Robinson et al.
2021, App. D.2; UnReMix, Tabassum et al. 2022; BatchSampler, Yang et al. 2023, App. E.2).

Protocol (as the InfoGraph / GraphCL evaluation code, ``evaluate_embedding.py``, as far as
we know it; the papers say only "10-fold cross-validation accuracy using an SVM"):

1. ``folds``-fold stratified cross-validation over all graphs (shuffled, seeded);
2. in each outer fold, a scikit-learn ``SVC`` (RBF kernel, ``gamma="scale"`` =
   ``1 / (F * var(X_train))``, no feature scaling) whose ``C`` is chosen from ``C_grid``
   (default ``{1e-3, 1e-2, ..., 1e3}``) by an inner ``inner_folds``-fold stratified
   cross-validation of accuracy on the outer training part (``GridSearchCV(SVC(), cv=5)``:
   unshuffled inner folds, the smallest best ``C`` on ties), then refit on the whole outer
   training part and scored on the outer test part;
3. the mean and standard deviation of the ``folds`` test accuracies.

Speed (``docs/notes/graph_models.md``): the same fits, faster. The RBF kernel of a fold is
computed once from the pairwise squared distances (computed once for all graphs) and the
SVMs take it precomputed (``kernel="precomputed"``): the same predictions as
``SVC(kernel="rbf")`` with the same ``gamma``, 3-9x faster per fit on NCI1-sized data. Inner
folds reuse the outer fold's ``gamma`` (``GridSearchCV`` would recompute ``var(X)`` on each
inner training part: a difference of a few percent in ``gamma``). When no dual coefficient
of a fit reaches its bound ``C``, the solution is also the solution for every larger ``C``
(the box constraint is inactive), so those fits are skipped and their predictions reused
(exact up to LIBSVM's stopping tolerance).

Deterministic for a ``seed``. The SVM part is NumPy and scikit-learn only.
"""

from __future__ import annotations

import numbers
from typing import Any, Sequence

import numpy as np

from keras_hardneg.evaluation.graph_features import embed_graphs
from keras_hardneg.registry import EVALUATIONS, Param

__all__ = ["svm_cross_validation", "embed_graphs", "C_GRID"]

#: The C grid of InfoGraph / GraphCL's evaluation.
C_GRID = (1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0)


def _check_int(value: Any, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"`{name}` must be an integer >= {low}; got {value!r}.")
    return int(value)


def _check_inputs(features, labels, folds, inner_folds, seed, C_grid):
    x = np.asarray(features)
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"`features` must be a non-empty [N, F] array; got shape {x.shape}.")
    if not np.issubdtype(x.dtype, np.number):
        raise ValueError(f"`features` must be numbers; got dtype {x.dtype}.")
    x = x.astype(np.float64)
    if not np.all(np.isfinite(x)):
        raise ValueError("`features` contains NaN or infinite values.")
    y = np.asarray(labels)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1 or y.shape[0] != x.shape[0]:
        raise ValueError(f"`labels` must have shape [{x.shape[0]}] to match the features; "
                         f"got {y.shape}.")
    folds = _check_int(folds, "folds", 2)
    inner_folds = _check_int(inner_folds, "inner_folds", 2)
    seed = _check_int(seed, "seed", 0)
    classes, counts = np.unique(y, return_counts=True)
    if len(classes) < 2:
        raise ValueError(f"`labels` must have at least 2 classes; got {classes.tolist()}.")
    # Every outer training part must hold `inner_folds` graphs of each class.
    if counts.min() < folds or counts.min() - -(-counts.min() // folds) < inner_folds:
        raise ValueError(
            f"every class needs enough graphs for {folds} outer and {inner_folds} inner "
            f"folds; the smallest class has {int(counts.min())} (lower `folds` or "
            "`inner_folds`).")
    try:
        grid = [float(c) for c in C_grid]
    except (TypeError, ValueError):
        raise ValueError(f"`C_grid` must be a sequence of numbers > 0; got {C_grid!r}.") \
            from None
    if not grid or min(grid) <= 0 or not all(np.isfinite(grid)):
        raise ValueError(f"`C_grid` must be a non-empty sequence of numbers > 0; got "
                         f"{C_grid!r}.")
    return x, np.searchsorted(classes, y), folds, inner_folds, seed, sorted(set(grid))


def _squared_distances(x: np.ndarray) -> np.ndarray:
    sq = np.einsum("ij,ij->i", x, x)
    d = sq[:, None] + sq[None, :] - 2.0 * (x @ x.T)
    np.maximum(d, 0.0, out=d)
    np.fill_diagonal(d, 0.0)
    return d


def _gamma(x_train: np.ndarray) -> float:
    """scikit-learn's ``gamma="scale"``: ``1 / (F * var(X))`` (1 when ``var(X) == 0``)."""
    var = x_train.var()
    return 1.0 / (x_train.shape[1] * var) if var != 0 else 1.0


def _block(kernel: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    return np.take(np.take(kernel, rows, axis=0), cols, axis=1)


def _fits_over_grid(k_train, y_train, k_test, grid):
    """Test predictions of SVMs on the precomputed kernels ``k_train [n, n]``, ``k_test
    [m, n]`` for each ``C`` of ``grid`` (ascending); a fit whose dual coefficients all stay
    below ``C`` also solves every larger ``C``, so its predictions are reused for them."""
    from sklearn import config_context
    from sklearn.svm import SVC

    predictions, reused = [], None
    with config_context(assume_finite=True):  # the kernel is finite: skip the re-checks
        for c in grid:
            if reused is None:
                svm = SVC(C=c, kernel="precomputed").fit(k_train, y_train)
                pred = svm.predict(k_test)
                # LIBSVM stops at a tolerance: a coefficient within 1e-6 C is at the bound.
                if np.all(np.abs(svm.dual_coef_) < c * (1.0 - 1e-6)):
                    reused = pred
            else:
                pred = reused
            predictions.append(pred)
    return predictions


@EVALUATIONS.register(
    "svm", result="svm_accuracy", modality="graph",
    params={"folds": Param(int, low=2, help="outer stratified cross-validation folds"),
            "inner_folds": Param(int, low=2, help="inner folds choosing the SVM's C")})
def svm_cross_validation(features: Any, labels: Any, *, folds: int = 10, seed: int = 0,
                         C_grid: Sequence[float] = C_GRID, inner_folds: int = 5) -> dict:
    """Cross-validated accuracy of an RBF ``SVC`` on frozen embeddings (see the module
    docstring for the protocol).

    Args:
        features: ``[N, F]`` graph embeddings (any scale; not rescaled, as the papers' code).
        labels: ``[N]`` class labels (any values; at least 2 classes).
        folds: outer stratified folds (default 10).
        seed: shuffles the outer folds; the result is a function of the inputs and ``seed``.
        C_grid: candidate ``C`` values (default :data:`C_GRID`, ``1e-3 ... 1e3``).
        inner_folds: inner folds choosing ``C`` (default 5, as ``GridSearchCV(cv=5)``).

    Returns:
        ``{"svm_accuracy": mean, "svm_accuracy_std": std, "fold_accuracies": [folds],
        "chosen_C": [folds]}``: fractions in ``[0, 1]`` (Python floats).

    Raises:
        ValueError: naming the argument (shapes, non-finite features, a single class, a
            class with too few graphs for the folds, a bad grid).

    Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat([0, 1], 30); x = rng.normal(size=(60, 4)) + 5 * y[:, None]
    >>> out = svm_cross_validation(x, y, folds=5, seed=0)
    >>> out["svm_accuracy"], len(out["fold_accuracies"])
    (1.0, 5)
    """
    from sklearn.model_selection import StratifiedKFold

    x, y, folds, inner_folds, seed, grid = _check_inputs(features, labels, folds, inner_folds,
                                                          seed, C_grid)
    distances = _squared_distances(x)
    outer = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    accuracies, chosen = [], []
    for train, test in outer.split(x, y):
        rows = np.take(distances, train, axis=0)          # [n_train, N]
        rows *= -_gamma(x[train])
        np.exp(rows, out=rows)                            # RBF kernel rows of the train part
        k_train, k_test = np.take(rows, train, axis=1), np.take(rows, test, axis=1).T
        del rows
        y_train = y[train]
        scores = np.zeros(len(grid))
        inner = StratifiedKFold(n_splits=inner_folds, shuffle=False)
        for tr, val in inner.split(train, y_train):
            predictions = _fits_over_grid(_block(k_train, tr, tr), y_train[tr],
                                          _block(k_train, val, tr), grid)
            for i, pred in enumerate(predictions):
                scores[i] += np.mean(pred == y_train[val])
        best = int(np.argmax(scores))  # the smallest C among the best (GridSearchCV's)
        pred = _fits_over_grid(k_train, y_train, k_test, [grid[best]])[0]
        accuracies.append(float(np.mean(pred == y[test])))
        chosen.append(grid[best])
    return {"svm_accuracy": float(np.mean(accuracies)),
            "svm_accuracy_std": float(np.std(accuracies)),
            "fold_accuracies": accuracies, "chosen_C": chosen}
