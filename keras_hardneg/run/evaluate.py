"""Evaluation of a frozen encoder with the registered evaluations (weighted kNN, linear probe)."""

from __future__ import annotations

from typing import Any

import numpy as np

from keras_hardneg.registry import EVALUATIONS

__all__ = ["evaluate_encoder"]


def evaluate_encoder(encoder: Any, train: tuple[np.ndarray, np.ndarray],
                     test: tuple[np.ndarray, np.ndarray], k: int | None = None,
                     temperature: float | None = None, linear_probe: bool = True
                     ) -> dict[str, float]:
    """Weighted kNN (and linear-probe) accuracy of ``encoder``'s features, fit on ``train``
    and scored on ``test`` (labelled arrays).

    ``k`` and ``temperature`` default to the ``knn`` evaluation's registered defaults.
    Returns ``{"knn_accuracy": ..., "linear_probe_accuracy": ...}`` (fractions).
    """
    from keras_hardneg.evaluation import extract_features

    f_train = extract_features(encoder, train[0])
    f_test = extract_features(encoder, test[0])
    knn = {key: value for key, value in (("k", k), ("temperature", temperature))
           if value is not None}
    plan = [("knn", knn)] + ([("linear_probe", {})] if linear_probe else [])
    out = {}
    for name, config in plan:
        result = EVALUATIONS.get(name).tags["result"]
        out[result] = float(EVALUATIONS.build(name, f_train, train[1], f_test, test[1], **config))
    return out
