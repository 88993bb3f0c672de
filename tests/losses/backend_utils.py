"""Backend-dispatching helpers for the loss tests (no TensorFlow import at module level):
the same test runs under ``KERAS_BACKEND=tensorflow`` and ``KERAS_BACKEND=jax``."""

import collections
import itertools

import keras
import numpy as np


def backend():
    return keras.backend.backend()


def on_jax() -> bool:
    return backend() == "jax"


def grid(*axes, jax_every=None):
    """The cases of a parametrized test, the product of ``axes`` (lists; an entry that is
    a tuple fills several parametrize names), each case one flat tuple (or the entry
    itself for one axis).

    Under TensorFlow (the default backend) every case: the full grids. Under JAX, where
    every new shape or configuration costs XLA compilations, a covering subset: greedily,
    in order, the cases that bring an entry of some axis not run yet, until every entry of
    every axis has run at least once (as many cases as the longest axis has entries), ties
    going to the case whose entries have run least (so the cases spread); plus every
    ``jax_every``-th case of the product when given.

    >>> len(grid([2, 5, 16], [3, 32], [0.07, 0.5, 1.0])) == (3 if on_jax() else 18)
    True
    """
    combos = list(itertools.product(*axes))

    def flat(parts):
        if len(parts) == 1:
            return parts[0]
        return tuple(x for p in parts for x in (p if isinstance(p, tuple) else (p,)))

    if not on_jax():
        return [flat(c) for c in combos]
    keys = [{(i, repr(v)) for i, v in enumerate(c)} for c in combos]
    todo = set().union(*keys) if keys else set()
    chosen = set(range(0, len(combos), jax_every)) if jax_every else set()
    for i in chosen:
        todo -= keys[i]
    used = collections.Counter(k for i in chosen for k in keys[i])
    while todo:
        best = max(range(len(combos)), key=lambda i: (
            len(keys[i] & todo), -sum(used[k] for k in keys[i]), -i))
        chosen.add(best)
        todo -= keys[best]
        used.update(keys[best])
    return [flat(combos[i]) for i in sorted(chosen)]


def evaluate(fn, *args):
    """``fn(*args)``: eagerly under TensorFlow, under ``jax.jit`` on JAX (one compilation
    for the whole computation instead of one per op and shape: the grids' cases each have
    their own shapes and constants, so nothing would be reused op by op)."""
    if on_jax():
        import jax

        return jax.jit(fn)(*args)
    return fn(*args)


def to_numpy(x):
    """A NumPy array of a backend tensor (float32 for low-precision floats)."""
    x = keras.ops.convert_to_numpy(x)
    if x.dtype.kind == "f" and x.dtype.itemsize < 4 or str(x.dtype) == "bfloat16":
        x = x.astype("float32")
    return x


def tensor(x, dtype=None):
    return keras.ops.convert_to_tensor(np.asarray(x), dtype=dtype)


def value_and_grad(fn, *args, jit=False):
    """``(value, [d value / d arg, ...])`` as NumPy arrays: ``tf.GradientTape`` under
    TensorFlow, ``jax.value_and_grad`` under JAX (under ``jax.jit`` when ``jit``; TF
    ignores it). ``args`` are NumPy arrays or tensors (their dtype is kept)."""
    args = [tensor(a) if isinstance(a, np.ndarray) else a for a in args]
    if backend() == "tensorflow":
        import tensorflow as tf

        variables = [tf.Variable(a) for a in args]
        with tf.GradientTape() as tape:
            value = fn(*variables)
        grads = tape.gradient(value, variables)
    elif backend() == "jax":
        import jax

        grad_fn = jax.value_and_grad(fn, argnums=tuple(range(len(args))))
        value, grads = (jax.jit(grad_fn) if jit else grad_fn)(*args)
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
