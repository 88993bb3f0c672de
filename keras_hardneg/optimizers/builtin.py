"""Keras's own optimizers as registered components (:data:`keras_hardneg.registry.OPTIMIZERS`).

Each factory takes ``learning_rate`` (a float or a schedule) and the keys a recipe may
set for it; LARS registers itself in :mod:`keras_hardneg.optimizers.lars`.
"""

from __future__ import annotations

import keras

from keras_hardneg.registry import OPTIMIZERS, Param

__all__ = ["LEARNING_RATE", "MOMENTUM", "WEIGHT_DECAY", "adam", "adamw", "sgd", "lamb"]

LEARNING_RATE = Param(float, low=0.0, low_inclusive=False, tunable=True,
                      help="base learning rate (> 0); the schedule scales it")
MOMENTUM = Param(float, low=0.0, high=1.0, help="momentum in [0, 1]")
WEIGHT_DECAY = Param(float, low=0.0, help="decoupled weight decay >= 0")


@OPTIMIZERS.register("adam", params={"learning_rate": LEARNING_RATE, "weight_decay": WEIGHT_DECAY})
def adam(learning_rate=1e-3, weight_decay=None) -> keras.optimizers.Optimizer:
    """Adam (Kingma & Ba 2015), with optional decoupled weight decay."""
    return keras.optimizers.Adam(learning_rate, weight_decay=weight_decay)


@OPTIMIZERS.register("adamw", params={"learning_rate": LEARNING_RATE, "weight_decay": WEIGHT_DECAY})
def adamw(learning_rate=1e-3, weight_decay=1e-4) -> keras.optimizers.Optimizer:
    """AdamW: Adam with decoupled weight decay (Loshchilov & Hutter 2019)."""
    return keras.optimizers.AdamW(learning_rate, weight_decay=weight_decay)


@OPTIMIZERS.register("sgd", params={"learning_rate": LEARNING_RATE, "momentum": MOMENTUM,
                                    "weight_decay": WEIGHT_DECAY})
def sgd(learning_rate=0.03, momentum=0.9, weight_decay=None) -> keras.optimizers.Optimizer:
    """SGD with momentum (MoCo's optimizer), with optional decoupled weight decay."""
    return keras.optimizers.SGD(learning_rate, momentum=momentum, weight_decay=weight_decay)


@OPTIMIZERS.register("lamb", params={"learning_rate": LEARNING_RATE})
def lamb(learning_rate=1e-3) -> keras.optimizers.Optimizer:
    """LAMB (You et al. 2020): layer-wise adaptive Adam for large batches."""
    return keras.optimizers.Lamb(learning_rate)
