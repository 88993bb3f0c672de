"""The Transformer sentence encoder on every backend (this module runs under TensorFlow and
JAX): shapes, the padding mask, dropout views, a table start, serialization, the baseline."""

import keras
import numpy as np
import pytest

from keras_hardneg.encoders import mean_embedding_encoder, text_transformer
from keras_hardneg.registry import ENCODERS, ConfigError

pytestmark = pytest.mark.backends

# At most 4 real tokens a row, so the padding test can cut the last 4 columns. Shapes are
# kept few on purpose: JAX compiles each op once per shape when it runs eagerly.
IDS = np.array([[1, 5, 7, 9, 0, 0, 0, 0],
                [1, 9, 3, 4, 0, 0, 0, 0],
                [1, 0, 0, 0, 0, 0, 0, 0]], "int32")


def _np(x):
    return keras.ops.convert_to_numpy(x)


def _small(**kwargs):
    keras.utils.set_random_seed(0)
    config = dict(input_shape=(8,), vocab_size=12, width=16, num_layers=1, num_heads=2)
    config.update(kwargs)
    return text_transformer(**config)


def test_shapes_and_pooling():
    enc = _small()
    assert enc.output_shape == (None, 16)
    out = _np(enc(IDS))
    assert out.shape == (3, 16) and out.dtype == np.float32 and np.all(np.isfinite(out))
    cls = _small(pooling="cls", num_layers=0)
    assert _np(cls(IDS)).shape == (3, 16)


def test_padding_does_not_change_the_embedding():
    fixed = _small()
    anylen = _small(input_shape=(None,), max_length=8)
    anylen.set_weights(fixed.get_weights())
    full = _np(fixed(IDS))
    np.testing.assert_allclose(_np(anylen(IDS)), full, atol=1e-6)
    # Cutting off padding columns: same embedding for each sentence (masked attention,
    # masked mean, absolute positions).
    np.testing.assert_allclose(_np(anylen(IDS[:, :4])), full, atol=1e-5)
    # CLS pooling too.
    cls_fixed, cls_any = _small(pooling="cls"), _small(pooling="cls", input_shape=(None,),
                                                       max_length=8)
    cls_any.set_weights(cls_fixed.get_weights())
    np.testing.assert_allclose(_np(cls_any(IDS[:, :4])), _np(cls_fixed(IDS)), atol=1e-5)


def test_dropout_views_differ_in_training_and_agree_without():
    enc = _small(dropout=0.1)
    a, b = _np(enc(IDS, training=True)), _np(enc(IDS, training=True))
    assert np.abs(a - b).max() > 1e-3
    # Within one batch too (SimCLR encodes both views as one batch of 2B rows): two
    # copies of a sentence get different masks.
    twice = _np(enc(IDS[[0, 0, 1]], training=True))
    assert np.abs(twice[0] - twice[1]).max() > 1e-3
    np.testing.assert_array_equal(_np(enc(IDS, training=False)), _np(enc(IDS)))
    nodrop = _small(dropout=0.0)
    np.testing.assert_allclose(_np(nodrop(IDS, training=True)), _np(nodrop(IDS)), atol=1e-6)


def test_initial_embeddings_start_and_projection():
    table = np.random.default_rng(0).normal(size=(12, 6)).astype("float32")
    enc = _small(initial_embeddings=table, vocab_size=None)
    np.testing.assert_array_equal(_np(enc.get_layer("token_embedding").embeddings), table)
    assert enc.get_layer("token_projection").kernel.shape == (6, 16)
    same = _small(initial_embeddings=np.ones((12, 16), "float32"))
    assert "token_projection" not in [layer.name for layer in same.layers]
    with pytest.raises(ValueError, match="must agree"):
        _small(initial_embeddings=table, vocab_size=13)


def test_mean_embedding_baseline():
    table = np.random.default_rng(1).normal(size=(12, 6)).astype("float32")
    base = mean_embedding_encoder(table)
    expected = np.stack([table[row[row != 0]].mean(0) for row in IDS])
    np.testing.assert_allclose(_np(base(IDS)), expected, rtol=1e-5, atol=1e-6)
    assert not base.trainable_weights
    enc = _small()
    copied = mean_embedding_encoder(enc)
    assert _np(copied(IDS)).shape == (3, 16)
    with pytest.raises(ValueError, match="table"):
        mean_embedding_encoder(keras.Sequential([keras.layers.Dense(2)], name="other"))


def test_serialization_round_trip(tmp_path):
    enc = _small(pooling="cls")
    ref = _np(enc(IDS))
    clone = keras.Model.from_config(enc.get_config())
    clone.set_weights(enc.get_weights())
    np.testing.assert_allclose(_np(clone(IDS)), ref, atol=1e-6)
    path = str(tmp_path / "enc.keras")
    enc.save(path)
    np.testing.assert_allclose(_np(keras.models.load_model(path)(IDS)), ref, atol=1e-6)


def test_registry_and_bad_arguments():
    comp = ENCODERS.get("transformer")
    assert comp.tags["modality"] == "text"
    assert ENCODERS.defaults("transformer") == {"width": 128, "num_layers": 2, "num_heads": 4,
                                                "dropout": 0.1, "pooling": "mean", "rezero": False}
    enc = ENCODERS.make("transformer", {"width": 8, "num_heads": 2, "num_layers": 1},
                        input_shape=(8,), vocab_size=12)
    assert enc.output_shape == (None, 8)
    with pytest.raises(ConfigError, match="multiple of 'num_heads'"):
        ENCODERS.check("transformer", {"width": 10, "num_heads": 4})
    with pytest.raises(ConfigError, match="pooling"):
        ENCODERS.check("transformer", {"pooling": "max"})
    with pytest.raises(ValueError, match="vocab_size"):
        text_transformer(input_shape=(8,))
    with pytest.raises(ValueError, match="multiple"):
        _small(width=10, num_heads=4)
    with pytest.raises(ValueError, match="dropout"):
        _small(dropout=1.0)
    with pytest.raises(ValueError, match="input_shape"):
        _small(input_shape=(8, 2))
    with pytest.raises(ValueError, match="max_length"):
        _small(input_shape=(None,))


@pytest.mark.backends
def test_rezero_encoder_starts_as_the_pooled_token_embeddings():
    """ReZero gates start at 0 and positions at 0: the untrained encoder is the mean over
    real tokens of LayerNorm(token embedding)."""
    import keras

    from keras_hardneg.encoders.text_transformer import text_transformer

    model = text_transformer(input_shape=(6,), vocab_size=30, width=16, num_layers=2,
                             num_heads=2, rezero=True)
    ids = np.array([[2, 5, 7, 0, 0, 0], [3, 3, 9, 11, 4, 0]], dtype="int32")
    table = keras.ops.convert_to_numpy(model.get_layer("token_embedding").embeddings)
    emb = table[ids]
    normed = (emb - emb.mean(-1, keepdims=True)) / np.sqrt(emb.var(-1, keepdims=True) + 1e-6)
    mask = (ids != 0)[..., None]
    expected = (normed * mask).sum(1) / mask.sum(1)
    got = keras.ops.convert_to_numpy(model(ids, training=False))
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    restored = keras.Model.from_config(model.get_config())
    assert any("rezero_gate" in w.path for w in restored.weights)
