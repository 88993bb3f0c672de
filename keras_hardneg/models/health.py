"""Model health: what each training step looked like, and what to do when it was not finite.

A contrastive step can go non-finite (NaN pixels, a too-low temperature, an exploding
learning rate). The frameworks then skip the update (see
:meth:`~keras_hardneg.models.ContrastiveModel.apply_update`) and

* record :data:`HEALTH_FIELDS` in ``model.health`` (:func:`health_values`);
* put back the moving statistics the forward pass changed (:class:`GuardedState`), so a
  NaN batch cannot poison batch norm either;
* let :class:`NonFiniteGuard` -- which ``ContrastiveModel.fit`` puts first among the
  callbacks -- stop the run with a report (:class:`NonFiniteError`).

Example:
>>> HEALTH_FIELDS[0], len(HEALTH_FIELDS)
('loss_finite', 8)
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import keras
import numpy as np
from keras import ops

__all__ = ["HEALTH_FIELDS", "GuardedState", "NonFiniteError", "NonFiniteGuard",
           "health_values"]

#: Entries of ``model.health``, written every training step.
HEALTH_FIELDS = (
    "loss_finite", "positive_term_finite", "negative_term_finite", "gradients_finite",
    "input_min", "input_max", "input_nonfinite_values", "projection_nonfinite_values",
)


# ------------------------------------------------------------------ the record
def _nonfinite_count(t):
    return ops.sum(ops.cast(ops.logical_not(ops.isfinite(t)), "float32"))


def _recorded_leaves(view: Any) -> list:
    """The leaves of ``view`` (a tensor or a structure of them) whose values are recorded:
    the floating-point ones (a graph batch's features and masks, not its indices), or all
    of them when none is floating (token ids)."""
    leaves = keras.tree.flatten(view)
    floating = [x for x in leaves if "float" in keras.backend.standardize_dtype(x.dtype)]
    return floating or leaves


def _finite_min(t):
    return ops.min(ops.where(ops.isfinite(t), t, float("inf")))


def _finite_max(t):
    return ops.max(ops.where(ops.isfinite(t), t, float("-inf")))


def health_values(views: Sequence[Any], projections: Sequence[Any], terms: dict,
                  loss_value: Any, grads_finite: Any) -> Any:
    """``[len(HEALTH_FIELDS)]`` float32 values of :data:`HEALTH_FIELDS` for one step.

    Args:
        views: the input views of the step (tensors, or structures of them such as a
            graph batch: every floating-point leaf is recorded).
        projections: its projections (tensors, or dicts with ``"embeddings"``).
        terms: the loss's terms (``positive_cosine``, ``negative_cosine``).
        loss_value: the scalar loss.
        grads_finite: whether every gradient was finite.
    """
    views = [ops.cast(leaf, "float32") for v in views for leaf in _recorded_leaves(v)]
    projections = [ops.cast(p["embeddings"] if isinstance(p, dict) else p, "float32")
                   for p in projections]

    def flag(x):
        return ops.cast(x, "float32")

    return ops.stack([
        flag(ops.isfinite(loss_value)),
        flag(ops.isfinite(terms["positive_cosine"])),
        flag(ops.isfinite(terms["negative_cosine"])),
        flag(grads_finite),
        ops.min(ops.stack([_finite_min(v) for v in views])),
        ops.max(ops.stack([_finite_max(v) for v in views])),
        sum(_nonfinite_count(v) for v in views),
        sum(_nonfinite_count(p) for p in projections),
    ])


# --------------------------------------------------------------- guarded state
class GuardedState:
    """The non-trainable float weights of ``layers`` that a forward pass changes
    (batch-norm moving statistics), snapshotted before a step and put back when the
    step was not finite.

    Backend-agnostic (``keras.ops`` and ``variable.assign``): inside a JAX
    ``keras.StatelessScope`` the snapshot and the restore read and write the scope's
    values.

    Args:
        layers: the layers whose state is guarded (None entries are skipped); each
            variable is guarded once even when layers share it.
    """

    def __init__(self, layers: Iterable[keras.layers.Layer | None]):
        seen, self.variables = set(), []
        for layer in layers:
            if layer is None:
                continue
            for v in layer.non_trainable_variables:
                if id(v) not in seen and "float" in str(v.dtype):
                    seen.add(id(v))
                    self.variables.append(v)

    def snapshot(self) -> list:
        """Current values (call before the step's forward pass)."""
        return [ops.copy(v.value) for v in self.variables]

    def restore_unless(self, finite: Any, snapshot: list) -> None:
        """Puts ``snapshot`` back when ``finite`` is False."""
        for v, old in zip(self.variables, snapshot):
            v.assign(ops.where(finite, v.value, old))


# -------------------------------------------------------------------- the guard
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
    and what the inputs looked like (``model.health``, :data:`HEALTH_FIELDS`).

    Args:
        raise_error: raise :class:`NonFiniteError` (default) or only set
            ``model.stop_training``.
    """

    def __init__(self, raise_error: bool = True):
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

    def describe(self, batch: int) -> str:
        """The report for a non-finite step at ``batch`` of the current epoch."""
        # Any model may be guarded; only keras-hardneg's models keep a health record.
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

    def get_config(self) -> dict:
        return {"raise_error": self.raise_error}

    @classmethod
    def from_config(cls, config: dict) -> "NonFiniteGuard":
        return cls(**config)
