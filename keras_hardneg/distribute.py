"""Cross-replica helpers: gather embeddings from every replica, with gradients.

Under a ``tf.distribute`` strategy, Keras runs ``train_step`` once per replica.
:func:`gather` concatenates a tensor across replicas in replica order, and its
gradient flows back to the replica that produced each row (TensorFlow's
``ReplicaContext.all_gather`` is differentiable), so a loss that sees the global
batch gives every replica the gradients it would get on one device.
Outside a strategy (or with one replica) everything here is the identity.
"""

import tensorflow as tf

__all__ = ["replica_info", "gather", "num_replicas"]


def num_replicas():
    """Number of replicas in sync of the current strategy (1 without one)."""
    return tf.distribute.get_strategy().num_replicas_in_sync


def replica_info():
    """``(num_replicas, replica_id)``; ``replica_id`` may be a scalar tensor."""
    ctx = tf.distribute.get_replica_context()
    if ctx is None:  # cross-replica context
        return 1, 0
    return ctx.num_replicas_in_sync, ctx.replica_id_in_sync_group


def gather(x, axis=0):
    """Concatenates ``x`` (a tensor or a dict of tensors) from all replicas along ``axis``."""
    ctx = tf.distribute.get_replica_context()
    if ctx is None or ctx.num_replicas_in_sync == 1:
        return x
    if isinstance(x, dict):
        return {k: ctx.all_gather(v, axis=axis) for k, v in x.items()}
    return ctx.all_gather(x, axis=axis)
