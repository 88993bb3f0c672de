"""The text modality's encoding of token ids (``_encode_ids``, behind STS, SentEval, the
retrieval evaluation and the miner): the same features in the caller's order whether the
encoder runs eagerly (a few batches) or compiled (``tf.function`` / ``jax.jit``), trimmed
and bucketed lengths included."""

import keras
import numpy as np
import pytest

from keras_hardneg.modalities import text

pytestmark = pytest.mark.backends


class _MaskedMean(keras.layers.Layer):
    def call(self, states, ids):
        mask = keras.ops.cast(keras.ops.not_equal(ids, 0), states.dtype)[..., None]
        return keras.ops.sum(states * mask, axis=1) / keras.ops.maximum(
            keras.ops.sum(mask, axis=1), 1.0)


def _any_length_encoder():
    """ids ``(None,)`` -> the mean of real tokens' states (padding never changes it)."""
    ids = keras.Input((None,), dtype="int32")
    states = keras.layers.Dense(6)(keras.layers.Embedding(50, 8)(ids))
    return keras.Model(ids, _MaskedMean()(states, ids))


def _ids(n, width, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, width + 1, n)
    ids = np.zeros((n, width), "int32")
    for i, length in enumerate(lengths):
        ids[i, :length] = rng.integers(1, 50, length)
    return ids, lengths


@pytest.mark.parametrize("n", [text.COMPILE_FROM_BATCHES * 4 - 1, 4 * 2])
def test_trimmed_features_equal_the_full_width_rows_eager_or_compiled(n):
    """``n = 4 * COMPILE_FROM_BATCHES - 1`` compiles (the last batch padded to four rows);
    ``n = 8`` (two batches) runs eagerly: both equal the rows encoded at their full width
    (the encoder ignores padding), in the caller's order, whatever the backend's length
    buckets (widths 1-40: buckets 32 and 40 under JAX)."""
    keras.utils.set_random_seed(0)
    encoder = _any_length_encoder()
    ids, _ = _ids(n, 40)
    want = keras.ops.convert_to_numpy(encoder(ids))  # every row at the full width, at once
    got = text._encode_ids(encoder, ids, 4, trim=True)
    assert got.shape == (n, 6) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_fixed_length_features_keep_the_rows_and_their_order():
    """An encoder of fixed length gets whole rows; the padded last batch is dropped."""
    keras.utils.set_random_seed(0)
    ids_in = keras.Input((12,), dtype="int32")
    encoder = keras.Model(ids_in, keras.layers.Flatten()(keras.layers.Embedding(50, 2)(ids_in)))
    ids, _ = _ids(4 * text.COMPILE_FROM_BATCHES + 1, 12, seed=1)
    got = text._encode_ids(encoder, ids, 4, trim=False)
    np.testing.assert_allclose(got, keras.ops.convert_to_numpy(encoder(ids)), atol=1e-6)
