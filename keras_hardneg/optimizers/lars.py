"""LARS: Layer-wise Adaptive Rate Scaling (You, Gitman, Ginsburg 2017, arXiv:1708.03888).

The large-batch optimizer used by SimCLR (Chen et al. 2020) and MoCo v3. For every
variable ``w`` with gradient ``g`` and learning rate ``lr``:

.. code-block:: text

    g  <- g + weight_decay * w                       (unless excluded from weight decay)
    r  <- eta * ||w|| / ||g||  if ||w|| > 0 and ||g|| > 0 else 1
                                                      (r = 1 if excluded from adaptation)
    v  <- momentum * v + lr * r * g
    w  <- w - v                                       (Nesterov: w <- w - (momentum * v + lr * r * g))

``||.||`` is the L2 norm of the whole variable (the "layer"), ``eta`` the trust coefficient.
Weight decay is coupled (added to the gradient before the trust ratio), as in the paper and
the SimCLR implementation -- not the decoupled AdamW-style decay of
:class:`keras.optimizers.Optimizer`, which is therefore not used (``super()`` gets
``weight_decay=None``).

Exclusions: by default biases and batch-norm parameters get neither weight decay nor the
trust-ratio adaptation (SimCLR). A variable is excluded when it is 1-D or scalar
(``exclude_1d=True``) or when any of the regular expressions in the exclusion list
matches its ``variable.path`` (e.g. ``"projection_head/bn_0/gamma"``).
``exclude_from_weight_decay`` defaults to ``("bias", "beta", "gamma", "batch_norm",
"batchnorm")``; ``exclude_from_adaptation`` defaults to the same list as weight decay.
Pass ``()`` and ``exclude_1d=False`` to apply LARS to every variable.

Example:

>>> import keras, numpy as np
>>> opt = LARS(learning_rate=0.1, weight_decay=1e-6)
>>> w = keras.Variable(np.ones((3, 2), "float32"), name="kernel")
>>> opt.apply([np.ones((3, 2), "float32")], [w])
>>> tuple(w.shape)
(3, 2)
"""

from __future__ import annotations

from typing import Any, Sequence

import re

import keras
from keras import ops

from keras_hardneg.optimizers.builtin import LEARNING_RATE, MOMENTUM, WEIGHT_DECAY
from keras_hardneg.optimizers.sgd_l2 import MomentumBuffers
from keras_hardneg.registry import OPTIMIZERS

__all__ = ["LARS", "DEFAULT_EXCLUDE"]

#: Regular expressions on ``variable.path``: matching variables (biases, batch-norm
#: ``beta``/``gamma``) get neither weight decay nor LARS's trust ratio by default.
DEFAULT_EXCLUDE = ("bias", "beta", "gamma", "batch_norm", "batchnorm")


def _as_patterns(value, what):
    if value is None:
        return None
    if isinstance(value, str):
        value = (value,)
    try:
        value = tuple(value)
    except TypeError:
        raise ValueError(f"{what} must be a sequence of regular expressions, got {value!r}") \
            from None
    for v in value:
        if not isinstance(v, str):
            raise ValueError(f"{what} entries must be strings, got {v!r}")
        re.compile(v)
    return value


@OPTIMIZERS.register("lars", params={"learning_rate": LEARNING_RATE, "momentum": MOMENTUM,
                                     "weight_decay": WEIGHT_DECAY})
@keras.saving.register_keras_serializable(package="keras_hardneg")
class LARS(MomentumBuffers):
    """Layer-wise Adaptive Rate Scaling optimizer (You et al. 2017) for Keras 3.

    Args:
        learning_rate: float or :class:`keras.optimizers.schedules.LearningRateSchedule`
            (e.g. :class:`~keras_hardneg.optimizers.WarmupCosineDecay`). SimCLR uses
            ``0.3 * batch_size / 256``.
        momentum: momentum coefficient in ``[0, 1)`` (default 0.9).
        weight_decay: coupled L2 weight decay added to the gradient (default 0; SimCLR
            uses 1e-6).
        eta: trust coefficient (default 0.001).
        nesterov: use Nesterov momentum.
        exclude_from_weight_decay: regexes on ``variable.path``; matching variables get no
            weight decay. ``None`` -> :data:`DEFAULT_EXCLUDE`.
        exclude_from_adaptation: regexes on ``variable.path``; matching variables use
            trust ratio 1 (plain momentum SGD). ``None`` -> same as
            ``exclude_from_weight_decay``.
        exclude_1d: also exclude every variable of rank <= 1 (biases, BN gamma/beta) from
            both weight decay and adaptation.
        epsilon: unused in the ratio's zero-checks; kept tiny for numerical safety in the
            division ``||w|| / ||g||``.
        name, **kwargs: forwarded to :class:`keras.optimizers.Optimizer` (``clipnorm``,
            ``global_clipnorm``, ``use_ema``, ``loss_scale_factor``, ...).

    Raises:
        ValueError: bad ``momentum``, ``eta`` or ``weight_decay`` (names the parameter).

    Example:

    >>> import keras, numpy as np, keras_hardneg as khn
    >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    >>> opt = khn.optimizers.LARS(learning_rate=0.1, momentum=0.9, weight_decay=1e-6)
    >>> model.compile(optimizer=opt, loss="mse")
    >>> x = np.random.default_rng(0).normal(size=(16, 4)).astype("float32")
    >>> history = model.fit(x, x[:, :2], epochs=2, verbose=0)
    >>> [opt.uses_adaptation(v) for v in model.trainable_variables]   # kernel, bias (1-D)
    [True, False]
    """

    def __init__(self, learning_rate: Any = 0.1, momentum: float = 0.9,
                 weight_decay: float = 0.0, eta: float = 0.001, nesterov: bool = False,
                 exclude_from_weight_decay: Sequence[str] | None = None,
                 exclude_from_adaptation: Sequence[str] | None = None, exclude_1d: bool = True,
                 epsilon: float = 0.0, name: str = "lars", **kwargs: Any):
        if kwargs.get("weight_decay") is not None:
            raise ValueError("weight_decay given twice")
        if isinstance(learning_rate, bool) or (
                isinstance(learning_rate, (int, float)) and not learning_rate > 0):
            raise ValueError(f"learning_rate must be a float > 0 (or a schedule), got "
                             f"{learning_rate!r}")
        super().__init__(learning_rate=learning_rate, name=name, weight_decay=None, **kwargs)
        if not isinstance(momentum, (int, float)) or not 0.0 <= momentum < 1.0:
            raise ValueError(f"momentum must be a float in [0, 1), got {momentum!r}")
        if not isinstance(eta, (int, float)) or eta <= 0:
            raise ValueError(f"eta must be a positive float, got {eta!r}")
        if weight_decay is None:
            weight_decay = 0.0
        if not isinstance(weight_decay, (int, float)) or weight_decay < 0:
            raise ValueError(f"weight_decay must be a float >= 0, got {weight_decay!r}")
        if not isinstance(epsilon, (int, float)) or epsilon < 0:
            raise ValueError(f"epsilon must be a float >= 0, got {epsilon!r}")
        self.momentum = float(momentum)
        self.lars_weight_decay = float(weight_decay)
        self.eta = float(eta)
        self.nesterov = bool(nesterov)
        self.epsilon = float(epsilon)
        self.exclude_1d = bool(exclude_1d)
        wd = _as_patterns(exclude_from_weight_decay, "exclude_from_weight_decay")
        self.weight_decay_exclusions = DEFAULT_EXCLUDE if wd is None else wd
        ad = _as_patterns(exclude_from_adaptation, "exclude_from_adaptation")
        self.adaptation_exclusions = self.weight_decay_exclusions if ad is None else ad
        self._explicit_adaptation = ad is not None

    # -- exclusion rules -------------------------------------------------------------
    def _matches(self, variable, patterns):
        if self.exclude_1d and len(variable.shape) <= 1:
            return True
        path = getattr(variable, "path", None) or variable.name
        return any(re.search(p, path) for p in patterns)

    def uses_weight_decay(self, variable):
        """Whether ``variable`` gets weight decay (static, from its path/shape)."""
        return self.lars_weight_decay > 0 and not self._matches(
            variable, self.weight_decay_exclusions)

    def uses_adaptation(self, variable):
        """Whether ``variable`` gets the trust-ratio adaptation (static, from its path/shape)."""
        return not self._matches(variable, self.adaptation_exclusions)

    # -- Keras optimizer API (the buffers: MomentumBuffers) ----------------------------
    def update_step(self, gradient, variable, learning_rate):
        g, lr, m = self._cast(gradient, variable, learning_rate)
        dtype = variable.dtype
        w = ops.convert_to_tensor(variable)
        if self.uses_weight_decay(variable):
            g = g + ops.cast(self.lars_weight_decay, dtype) * w
        if self.uses_adaptation(variable):
            w_norm = ops.sqrt(ops.sum(ops.square(w)))
            g_norm = ops.sqrt(ops.sum(ops.square(g)))
            ratio = ops.cast(self.eta, dtype) * w_norm / (
                g_norm + ops.cast(self.epsilon, dtype))
            positive = ops.logical_and(ops.greater(w_norm, 0), ops.greater(g_norm, 0))
            trust = ops.where(positive, ratio, ops.ones_like(ratio))
            scaled = lr * trust * g
        else:
            scaled = lr * g
        v = self.momentums[self._get_variable_index(variable)]
        self.assign(v, m * v + scaled)
        if self.nesterov:
            self.assign_sub(variable, m * v + scaled)
        else:
            self.assign_sub(variable, v)

    def get_config(self):
        config = super().get_config()
        config.update({
            "momentum": self.momentum,
            "weight_decay": self.lars_weight_decay,
            "eta": self.eta,
            "nesterov": self.nesterov,
            "exclude_from_weight_decay": list(self.weight_decay_exclusions),
            "exclude_from_adaptation": (list(self.adaptation_exclusions)
                                        if self._explicit_adaptation else None),
            "exclude_1d": self.exclude_1d,
            "epsilon": self.epsilon,
        })
        return config
