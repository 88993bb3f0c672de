"""The dual encoder: the family loss wrapped with the tuple layout's K, short queries encoded
at their own length with the same embeddings, one step trains (TF and JAX)."""

import keras
import numpy as np
import pytest

from keras_hardneg.losses import MinedNegativesLoss, NTXentLoss
from keras_hardneg.models import DualEncoder

pytestmark = pytest.mark.backends


def any_length_encoder(vocab=30, width=8):
    """Token ids of any length -> the mean of their embeddings (padding 0 masked)."""
    ids = keras.Input((None,), dtype="int32")
    table = keras.layers.Embedding(vocab, width, mask_zero=True)
    return keras.Model(ids, keras.layers.GlobalAveragePooling1D()(table(ids)))


def tuple_batch(b=3, k=1, length=10, query_length=4, seed=0):
    """Flat [b (2 + k), length] ids: queries hold query_length ids, documents all."""
    rng = np.random.default_rng(seed)
    x = rng.integers(1, 30, size=(b, 2 + k, length)).astype("int32")
    x[:, 0, query_length:] = 0
    return x.reshape(-1, length)


def test_compile_wraps_the_family_loss_with_the_models_k():
    model = DualEncoder(any_length_encoder(), num_negatives=1, symmetric=True)
    model.compile(optimizer="adam", loss=NTXentLoss(temperature=0.05))
    assert isinstance(model.tuple_loss, MinedNegativesLoss)
    assert (model.tuple_loss.num_negatives, model.tuple_loss.symmetric) == (1, True)
    assert model.contrastive_loss.temperature == 0.05  # what the card and the probe read
    with pytest.raises(ValueError, match="num_negatives.*must be this model's"):
        model.compile(loss=MinedNegativesLoss("nt_xent", num_negatives=2))
    with pytest.raises(ValueError, match="`augmentation` must be None"):
        DualEncoder(any_length_encoder(), augmentation=object())


def test_short_queries_are_encoded_at_their_length_with_the_same_embeddings():
    x = tuple_batch()
    whole = DualEncoder(any_length_encoder(), num_negatives=1)
    split = DualEncoder(whole.encoder, num_negatives=1, query_length=4)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(split.embed_tuples(x, False)),
                               keras.ops.convert_to_numpy(whole.embed_tuples(x, False)),
                               atol=1e-6)


def test_one_step_trains_and_logs_the_tuple_cosines():
    model = DualEncoder(any_length_encoder(), num_negatives=1, query_length=4,
                        guard="self", guard_margin=0.1)
    model.compile(optimizer="adam", loss="nt_xent")
    before = [w.copy() for w in model.encoder.get_weights()]
    logs = model.train_on_batch(tuple_batch(b=4), return_dict=True)
    assert np.isfinite(logs["loss"]) and -1.0 <= logs["negative_cosine"] <= 1.0
    assert any(not np.allclose(a, b) for a, b in zip(before, model.encoder.get_weights()))
