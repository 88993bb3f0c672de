"""View makers: a batch of raw examples of one modality -> two random views of it.

Contrastive frameworks learn by matching two views of the same example (Chen et al.
2020, "A Simple Framework for Contrastive Learning of Visual Representations"). What
a view is depends on the modality -- two augmented crops of an image, two dropout masks
of a sentence, two perturbations of a graph -- so the frameworks do not draw views
themselves: they hand the raw batch to a :class:`ViewMaker` chosen for the modality.

* :class:`ViewMaker` -- the base: ``call(x, training) -> (view1, view2)``; it checks its
  own input (:meth:`ViewMaker.check_input`).
* :class:`ImageViews` -- images ``[B, H, W, 3]``: two draws of an augmentation layer
  (:func:`~keras_hardneg.augment.simclr_augmentation` by default), honouring asymmetric
  recipes (SimCLR v3 solarizes only view 2) through :func:`two_views`.
* :func:`as_view_maker` -- what the frameworks do with their ``augmentation=`` argument.

View makers are registered in :data:`keras_hardneg.registry.VIEW_MAKERS` with their
modality (``VIEW_MAKERS.names(modality="image")``).

Example:
>>> import numpy as np
>>> views = simclr_views(image_size=8, seed=0)
>>> v1, v2 = views(np.random.rand(4, 8, 8, 3).astype("float32"), training=True)
>>> tuple(v1.shape), tuple(v2.shape)
((4, 8, 8, 3), (4, 8, 8, 3))
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
from keras import ops

from keras_hardneg.augment.simclr import (CONTRAST_MEANS, CROP_BOXES, VERSIONS,
                                         simclr_augmentation, two_views)
from keras_hardneg.registry import VIEW_MAKERS, Param

__all__ = ["ViewMaker", "ImageViews", "as_view_maker", "simclr_views"]


class ViewMaker(keras.layers.Layer):
    """Base of the view makers: ``call(x, training) -> (view1, view2)``.

    Each view keeps the layout and the batch size ``B`` of ``x``, row ``i`` of both views
    made from row ``i`` of ``x``: images ``[B, H, W, C]`` give two ``[B, H', W', C]`` views
    (``H', W'``: the crop size), token ids ``[B, L]`` two ``[B, L]`` views, a graph batch
    of ``B`` graphs two graph batches of the same ``B`` graphs.

    Subclasses implement :meth:`make_views` and, when their input has a required
    form, :meth:`check_input` (raising a ``ValueError`` that says what was expected).

    Attributes:
        modality: what the input is (``"image"``, ``"text"``, ``"graph"``...).
        jit_compatible: whether the view maker can run inside an XLA-compiled step.
    """

    modality: str = "any"
    jit_compatible: bool = True

    def check_input(self, x: Any) -> None:
        """Raises ``ValueError`` when ``x`` is not a batch this view maker accepts."""

    def make_views(self, x: Any, training: bool | None) -> tuple[Any, Any]:
        """``(view1, view2)`` of a checked batch ``x``."""
        raise NotImplementedError(f"{type(self).__name__} must implement make_views.")

    def call(self, x: Any, training: bool | None = None) -> tuple[Any, Any]:
        self.check_input(x)
        return self.make_views(x, training)


@keras.saving.register_keras_serializable(package="keras_hardneg")
class ImageViews(ViewMaker):
    """Two augmented views of a batch of images ``[B, H, W, 3]``: float in ``[0, 1]``, or
    uint8 in ``[0, 255]`` (scaled by 1/255 inside the step, so a feed can send 4x fewer
    bytes to the accelerator).

    Args:
        augmentation: a layer drawing one random view of a batch of images, e.g.
            :func:`~keras_hardneg.augment.simclr_augmentation`; its ``two_views`` is
            used when it has one (asymmetric recipes), else it is called twice.
    """

    modality = "image"
    # SimCLRAugmentation is keras.ops + keras.random: it compiles under XLA (TF
    # jit_compile, jax.jit) once per input shape.
    jit_compatible = True

    def __init__(self, augmentation: keras.layers.Layer, **kwargs):
        # Views are drawn in float32 whatever the dtype policy (as the augmentation does).
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        if augmentation is None or not callable(augmentation):
            raise ValueError("`augmentation` must be a layer drawing one random view of a "
                             f"batch of images; got {augmentation!r}.")
        self.augmentation = augmentation
        # No weights of its own (the augmentation's are created with it): usable by
        # ``stateless_call`` in a compiled step before any call.
        self.built = True

    def check_input(self, x: Any) -> None:
        # Static checks only (numpy, TF and JAX arrays, KerasTensors): a TF tensor of
        # unknown rank passes.
        rank = getattr(x, "ndim", None)
        if rank is None and not hasattr(x, "shape"):
            rank = ops.ndim(x)
        if rank is None:
            return
        shape = tuple(x.shape) if hasattr(x, "shape") else tuple(ops.shape(x))
        if rank != 4 or shape[-1] not in (None, 3):
            raise ValueError(f"Images must have shape [batch, height, width, 3]; got {shape}.")

    def make_views(self, x: Any, training: bool | None) -> tuple[Any, Any]:
        if keras.backend.standardize_dtype(x.dtype) == "uint8":
            x = ops.cast(x, "float32") * np.float32(1.0 / 255.0)  # as data.decode.to_unit_float
        return two_views(self.augmentation)(ops.cast(x, "float32"), training=training)

    def compute_output_spec(self, x: Any, training: bool | None = None):
        view = keras.KerasTensor(self.augmentation.compute_output_shape(x.shape), "float32")
        return view, view

    def get_config(self) -> dict:
        config = super().get_config()
        config["augmentation"] = keras.saving.serialize_keras_object(self.augmentation)
        return config

    @classmethod
    def from_config(cls, config: dict) -> "ImageViews":
        config = dict(config)
        config["augmentation"] = keras.saving.deserialize_keras_object(config["augmentation"])
        return cls(**config)


def as_view_maker(augmentation: Any) -> ViewMaker | None:
    """The view maker for a framework's ``augmentation=`` argument: None stays None
    (the data holds the views), a :class:`ViewMaker` is used as is, and any other
    augmentation layer is wrapped in :class:`ImageViews`."""
    if augmentation is None or isinstance(augmentation, ViewMaker):
        return augmentation
    return ImageViews(augmentation)


# image_size and seed are not config keys: the run layer takes them from the data and the
# recipe's seed.
@VIEW_MAKERS.register("simclr", modality="image", params={
    "version": Param(str, choices=VERSIONS,
                     help="v1 additive brightness; v2 multiplicative; v3 v2 + solarized view 2"),
    "strength": Param(float, low=0, help="colour-jitter strength (1 = 0.4/0.4/0.4/0.1)"),
    "crop_scale": Param(list, low=0, high=1, low_inclusive=False,
                        help="(min, max) area fraction of the random resized crop"),
    "exact_color_jitter": Param(bool, help="colour jitter op by op with a clip after each "
                                           "and an HSV hue (torchvision's); false: one "
                                           "affine colour map, ~10x cheaper on CPU"),
    "contrast_mean": Param(str, choices=CONTRAST_MEANS,
                           help="contrast around each channel's mean (SimCLR's TF code) or "
                                "the mean grey level (torchvision, lightly)"),
    "crop_boxes": Param(str, choices=CROP_BOXES,
                        help="crop box of real size and offset (TF's crop_and_resize) or of "
                             "whole pixels, half-pixel resize (torchvision, lightly)"),
})
def simclr_views(image_size: int = 32, version: str = "v1", strength: float = 1.0,
                 crop_scale: tuple = (0.08, 1.0), exact_color_jitter: bool = False,
                 contrast_mean: str = "channel", crop_boxes: str = "continuous",
                 seed: int | None = None) -> ImageViews:
    """SimCLR's two augmented views of images (Chen et al. 2020), as an :class:`ImageViews`
    around :func:`~keras_hardneg.augment.simclr_augmentation`."""
    return ImageViews(simclr_augmentation(image_size=image_size, version=version,
                                          strength=strength, crop_scale=tuple(crop_scale),
                                          exact_color_jitter=exact_color_jitter,
                                          contrast_mean=contrast_mean,
                                          crop_boxes=crop_boxes, seed=seed))
