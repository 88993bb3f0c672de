"""Evaluating frozen representations.

* :func:`extract_features`: encoder + images/dataset -> numpy features (and labels).
* :func:`weighted_knn_accuracy`: the weighted kNN classifier of Wu et al. (2018).
* :func:`linear_probe_accuracy`: logistic regression on standardised frozen features.
* :class:`KNNMonitor`: a ``keras.callbacks.Callback`` logging kNN accuracy during ``fit``.
* :func:`false_negative_rate`: share of in-batch SimCLR negatives that share the anchor's class.
"""

from keras_hardneg.evaluation.false_negatives import false_negative_rate
from keras_hardneg.evaluation.features import extract_features
from keras_hardneg.evaluation.knn import weighted_knn_accuracy, weighted_knn_predict
from keras_hardneg.evaluation.linear_probe import linear_probe_accuracy
from keras_hardneg.evaluation.monitor import KNNMonitor

__all__ = [
    "KNNMonitor",
    "extract_features",
    "false_negative_rate",
    "linear_probe_accuracy",
    "weighted_knn_accuracy",
    "weighted_knn_predict",
]
