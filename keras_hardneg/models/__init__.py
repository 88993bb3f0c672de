"""Contrastive frameworks as ``keras.Model`` subclasses trained with ``fit()``.

* :class:`SimCLR`; :class:`MoCoV2` and :class:`MoCoV3` (``MoCo(..., version=...)`` builds
  either), on :class:`ContrastiveModel` / :class:`MomentumContrast`.
* Graphs: :class:`GraphCL` (SimCLR on two graph views) and :class:`InfoGraph` (node vs
  graph contrast, HCL's graph set-up).
* Retrieval: :class:`DualEncoder` (one shared encoder over (query, positive, mined
  negatives) tuples, :class:`~keras_hardneg.losses.MinedNegativesLoss`).
* :mod:`.health` (the step record, :class:`NonFiniteGuard`), :mod:`.memory_bank`,
  :mod:`.metrics`: what every framework keeps besides its step.
"""

from keras_hardneg.models.base import ContrastiveModel
from keras_hardneg.models.dual_encoder import DualEncoder
from keras_hardneg.models.graphcl import GraphCL
from keras_hardneg.models.health import HEALTH_FIELDS, NonFiniteError, NonFiniteGuard
from keras_hardneg.models.infograph import InfoGraph
from keras_hardneg.models.moco import MoCo, MoCoV2, MoCoV3
from keras_hardneg.models.momentum import MomentumContrast
from keras_hardneg.models.simclr import SimCLR

__all__ = ["ContrastiveModel", "DualEncoder", "GraphCL", "HEALTH_FIELDS", "InfoGraph", "MoCo", "MoCoV2",
           "MoCoV3", "MomentumContrast", "NonFiniteError", "NonFiniteGuard", "SimCLR"]
