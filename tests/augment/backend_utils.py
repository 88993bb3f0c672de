"""Backend helpers for the augmentation tests (no TensorFlow import at module level).

Under JAX, every new input shape of an eager augmentation call costs one XLA compilation per
op (about 100 for the SimCLR pipeline, 3-4 s on 2 CPU cores); the same call under
``jax.jit`` is one compilation (1-2 s). The augmentation tests use many shapes, so under
JAX :func:`run` compiles each call whole, threading the layer's variables (its
``SeedGenerator`` state) through ``keras.StatelessScope`` and writing them back, so the
layer advances exactly as after an eager call. Under TensorFlow it is the plain call.
"""

import keras
import numpy as np


def run(layer, *args, method=None, **kwargs):
    """``layer(*args, **kwargs)`` (or ``method(*args, **kwargs)``, a callable using
    ``layer``'s variables, e.g. ``layer.two_views``): eager under TensorFlow, one
    ``jax.jit`` compilation under JAX, with the layer's variables updated afterwards.

    >>> import numpy as np
    >>> flip = keras.layers.RandomFlip(seed=0)
    >>> tuple(run(flip, np.zeros((2, 4, 4, 3), "float32")).shape)
    (2, 4, 4, 3)
    """
    fn = method if method is not None else layer
    if keras.backend.backend() != "jax":
        return fn(*args, **kwargs)
    import jax

    variables = list(layer.variables)

    def stateless(values, *inputs):
        with keras.StatelessScope(state_mapping=list(zip(variables, values))) as scope:
            out = fn(*inputs, **kwargs)
        new = []
        for v, old in zip(variables, values):
            current = scope.get_current_value(v)
            new.append(old if current is None else current)
        return out, new

    out, new = jax.jit(stateless)([v.value for v in variables], *args)
    for v, value in zip(variables, new):
        v.assign(value)
    return out


def images(b=8, size=16, seed=0):
    """Random float32 images ``[b, size, size, 3]`` in ``[0, 1)``."""
    return np.random.default_rng(seed).random((b, size, size, 3)).astype("float32")


def same_image_batch(b=16, size=16):
    """One random image repeated ``b`` times (distinct views come from the augmentation)."""
    return np.repeat(images(1, size), b, axis=0)


def n_distinct(batch):
    """How many distinct images a batch holds (to 5 decimals)."""
    flat = np.round(np.asarray(batch).reshape(len(batch), -1), 5)
    return len({row.tobytes() for row in flat})
