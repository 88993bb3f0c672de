"""Epoch schedules for the losses' hyper-parameters."""

from __future__ import annotations

import math

import keras

__all__ = ["BetaAnnealing", "RingAnnealing", "beta_schedule", "ring_upper_schedule"]


def _positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"`{name}` must be an int >= 1; got {value!r}.")
    return value


def beta_schedule(beta, epochs, num_changes, epoch):
    """``beta`` at ``epoch`` (0-based) under Robinson et al. App. D.1.

    Starting from ``beta_1 = beta``, every ``epochs / num_changes`` epochs beta is
    lowered by ``beta / num_changes``: at epoch ``e`` it is
    ``beta * (1 - floor(e * l / epochs) / l)``, reaching 0 only after the run.
    """
    step = math.floor(epoch * num_changes / epochs)
    return max(0.0, beta * (1.0 - step / num_changes))


def ring_upper_schedule(start, end, epochs, epoch):
    """Ring's upper percentile at ``epoch``: linear from ``start`` (first epoch)
    to ``end`` (last epoch), as in Wu et al. (2021)."""
    if epochs <= 1:
        return float(end)
    return float(start + (end - start) * epoch / (epochs - 1))


def _retrace(model):
    # The losses read their hyper-parameters when the step is traced; a change
    # takes effect by re-making the (cached) train function.
    if getattr(model, "train_function", None) is not None:
        model.make_train_function(force=True)


@keras.saving.register_keras_serializable(package="keras_hardneg")
class BetaAnnealing(keras.callbacks.Callback):
    """Anneals the hard-negative concentration ``beta`` down to 0 (Robinson et
    al., ICLR 2021, App. D.1): ``num_changes`` equal steps over ``epochs``.

    Works with any loss that has a ``beta`` attribute (hard-negative, UnReMix),
    found as ``model.loss``. Resumes correctly: the value is a function of the
    epoch index, so a run restored at epoch ``e`` continues the schedule.

    Args:
        epochs: total epochs of the run.
        num_changes: ``l``, the number of decrements.
        initial_beta: starting value (default: the loss's ``beta`` at train start).

    Example:
    >>> cb = BetaAnnealing(epochs=100, num_changes=4, initial_beta=1.0)
    >>> [beta_schedule(1.0, 100, 4, e) for e in (0, 24, 25, 99)]
    [1.0, 1.0, 0.75, 0.25]
    """

    def __init__(self, epochs: int, num_changes: int = 4, initial_beta: float | None = None):
        super().__init__()
        self.epochs = _positive_int("epochs", epochs)
        self.num_changes = _positive_int("num_changes", num_changes)
        if initial_beta is not None and (not isinstance(initial_beta, (int, float)) or initial_beta < 0):
            raise ValueError(f"`initial_beta` must be a number >= 0; got {initial_beta!r}.")
        self.initial_beta = None if initial_beta is None else float(initial_beta)

    def _loss(self):
        loss = getattr(self.model, "loss", None)
        if loss is None or not hasattr(loss, "beta"):
            raise ValueError(
                "BetaAnnealing needs a compiled loss with a `beta` (HardNegativeContrastiveLoss "
                f"or UnReMixContrastiveLoss); got {loss!r}."
            )
        return loss

    def on_train_begin(self, logs=None):
        if self.initial_beta is None:
            self.initial_beta = float(self._loss().beta)

    def on_epoch_begin(self, epoch, logs=None):
        loss = self._loss()
        value = beta_schedule(self.initial_beta, self.epochs, self.num_changes, epoch)
        if value != loss.beta:
            loss.beta = value
            _retrace(self.model)

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["beta"] = float(self._loss().beta)

    def get_config(self):
        return {"epochs": self.epochs, "num_changes": self.num_changes,
                "initial_beta": self.initial_beta}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


@keras.saving.register_keras_serializable(package="keras_hardneg")
class RingAnnealing(keras.callbacks.Callback):
    """Anneals Ring's upper percentile linearly from ``start`` to ``end`` over
    ``epochs`` (Wu et al., ICLR 2021: 100 -> 10). The lower percentile is kept;
    the upper one never goes below ``lower + 1e-6``.

    Example:
    >>> [ring_upper_schedule(100, 10, 10, e) for e in (0, 9)]
    [100.0, 10.0]
    """

    def __init__(self, epochs: int, start: float = 100.0, end: float = 10.0):
        super().__init__()
        self.epochs = _positive_int("epochs", epochs)
        for name, value in (("start", start), ("end", end)):
            if not isinstance(value, (int, float)) or not 0 < value <= 100:
                raise ValueError(f"`{name}` must be a percentile in (0, 100]; got {value!r}.")
        self.start, self.end = float(start), float(end)

    def on_epoch_begin(self, epoch, logs=None):
        loss = getattr(self.model, "loss", None)
        if loss is None or not hasattr(loss, "upper_percentile"):
            raise ValueError(f"RingAnnealing needs a compiled RingContrastiveLoss; got {loss!r}.")
        value = max(ring_upper_schedule(self.start, self.end, self.epochs, epoch),
                    loss.lower_percentile + 1e-6)
        if value != loss.upper_percentile:
            loss.upper_percentile = value
            _retrace(self.model)

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["upper_percentile"] = float(self.model.loss.upper_percentile)

    def get_config(self):
        return {"epochs": self.epochs, "start": self.start, "end": self.end}

    @classmethod
    def from_config(cls, config):
        return cls(**config)
