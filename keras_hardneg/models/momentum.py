"""The momentum encoder shared by MoCo v2 and v3 (He et al. 2020, "Momentum Contrast for
Unsupervised Visual Representation Learning", CVPR).

A query branch (encoder, projection head) trained by gradient, and a key branch
(``key_encoder``, ``key_projector``) that is its exponential moving average:
``key = momentum * key + (1 - momentum) * query`` for every trainable weight, in the same
order as ``encoder.weights``. The key branch runs batch norm in training mode (batch
statistics, its own moving averages), as in MoCo, and is never touched by the optimizer.
"""

from __future__ import annotations

from typing import Any, Sequence

import keras
from keras import ops

from keras_hardneg.encoders.heads import ProjectionHead
from keras_hardneg.models.base import ContrastiveModel

__all__ = ["MomentumContrast"]


def check_momentum(momentum: Any) -> float:
    """``momentum`` as a float in ``[0, 1]``."""
    if isinstance(momentum, bool) or not isinstance(momentum, (int, float)) or \
            not 0.0 <= float(momentum) <= 1.0:
        raise ValueError(f"`momentum` must be a number in [0, 1]; got {momentum!r}.")
    return float(momentum)


class MomentumContrast(ContrastiveModel):
    """Base of :class:`MoCoV2` and :class:`MoCoV3` (not used directly).

    Subclasses implement ``contrastive_forward(view1, view2, labels, training)`` (see
    :meth:`ContrastiveModel.forward`); the momentum update is :meth:`prepare_step`, run
    before every training step's forward pass on every backend.

    Shapes: a batch of ``B`` inputs gives ``B`` queries ``[B, p]`` (the online branch,
    ``p = projection_dims[-1]``) and ``B`` keys ``[B, p]`` (the momentum branch); the
    subclasses say what the negatives are (a queue ``[K, p]``, or the other keys).

    Attributes:
        key_encoder: momentum copy of ``encoder`` (same weights, same order).
        key_projector: momentum copy of ``projector``.

    Args:
        encoder, projection_dims, augmentation, head_version: as in :class:`ContrastiveModel`.
        momentum: EMA coefficient in ``[0, 1]``.
    """

    def __init__(self, encoder: keras.Model, projection_dims: Sequence[int],
                 momentum: float, head_version: str, augmentation: Any = None, **kwargs: Any):
        momentum = check_momentum(momentum)
        super().__init__(encoder, projection_dims=projection_dims, head_version=head_version,
                         augmentation=augmentation, **kwargs)
        self.momentum = momentum
        self.key_encoder = keras.models.clone_model(encoder)
        self.key_encoder.set_weights(encoder.get_weights())
        self.key_projector = ProjectionHead.from_config(
            {**self.projector.get_config(), "name": "key_projection_head"})
        self.key_projector.set_weights(self.projector.get_weights())

    # ----------------------------------------------------------------- weights
    def guarded_layers(self) -> list:
        return self.query_layers() + [self.key_encoder, self.key_projector]

    def guarded_state(self):
        """As the base's, plus the key branch's weights: a step not applied (not finite,
        or a batch without negatives) leaves the momentum update undone too."""
        state = super().guarded_state()
        seen = {id(v) for v in state.variables}
        state.variables += [v for v in self.key_variables() if id(v) not in seen]
        return state

    def query_variables(self) -> list:
        """The weights trained by gradient (:meth:`query_layers`)."""
        out = []
        for layer in self.query_layers():
            out += layer.trainable_variables
        return out

    def key_variables(self) -> list:
        """The key branch's weights updated by momentum (trainable in their layers, but
        never by the optimizer)."""
        return self.key_encoder.trainable_variables + self.key_projector.trainable_variables

    @property
    def trainable_variables(self) -> list:
        # The key branch is updated by momentum, never by the optimizer.
        return self.query_variables()

    @property
    def non_trainable_variables(self) -> list:
        # The key branch's weights are state, like moving statistics: Keras's JAX trainer
        # carries exactly trainable + non-trainable variables through its stateless step.
        seen = {id(v) for v in self.trainable_variables}
        out = [v for v in super().non_trainable_variables if id(v) not in seen]
        seen.update(id(v) for v in out)
        return out + [v for v in self.key_variables() if id(v) not in seen]

    def momentum_update(self) -> None:
        """``key = m * key + (1 - m) * query`` over encoder and head weights."""
        m = self.momentum
        for query, key in ((self.encoder, self.key_encoder), (self.projector, self.key_projector)):
            for q, k in zip(query.trainable_variables, key.trainable_variables):
                k.assign(m * k.value + (1.0 - m) * ops.cast(q.value, k.dtype))

    # -------------------------------------------------------------- branches
    def keys(self, images: Any) -> Any:
        """Key projections of ``images`` (no gradient; batch norm in training mode)."""
        h = self.key_encoder(images, training=True)
        return ops.stop_gradient(self.key_projector(h, training=True))

    def query_head(self, z: Any, feats: Any, training: bool) -> tuple:
        """``(z, feats)`` after the projection head (identity; MoCo v3 adds a predictor)."""
        return z, feats

    def query(self, images: Any, training: bool) -> Any:
        """Query projections of ``images`` (dicts with ``features`` for UnReMix)."""
        h = self.encoder(images, training=training)
        z, feats = self.projector(h, training=training, return_features=True)
        z, feats = self.query_head(z, feats, training)
        if self.uses_features:
            return {"embeddings": z, "features": feats}
        return z

    def probe_projections(self, view1: Any, view2: Any) -> tuple:
        """The query branch's projections of both views, in inference mode."""
        return self.query(view1, training=False), self.query(view2, training=False)

    # -------------------------------------------------------------------- steps
    def prepare_step(self) -> None:
        """The key branch takes its momentum update before the step's forward pass."""
        self.momentum_update()

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(momentum=self.momentum)
        return config
