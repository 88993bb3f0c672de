"""Spreading a run over processes: one registered entry per way of distributing.

* :mod:`~keras_hardneg.run.distribution.base`: where a process sits among the workers
  (:class:`WorkerPlace`), the :class:`Distribution` hooks, ``"single"`` (one process, the
  default) and :func:`build_distribution`;
* :mod:`~keras_hardneg.run.distribution.multi_worker`: ``"tf_multi_worker"``
  (TensorFlow's ``MultiWorkerMirroredStrategy``, ``TF_CONFIG``);
* :mod:`~keras_hardneg.run.distribution.multi_process`: ``"jax_multi_process"``
  (``jax.distributed``).

Importing this package registers all three in :data:`keras_hardneg.registry.DISTRIBUTIONS`.
"""

from keras_hardneg.run.distribution.base import (Distribution, SingleProcess, WorkerPlace,
                                                 build_distribution)
from keras_hardneg.run.distribution import multi_process  # noqa: F401  (registers it)
from keras_hardneg.run.distribution import multi_worker  # noqa: F401  (registers it)

__all__ = ["WorkerPlace", "Distribution", "SingleProcess", "build_distribution"]
