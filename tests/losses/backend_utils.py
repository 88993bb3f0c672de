"""Backend-dispatching helpers for the loss tests (no TensorFlow import at module level):
the same test runs under ``KERAS_BACKEND=tensorflow`` and ``KERAS_BACKEND=jax``."""

import keras
import numpy as np


def backend():
    return keras.backend.backend()


def to_numpy(x):
    """A NumPy array of a backend tensor (float32 for low-precision floats)."""
    x = keras.ops.convert_to_numpy(x)
    if x.dtype.kind == "f" and x.dtype.itemsize < 4 or str(x.dtype) == "bfloat16":
        x = x.astype("float32")
    return x


def tensor(x, dtype=None):
    return keras.ops.convert_to_tensor(np.asarray(x), dtype=dtype)


def value_and_grad(fn, *args):
    """``(value, [d value / d arg, ...])`` as NumPy arrays: ``tf.GradientTape`` under
    TensorFlow, ``jax.value_and_grad`` under JAX. ``args`` are NumPy arrays or tensors
    (their dtype is kept)."""
    args = [tensor(a) if isinstance(a, np.ndarray) else a for a in args]
    if backend() == "tensorflow":
        import tensorflow as tf

        variables = [tf.Variable(a) for a in args]
        with tf.GradientTape() as tape:
            value = fn(*variables)
        grads = tape.gradient(value, variables)
    elif backend() == "jax":
        import jax

        value, grads = jax.value_and_grad(fn, argnums=tuple(range(len(args))))(*args)
    else:  # pragma: no cover
        raise NotImplementedError(f"no gradient helper for backend {backend()!r}")
    return to_numpy(value), [to_numpy(g) for g in grads]


def compiled(fn):
    """``fn`` compiled with XLA: ``tf.function(jit_compile=True)`` or ``jax.jit``."""
    if backend() == "tensorflow":
        import tensorflow as tf

        return tf.function(fn, jit_compile=True)
    if backend() == "jax":
        import jax

        return jax.jit(fn)
    raise NotImplementedError(f"no compiler for backend {backend()!r}")  # pragma: no cover
