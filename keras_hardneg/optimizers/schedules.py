"""Linear warm-up followed by cosine decay (Goyal et al. 2017; Loshchilov & Hutter 2017).

The learning-rate schedule of SimCLR (Chen et al. 2020: 10 warm-up epochs, then cosine
decay without restarts) and MoCo v3:

.. code-block:: text

    lr(t) = base * t / warmup_steps                                   t <  warmup_steps
    lr(t) = end + (base - end) * 0.5 * (1 + cos(pi * (t - warmup) / (total - warmup)))
                                                                      warmup <= t < total
    lr(t) = end                                                       t >= total

Example:

>>> sched = WarmupCosineDecay(1.0, total_steps=100, warmup_steps=10)
>>> round(float(sched(5)), 3), round(float(sched(10)), 3), round(float(sched(100)), 3)
(0.5, 1.0, 0.0)
"""

import math

import keras
from keras import ops

from keras_hardneg.registry import SCHEDULES, Param

__all__ = ["WarmupCosineDecay", "constant", "warmup_cosine"]


@keras.saving.register_keras_serializable(package="keras_hardneg")
class WarmupCosineDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up from 0 to ``base_learning_rate``, then cosine decay to ``end_learning_rate``.

    Args:
        base_learning_rate: peak learning rate, reached at ``warmup_steps``.
        total_steps: step at which the decay reaches ``end_learning_rate`` (and stays).
        warmup_steps: length of the linear warm-up (0 = none); ``< total_steps``.
        end_learning_rate: final learning rate (default 0).

    Called with an int/float step (scalar tensor allowed), returns a float32 scalar.

    Raises:
        ValueError: ``total_steps < 1``, ``warmup_steps`` outside ``[0, total_steps)``,
            negative learning rates (the message names the parameter).
    """

    def __init__(self, base_learning_rate, total_steps, warmup_steps=0, end_learning_rate=0.0,
                 name="warmup_cosine_decay"):
        if not isinstance(total_steps, int) or isinstance(total_steps, bool) or total_steps < 1:
            raise ValueError(f"total_steps must be an int >= 1, got {total_steps!r}")
        if (not isinstance(warmup_steps, int) or isinstance(warmup_steps, bool)
                or not 0 <= warmup_steps < total_steps):
            raise ValueError(
                f"warmup_steps must be an int in [0, total_steps={total_steps}), "
                f"got {warmup_steps!r}")
        if base_learning_rate < 0:
            raise ValueError(f"base_learning_rate must be >= 0, got {base_learning_rate!r}")
        if end_learning_rate < 0:
            raise ValueError(f"end_learning_rate must be >= 0, got {end_learning_rate!r}")
        self.base_learning_rate = float(base_learning_rate)
        self.total_steps = int(total_steps)
        self.warmup_steps = int(warmup_steps)
        self.end_learning_rate = float(end_learning_rate)
        self.name = name

    def __call__(self, step):
        step = ops.cast(step, "float32")
        base = ops.cast(self.base_learning_rate, "float32")
        end = ops.cast(self.end_learning_rate, "float32")
        warm = float(self.warmup_steps)
        decay_steps = float(self.total_steps - self.warmup_steps)
        warmup_lr = base * step / max(warm, 1.0)
        progress = ops.clip((step - warm) / decay_steps, 0.0, 1.0)
        cosine_lr = end + (base - end) * 0.5 * (1.0 + ops.cos(math.pi * progress))
        return ops.where(step < warm, warmup_lr, cosine_lr)

    def get_config(self):
        return {
            "base_learning_rate": self.base_learning_rate,
            "total_steps": self.total_steps,
            "warmup_steps": self.warmup_steps,
            "end_learning_rate": self.end_learning_rate,
            "name": self.name,
        }


@SCHEDULES.register("constant")
def constant(learning_rate: float, steps_per_epoch: int, epochs: int) -> float:
    """The learning rate, unchanged for the whole run."""
    return learning_rate


@SCHEDULES.register("warmup_cosine", params={"warmup_epochs": Param(
    int, low=0, help="epochs of linear warm-up before the cosine decay")})
def warmup_cosine(learning_rate: float, steps_per_epoch: int, epochs: int,
                  warmup_epochs: int = 0) -> WarmupCosineDecay:
    """:class:`WarmupCosineDecay` over ``steps_per_epoch * epochs`` steps (the warm-up is
    cut to leave at least one step of decay)."""
    total = max(steps_per_epoch * epochs, 1)
    return WarmupCosineDecay(learning_rate, total_steps=total,
                             warmup_steps=min(warmup_epochs * steps_per_epoch, total - 1))
