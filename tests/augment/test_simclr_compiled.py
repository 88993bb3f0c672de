"""The SimCLR view maker inside a compiled step: a bounded number of compilations over 20
same-shaped batches (``jax.jit`` on JAX, ``tf.function(jit_compile=True)`` on TF), new
views every call (``import keras_hardneg.augment`` and ``simclr_views`` without TensorFlow
under JAX: tests/test_no_tensorflow.py)."""

import keras
import numpy as np
import pytest

from keras_hardneg.augment import ImageViews, simclr_views

pytestmark = pytest.mark.backends


def _images(b=4, size=12, seed=0):
    return np.random.default_rng(seed).random((b, size, size, 3)).astype("float32")


def test_view_maker_is_jit_compatible_and_compiles_once_over_20_batches():
    views = simclr_views(image_size=8, version="v3", seed=0)
    assert ImageViews.jit_compatible and views.jit_compatible
    traces = []
    batches = [_images(seed=i) for i in range(20)]
    if keras.backend.backend() == "jax":
        import jax

        def step(state, x):
            traces.append(1)
            (v1, v2), state = views.stateless_call([], state, x, training=True)
            return v1, v2, state

        jitted = jax.jit(step)
        state = [v.value for v in views.non_trainable_variables]
        outs = []
        for x in batches:
            v1, v2, state = jitted(state, x)
            outs.append((np.asarray(v1), np.asarray(v2)))
        assert jitted._cache_size() == 1
    elif keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        def step(x):
            traces.append(1)
            return views(x, training=True)

        jitted = tf.function(step, jit_compile=True, autograph=False)
        outs = [tuple(np.asarray(v) for v in jitted(tf.constant(x))) for x in batches]
    else:
        pytest.skip(f"no compiled-step check for {keras.backend.backend()}")
    assert len(traces) == 1
    v1s = np.stack([o[0] for o in outs])
    assert v1s.shape == (20, 4, 8, 8, 3) and 0 <= v1s.min() and v1s.max() <= 1
    # Same input twice -> different views: the seed state advanced inside the step.
    assert not np.allclose(outs[0][0], outs[0][1])
    repeated = [o[0] for o in outs]
    assert len({np.round(r, 5).tobytes() for r in repeated}) == 20


def test_eager_calls_are_deterministic_given_the_seed():
    x = _images()
    a = simclr_views(image_size=8, seed=3)(x, training=True)
    b = simclr_views(image_size=8, seed=3)(x, training=True)
    c = simclr_views(image_size=8, seed=4)(x, training=True)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(np.asarray(u), np.asarray(v))
    assert not np.allclose(np.asarray(a[0]), np.asarray(c[0]))


# `simclr_views` without TensorFlow under JAX: the "views" scenario of tests/test_no_tensorflow.py.
