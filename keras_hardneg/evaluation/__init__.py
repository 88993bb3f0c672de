"""Evaluating frozen representations.

* :func:`extract_features`: encoder + images/dataset -> numpy features (and labels).
* :func:`weighted_knn_accuracy`: the weighted kNN classifier of Wu et al. (2018).
* :func:`linear_probe_accuracy`: logistic regression on standardised frozen features.
* :func:`false_negative_rate`: share of in-batch SimCLR negatives that share the anchor's class.
* :func:`svm_cross_validation`: 10-fold SVM accuracy of frozen graph embeddings (InfoGraph /
  GraphCL protocol); :func:`embed_graphs` runs a graph encoder over a ``GraphSet``.
* :func:`sts_scores`: SimCSE's STS12-16, STS-B, SICK-R evaluation (Spearman of cosine x 100).
* :func:`senteval_scores`: SentEval's MR, CR, SUBJ, MPQA, TREC, MRPC logistic-regression accuracy.
* :func:`retrieval_scores`: BEIR's nDCG@10, Recall@100, MRR@10 of query and corpus embeddings
  (:func:`ranking_scores` of a ranking; :func:`rank_corpus`; per query :func:`ndcg_at_k`,
  :func:`recall_at_k`, :func:`mrr_at_k`).

The kNN-accuracy callback for ``fit`` is :class:`keras_hardneg.callbacks.KNNMonitor`.
"""

from keras_hardneg.evaluation.false_negatives import false_negative_rate
from keras_hardneg.evaluation.features import extract_features
from keras_hardneg.evaluation.graph_features import embed_graphs
from keras_hardneg.evaluation.knn import weighted_knn_accuracy, weighted_knn_predict
from keras_hardneg.evaluation.linear_probe import linear_probe_accuracy
from keras_hardneg.evaluation.retrieval import (mrr_at_k, ndcg_at_k, rank_corpus, ranking_scores,
                                                recall_at_k, retrieval_scores)
from keras_hardneg.evaluation.svm import svm_cross_validation
from keras_hardneg.evaluation.senteval import senteval_scores
from keras_hardneg.evaluation.sts import spearman, sts_scores

__all__ = [
    "embed_graphs",
    "extract_features",
    "false_negative_rate",
    "linear_probe_accuracy",
    "mrr_at_k",
    "ndcg_at_k",
    "rank_corpus",
    "ranking_scores",
    "recall_at_k",
    "retrieval_scores",
    "svm_cross_validation",
    "senteval_scores",
    "spearman",
    "sts_scores",
    "weighted_knn_accuracy",
    "weighted_knn_predict",
]
