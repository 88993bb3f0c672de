"""Cross-replica helpers: gather embeddings from every replica, with gradients.

The one place (with the train steps in :mod:`keras_hardneg.models.base`) that branches on
the Keras backend, because the two backends distribute a step differently:

* **TensorFlow** (``tf.distribute``): Keras runs ``train_step`` once per replica on the
  local batch. :func:`gather` concatenates a tensor across replicas in replica order, and
  its gradient flows back to the replica that produced each row (TensorFlow's
  ``ReplicaContext.all_gather`` is differentiable), so a loss that sees the global batch
  gives every replica the gradients it would get on one device.
* **JAX** (``keras.distribution.DataParallel``): Keras jits one step over the *global*
  batch, sharded across devices; XLA inserts the collectives. A step already sees every
  row, so :func:`gather` is the identity, :func:`num_replicas` is 1 and
  :func:`replica_info` is ``(1, 0)``: in-batch negatives are the global batch without an
  explicit all-gather.

Outside a strategy (or with one replica) everything here is the identity. TensorFlow is
imported only when the backend is TensorFlow.

Example:
>>> num_replicas(), replica_info()
(1, (1, 0))
>>> gather([1.0, 2.0])
[1.0, 2.0]
"""

from __future__ import annotations

from typing import Any

import keras

__all__ = ["replica_info", "gather", "num_replicas", "uses_tf_distribute", "spans_workers"]


def uses_tf_distribute() -> bool:
    """Whether steps run once per replica under ``tf.distribute`` (the TensorFlow backend)."""
    return keras.backend.backend() == "tensorflow"


def num_replicas() -> int:
    """Replicas whose gradients are summed: those of the current ``tf.distribute`` strategy
    on TensorFlow (1 without one); always 1 on JAX (one step over the global batch)."""
    if not uses_tf_distribute():
        return 1
    import tensorflow as tf

    return tf.distribute.get_strategy().num_replicas_in_sync


def spans_workers(strategy: Any = None) -> bool:
    """Whether ``strategy`` (default: the current ``tf.distribute`` strategy) has replicas
    in other processes: a ``MultiWorkerMirroredStrategy`` with more than one worker. Always
    False on JAX."""
    if not uses_tf_distribute():
        return False
    import tensorflow as tf

    strategy = strategy if strategy is not None else tf.distribute.get_strategy()
    if strategy.num_replicas_in_sync == 1:  # the default strategy among others
        return False
    # More replicas in sync than devices in this process: the others are on other workers.
    return strategy.num_replicas_in_sync > len(strategy.extended.worker_devices)


def replica_info() -> tuple:
    """``(num_replicas, replica_id)``; ``replica_id`` may be a scalar tensor."""
    if not uses_tf_distribute():
        return 1, 0
    import tensorflow as tf

    ctx = tf.distribute.get_replica_context()
    if ctx is None:  # cross-replica context
        return 1, 0
    return ctx.num_replicas_in_sync, ctx.replica_id_in_sync_group


def gather(x: Any, axis: int = 0) -> Any:
    """Concatenates ``x`` (a tensor or a dict of tensors) from all replicas along ``axis``
    (the identity on JAX, where the step already holds the global batch): a per-replica
    ``[B, d]`` gives ``[R * B, d]`` over ``R`` replicas, replica 0's rows first."""
    if not uses_tf_distribute():
        return x
    import tensorflow as tf

    ctx = tf.distribute.get_replica_context()
    if ctx is None or ctx.num_replicas_in_sync == 1:
        return x
    if isinstance(x, dict):
        return {k: ctx.all_gather(v, axis=axis) for k, v in x.items()}
    return ctx.all_gather(x, axis=axis)
