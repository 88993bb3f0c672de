"""Linear evaluation: a logistic-regression classifier on frozen, standardised features.

Choice: scikit-learn's ``LogisticRegression`` (L-BFGS, multinomial, L2 penalty) rather than a
Keras ``Dense`` layer trained with Adam. The problem is convex, so L-BFGS reaches the optimum
without a learning rate, epoch count or batch size to tune; the result is deterministic and
independent of the training hardware. (The papers' SGD-trained linear heads with augmentation
give a few points more on big datasets; that belongs to a training script, not to a metric.)
Features are standardised with statistics of the train set only.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from keras_hardneg.registry import EVALUATIONS, Param

__all__ = ["linear_probe_accuracy"]


@EVALUATIONS.register(
    "linear_probe", result="linear_probe_accuracy",
    params={"C": Param(float, low=0.0, low_inclusive=False,
                       help="inverse L2 strength of the logistic regression")})
def linear_probe_accuracy(train_features: ArrayLike, train_labels: ArrayLike,
                          test_features: ArrayLike, test_labels: ArrayLike, C: float = 1.0,
                          max_iter: int = 1000, seed: int = 0, standardize: bool = True,
                          return_model: bool = False) -> float | tuple[float, Any]:
    """Top-1 test accuracy of a logistic regression trained on frozen features.

    Args:
        train_features: float ``[n_train, F]``.
        train_labels: int ``[n_train]``.
        test_features: float ``[n_test, F]``.
        test_labels: int ``[n_test]``.
        C: inverse L2 regularisation strength, ``> 0`` (scikit-learn's convention).
        max_iter: L-BFGS iterations, ``>= 1``.
        seed: ``random_state`` (L-BFGS is deterministic; kept for solver changes).
        standardize: scale features to zero mean, unit variance (train statistics).
        return_model: also return the fitted scikit-learn ``Pipeline``.

    Returns:
        Python float accuracy in ``[0, 1]`` (and the model if ``return_model``).

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> y = rng.integers(0, 2, 200); x = rng.normal(size=(200, 5)) + 3 * y[:, None]
        >>> linear_probe_accuracy(x[:100], y[:100], x[100:], y[100:]) > 0.9
        True
    """
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    train_features = np.asarray(train_features, dtype=np.float64)
    test_features = np.asarray(test_features, dtype=np.float64)
    train_labels = np.asarray(train_labels).reshape(-1)
    test_labels = np.asarray(test_labels).reshape(-1)
    for name, f, lab in (("train_features", train_features, train_labels),
                         ("test_features", test_features, test_labels)):
        if f.ndim != 2 or f.shape[0] == 0:
            raise ValueError(f"`{name}` must be a non-empty [n, F] array; got shape {f.shape}.")
        if lab.shape[0] != f.shape[0]:
            raise ValueError(
                f"`{name.replace('features', 'labels')}` has {lab.shape[0]} labels for "
                f"{f.shape[0]} feature rows."
            )
    if train_features.shape[1] != test_features.shape[1]:
        raise ValueError(
            f"`test_features` has {test_features.shape[1]} dimensions but `train_features` "
            f"has {train_features.shape[1]}."
        )
    if len(np.unique(train_labels)) < 2:
        raise ValueError("`train_labels` must contain at least two classes.")
    if isinstance(C, bool) or not isinstance(C, numbers.Real) or not C > 0:
        raise ValueError(f"`C` must be a number > 0; got {C!r}.")
    if isinstance(max_iter, bool) or not isinstance(max_iter, numbers.Integral) or max_iter < 1:
        raise ValueError(f"`max_iter` must be an integer >= 1; got {max_iter!r}.")

    steps = [StandardScaler()] if standardize else []
    steps.append(LogisticRegression(C=float(C), max_iter=int(max_iter), random_state=seed))
    model = make_pipeline(*steps)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(train_features, train_labels)
    accuracy = float(np.mean(model.predict(test_features) == test_labels))
    return (accuracy, model) if return_model else accuracy
