"""Projection and prediction heads (SimCLR v1/v2, MoCo v2/v3).

Architectures (``hidden_dims`` = widths of the hidden layers, ``d`` = ``output_dim``):

============  =====================================================================
version       layers
============  =====================================================================
simclr_v1     Dense - BN - ReLU - Dense(d)                  (Chen et al. 2020a, SimCLR;
              BN on the hidden layer as in the reference implementation)
simclr_v2     [Dense - BN - ReLU] x 2 - Dense(d)            (Chen et al. 2020b, SimCLR v2:
              3-layer head)
simclr_v1_bn  Dense - BN - ReLU - Dense(d) - BN               (SimCLR v1 with BN on the output
              as well: lightly's ``SimCLRProjectionHead``, the head of its CIFAR-10
              benchmark, 512-512-128)
moco_v2       Dense - ReLU - Dense(d)                       (Chen et al. 2020c, MoCo v2)
moco_v3       [Dense - BN - ReLU] x 2 - Dense(d) - BN(no affine)
                                                            (Chen, Xie, He 2021, MoCo v3)
prediction    Dense - BN - ReLU - Dense(d)                  (MoCo v3 predictor)
============  =====================================================================

Dense layers followed by BN have no bias (the BN shift replaces it).

Contract used by the frameworks and the UnReMix loss: :class:`ProjectionHead` is a
:class:`keras.Model` whose ``call(x, training=None, return_features=False)`` returns the
projection ``[B, d]``, or ``(projection, features)`` where ``features`` ``[B, h]`` is the
input of the head's last Dense layer. Both are float32 under any mixed-precision policy.

Example:

>>> import numpy as np
>>> head = projection_head(16, 32, 8, version="simclr_v1")
>>> z, h = head(np.ones((4, 16), "float32"), return_features=True)
>>> tuple(z.shape), tuple(h.shape)
((4, 8), (4, 32))
"""

from __future__ import annotations

from typing import Any, Sequence

import functools

import keras
from keras import ops

from keras_hardneg.encoders.resnet import _BN_EPSILON, _BN_MOMENTUM
from keras_hardneg.registry import HEADS

__all__ = ["ProjectionHead", "projection_head", "prediction_head", "HEAD_VERSIONS",
           "DENSE_INITS"]

# version -> (default number of hidden layers, BN on hidden, final BN: None, "plain" (no
# affine) or "affine")
_VERSIONS = {
    "simclr_v1": (1, True, None),
    "simclr_v1_bn": (1, True, "affine"),
    "simclr_v2": (2, True, None),
    "moco_v2": (1, False, None),
    "moco_v3": (2, True, "plain"),
    "prediction": (1, True, None),
}
#: The projection heads ``projection_head(version=...)`` builds, after the papers whose
#: names they carry (``"simclr_v1"``, ``"simclr_v1_bn"``, ``"simclr_v2"``, ``"moco_v2"``,
#: ``"moco_v3"``).
HEAD_VERSIONS = tuple(v for v in _VERSIONS if v != "prediction")
#: ``dense_init``: how the head's Dense kernels are drawn.
DENSE_INITS = {
    # Keras's default.
    "glorot_uniform": "glorot_uniform",
    # PyTorch's nn.Linear default (kaiming_uniform_ with a = sqrt(5)): U(+-1/sqrt(fan_in)).
    "torch_linear": {"class_name": "VarianceScaling",
                     "config": {"scale": 1.0 / 3.0, "mode": "fan_in",
                                "distribution": "uniform"}},
}
_HEAD_HELP = {
    "simclr_v1": "SimCLR v1 (Chen et al. 2020): Dense-BN-ReLU, then Dense",
    "simclr_v1_bn": "SimCLR v1 with BN on the output (lightly's SimCLRProjectionHead): "
                    "Dense-BN-ReLU, then Dense-BN",
    "simclr_v2": "SimCLR v2 (Chen et al. 2020b): two Dense-BN-ReLU layers, then Dense",
    "moco_v2": "MoCo v2 (Chen et al. 2020c): Dense-ReLU, then Dense (no BN)",
    "moco_v3": "MoCo v3 (Chen, Xie & He 2021): two Dense-BN-ReLU, then Dense-BN without affine",
}


def _positive_int(value, what):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what} must be a positive int, got {value!r}")
    return value


@keras.saving.register_keras_serializable(package="keras_hardneg")
class ProjectionHead(keras.Model):
    """MLP projection/prediction head with access to its last Dense layer's input.

    Args:
        input_dim: ``F``, size of the encoder features.
        hidden_dims: int (repeated for the version's number of hidden layers) or a sequence
            of hidden widths (overrides the default depth).
        output_dim: ``d``, size of the projection.
        version: ``"simclr_v1"``, ``"simclr_v1_bn"``, ``"simclr_v2"``, ``"moco_v2"``,
            ``"moco_v3"`` or ``"prediction"`` (see the module docstring).
        sync_batchnorm: use ``BatchNormalization(synchronized=True)`` (statistics reduced
            across replicas under ``tf.distribute``).
        dense_init: ``"glorot_uniform"`` (default; Keras) or ``"torch_linear"`` (PyTorch's
            ``nn.Linear`` default, ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``).

    Call: ``head(x, training=None, return_features=False)`` with ``x`` ``[B, input_dim]``
    -> ``[B, output_dim]`` float32, or ``(projection, features)`` with ``features``
    ``[B, hidden_dims[-1]]`` float32 (the input of the last Dense layer).
    """

    def __init__(self, input_dim: int, hidden_dims: Sequence[int], output_dim: int,
                 version: str = "simclr_v1", sync_batchnorm: bool = False,
                 dense_init: str = "glorot_uniform", **kwargs: Any):
        super().__init__(**kwargs)
        if version not in _VERSIONS:
            raise ValueError(f"version must be one of {sorted(_VERSIONS)}, got {version!r}")
        if dense_init not in DENSE_INITS:
            raise ValueError(f"dense_init must be one of {list(DENSE_INITS)}, "
                             f"got {dense_init!r}")
        self.dense_init = dense_init
        kernel_init = lambda: keras.initializers.get(DENSE_INITS[dense_init])  # noqa: E731
        default_depth, hidden_bn, final_bn = _VERSIONS[version]
        self.input_dim = _positive_int(input_dim, "input_dim")
        self.output_dim = _positive_int(output_dim, "output_dim")
        if isinstance(hidden_dims, int) and not isinstance(hidden_dims, bool):
            hidden_dims = [hidden_dims] * default_depth
        try:
            hidden_dims = [int(h) if not isinstance(h, bool) and int(h) == h else h
                           for h in hidden_dims]
        except (TypeError, ValueError):
            raise ValueError(f"hidden_dims must be an int or a sequence of ints, "
                             f"got {hidden_dims!r}") from None
        if not hidden_dims:
            raise ValueError("hidden_dims must not be empty")
        for h in hidden_dims:
            _positive_int(h, "hidden_dims entries")
        self.hidden_dims = list(hidden_dims)
        self.version = version
        self.sync_batchnorm = bool(sync_batchnorm)

        self.hidden_layers = []
        for i, h in enumerate(self.hidden_dims):
            block = [keras.layers.Dense(h, use_bias=not hidden_bn, name=f"dense_{i}",
                                        kernel_initializer=kernel_init())]
            if hidden_bn:
                block.append(self._bn(f"bn_{i}"))
            block.append(keras.layers.ReLU(name=f"relu_{i}"))
            self.hidden_layers.append(block)
        self.output_dense = keras.layers.Dense(self.output_dim, use_bias=not final_bn,
                                               name=f"dense_{len(self.hidden_dims)}",
                                               kernel_initializer=kernel_init())
        affine = final_bn == "affine"
        self.output_bn = (self._bn("bn_out", center=affine, scale=affine) if final_bn
                          else None)
        self.build((None, self.input_dim))

    def _bn(self, name, **kwargs):
        return keras.layers.BatchNormalization(
            momentum=_BN_MOMENTUM, epsilon=_BN_EPSILON, synchronized=self.sync_batchnorm,
            name=name, **kwargs)

    def build(self, input_shape):
        shape = (None, self.input_dim)
        for block in self.hidden_layers:
            for layer in block:
                layer.build(shape)
                shape = layer.compute_output_shape(shape)
        self.output_dense.build(shape)
        if self.output_bn is not None:
            self.output_bn.build((None, self.output_dim))
        self.built = True

    def call(self, x, training=None, return_features=False):
        for block in self.hidden_layers:
            for layer in block:
                x = layer(x, training=training) if isinstance(
                    layer, keras.layers.BatchNormalization) else layer(x)
        features = x
        z = self.output_dense(x)
        if self.output_bn is not None:
            z = self.output_bn(z, training=training)
        z = ops.cast(z, "float32")
        if return_features:
            return z, ops.cast(features, "float32")
        return z

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.output_dim)

    @property
    def last_dense(self):
        """The head's last Dense layer (its input is what ``return_features=True`` returns)."""
        return self.output_dense

    def get_config(self):
        return {
            **super().get_config(),  # name, trainable, dtype policy
            "input_dim": self.input_dim,
            "hidden_dims": list(self.hidden_dims),
            "output_dim": self.output_dim,
            "version": self.version,
            "sync_batchnorm": self.sync_batchnorm,
            "dense_init": self.dense_init,
        }


def projection_head(input_dim: int, hidden_dims: Sequence[int], output_dim: int,
                    version: str = "simclr_v1", name: str | None = None,
                    sync_batchnorm: bool = False, dense_init: str = "glorot_uniform"
                    ) -> ProjectionHead:
    """Build a :class:`ProjectionHead` (SimCLR v1/v2, MoCo v2/v3 projection MLP).

    Args:
        input_dim: encoder feature size ``F``.
        hidden_dims: hidden width (int) or widths (sequence).
        output_dim: projection size ``d``.
        version: ``"simclr_v1"`` | ``"simclr_v1_bn"`` | ``"simclr_v2"`` | ``"moco_v2"`` |
            ``"moco_v3"``.
        name: model name (default ``"projection_head"``).
        sync_batchnorm: synchronized BatchNormalization across replicas.
        dense_init: ``"glorot_uniform"`` or ``"torch_linear"`` (:data:`DENSE_INITS`).

    Returns:
        :class:`ProjectionHead`: ``[B, F] -> [B, d]`` (float32).

    Example:

    >>> import numpy as np
    >>> head = projection_head(512, 2048, 128, version="simclr_v2")
    >>> head(np.zeros((2, 512), "float32")).shape
    TensorShape([2, 128])
    """
    if version not in HEAD_VERSIONS:
        raise ValueError(f"version must be one of {list(HEAD_VERSIONS)}, got {version!r}")
    return ProjectionHead(input_dim, hidden_dims, output_dim, version=version,
                          sync_batchnorm=sync_batchnorm, dense_init=dense_init,
                          name=name or "projection_head")


for _version in HEAD_VERSIONS:
    HEADS.register(_version, functools.partial(projection_head, version=_version),
                   help=_HEAD_HELP[_version])


def prediction_head(input_dim: int, hidden_dim: int, output_dim: int, name: str | None = None,
                    sync_batchnorm: bool = False) -> ProjectionHead:
    """MoCo v3 predictor (Chen, Xie, He 2021): Dense - BN - ReLU - Dense.

    Args:
        input_dim: projection size ``d`` (input).
        hidden_dim: hidden width (4096 in the paper).
        output_dim: output size (``d``).
        name: model name (default ``"prediction_head"``).
        sync_batchnorm: synchronized BatchNormalization across replicas.

    Returns:
        :class:`ProjectionHead` with ``version="prediction"``: ``[B, d] -> [B, output_dim]``.

    Example:

    >>> import numpy as np
    >>> pred = prediction_head(8, 16, 8)
    >>> pred(np.zeros((2, 8), "float32")).shape
    TensorShape([2, 8])
    """
    return ProjectionHead(input_dim, hidden_dim, output_dim, version="prediction",
                          sync_batchnorm=sync_batchnorm, name=name or "prediction_head")
