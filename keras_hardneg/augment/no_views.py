"""``"none"``: the view maker of data whose positive pairs are given, not drawn.

Retrieval trains on given (query, positive document, mined negatives) tuples: a training
batch holds the pairs themselves (:mod:`keras_hardneg.modalities.retrieval`), so no view is
drawn. A recipe still names its ``augmentation``; for such data it is ``"none"``, whose
views of a batch are the batch itself, twice, unchanged.

Example:
>>> import numpy as np
>>> v1, v2 = NoViews()(np.ones((2, 3), "int32"))
>>> tuple(v1.shape), bool((np.asarray(v1) == np.asarray(v2)).all())
((2, 3), True)
"""

from __future__ import annotations

from typing import Any

import keras

from keras_hardneg.augment.views import ViewMaker
from keras_hardneg.registry import VIEW_MAKERS

__all__ = ["NoViews", "no_views"]


@keras.saving.register_keras_serializable(package="keras_hardneg")
class NoViews(ViewMaker):
    """Views of given pairs: a batch ``x [B, ...]`` -> ``(x, x)``, both ``[B, ...]``,
    unchanged (nothing random, no weights)."""

    modality = "retrieval"
    jit_compatible = True

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.built = True

    def make_views(self, x: Any, training: bool | None) -> tuple[Any, Any]:
        return x, x

    def compute_output_spec(self, x: Any, training: bool | None = None):
        return x, x


# seed: the run layer passes the recipe's seed to every view maker that takes one.
@VIEW_MAKERS.register("none", modality="retrieval")
def no_views(seed: int | None = None) -> NoViews:
    """No views: the feed's tuples are the pairs (retrieval)."""
    return NoViews()
