"""Data augmentation for contrastive learning (SimCLR, Chen et al. 2020).

* :func:`simclr_augmentation` / :class:`SimCLRAugmentation` -- the SimCLR pipeline as one
  Keras layer, random per image; runs in a model's graph and in ``tf.data``.
* :func:`two_views` -- ``images -> (view1, view2)``.
* :class:`RandomApply` -- per-image random application of any shape-preserving layer.
* :class:`ViewMaker` / :class:`ImageViews` / :func:`simclr_views` -- how the frameworks
  draw two views of a batch, one view maker per modality (registered in
  :data:`keras_hardneg.registry.VIEW_MAKERS`).
"""

from keras_hardneg.augment.simclr import (VERSIONS, RandomApply, SimCLRAugmentation,
                                          simclr_augmentation, two_views)
from keras_hardneg.augment.views import ImageViews, ViewMaker, as_view_maker, simclr_views

__all__ = ["VERSIONS", "ImageViews", "RandomApply", "SimCLRAugmentation", "ViewMaker",
           "as_view_maker", "simclr_augmentation", "simclr_views", "two_views"]
