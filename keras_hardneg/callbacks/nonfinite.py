"""Stops a run at the first non-finite loss or gradient, saying what happened."""

import keras
import numpy as np

__all__ = ["NonFiniteError", "NonFiniteGuard"]


class NonFiniteError(FloatingPointError):
    """Raised by :class:`NonFiniteGuard`; the message is the report."""


@keras.saving.register_keras_serializable(package="keras_hardneg")
class NonFiniteGuard(keras.callbacks.Callback):
    """Stops training when a step's loss or gradients were not finite.

    keras-hardneg's models skip such an update (the weights stay as they were)
    and count it in the ``nonfinite_steps`` metric; this callback, which their
    ``fit`` puts first, then raises :class:`NonFiniteError` at the end of that
    batch -- before any checkpoint callback can run for it -- with the step,
    the loss term that broke (loss, positive or negative term, gradients)
    and what the inputs looked like (``model.health``).

    Args:
        raise_error: raise :class:`NonFiniteError` (default) or only set
            ``model.stop_training``.
    """

    def __init__(self, raise_error=True):
        super().__init__()
        if not isinstance(raise_error, bool):
            raise ValueError(f"`raise_error` must be True or False; got {raise_error!r}.")
        self.raise_error = raise_error
        self.report = None
        self._epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if not logs or float(logs.get("nonfinite_steps", 0.0)) <= 0:
            return
        self.report = self.describe(batch)
        self.model.stop_training = True
        if self.raise_error:
            raise NonFiniteError(self.report)

    def describe(self, batch):
        from keras_hardneg.models.base import HEALTH_FIELDS

        health = getattr(self.model, "health", None)
        where = f"epoch {self._epoch}, batch {batch}"
        if health is None:
            return f"Non-finite loss or gradient at {where}; the update was skipped."
        h = dict(zip(HEALTH_FIELDS, np.asarray(keras.ops.convert_to_numpy(health)).tolist()))
        broken = [name for name in ("loss_finite", "positive_term_finite",
                                    "negative_term_finite", "gradients_finite") if h[name] < 0.5]
        terms = ", ".join(name.replace("_finite", "") for name in broken) or "loss"
        return (
            f"Non-finite values at {where} (update skipped, weights unchanged): "
            f"non-finite {terms}. Inputs: min {h['input_min']:.4g}, max {h['input_max']:.4g}, "
            f"{int(h['input_nonfinite_values'])} non-finite input values; "
            f"{int(h['projection_nonfinite_values'])} non-finite projection values. "
            "Check the data (NaN/inf pixels), the learning rate, and the temperature."
        )

    def get_config(self):
        return {"raise_error": self.raise_error}
