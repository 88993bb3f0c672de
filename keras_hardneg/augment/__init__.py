"""Data augmentation for contrastive learning (SimCLR, Chen et al. 2020).

* :func:`simclr_augmentation` / :class:`SimCLRAugmentation` -- the SimCLR pipeline as one
  Keras layer, random per image; runs in a model's graph and in ``tf.data``.
* :func:`two_views` -- ``images -> (view1, view2)``.
* :class:`RandomApply` -- per-image random application of any shape-preserving layer.
"""

from keras_hardneg.augment.simclr import (VERSIONS, RandomApply, SimCLRAugmentation,
                                          simclr_augmentation, two_views)

__all__ = ["VERSIONS", "RandomApply", "SimCLRAugmentation", "simclr_augmentation", "two_views"]
