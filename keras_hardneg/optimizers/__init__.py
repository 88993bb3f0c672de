"""Optimizers and schedules for large-batch contrastive pre-training.

* :class:`LARS` -- Layer-wise Adaptive Rate Scaling (You et al. 2017), as used by SimCLR.
* :class:`WarmupCosineDecay` -- linear warm-up + cosine decay learning-rate schedule.
* :class:`WarmupLinearDecay` -- linear warm-up + linear decay to 0 (BERT fine-tuning).
* :mod:`builtin` -- Keras's Adam, AdamW, SGD and LAMB as registered optimizers.
* :class:`SGDL2` -- momentum SGD with coupled L2 decay, as ``torch.optim.SGD`` (``"sgd_l2"``).
"""

from keras_hardneg.optimizers import builtin
from keras_hardneg.optimizers.lars import DEFAULT_EXCLUDE, LARS
from keras_hardneg.optimizers.schedules import WarmupCosineDecay, WarmupLinearDecay
from keras_hardneg.optimizers.sgd_l2 import SGDL2

__all__ = ["DEFAULT_EXCLUDE", "LARS", "SGDL2", "WarmupCosineDecay", "WarmupLinearDecay",
           "builtin"]
