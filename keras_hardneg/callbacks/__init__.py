"""Training callbacks: hyper-parameter schedules and the non-finite guard.

* :class:`BetaAnnealing` -- Robinson et al. (2021) App. D.1: ``beta`` steps down to 0.
* :class:`RingAnnealing` -- Wu et al. (2021): Ring's upper percentile, linearly 100 -> 10.
* :class:`NonFiniteGuard` -- stops a run at the first non-finite loss or gradient, with a report.
* :class:`AtomicBackupAndRestore` -- crash-safe resume state (weights, optimizer, sampler).
* :class:`GraphRefreshCallback` -- rebuilds BatchSampler's proximity graph every N steps.
* :class:`KNNMonitor` -- logs the encoder's weighted-kNN accuracy during ``fit``.
* :class:`ReminingCallback` -- re-mines the retrieval tuples with the encoder being trained.
"""

from keras_hardneg.callbacks.annealing import BetaAnnealing, RingAnnealing
from keras_hardneg.callbacks.backup import AtomicBackupAndRestore, BackupError, RandomState
from keras_hardneg.callbacks.graph_refresh import GraphRefreshCallback
from keras_hardneg.callbacks.knn_monitor import KNNMonitor
from keras_hardneg.callbacks.remining import ReminingCallback
from keras_hardneg.models.health import NonFiniteError, NonFiniteGuard

__all__ = ["AtomicBackupAndRestore", "BackupError", "RandomState", "BetaAnnealing", "GraphRefreshCallback", "KNNMonitor", "NonFiniteError", "NonFiniteGuard", "ReminingCallback", "RingAnnealing"]
