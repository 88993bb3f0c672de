"""SGD with momentum and **coupled** L2 weight decay, as ``torch.optim.SGD`` applies it.

Keras's ``SGD(weight_decay=...)`` decays the weights *outside* the gradient step
(``w <- w - lr * wd * w``, decoupled, Loshchilov & Hutter 2019). PyTorch's ``SGD`` (and so
every lightly / solo-learn recipe written for it, e.g. lightly's CIFAR-10 benchmark: lr
``0.06 * B / 128``, momentum 0.9, ``weight_decay=5e-4``) adds the L2 term to the gradient,
so the decay passes through the momentum buffer. At steady state the buffer multiplies it by
``1 / (1 - momentum)`` (10x at momentum 0.9): the two readings of "weight decay 5e-4" are
different regularisers, and a recipe copied from PyTorch needs this one.

For every variable ``w`` with gradient ``g`` at learning rate ``lr`` (PyTorch's update with
``dampening=0``):

.. code-block:: text

    g <- g + weight_decay * w                 (every variable; none excluded, as torch)
    b <- momentum * b + g                     (b starts at 0, so the first b is g)
    w <- w - lr * b                           (nesterov: w <- w - lr * (g + momentum * b))

The buffer ``b`` holds gradients, not steps, so a learning rate that changes (a schedule)
scales the whole buffer at once, as in PyTorch; Keras's ``SGD`` folds ``lr`` into its
velocity instead, which differs as soon as ``lr`` changes.

Example:

>>> import keras, numpy as np
>>> opt = SGDL2(learning_rate=0.1, momentum=0.9, weight_decay=0.5)
>>> w = keras.Variable(np.ones((2,), "float32"))
>>> opt.apply([np.zeros((2,), "float32")], [w])      # g = 0: only the decay moves w
>>> [round(float(v), 4) for v in keras.ops.convert_to_numpy(w)]   # 1 - 0.1 * 0.5 * 1
[0.95, 0.95]
"""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from keras_hardneg.optimizers.builtin import LEARNING_RATE, MOMENTUM
from keras_hardneg.registry import OPTIMIZERS, Param

__all__ = ["MomentumBuffers", "SGDL2"]

L2_WEIGHT_DECAY = Param(float, low=0.0,
                        help="L2 coefficient added to the gradient (torch SGD's weight_decay) >= 0")


class MomentumBuffers(keras.optimizers.Optimizer):
    """An optimizer with one momentum buffer per variable (``self.momentums``, zeros), the
    base of :class:`SGDL2` and :class:`~keras_hardneg.optimizers.LARS`."""

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self.momentums = self.add_optimizer_variables(var_list, "momentum")

    def _cast(self, gradient, variable, learning_rate):
        """``(g, lr, m)`` in the variable's dtype."""
        dtype = variable.dtype
        return (ops.cast(gradient, dtype), ops.cast(learning_rate, dtype),
                ops.cast(self.momentum, dtype))


@OPTIMIZERS.register("sgd_l2", params={"learning_rate": LEARNING_RATE, "momentum": MOMENTUM,
                                       "weight_decay": L2_WEIGHT_DECAY})
@keras.saving.register_keras_serializable(package="keras_hardneg")
class SGDL2(MomentumBuffers):
    """Momentum SGD with L2 weight decay added to the gradient (``torch.optim.SGD``'s rule).

    Args:
        learning_rate: float > 0 or a
            :class:`keras.optimizers.schedules.LearningRateSchedule`.
        momentum: float in ``[0, 1)`` (default 0.9).
        weight_decay: L2 coefficient ``>= 0`` added to every variable's gradient (default 0).
        nesterov: Nesterov momentum (PyTorch's formulation).
        name, **kwargs: forwarded to :class:`keras.optimizers.Optimizer` (``clipnorm``,
            ``global_clipnorm``, ``loss_scale_factor``, ...); Keras's own decoupled
            ``weight_decay`` is not used (``weight_decay`` here is the L2 term).

    Raises:
        ValueError: a bad ``learning_rate``, ``momentum`` or ``weight_decay`` (names it).
    """

    def __init__(self, learning_rate: Any = 0.03, momentum: float = 0.9,
                 weight_decay: float = 0.0, nesterov: bool = False, name: str = "sgd_l2",
                 **kwargs: Any):
        if isinstance(learning_rate, bool) or (
                isinstance(learning_rate, (int, float)) and not learning_rate > 0):
            raise ValueError(f"`learning_rate` must be a float > 0 (or a schedule); got "
                             f"{learning_rate!r}.")
        if (isinstance(momentum, bool) or not isinstance(momentum, (int, float))
                or not 0.0 <= momentum < 1.0):
            raise ValueError(f"`momentum` must be a float in [0, 1); got {momentum!r}.")
        if weight_decay is None:
            weight_decay = 0.0
        if (isinstance(weight_decay, bool) or not isinstance(weight_decay, (int, float))
                or not weight_decay >= 0):
            raise ValueError(f"`weight_decay` must be a float >= 0; got {weight_decay!r}.")
        kwargs.pop("weight_decay", None)
        super().__init__(learning_rate=learning_rate, name=name, weight_decay=None, **kwargs)
        self.momentum = float(momentum)
        self.l2 = float(weight_decay)
        self.nesterov = bool(nesterov)

    def update_step(self, gradient, variable, learning_rate):
        g, lr, m = self._cast(gradient, variable, learning_rate)
        if self.l2 > 0:
            g = g + ops.cast(self.l2, variable.dtype) * ops.convert_to_tensor(variable)
        b = self.momentums[self._get_variable_index(variable)]
        self.assign(b, m * b + g)
        step = g + m * b if self.nesterov else b
        self.assign_sub(variable, lr * step)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({"momentum": self.momentum, "weight_decay": self.l2,
                       "nesterov": self.nesterov})
        return config
