"""Linear warm-up followed by cosine decay (Goyal et al. 2017; Loshchilov & Hutter 2017).

The learning-rate schedule of SimCLR (Chen et al. 2020: 10 warm-up epochs, then cosine
decay without restarts) and MoCo v3:

.. code-block:: text

    lr(t) = base * t / warmup_steps                                   t <  warmup_steps
    lr(t) = end + (base - end) * 0.5 * (1 + cos(pi * (t - warmup) / (total - warmup)))
                                                                      warmup <= t < total
    lr(t) = end                                                       t >= total

With ``hold_steps = n`` the step is first floored to a multiple of ``n``: the rate is held
for ``n`` steps at its value for the first of them. ``n = steps_per_epoch`` is PyTorch's
``CosineAnnealingLR`` stepped once per epoch (lightly's benchmarks): epoch ``e`` trains at
``end + (base - end) * 0.5 * (1 + cos(pi * e / epochs))`` throughout.

Example:

>>> sched = WarmupCosineDecay(1.0, total_steps=100, warmup_steps=10)
>>> round(float(sched(5)), 3), round(float(sched(10)), 3), round(float(sched(100)), 3)
(0.5, 1.0, 0.0)
"""

from __future__ import annotations

import math
import numbers

import keras
from keras import ops

from keras_hardneg.registry import SCHEDULES, Param

__all__ = ["WarmupCosineDecay", "WarmupLinearDecay", "constant", "warmup_cosine",
           "warmup_linear"]


@keras.saving.register_keras_serializable(package="keras_hardneg")
class WarmupCosineDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up from 0 to ``base_learning_rate``, then cosine decay to ``end_learning_rate``.

    Args:
        base_learning_rate: peak learning rate, reached at ``warmup_steps``.
        total_steps: step at which the decay reaches ``end_learning_rate`` (and stays).
        warmup_steps: length of the linear warm-up (0 = none); ``< total_steps``.
        end_learning_rate: final learning rate (default 0).
        hold_steps: the rate changes every ``hold_steps`` steps (default 1: every step);
            ``total_steps`` and ``warmup_steps`` must be multiples of it.

    Called with an int/float step (scalar tensor allowed), returns a float32 scalar.

    Raises:
        ValueError: ``total_steps < 1``, ``warmup_steps`` outside ``[0, total_steps)``,
            negative learning rates, ``hold_steps < 1`` or not dividing the other two (the
            message names the parameter).
    """

    def __init__(self, base_learning_rate: float, total_steps: int, warmup_steps: int = 0,
                 end_learning_rate: float = 0.0, name: str = "warmup_cosine_decay",
                 hold_steps: int = 1):
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
        if not isinstance(hold_steps, int) or isinstance(hold_steps, bool) or hold_steps < 1:
            raise ValueError(f"hold_steps must be an int >= 1, got {hold_steps!r}")
        if total_steps % hold_steps or warmup_steps % hold_steps:
            raise ValueError(f"hold_steps={hold_steps} must divide total_steps={total_steps} "
                             f"and warmup_steps={warmup_steps}")
        self.base_learning_rate = float(base_learning_rate)
        self.total_steps = int(total_steps)
        self.warmup_steps = int(warmup_steps)
        self.end_learning_rate = float(end_learning_rate)
        self.hold_steps = int(hold_steps)
        self.name = name

    def __call__(self, step):
        step = ops.cast(step, "float32")
        if self.hold_steps > 1:
            step = ops.floor(step / float(self.hold_steps)) * float(self.hold_steps)
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
            "hold_steps": self.hold_steps,
        }


def _run_length(steps_per_epoch: int, epochs: int) -> tuple[int, int]:
    """``(steps_per_epoch, epochs)`` as ints, each checked ``>= 1``: every schedule builder
    refuses a run without steps (it used to make a one-step schedule of it, silently)."""
    out = []
    for name, value in (("steps_per_epoch", steps_per_epoch), ("epochs", epochs)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError(f"`{name}` must be an int >= 1 (a learning-rate schedule needs "
                             f"the run's length); got {value!r}.")
        out.append(int(value))
    return out[0], out[1]


@SCHEDULES.register("constant")
def constant(learning_rate: float, steps_per_epoch: int, epochs: int) -> float:
    """The learning rate, unchanged for the whole run (``steps_per_epoch`` and ``epochs``
    must still be ``>= 1``, as for every schedule)."""
    _run_length(steps_per_epoch, epochs)
    return learning_rate


@SCHEDULES.register("warmup_cosine", params={
    "warmup_epochs": Param(int, low=0, help="epochs of linear warm-up before the cosine decay"),
    "per_epoch": Param(bool, help="change the rate once per epoch (PyTorch's CosineAnnealingLR "
                                  "stepped per epoch, as lightly) instead of every step")},
    check=lambda c: ("'per_epoch' needs 'warmup_epochs' = 0 (a warm-up held per epoch trains "
                     "epoch 0 at rate 0)") if c["per_epoch"] and c["warmup_epochs"] else None)
def warmup_cosine(learning_rate: float, steps_per_epoch: int, epochs: int,
                  warmup_epochs: int = 0, per_epoch: bool = False) -> WarmupCosineDecay:
    """:class:`WarmupCosineDecay` over ``steps_per_epoch * epochs`` steps (the warm-up is
    cut to leave at least one step of decay). ``per_epoch`` holds each epoch at the rate of
    its first step; the registry refuses it with a warm-up (held, epoch 0 would train at
    rate 0).

    Raises:
        ValueError: ``steps_per_epoch`` or ``epochs`` is not an int ``>= 1``.

    Example:

    >>> warmup_cosine(0.1, steps_per_epoch=5, epochs=4, warmup_epochs=1).total_steps
    20
    """
    steps_per_epoch, epochs = _run_length(steps_per_epoch, epochs)
    total = steps_per_epoch * epochs
    return WarmupCosineDecay(learning_rate, total_steps=total,
                             warmup_steps=min(warmup_epochs * steps_per_epoch, total - 1),
                             hold_steps=steps_per_epoch if per_epoch else 1)


@keras.saving.register_keras_serializable(package="keras_hardneg")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up from 0 to ``base_learning_rate`` over ``warmup_steps``, then linear
    decay to 0 at ``total_steps`` (BERT's schedule, Devlin et al. 2019; the
    ``get_linear_schedule_with_warmup`` of sentence-transformers' fine-tuning).

    ``lr(t) = base t / warmup`` for ``t < warmup``, ``base (total - t) / (total - warmup)``
    up to ``total``, 0 after.

    Example:
    >>> sched = WarmupLinearDecay(1.0, total_steps=10, warmup_steps=2)
    >>> [round(float(sched(t)), 3) for t in (0, 1, 2, 6, 10, 12)]
    [0.0, 0.5, 1.0, 0.5, 0.0, 0.0]
    """

    def __init__(self, base_learning_rate, total_steps, warmup_steps=0,
                 name="warmup_linear_decay"):
        if not isinstance(total_steps, int) or isinstance(total_steps, bool) or total_steps < 1:
            raise ValueError(f"total_steps must be an int >= 1, got {total_steps!r}")
        if (not isinstance(warmup_steps, int) or isinstance(warmup_steps, bool)
                or not 0 <= warmup_steps < total_steps):
            raise ValueError(f"warmup_steps must be an int in [0, total_steps={total_steps}), "
                             f"got {warmup_steps!r}")
        if base_learning_rate < 0:
            raise ValueError(f"base_learning_rate must be >= 0, got {base_learning_rate!r}")
        self.base_learning_rate = float(base_learning_rate)
        self.total_steps = int(total_steps)
        self.warmup_steps = int(warmup_steps)
        self.name = name

    def __call__(self, step):
        step = ops.cast(step, "float32")
        base = ops.cast(self.base_learning_rate, "float32")
        warm, total = float(self.warmup_steps), float(self.total_steps)
        rising = base * step / max(warm, 1.0)
        falling = base * ops.clip((total - step) / (total - warm), 0.0, 1.0)
        return ops.where(step < warm, rising, falling)

    def get_config(self):
        return {"base_learning_rate": self.base_learning_rate, "total_steps": self.total_steps,
                "warmup_steps": self.warmup_steps, "name": self.name}


@SCHEDULES.register("warmup_linear", params={
    "warmup_fraction": Param(float, low=0.0, high=1.0, high_inclusive=False,
                             help="share of the run's steps spent warming up linearly")})
def warmup_linear(learning_rate: float, steps_per_epoch: int, epochs: int,
                  warmup_fraction: float = 0.1) -> WarmupLinearDecay:
    """:class:`WarmupLinearDecay` over ``steps_per_epoch * epochs`` steps, the first
    ``round(warmup_fraction * total)`` of them warming up (sentence-transformers' 10 %).

    Example:
    >>> warmup_linear(2e-5, steps_per_epoch=28, epochs=3).warmup_steps
    8
    """
    steps_per_epoch, epochs = _run_length(steps_per_epoch, epochs)
    total = steps_per_epoch * epochs
    return WarmupLinearDecay(learning_rate, total_steps=total,
                             warmup_steps=min(int(round(warmup_fraction * total)), total - 1))
