"""A small Transformer sentence encoder: token ids ``int32 [B, L]`` -> float32 ``[B, width]``.

The encoder of the sentence-embedding experiments (unsupervised SimCSE, Gao et al. 2021,
"SimCSE: Simple Contrastive Learning of Sentence Embeddings", whose positive pair is one
sentence encoded twice under two dropout masks; quick-thought vectors, Logeswaran & Lee
2018). SimCSE fine-tunes BERT; no pretrained BERT is available here, so this is a small
Transformer encoder (Vaswani et al. 2017) trained from scratch or from a token-embedding
table (wordllama's, :func:`keras_hardneg.data.wordllama_start`):

* token embedding (``[vocab_size, d]``; when it comes from a table whose ``d`` differs from
  ``width``, a linear projection to ``width`` follows), plus learned position embeddings;
* dropout (default 0.1, as BERT and SimCSE: the dropout *is* SimCSE's augmentation, so it
  is applied in training on embeddings, attention probabilities and both residual
  branches);
* ``num_layers`` pre-LN blocks (Xiong et al. 2020): ``x + Attn(LN(x))``, ``x + MLP(LN(x))``
  with ``keras.layers.MultiHeadAttention`` masked to the real tokens and a GELU MLP of
  ``4 * width``; a final LayerNormalization;
* pooling over the real tokens (ids != 0): ``"mean"`` (default) or ``"cls"`` (the first
  position, which :meth:`~keras_hardneg.data.SentenceTokenizer.encode` fills with
  ``[CLS]``).

Padding never changes a sentence's embedding: padded keys are masked out of attention and
out of the mean, and positions are absolute, so ``ids`` and ``ids`` with trailing padding
columns cut off embed the same (an encoder built with ``input_shape=(None,)`` and
``max_length`` accepts any length up to ``max_length``, with the same weights).

:func:`mean_embedding_encoder` is the baseline: the mean of a table's token embeddings
over the real tokens, without training (with wordllama's table this is WordLlama itself).

Everything is ``keras.layers`` / ``keras.ops`` (TensorFlow and JAX alike).

Example:
>>> import numpy as np
>>> enc = text_transformer(input_shape=(8,), vocab_size=50, width=16, num_layers=1,
...                        num_heads=2)
>>> ids = np.array([[1, 5, 7, 0, 0, 0, 0, 0], [1, 9, 0, 0, 0, 0, 0, 0]], "int32")
>>> tuple(enc(ids).shape), enc.output_shape
((2, 16), (None, 16))
>>> base = mean_embedding_encoder(enc)
>>> tuple(base(ids).shape)
(2, 16)
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
from keras import ops

from keras_hardneg.registry import ENCODERS, Param

__all__ = ["MaskedPooling", "PositionEmbedding", "TransformerBlock", "POOLINGS",
           "mean_embedding_encoder", "text_transformer"]

#: Values of ``pooling``.
POOLINGS = ("mean", "cls")


def _real_tokens(ids: Any) -> Any:
    """``float32 [B, L]``: 1 for a real token (id != 0), 0 for padding."""
    return ops.cast(ops.not_equal(ids, 0), "float32")


@keras.saving.register_keras_serializable(package="keras_hardneg")
class PositionEmbedding(keras.layers.Layer):
    """Adds a learned embedding of each position: ``[B, L, d] -> [B, L, d]``, any
    ``L <= max_length`` (the first ``L`` rows of the table are used).

    Args:
        max_length: rows of the position table.
        initializer: of the table (default normal, stddev 0.02, as BERT).
    """

    def __init__(self, max_length: int, initializer: Any = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.max_length = int(max_length)
        self.initializer = keras.initializers.get(
            initializer or keras.initializers.RandomNormal(stddev=0.02))

    def build(self, input_shape):
        self.positions = self.add_weight(shape=(self.max_length, int(input_shape[-1])),
                                         initializer=self.initializer, name="positions")

    def call(self, x):
        length = ops.shape(x)[1]
        return x + ops.cast(self.positions[:length], x.dtype)[None]

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(max_length=self.max_length,
                      initializer=keras.initializers.serialize(self.initializer))
        return config


@keras.saving.register_keras_serializable(package="keras_hardneg")
class TransformerBlock(keras.layers.Layer):
    """One pre-LN Transformer encoder block: ``x + Drop(Attn(LN(x)))`` then
    ``x + Drop(MLP(LN(x)))``; attention sees only the real tokens.

    ``call(x, token_mask, training)``: ``x`` ``[B, L, width]``, ``token_mask`` ``[B, L]``
    (1 real, 0 padding) -> ``[B, L, width]``.

    Args:
        width: model width (a multiple of ``num_heads``).
        num_heads: attention heads (head size ``width // num_heads``).
        mlp_dim: hidden width of the MLP.
        dropout: rate on the attention probabilities and both residual branches.
    """

    def __init__(self, width: int, num_heads: int, mlp_dim: int, dropout: float = 0.1,
                 rezero: bool = False, **kwargs: Any):
        super().__init__(**kwargs)
        self.width, self.num_heads, self.mlp_dim = int(width), int(num_heads), int(mlp_dim)
        self.dropout = float(dropout)
        self.rezero = bool(rezero)
        self.attention_norm = keras.layers.LayerNormalization(epsilon=1e-6,
                                                              name="attention_norm")
        self.attention = keras.layers.MultiHeadAttention(
            num_heads=self.num_heads, key_dim=self.width // self.num_heads,
            dropout=self.dropout, name="attention")
        self.attention_dropout = keras.layers.Dropout(self.dropout, name="attention_dropout")
        self.mlp_norm = keras.layers.LayerNormalization(epsilon=1e-6, name="mlp_norm")
        self.mlp_hidden = keras.layers.Dense(self.mlp_dim, activation="gelu", name="mlp_hidden")
        self.mlp_out = keras.layers.Dense(self.width, name="mlp_out")
        self.mlp_dropout = keras.layers.Dropout(self.dropout, name="mlp_dropout")

    def build(self, x_shape, token_mask_shape=None):
        shape = tuple(x_shape)
        self.attention_norm.build(shape)
        self.attention.build(shape, shape, shape)
        self.mlp_norm.build(shape)
        self.mlp_hidden.build(shape)
        self.mlp_out.build(shape[:-1] + (self.mlp_dim,))
        # ReZero (Bachlechner et al. 2021): each residual branch is scaled by a learned
        # scalar that starts at 0, so the untrained block is the identity.
        self.gate = (self.add_weight(shape=(), initializer="zeros", name="rezero_gate")
                     if self.rezero else None)

    def call(self, x, token_mask, training=None):
        # [B, L, L]: query t may attend to key s when s is a real token.
        keys = ops.cast(token_mask, "float32")
        attention_mask = ops.cast(ops.ones_like(keys)[:, :, None] * keys[:, None, :], "bool")
        h = self.attention_norm(x)
        h = self.attention(h, h, h, attention_mask=attention_mask, training=training)
        x = x + self._gated(self.attention_dropout(h, training=training))
        h = self.mlp_out(self.mlp_hidden(self.mlp_norm(x)))
        return x + self._gated(self.mlp_dropout(h, training=training))

    def _gated(self, h):
        return h if self.gate is None else h * ops.cast(self.gate, h.dtype)

    def compute_output_shape(self, x_shape, token_mask_shape=None):
        return tuple(x_shape)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(width=self.width, num_heads=self.num_heads, mlp_dim=self.mlp_dim,
                      dropout=self.dropout, rezero=self.rezero)
        return config


@keras.saving.register_keras_serializable(package="keras_hardneg")
class MaskedPooling(keras.layers.Layer):
    """``[B, L, d]`` token states and ``[B, L]`` ids -> float32 ``[B, d]``: the mean over
    the real tokens (ids != 0), or the first position (``"cls"``).

    Args:
        mode: ``"mean"`` or ``"cls"``.
    """

    def __init__(self, mode: str = "mean", **kwargs: Any):
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        if mode not in POOLINGS:
            raise ValueError(f"`pooling` must be one of {', '.join(POOLINGS)}; got {mode!r}.")
        self.mode = mode

    def call(self, x, ids):
        x = ops.cast(x, "float32")
        if self.mode == "cls":
            return x[:, 0]
        mask = _real_tokens(ids)[:, :, None]
        return ops.sum(x * mask, axis=1) / ops.maximum(ops.sum(mask, axis=1), 1.0)

    def compute_output_shape(self, x_shape, ids_shape=None):
        return (x_shape[0], x_shape[-1])

    def get_config(self) -> dict:
        config = super().get_config()
        config["mode"] = self.mode
        return config


@keras.saving.register_keras_serializable(package="keras_hardneg")
class TokenMask(keras.layers.Layer):
    """Token ids ``[B, L]`` -> float32 ``[B, L]``: 1 for a real token, 0 for padding (id 0)."""

    def __init__(self, **kwargs: Any):
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)

    def call(self, ids):
        return _real_tokens(ids)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)


def _check_positive_int(value: Any, name: str, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"`{name}` must be an integer >= {low}; got {value!r}.")
    return int(value)


def _check_table(initial_embeddings: Any, vocab_size: int | None) -> tuple[np.ndarray | None,
                                                                            int]:
    if initial_embeddings is None:
        if vocab_size is None:
            raise ValueError("`vocab_size` is required (the tokenizer's vocab_size) when no "
                             "`initial_embeddings` table is given.")
        return None, _check_positive_int(vocab_size, "vocab_size", 2)
    table = np.asarray(initial_embeddings, np.float32)
    if table.ndim != 2 or not np.all(np.isfinite(table)):
        raise ValueError("`initial_embeddings` must be a finite float table [vocab_size, d]; "
                         f"got shape {table.shape}.")
    if vocab_size is not None and int(vocab_size) != table.shape[0]:
        raise ValueError(f"`vocab_size` = {vocab_size} but `initial_embeddings` has "
                         f"{table.shape[0]} rows; they must agree.")
    return table, table.shape[0]


def _check_input_shape(input_shape: Any, max_length: int | None) -> tuple[tuple, int]:
    try:
        shape = tuple(input_shape)
    except TypeError:
        raise ValueError(f"`input_shape` must be (L,); got {input_shape!r}.") from None
    if len(shape) != 1:
        raise ValueError(f"`input_shape` must be (L,) (token ids per sentence); got "
                         f"{input_shape!r}.")
    length = shape[0] if max_length is None else max_length
    if length is None:
        raise ValueError("`max_length` is required when `input_shape` is (None,).")
    length = _check_positive_int(length, "max_length (or input_shape[0])", 1)
    if shape[0] is not None and int(shape[0]) > length:
        raise ValueError(f"`input_shape` {shape} is longer than `max_length` {length}.")
    return shape, length


def _check_transformer(config: dict) -> str | None:
    if config["width"] % config["num_heads"]:
        return (f"'width' ({config['width']}) must be a multiple of 'num_heads' "
                f"({config['num_heads']})")
    return None


@ENCODERS.register("transformer", modality="text", check=_check_transformer, params={
    "width": Param(int, low=8, help="model width (token states and the sentence embedding)"),
    "num_layers": Param(int, low=0, help="pre-LN Transformer blocks (0: embeddings only)"),
    "num_heads": Param(int, low=1, help="attention heads (width must be a multiple)"),
    "dropout": Param(float, low=0.0, high=1.0, high_inclusive=False, tunable=True,
                     help="dropout rate; SimCSE's two views differ only by it"),
    "pooling": Param(str, choices=POOLINGS, help="mean over real tokens, or the [CLS] position"),
    "rezero": Param(bool, help="ReZero residual gates starting at 0 and zero-initialised "
                               "positions: the untrained encoder is the mean of its token "
                               "embeddings (after LayerNorm)"),
})
def text_transformer(input_shape: tuple = (32,), vocab_size: int | None = None,
                     width: int = 128, num_layers: int = 2, num_heads: int = 4,
                     dropout: float = 0.1, pooling: str = "mean",
                     initial_embeddings: Any = None, max_length: int | None = None,
                     rezero: bool = False, name: str = "text_transformer") -> keras.Model:
    """A small Transformer sentence encoder (see the module docstring).

    Args:
        input_shape: ``(L,)``, token ids per sentence (``(None,)`` with ``max_length``).
        vocab_size: rows of the token table (the tokenizer's ``vocab_size``); read from
            ``initial_embeddings`` when omitted.
        width: model width, a multiple of ``num_heads``; the output is ``[B, width]``.
        num_layers: Transformer blocks (0: embeddings, dropout, LayerNorm and pooling).
        num_heads: attention heads.
        dropout: rate, ``[0, 1)``; in training only.
        pooling: ``"mean"`` over real tokens or ``"cls"`` (first position).
        initial_embeddings: ``[vocab_size, d]`` start of the token table (e.g. wordllama's),
            projected linearly to ``width`` when ``d != width``; default: random normal
            (stddev 0.02) of width ``width``.
        max_length: rows of the position table (default ``input_shape[0]``); with
            ``input_shape=(None,)`` the model accepts any ``L <= max_length``.
        rezero: scale each residual branch by a learned gate that starts at 0 (ReZero,
            Bachlechner et al. 2021) and start the position table at 0: the untrained
            encoder then pools LayerNorm(token embeddings), the bag-of-tokens baseline,
            and training moves away from it.
        name: model name.

    Returns:
        A functional ``keras.Model``: ``int32 [B, L]`` -> ``float32 [B, width]``.
    """
    table, vocab_size = _check_table(initial_embeddings, vocab_size)
    input_shape, max_length = _check_input_shape(input_shape, max_length)
    width = _check_positive_int(width, "width")
    num_layers = _check_positive_int(num_layers, "num_layers", 0)
    num_heads = _check_positive_int(num_heads, "num_heads")
    if width % num_heads:
        raise ValueError(f"`width` ({width}) must be a multiple of `num_heads` ({num_heads}).")
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or \
            not 0.0 <= dropout < 1.0:
        raise ValueError(f"`dropout` must be a number in [0, 1); got {dropout!r}.")
    if pooling not in POOLINGS:
        raise ValueError(f"`pooling` must be one of {', '.join(POOLINGS)}; got {pooling!r}.")
    embed_dim = width if table is None else table.shape[1]

    ids = keras.Input(shape=input_shape, dtype="int32", name="token_ids")
    token_mask = TokenMask(name="token_mask")(ids)
    x = keras.layers.Embedding(
        vocab_size, embed_dim, embeddings_initializer=keras.initializers.RandomNormal(
            stddev=0.02), name="token_embedding")(ids)
    if embed_dim != width:
        x = keras.layers.Dense(width, use_bias=False, name="token_projection")(x)
    x = PositionEmbedding(max_length, initializer="zeros" if rezero else None,
                          name="position_embedding")(x)
    x = keras.layers.Dropout(dropout, name="embedding_dropout")(x)
    for i in range(num_layers):
        x = TransformerBlock(width, num_heads, 4 * width, dropout, rezero=bool(rezero),
                             name=f"block{i + 1}")(x, token_mask)
    x = keras.layers.LayerNormalization(epsilon=1e-6, name="final_norm")(x)
    outputs = MaskedPooling(pooling, name=f"{pooling}_pooling")(x, ids)
    model = keras.Model(ids, outputs, name=name)
    if table is not None:
        model.get_layer("token_embedding").embeddings.assign(table)
    return model


def mean_embedding_encoder(embeddings: Any, input_shape: tuple = (None,),
                           name: str = "mean_embedding") -> keras.Model:
    """The baseline: the mean of token embeddings over the real tokens (no training).

    Args:
        embeddings: a table ``[vocab_size, d]`` (e.g. wordllama's), or an encoder made by
            :func:`text_transformer`, whose current token table is copied (call it before
            training for the encoder's start).
        input_shape: ``(L,)`` or ``(None,)`` (any length).
        name: model name.

    Returns:
        A functional ``keras.Model`` ``int32 [B, L]`` -> ``float32 [B, d]`` with a frozen
        copy of the table.
    """
    if isinstance(embeddings, keras.Model):
        try:
            layer = embeddings.get_layer("token_embedding")
        except ValueError:
            raise ValueError("`embeddings` must be a table [vocab_size, d] or an encoder made "
                             "by text_transformer (with a 'token_embedding' layer); got model "
                             f"{embeddings.name!r}.") from None
        table = keras.ops.convert_to_numpy(layer.embeddings)
    else:
        table = embeddings
    table, vocab_size = _check_table(table, None)
    ids = keras.Input(shape=tuple(input_shape), dtype="int32", name="token_ids")
    emb = keras.layers.Embedding(vocab_size, table.shape[1], trainable=False,
                                 name="token_embedding")
    x = emb(ids)
    emb.embeddings.assign(table)
    outputs = MaskedPooling("mean", name="mean_pooling")(x, ids)
    return keras.Model(ids, outputs, name=name)
