"""Data augmentation for contrastive learning (SimCLR, Chen et al. 2020).

* :func:`simclr_augmentation` / :class:`SimCLRAugmentation` -- the SimCLR pipeline as one
  Keras layer, random per image; runs in a model's graph and in ``tf.data``.
* :func:`two_views` -- ``images -> (view1, view2)``.
* :class:`RandomApply` -- per-image random application of any shape-preserving layer.
* :class:`ViewMaker` / :class:`ImageViews` / :func:`simclr_views` -- how the frameworks
  draw two views of a batch, one view maker per modality (registered in
  :data:`keras_hardneg.registry.VIEW_MAKERS`).
* :class:`DropoutViews` / :class:`AdjacentViews` -- sentence views: unsupervised SimCSE (the
  same ids twice; the encoder's dropout makes them differ) and quick-thought (a sentence and
  the next one), registered as ``"simcse"`` and ``"quick_thought"``.
* :class:`GraphViews` / :func:`graphcl_views` -- GraphCL's graph augmentations (node dropping,
  edge perturbation, attribute masking, subgraph), host-side NumPy, for the graph feed.
* :class:`NoViews` -- ``"none"``: data whose pairs are given (retrieval tuples), no views.
"""

from keras_hardneg.augment.graph_views import GraphViews, graphcl_views
from keras_hardneg.augment.no_views import NoViews
from keras_hardneg.augment.simclr import (VERSIONS, RandomApply, SimCLRAugmentation,
                                          simclr_augmentation, two_views)
from keras_hardneg.augment.text_views import AdjacentViews, DropoutViews
from keras_hardneg.augment.views import ImageViews, ViewMaker, as_view_maker, simclr_views

__all__ = ["AdjacentViews", "DropoutViews", "NoViews",
           "VERSIONS", "GraphViews", "ImageViews", "RandomApply", "SimCLRAugmentation",
           "ViewMaker", "as_view_maker", "graphcl_views", "simclr_augmentation", "simclr_views",
           "two_views"]
