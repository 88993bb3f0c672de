"""SimCLR on sentences (unsupervised SimCSE, Gao et al. 2021; quick-thought pairs): every loss
of the family trains the Transformer sentence encoder end to end with plain ``fit()`` on a
few hundred token-id rows. The NT-Xent test is marked ``backends`` (it runs under JAX too);
the module imports no TensorFlow. (The same on 256 sentences of the shared Wikipedia prefix
with a trained tokenizer: docs/notes/text_data.md.)"""

import keras
import numpy as np
import pytest

import keras_hardneg as khn
from keras_hardneg.augment import AdjacentViews, DropoutViews
from keras_hardneg.encoders import text_transformer

LENGTH, VOCAB = 16, 64


def _ids(n=128, seed=0):
    """Synthetic token ids [n, LENGTH]: [CLS]=1, 4-14 tokens drawn from a Zipf-like
    vocabulary (no tokenizer needed), then padding."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, VOCAB - 1)
    ids = np.zeros((n, LENGTH), np.int32)
    ids[:, 0] = 1
    for row, length in zip(ids, rng.integers(4, LENGTH - 1, n)):
        row[1:1 + length] = rng.choice(np.arange(2, VOCAB), length, p=p / p.sum())
    return ids


def _model(views, loss):
    keras.utils.set_random_seed(0)
    enc = text_transformer(input_shape=(LENGTH,), vocab_size=VOCAB, width=16, num_layers=1,
                           num_heads=2, dropout=0.1)
    model = khn.models.SimCLR(enc, projection_dims=(16, 8), augmentation=views)
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss=loss)
    return model


def _check_training(history):
    losses = history.history["loss"]
    assert np.all(np.isfinite(losses)), losses
    assert losses[-1] < losses[0], losses
    assert history.history["nonfinite_steps"][-1] == 0
    # The two views differ (dropout): positives are close but not identical.
    assert 0.0 < history.history["positive_cosine"][-1] < 0.9999


@pytest.mark.backends
def test_simcse_trains_with_nt_xent_on_every_backend():
    model = _model(DropoutViews(), "nt_xent")
    _check_training(model.fit(_ids(), batch_size=32, epochs=3, verbose=0))


@pytest.mark.parametrize("loss", ["debiased", "hard", "ring", "unremix"])
def test_simcse_trains_with_every_loss(loss):
    model = _model(DropoutViews(), loss)
    _check_training(model.fit(_ids(), batch_size=32, epochs=3, verbose=0))


def test_two_dropout_masks_in_one_batch():
    model = _model(DropoutViews(), "nt_xent")
    ids = _ids(8)
    z1, z2 = model.project(*model.view_maker(ids), training=True)
    assert np.abs(keras.ops.convert_to_numpy(z1) - keras.ops.convert_to_numpy(z2)).max() > 1e-4
    z1, z2 = model.project(*model.view_maker(ids), training=False)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(z1), keras.ops.convert_to_numpy(z2),
                               atol=1e-6)


def test_quick_thought_pairs_train():
    ids = _ids(129)
    pairs = np.stack([ids[:-1], ids[1:]], axis=1)  # sentence i and i + 1
    model = _model(AdjacentViews(), "hard")
    history = model.fit(pairs, batch_size=32, epochs=3, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    assert history.history["loss"][-1] < history.history["loss"][0]
