"""A pretrained BERT-family sentence encoder: token ids ``int32 [B, L]`` -> ``float32 [B, d]``.

Unsupervised SimCSE (Gao et al. 2021, "SimCSE: Simple Contrastive Learning of Sentence
Embeddings") fine-tunes a *pretrained* BERT (Devlin et al. 2019): the positive pair is one
sentence encoded twice under two dropout masks, the negatives are the other sentences of
the batch (or the ones a sampler such as BatchSampler, Yang et al., puts there). This module
makes such a checkpoint the ``encoder`` of the SimCLR / MoCo frameworks:

* the backbone is keras-hub's ``BertBackbone`` (the Keras ecosystem's home for pretrained
  backbones; an optional extra: ``pip install "keras-hardneg[pretrained]"``), loaded with
  ``BertBackbone.from_preset(preset)`` from a local Hugging Face-format folder
  (``config.json`` with ``model_type: "bert"``, ``model.safetensors``) or a keras-hub preset
  folder, or -- online only -- a keras-hub preset name (the encoder only: the tokenizer
  reads a folder, so download the preset first). It runs under TensorFlow and JAX;
  keras-hub is imported only when an encoder is built;
* its inputs come from the ids alone: ``padding_mask = ids != 0`` (BERT's ``[PAD]`` is id
  0) and ``segment_ids = 0`` (one sentence), made by :class:`BertInputs`;
* the feed-forward activation is the checkpoint's: keras-hub's BertBackbone computes GELU
  with the tanh approximation (the original TensorFlow BERT's), while a Hugging Face config
  with ``hidden_act: "gelu"`` (all-MiniLM-L6-v2 among them) was trained with the exact erf
  GELU; the difference moved a tiny BERT's features by 3e-4, so the exact one is put back
  (:func:`_match_activation`);
* pooling over the real tokens (:class:`~keras_hardneg.encoders.text_transformer.MaskedPooling`):
  ``"mean"`` (sentence-transformers' default, and what all-MiniLM-L6-v2 was trained with) or
  ``"cls"`` (the ``[CLS]`` position; SimCSE's evaluation without its MLP).

The matching tokenizer is :func:`keras_hardneg.data.tokenizer.pretrained_tokenizer` (rows
``[CLS] tokens [SEP] 0 ...``); the ``text_file`` dataset uses it when its ``tokenizer`` key is
the same folder. :func:`check_preset` reads ``config.json`` and names what is wrong with a
folder in one line.

Example (a tiny random BERT written in Hugging Face format, as the tests do):
>>> import tempfile
>>> import numpy as np
>>> from keras_hardneg.data import pretrained_tokenizer
>>> folder = write_tiny_bert(tempfile.mkdtemp())
>>> tok = pretrained_tokenizer(folder)
>>> ids = tok.encode(["The cat sat on the mat.", "a dog"], max_length=12)
>>> enc = pretrained_text(input_shape=(None,), preset=folder, vocab_size=tok.vocab_size)
>>> tuple(enc(ids).shape)
(2, 16)
"""

from __future__ import annotations

import json
import os
from typing import Any

import keras
import numpy as np
from keras import ops

from keras_hardneg._keras_hub import import_keras_hub, is_preset_name
from keras_hardneg.encoders.text_transformer import POOLINGS, MaskedPooling
from keras_hardneg.registry import ENCODERS, Param

__all__ = ["BertInputs", "BertTokenStates", "SIMCSE_FINETUNE", "SUPPORTED_MODEL_TYPES", "check_preset",
           "FINETUNE_LOSS_DEFAULTS", "finetune_loss", "finetune_recipe", "keras_hub_available",
           "pretrained_text", "write_tiny_bert"]

#: ``model_type`` values of ``config.json`` this encoder loads (keras-hub's BertBackbone).
SUPPORTED_MODEL_TYPES = ("bert",)


def keras_hub_available() -> bool:
    """Whether keras-hub and safetensors can be imported (the optional extra)."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("keras_hub", "safetensors"))


def check_preset(preset: Any) -> dict[str, Any]:
    """``{"vocab_size", "hidden_size", "max_length", "source"}`` of a checkpoint, checked.

    A folder must hold ``config.json`` naming a BERT (Hugging Face format: ``model_type``
    ``"bert"``; keras-hub format: ``class_name`` ``"BertBackbone"``) and its weights
    (``model.safetensors`` or keras-hub's ``model.weights.h5``). A string that is not a
    path (no ``/`` and not an existing file) is taken as a keras-hub preset name (resolved,
    and downloaded, by keras-hub: only when online); its facts are then ``None``.

    Raises:
        ValueError: one line naming ``preset`` and what is allowed.
    """
    if not isinstance(preset, (str, os.PathLike)) or not os.fspath(preset):
        raise ValueError(f"`preset` must be a checkpoint folder (Hugging Face or keras-hub "
                         f"format) or a keras-hub preset name; got {preset!r}.")
    preset = os.fspath(preset)
    if is_preset_name(preset):
        return {"vocab_size": None, "hidden_size": None, "max_length": None,
                "source": "keras-hub preset"}
    if not os.path.isdir(preset):
        raise ValueError(f"`preset` {preset!r}: no such folder; pass a folder holding "
                         "config.json and model.safetensors (a Hugging Face BERT checkpoint) "
                         "or a keras-hub preset folder.")
    config_path = os.path.join(preset, "config.json")
    if not os.path.isfile(config_path):
        raise ValueError(f"`preset` {preset!r} has no config.json; a checkpoint folder holds "
                         "config.json and model.safetensors (Hugging Face format).")
    try:
        with open(config_path) as f:
            config = json.load(f)
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"`preset` {preset!r}: config.json is not readable JSON "
                         f"({err}).") from None
    if not isinstance(config, dict):
        raise ValueError(f"`preset` {preset!r}: config.json must be a JSON object.")
    if "class_name" in config:  # a keras-hub preset folder
        if config["class_name"] != "BertBackbone":
            raise ValueError(f"`preset` {preset!r}: architecture {config['class_name']!r} is "
                             "not supported; allowed: BertBackbone (keras-hub) or "
                             f"model_type {', '.join(SUPPORTED_MODEL_TYPES)} (Hugging Face).")
        inner = config.get("config", {})
        return {"vocab_size": inner.get("vocabulary_size"),
                "hidden_size": inner.get("hidden_dim"),
                "max_length": inner.get("max_sequence_length"), "source": "keras-hub folder"}
    model_type = config.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        arch = model_type or (config.get("architectures") or [None])[0]
        raise ValueError(f"`preset` {preset!r}: architecture {arch!r} (config.json "
                         f"model_type) is not supported; allowed: "
                         f"{', '.join(SUPPORTED_MODEL_TYPES)} (BERT-family checkpoints "
                         "keras-hub's BertBackbone loads).")
    if not os.path.isfile(os.path.join(preset, "model.safetensors")):
        raise ValueError(f"`preset` {preset!r} has no model.safetensors (the weights of a "
                         "Hugging Face checkpoint).")
    act = config.get("hidden_act", "gelu")
    if act not in _HF_GELU:
        raise ValueError(f"`preset` {preset!r}: hidden_act {act!r} (config.json) is not "
                         f"supported; allowed: {', '.join(sorted(_HF_GELU))}.")
    return {"vocab_size": config.get("vocab_size"), "hidden_size": config.get("hidden_size"),
            "max_length": config.get("max_position_embeddings"),
            "source": "Hugging Face folder", "exact_gelu": _HF_GELU[act]}


#: Hugging Face ``hidden_act`` values -> whether the GELU is exact (erf) or tanh-approximate.
_HF_GELU = {"gelu": True, "gelu_new": False, "gelu_pytorch_tanh": False, "gelu_fast": False}


def _exact_gelu(x):
    return keras.activations.gelu(x, approximate=False)


def _match_activation(backbone: Any, exact: bool) -> None:
    """Sets the feed-forward activation of every Transformer layer of a keras-hub
    BertBackbone to the exact GELU when the checkpoint was trained with it (keras-hub
    builds BERT with the tanh approximation). The functional backbone calls each Dense
    anew, so the activation it holds at call time is the one used."""
    if not exact:
        return
    for layer in backbone.transformer_layers:
        dense = getattr(layer, "_feedforward_intermediate_dense", None)
        if dense is None:
            raise ValueError("this keras-hub version's BertBackbone has no feed-forward Dense "
                             "where expected; cannot set the checkpoint's exact GELU.")
        dense.activation = _exact_gelu


@keras.saving.register_keras_serializable(package="keras_hardneg")
class BertInputs(keras.layers.Layer):
    """Token ids ``int32 [B, L]`` -> BERT's input dict: ``token_ids`` (the ids),
    ``padding_mask`` (``bool [B, L]``, ids != 0) and ``segment_ids`` (``int32 [B, L]``,
    zeros: one sentence per row)."""

    def call(self, ids):
        ids = ops.cast(ids, "int32")
        return {"token_ids": ids, "padding_mask": ops.not_equal(ids, 0),
                "segment_ids": ops.zeros_like(ids)}

    def compute_output_spec(self, ids):
        shape = tuple(ids.shape)
        return {"token_ids": keras.KerasTensor(shape, "int32"),
                "padding_mask": keras.KerasTensor(shape, "bool"),
                "segment_ids": keras.KerasTensor(shape, "int32")}


@keras.saving.register_keras_serializable(package="keras_hardneg")
class BertTokenStates(keras.layers.Layer):
    """A keras-hub ``BertBackbone``'s token states: BERT's input dict -> ``float32 [B, L, H]``
    (``sequence_output``), with what the checkpoint needs kept across save and load.

    keras-hub's ``BertBackbone.get_config`` records no activation, so a backbone rebuilt
    from a saved config computes the tanh-approximate GELU whatever the checkpoint was
    trained with; this layer records ``exact_gelu`` and sets the exact GELU again
    (:func:`_match_activation`) each time it is made, from a checkpoint or from a config.
    BERT's ``[CLS]`` pooler (``pooled_dense``) is unused by sentence pooling and kept
    frozen, so that an optimizer never sees variables without gradients.

    Args:
        backbone: a ``keras_hub.models.BertBackbone``, or its serialized config (keras-hub
            is imported then).
        exact_gelu: whether the feed-forward activation is the exact (erf) GELU.
    """

    def __init__(self, backbone: Any, exact_gelu: bool = False, **kwargs):
        super().__init__(**kwargs)
        if isinstance(backbone, dict):
            import_keras_hub()  # registers keras-hub's classes
            backbone = keras.saving.deserialize_keras_object(backbone)
        self.backbone = backbone
        self.exact_gelu = bool(exact_gelu)
        _match_activation(backbone, self.exact_gelu)
        backbone.get_layer("pooled_dense").trainable = False

    @property
    def trainable(self) -> bool:
        return keras.layers.Layer.trainable.fget(self)

    @trainable.setter
    def trainable(self, value: bool) -> None:  # ``model.trainable = True`` keeps the pooler off
        keras.layers.Layer.trainable.fset(self, value)
        if getattr(self, "backbone", None) is not None:
            self.backbone.get_layer("pooled_dense").trainable = False

    def call(self, inputs, training=None):
        return self.backbone(inputs, training=training)["sequence_output"]

    def compute_output_spec(self, inputs, training=None):
        shape = tuple(inputs["token_ids"].shape) + (self.backbone.hidden_dim,)
        return keras.KerasTensor(shape, self.compute_dtype)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(),
                "backbone": keras.saving.serialize_keras_object(self.backbone),
                "exact_gelu": self.exact_gelu}


@ENCODERS.register("pretrained_bert", modality="text", params={
    "preset": Param(str, help="pretrained checkpoint: a Hugging Face-format BERT folder "
                              "(config.json, model.safetensors, tokenizer.json/vocab.txt), a "
                              "keras-hub preset folder, or (online) a keras-hub preset name"),
    "pooling": Param(str, choices=POOLINGS, help="mean over real tokens, or the [CLS] position"),
    "dropout": Param(float, low=0.0, high=1.0, high_inclusive=False, default=None,
                     help="dropout rate (default: the checkpoint's, 0.1 for BERT); SimCSE's "
                          "two views differ only by it"),
}, check=lambda c: None if c["preset"] else "'preset' (a checkpoint folder) is required")
def pretrained_text(input_shape: tuple = (None,), preset: str | None = None,
                    vocab_size: int | None = None, pooling: str = "mean",
                    dropout: float | None = None, name: str = "pretrained_bert"
                    ) -> keras.Model:
    """A pretrained BERT-family backbone with pooling (see the module docstring).

    Args:
        input_shape: ``(L,)`` or ``(None,)``: the training length, checked against the
            checkpoint's ``max_position_embeddings``. The model's input is always
            ``(None,)``: any length up to that works with the same weights (positions are
            absolute and padding is masked), so the evaluation reads whole sentences
            (:data:`~keras_hardneg.modalities.text.ANY_LENGTH_EVALUATION_TOKENS`).
        preset: the checkpoint (:func:`check_preset`).
        vocab_size: the tokenizer's ``vocab_size`` (the run layer passes it); must equal the
            checkpoint's, else ``ValueError`` (a vocabulary/tokenizer mismatch).
        pooling: ``"mean"`` or ``"cls"``.
        dropout: overrides the checkpoint's dropout rate (``[0, 1)``).
        name: model name.

    Returns:
        A functional ``keras.Model`` ``int32 [B, L]`` -> ``float32 [B, hidden_size]``.
    """
    facts = check_preset(preset)
    if pooling not in POOLINGS:
        raise ValueError(f"`pooling` must be one of {', '.join(POOLINGS)}; got {pooling!r}.")
    if dropout is not None and (isinstance(dropout, bool) or not isinstance(
            dropout, (int, float)) or not 0.0 <= dropout < 1.0):
        raise ValueError(f"`dropout` must be a number in [0, 1) or None; got {dropout!r}.")
    input_shape = tuple(input_shape)
    if len(input_shape) != 1:
        raise ValueError(f"`input_shape` must be (L,) or (None,); got {input_shape!r}.")
    if facts["max_length"] and input_shape[0] is not None and \
            input_shape[0] > facts["max_length"]:
        raise ValueError(f"`input_shape` ({input_shape[0]} ids) exceeds the checkpoint's "
                         f"max_position_embeddings ({facts['max_length']}); use max_length <= "
                         f"{facts['max_length']}.")
    if vocab_size is not None and facts["vocab_size"] is not None and \
            int(vocab_size) != int(facts["vocab_size"]):
        raise ValueError(f"`preset` {os.fspath(preset)!r}: the tokenizer has {vocab_size} ids "
                         f"but the checkpoint's vocab_size is {facts['vocab_size']}; use the "
                         "tokenizer of the same checkpoint (data key 'tokenizer' = the "
                         "preset folder).")
    keras_hub = import_keras_hub()
    kwargs = {} if dropout is None else {"dropout": float(dropout)}
    backbone = keras_hub.models.BertBackbone.from_preset(os.fspath(preset), **kwargs)
    if vocab_size is not None and int(vocab_size) != int(backbone.vocabulary_size):
        raise ValueError(f"`preset` {os.fspath(preset)!r}: the tokenizer has {vocab_size} ids "
                         f"but the checkpoint's vocabulary has {backbone.vocabulary_size}; use "
                         "the tokenizer of the same checkpoint.")
    ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
    states = BertTokenStates(backbone, exact_gelu=facts.get("exact_gelu", False),
                             name="bert")
    x = states(BertInputs(name="bert_inputs")(ids))
    outputs = MaskedPooling(pooling, name=f"{pooling}_pooling")(x, ids)
    return keras.Model(ids, outputs, name=name)


def write_tiny_bert(folder: str | os.PathLike, vocab: list[str] | None = None,
                    hidden_size: int = 16, num_layers: int = 2, num_heads: int = 2,
                    intermediate_size: int = 32, max_length: int = 64, seed: int = 0) -> str:
    """Writes a tiny randomly initialised BERT in Hugging Face format (``config.json``,
    ``model.safetensors`` with BertModel's tensor names, ``vocab.txt``, ``tokenizer.json``)
    into ``folder`` and returns it: a checkpoint for tests and examples, no download.

    ``vocab`` defaults to ``[PAD] [UNK] [CLS] [SEP] [MASK]`` and a few lower-case words.
    Needs ``safetensors`` and ``tokenizers``.
    """
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    vocab = list(vocab or ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "cat",
                           "dog", "sat", "on", "mat", "man", "is", "playing", "guitar", "##s",
                           ".", ",", "and"])
    rng = np.random.default_rng(seed)
    h, f = hidden_size, intermediate_size

    def normal(*shape):
        return (0.2 * rng.standard_normal(shape)).astype("float32")

    w = {"embeddings.word_embeddings.weight": normal(len(vocab), h),
         "embeddings.position_embeddings.weight": normal(max_length, h),
         "embeddings.token_type_embeddings.weight": normal(2, h),
         "embeddings.LayerNorm.weight": 1 + normal(h), "embeddings.LayerNorm.bias": normal(h)}
    for i in range(num_layers):
        p = f"encoder.layer.{i}."
        for part in ("query", "key", "value"):
            w[f"{p}attention.self.{part}.weight"] = normal(h, h)
            w[f"{p}attention.self.{part}.bias"] = normal(h)
        w.update({f"{p}attention.output.dense.weight": normal(h, h),
                  f"{p}attention.output.dense.bias": normal(h),
                  f"{p}attention.output.LayerNorm.weight": 1 + normal(h),
                  f"{p}attention.output.LayerNorm.bias": normal(h),
                  f"{p}intermediate.dense.weight": normal(f, h),
                  f"{p}intermediate.dense.bias": normal(f),
                  f"{p}output.dense.weight": normal(h, f), f"{p}output.dense.bias": normal(h),
                  f"{p}output.LayerNorm.weight": 1 + normal(h),
                  f"{p}output.LayerNorm.bias": normal(h)})
    w["pooler.dense.weight"] = normal(h, h)
    w["pooler.dense.bias"] = normal(h)
    save_file(w, os.path.join(folder, "model.safetensors"))
    config = {"architectures": ["BertModel"], "model_type": "bert", "vocab_size": len(vocab),
              "hidden_size": h, "num_hidden_layers": num_layers,
              "num_attention_heads": num_heads, "intermediate_size": f,
              "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
              "attention_probs_dropout_prob": 0.1, "max_position_embeddings": max_length,
              "type_vocab_size": 2, "layer_norm_eps": 1e-12, "pad_token_id": 0}
    with open(os.path.join(folder, "config.json"), "w") as fh:
        json.dump(config, fh, indent=2)
    with open(os.path.join(folder, "vocab.txt"), "w", encoding="utf-8") as fh:
        fh.write("\n".join(vocab) + "\n")
    tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    tok.save(os.path.join(folder, "tokenizer.json"))
    return folder


#: Recipe keys of unsupervised SimCSE fine-tuning from a pretrained checkpoint (Gao et al.
#: 2021, Sec. 3 and Appendix A: dropout views, temperature 0.05, batch 64, learning rate
#: 3e-5 for BERT-base, sentences cut at 32 tokens), on top of the default text recipe.
SIMCSE_FINETUNE: dict[str, Any] = {
    "loss": {"temperature": 0.05},
    "optimizer": {"learning_rate": 3e-5},
    "batch_size": 64,
}

#: Loss keys of a fine-tuning run from a pretrained checkpoint, for the losses that take
#: them: SimCSE's temperature, and ``tau_plus`` 0 for the losses with a debiasing clamp
#: (debiased, hard, UnReMix). At t 0.05 a debiased estimator sits at its floor
#: ``N e^(-1/t)`` (no gradient) for every anchor whose positive beats its negatives by more
#: than ``t ln(1/tau_plus)`` (0.115 at tau_plus 0.1; still 0.46 at 1e-4); a pretrained
#: sentence encoder starts far beyond that (all-MiniLM-L6-v2: positives ~0.92, negatives
#: ~0.35), so any tau_plus above ~1e-5 leaves it unmoved (docs/notes/pretrained_text.md).
#: With tau_plus 0 the clamp cannot bind: ``hard`` is HCL's reweighting (beta) alone, and
#: ``debiased`` reduces to NT-Xent. Keys a recipe or flag gives win.
FINETUNE_LOSS_DEFAULTS: dict[str, Any] = {"temperature": 0.05, "tau_plus": 0.0}


def finetune_loss(name: str) -> dict[str, Any]:
    """The keys of :data:`FINETUNE_LOSS_DEFAULTS` that loss ``name`` takes (its other keys
    keep the loss's defaults).

    Example:
    >>> finetune_loss("hard")
    {'temperature': 0.05, 'tau_plus': 0.0}
    >>> finetune_loss("nt_xent")
    {'temperature': 0.05}
    """
    from keras_hardneg.registry import LOSSES

    entry = LOSSES.get(name)
    return {k: v for k, v in FINETUNE_LOSS_DEFAULTS.items() if entry.accepts(k)}


def finetune_recipe(preset: str, pooling: str = "mean",
                    loss: str | None = None) -> dict[str, Any]:
    """The recipe keys that make ``preset`` the encoder (and its tokenizer the data's) of
    an unsupervised SimCSE run (:data:`SIMCSE_FINETUNE`); merge them over a text recipe
    (``keras_hardneg.run.load_recipe(overrides=...)``). ``preset`` is made absolute when it
    is a folder. ``loss`` names another loss than the text recipe's NT-Xent, with its
    fine-tuning keys (:func:`finetune_loss`: t 0.05, ``tau_plus`` 0 where it has one).

    Example:
    >>> finetune_recipe("/ckpt")["encoder"]
    {'name': 'pretrained_bert', 'preset': '/ckpt', 'pooling': 'mean'}
    >>> finetune_recipe("/ckpt", loss="hard")["loss"]
    {'name': 'hard', 'temperature': 0.05, 'tau_plus': 0.0}
    """
    if os.path.isdir(os.fspath(preset)):
        preset = os.path.abspath(os.fspath(preset))
    out = {key: (dict(value) if isinstance(value, dict) else value)
           for key, value in SIMCSE_FINETUNE.items()}
    if loss is not None:
        out["loss"] = {"name": loss, **finetune_loss(loss)}
    out["encoder"] = {"name": "pretrained_bert", "preset": preset, "pooling": pooling}
    out["data"] = {"tokenizer": preset}
    return out
