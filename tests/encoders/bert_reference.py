"""An independent NumPy forward pass of a Hugging Face-format BERT checkpoint with mean
pooling, written from the BERT paper (Devlin et al. 2019) and the Transformer (Vaswani et
al. 2017): the reference the keras-hub encoder is checked against.

embeddings = LayerNorm(word[ids] + position[0..L) + token_type[0]); each layer (post-LN):
``x = LN(x + Attn(x))``, ``x = LN(x + W2 gelu(W1 x))`` with exact (erf) GELU and the padded
keys masked out of the softmax; the sentence embedding is the mean of the last layer's
states over the real tokens (ids != 0). Weights are read from ``model.safetensors`` by
their BertModel names (``[out, in]`` Dense matrices).
"""

from __future__ import annotations

import json
import os

import numpy as np
from scipy.special import erf


def _layer_norm(x, gamma, beta, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def _dense(x, w, prefix):
    return x @ w[prefix + ".weight"].T + w[prefix + ".bias"]


def bert_mean_features(folder: str, ids: np.ndarray) -> np.ndarray:
    """``float64 [B, hidden]``: mean-pooled last-layer states of the checkpoint in
    ``folder`` for ``ids`` ``[B, L]`` (0 = padding)."""
    from safetensors.numpy import load_file

    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    w = {k.removeprefix("bert."): v.astype(np.float64)
         for k, v in load_file(os.path.join(folder, "model.safetensors")).items()}
    eps = config.get("layer_norm_eps", 1e-12)
    heads = config["num_attention_heads"]
    ids = np.asarray(ids)
    b, length = ids.shape
    mask = ids != 0
    x = (w["embeddings.word_embeddings.weight"][ids]
         + w["embeddings.position_embeddings.weight"][:length][None]
         + w["embeddings.token_type_embeddings.weight"][0][None, None])
    x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    hidden = x.shape[-1]
    dh = hidden // heads
    bias = np.where(mask, 0.0, -1e9)[:, None, None, :]  # [B, 1, 1, L]
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}."

        def split(t):
            return t.reshape(b, length, heads, dh).transpose(0, 2, 1, 3)

        q = split(_dense(x, w, p + "attention.self.query"))
        k = split(_dense(x, w, p + "attention.self.key"))
        v = split(_dense(x, w, p + "attention.self.value"))
        scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(dh) + bias
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        probs = scores / scores.sum(-1, keepdims=True)
        ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(b, length, hidden)
        x = _layer_norm(x + _dense(ctx, w, p + "attention.output.dense"),
                        w[p + "attention.output.LayerNorm.weight"],
                        w[p + "attention.output.LayerNorm.bias"], eps)
        h = _dense(x, w, p + "intermediate.dense")
        h = 0.5 * h * (1.0 + erf(h / np.sqrt(2.0)))
        x = _layer_norm(x + _dense(h, w, p + "output.dense"),
                        w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps)
    m = mask[..., None].astype(np.float64)
    return (x * m).sum(1) / np.maximum(m.sum(1), 1.0)
