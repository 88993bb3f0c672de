"""Optimizers and schedules for large-batch contrastive pre-training.

* :class:`LARS` -- Layer-wise Adaptive Rate Scaling (You et al. 2017), as used by SimCLR.
* :class:`WarmupCosineDecay` -- linear warm-up + cosine decay learning-rate schedule.
* :mod:`builtin` -- Keras's Adam, AdamW, SGD and LAMB as registered optimizers.
"""

from keras_hardneg.optimizers import builtin
from keras_hardneg.optimizers.lars import DEFAULT_EXCLUDE, LARS
from keras_hardneg.optimizers.schedules import WarmupCosineDecay

__all__ = ["DEFAULT_EXCLUDE", "LARS", "WarmupCosineDecay", "builtin"]
