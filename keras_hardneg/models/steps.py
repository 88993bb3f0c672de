"""The train and test steps of each Keras backend, around one description of the step.

A :class:`~keras_hardneg.models.ContrastiveModel` describes its step once, in
``keras.ops`` and ``variable.assign`` (see :mod:`keras_hardneg.models.base`):

1. ``step_inputs(data, training)`` -- views, labels, dataset positions;
2. ``prepare_step()`` -- writes before the forward pass (MoCo's momentum update);
3. ``forward(inputs, training)`` -- projections, pairs, loss terms, the scalar ``loss``;
4. ``after_update(step, finite)`` -- health record, embedding bank, MoCo's queue;
5. ``record_metrics(step)``.

This module runs that description on each backend, and is the only place (with
:mod:`keras_hardneg.distribute`) that knows how a backend differentiates and updates:

* **TensorFlow**: ``tf.GradientTape`` around ``forward``, ``optimizer.apply``, and a
  non-finite step skipped with ``tf.cond`` (zero gradients under a multi-replica
  strategy, where an update cannot sit in a ``tf.cond``). Under a strategy spanning several
  workers (``MultiWorkerMirroredStrategy``), two places where Keras 3's TF trainer fails
  are worked around here: the build before ``fit`` (:func:`tf_prebuild_across_workers`)
  and the reduction of the step's logs (:func:`tf_step_logs`).
* **JAX**: Keras's stateless ``train_step(state, data)``; each phase runs in a
  ``keras.StatelessScope`` mapping the model's variables to the values in ``state``, so
  the shared description's variable reads and assigns work unchanged; the gradient is
  ``jax.value_and_grad`` of ``forward`` and the update ``optimizer.stateless_apply``; a
  non-finite step keeps the old weights and optimizer state through ``keras.ops.where``.

On both, a non-finite step (loss or any gradient not finite) leaves the trainable
weights, the optimizer state, the guarded moving statistics
(:class:`~keras_hardneg.models.health.GuardedState`), MoCo's key branch and queue as they
were, and is counted in ``nonfinite_steps``. A batch whose pairs have no negative (the step's
``usable`` False: e.g. a final batch of one example) is not trained on either: the same
state is kept, the optimizer's step count does not move (except under a multi-replica
``tf.distribute`` strategy, where zero gradients are applied, and a loss-scale optimizer
there), and it counts in ``dropped_batches`` only. When the batch size is known when the step
is traced (JAX; TensorFlow's first trace) this is decided then, with no update computed. With a ``keras.optimizers.LossScaleOptimizer`` the
optimizer checks the gradients itself (a non-finite *scaled* gradient is how it lowers
the scale) and only a non-finite loss counts.

Example (either backend):
>>> import numpy as np, keras_hardneg as khn
>>> enc = khn.encoders.small_convnet(input_shape=(8, 8, 3), width=4)
>>> model = khn.models.SimCLR(enc, projection_dims=(16, 8))
>>> model.compile(optimizer="sgd", loss="nt_xent")
>>> x = np.random.default_rng(0).uniform(size=(8, 8, 8, 3)).astype("float32")
>>> logs = model.train_on_batch({"view1": x, "view2": x[:, ::-1]}, return_dict=True)
>>> sorted(logs)[:3], bool(np.isfinite(logs["loss"]))
(['dropped_batches', 'false_negative_rate', 'loss'], True)
"""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from keras_hardneg import distribute

__all__ = ["run_train_step", "run_test_step", "tf_step_logs", "tf_prebuild_across_workers"]


def run_train_step(model: Any, *args: Any) -> Any:
    """``model``'s training step on the current backend (``(data)`` on TensorFlow,
    ``(state, data)`` on JAX, as Keras's trainers call it)."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        return _tf_train_step(model, *args)
    if backend == "jax":
        return _jax_train_step(model, *args)
    raise NotImplementedError(
        f"keras_hardneg trains with the 'tensorflow' or 'jax' Keras backend; got {backend!r} "
        "(set KERAS_BACKEND).")


def run_test_step(model: Any, *args: Any) -> Any:
    """``model``'s test step on the current backend (same arguments as :func:`run_train_step`)."""
    if keras.backend.backend() == "jax":
        return _jax_test_step(model, *args)
    inputs = model.step_inputs(args[0], training=False)
    step = model.forward(inputs, training=False)
    model.record_metrics(step)
    return tf_step_logs(model.metric_results())


def _uses_loss_scale(model) -> bool:
    return isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)


def _and(a: Any, b: Any) -> Any:
    """``a and b`` of Python bools or scalar bool tensors (Python when both are)."""
    if a is True or b is False:
        return b
    if b is True or a is False:
        return a
    return ops.logical_and(a, b)


def _counted_finite(finite: Any, usable: Any) -> Any:
    """What ``count_step`` counts: a dropped batch (not ``usable``) is no non-finite step."""
    if usable is True:
        return finite
    if usable is False:
        return True
    return ops.logical_or(finite, ops.logical_not(usable))


def _all_finite(loss_value, grads):
    finite = ops.isfinite(loss_value)
    for g in grads:
        if g is not None:
            finite = ops.logical_and(finite, ops.all(ops.isfinite(g)))
    return finite


# ---------------------------------------------------------------- TensorFlow
def _tf_train_step(model, data):
    import tensorflow as tf

    inputs = model.step_inputs(data, training=True)
    guard = model.guarded_state()
    snapshot = guard.snapshot()
    model.prepare_step()
    with tf.GradientTape() as tape:
        step = model.forward(inputs, training=True)
        objective = model.objective(step["loss"])
    usable = step["usable"]
    finite = tf_apply_update(model, tape, objective, step["loss"], usable=usable)
    applied = _and(finite, usable)
    guard.restore_unless(applied, snapshot)
    model.after_update(step, applied)
    model.record_metrics(step)
    return tf_step_logs(model.metric_results())


def tf_step_logs(logs: dict) -> dict:
    """TensorFlow: a step's logs as Keras's trainer can average them over the replicas.

    Keras 3's TF trainer averages what each replica's step returns with
    ``strategy.reduce("MEAN", value, axis=0)`` when the strategy spans several workers
    (``reduce_per_replica`` in ``keras/src/backend/tensorflow/trainer.py``); ``axis=0`` also
    averages *within* each replica along a batch axis, which a scalar log has not
    ("Invalid reduction dimension 0 for input with 0 dimensions"). Across workers each log
    is returned as ``[1]``, which that reduction turns into the scalar mean over replicas
    (what one process with several replicas reports). Unchanged otherwise."""
    if not distribute.spans_workers():
        return logs
    import tensorflow as tf

    return {k: tf.reshape(v, [1]) for k, v in logs.items()}


def tf_prebuild_across_workers(model: Any, iterator: Any = None, data_batch: Any = None) -> bool:
    """TensorFlow: stands in for Keras's build before ``fit``/``evaluate`` when ``model``'s
    strategy spans several workers; returns False (nothing done: Keras's own applies)
    otherwise.

    Keras 3's TF trainer (``_maybe_symbolic_build`` in
    ``keras/src/backend/tensorflow/trainer.py``), for a model created under a strategy,
    takes the first distributed batch and turns it into one batch with
    ``strategy.reduce("MEAN", batch, axis=None)`` on the *whole nested* batch.
    ``Strategy.reduce`` takes one value, not a nest: on one worker the nest passes
    through unchanged (a MEAN of a "non-distributed" value is the value), but across
    workers ``CollectiveAllReduce.reduce`` converts the nest to a tensor and fails with
    "Attempt to convert a value (PerReplica ...)" -- even for a one-layer model
    (keras-team/keras#20585, tensorflow/tensorflow#72388). The batch only gives the
    symbolic build its shapes; ours builds from this worker's own rows instead, and only
    when something is unbuilt (a built ContrastiveModel needs no batch: none is drawn, so a
    sampler's walk does not advance)."""
    strategy = getattr(model, "_distribute_strategy", None)
    if strategy is None or not distribute.spans_workers(strategy):
        return False
    unbuilt = (not all(layer.built for layer in model._flatten_layers())
               or (model.optimizer is not None and not model.optimizer.built))
    if not unbuilt:
        return True
    if data_batch is None and iterator is not None:
        for _, _, it in iterator:
            batch = next(it)
            import tensorflow as tf

            data_batch = tf.nest.map_structure(
                lambda v: strategy.experimental_local_results(v)[0]
                if isinstance(v, tf.distribute.DistributedValues) else v, batch)
            break
    with strategy.scope():
        model._symbolic_build(data_batch=data_batch)
    return True


def tf_apply_update(model: Any, tape: Any, objective: Any, loss_value: Any,
                    usable: Any = True) -> Any:
    """TensorFlow: gradient step on ``objective``; skipped (and counted in
    ``nonfinite_steps``) when the loss or a gradient is not finite, and skipped (not
    counted) when ``usable`` is False (a batch without negatives: a Python bool, or a scalar
    bool tensor). Returns whether the step was finite."""
    import tensorflow as tf

    variables = model.trainable_variables
    if usable is False:  # known when traced: nothing to differentiate or apply
        model.count_step(True)
        return tf.constant(True)
    grads = tape.gradient(objective, variables)
    replicas = distribute.num_replicas()

    def apply_when(condition):
        if condition is True:
            model.optimizer.apply(grads, variables)
            return

        def apply():
            model.optimizer.apply(grads, variables)
            return tf.no_op()

        tf.cond(condition, apply, tf.no_op)

    if _uses_loss_scale(model):
        # It checks the gradients (and skips non-finite steps) itself; a
        # non-finite *scaled* gradient is its normal way to lower the scale.
        apply_when(True if replicas > 1 else usable)
        finite = tf.math.is_finite(loss_value)
        model.count_step(_counted_finite(finite, usable))
        return finite
    finite = _all_finite(loss_value, grads)
    applied = _and(finite, usable)
    if replicas > 1:
        # A cross-replica update cannot sit inside tf.cond: apply zero
        # gradients instead (the NonFiniteGuard callback then stops the run).
        grads = [None if g is None else tf.where(applied, g, tf.zeros_like(g)) for g in grads]
        model.optimizer.apply(grads, variables)
    else:
        apply_when(applied)
    model.count_step(_counted_finite(finite, usable))
    return finite


# ----------------------------------------------------------------------- JAX
def _current(scope, refs, values):
    """The values of ``refs`` in ``scope`` (``values`` where the scope did not write)."""
    out = []
    for ref, old in zip(refs, values):
        new = scope.get_current_value(ref)
        out.append(old if new is None else new)
    return out


def _jax_train_step(model, state, data):
    import jax

    trainable, non_trainable, optimizer_values, metric_values = state
    t_refs, n_refs = model.trainable_variables, model.non_trainable_variables
    o_refs, m_refs = model.optimizer.variables, model.metrics_variables

    # 1. Inputs (augmentation advances its seed), the pre-step writes, the guard's snapshot.
    with keras.StatelessScope(state_mapping=list(zip(t_refs, trainable))
                              + list(zip(n_refs, non_trainable))) as scope:
        inputs = model.step_inputs(data, training=True)
        guard = model.guarded_state()
        snapshot = guard.snapshot()
        model.prepare_step()
    non_trainable = _current(scope, n_refs, non_trainable)

    # 2. The forward pass, differentiated with respect to the trainable values. Whether the
    # batch had negatives is a Python bool when the shapes say (kept out of the traced aux).
    static = {}

    def objective_fn(trainable_values, non_trainable_values):
        mapping = (list(zip(t_refs, trainable_values)) + list(zip(n_refs, non_trainable_values))
                   + list(zip(o_refs, optimizer_values)))
        with keras.StatelessScope(state_mapping=mapping) as forward_scope:
            step = model.forward(inputs, training=True)
            objective = model.objective(step["loss"])
        if isinstance(step["usable"], bool):
            static["usable"] = step.pop("usable")
        return objective, (step, _current(forward_scope, n_refs, non_trainable_values))

    (_, (step, non_trainable)), grads = jax.value_and_grad(objective_fn, has_aux=True)(
        trainable, non_trainable)
    if "usable" in static:
        step["usable"] = static["usable"]
    usable = step["usable"]

    # 3. The update; a non-finite step, or a batch without negatives, keeps the old weights
    # and optimizer state.
    if usable is False:
        new_trainable, new_optimizer = trainable, optimizer_values
        finite = True
    else:
        new_trainable, new_optimizer = model.optimizer.stateless_apply(
            optimizer_values, grads, trainable)
        if _uses_loss_scale(model):
            finite = ops.isfinite(step["loss"])
            kept = usable
        else:
            finite = _all_finite(step["loss"], grads)
            kept = _and(finite, usable)
        if kept is not True:
            new_trainable = [ops.where(kept, n, o) for n, o in zip(new_trainable, trainable)]
            new_optimizer = [ops.where(kept, n, o)
                             for n, o in zip(new_optimizer, optimizer_values)]
    applied = _and(finite, usable)

    # 4. The writes after the update, and the metrics.
    mapping = (list(zip(t_refs, new_trainable)) + list(zip(n_refs, non_trainable))
               + list(zip(m_refs, metric_values)))
    with keras.StatelessScope(state_mapping=mapping) as scope:
        guard.restore_unless(applied, snapshot)
        model.after_update(step, applied)
        model.count_step(_counted_finite(finite, usable))
        model.record_metrics(step)
        logs = model.metric_results()
    non_trainable = _current(scope, n_refs, non_trainable)
    metric_values = _current(scope, m_refs, metric_values)
    return logs, (new_trainable, non_trainable, new_optimizer, metric_values)


def _jax_test_step(model, state, data):
    trainable, non_trainable, metric_values = state
    t_refs, n_refs, m_refs = (model.trainable_variables, model.non_trainable_variables,
                              model.metrics_variables)
    mapping = (list(zip(t_refs, trainable)) + list(zip(n_refs, non_trainable))
               + list(zip(m_refs, metric_values)))
    with keras.StatelessScope(state_mapping=mapping) as scope:
        inputs = model.step_inputs(data, training=False)
        step = model.forward(inputs, training=False)
        model.record_metrics(step)
        logs = model.metric_results()
    return logs, (trainable, _current(scope, n_refs, non_trainable),
                  _current(scope, m_refs, metric_values))
