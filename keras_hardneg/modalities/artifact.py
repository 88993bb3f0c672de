"""A modality's artifacts: the exported signature, the model card's input lines, the preset.

:class:`Artifact` is one of the three interfaces a :class:`~keras_hardneg.modalities.Modality`
is made of. The export layer (``keras_hardneg.export``, above this package) asks it what an
exported encoder, a preset or a model card of the modality is: the SavedModel's input
signature (:meth:`Artifact.input_signature`, :meth:`Artifact.resolve_signature`,
:meth:`Artifact.build_encoder`, :meth:`Artifact.export_arguments`), the model card's
defaults, checks and wording (:meth:`Artifact.card_defaults`, :meth:`Artifact.fill_card`,
:meth:`Artifact.card_problems`, :meth:`Artifact.card_input_lines`,
:meth:`Artifact.card_usage`), how a loaded export takes its inputs
(:meth:`Artifact.prepare_export_input`), and what a preset records
(:meth:`Artifact.preset_spec`, :meth:`Artifact.example_input`,
:meth:`Artifact.rebuild_spec`). The defaults describe an input by its signature alone
(``{name: (full shape, dtype)}``), one tensor or a dict of them.

Example:
>>> art = Artifact()
>>> art.build_input({"a": ((None, 2), "float32"), "b": ((None,), "int32")})["a"].shape
(1, 2)
>>> "features = encoder(x)" in preset_usage("x")
True
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["Artifact", "DEFAULT_INPUT_RANGE", "DEFAULT_PREPROCESSING", "preset_usage"]

#: A model card's defaults are an image card's (the default modality): pixel values in
#: [0, 1] and this preprocessing line. A card of another modality whose fields keep these
#: defaults gets the modality's (:meth:`Artifact.card_defaults`).
DEFAULT_INPUT_RANGE = (0.0, 1.0)
#: A model card's default preprocessing line (an image card's).
DEFAULT_PREPROCESSING = (
    "None required: pass RGB images as float32 in [0, 1]; any normalization "
    "is done inside the encoder."
)


def preset_usage(call: str) -> list[str]:
    """The model card's lines on the Keras-native load (any backend, trainable), shown first
    in every card's usage (:meth:`Artifact.card_usage`); ``call`` names the input."""
    return [
        "Keras-native, under TensorFlow or JAX (no TensorFlow needed), trainable: the Keras "
        "preset in `preset/` (`config.json` + `model.weights.h5`; a zoo entry's is "
        "`khn.zoo.load(NAME)`).",
        "",
        "```python",
        "import keras_hardneg as khn",
        "encoder = khn.export.load_preset(export_dir)        # keras.Model, fine-tunable",
        f"features = encoder({call})",
        "```",
        "",
    ]


class Artifact:
    """What an exported encoder, a preset and a model card of a modality are.

    Attributes:
        input_description: how ``export_encoder``'s error names the exported input
            ("images (input_shape)").
        signature_form: how ``input_signature`` is written for this modality
            (``export_encoder``'s error).
        reads_tokens: whether the export reads token ids that its tokenizer makes from
            strings (``SavedModelEncoder.tokenizer`` / ``embed_sentences``).
        batch_axis: the model card's name for the output's batch axis (``[batch, F]``).
        axis_names: the model card's names of each input's unknown axes:
            ``{input: ("batch", "L")}`` (default: the batch axis of a one-tensor input;
            ``?`` where none is named).
    """

    name = "any"
    input_description = "its input signature"
    signature_form = ""
    reads_tokens = False
    batch_axis = "batch"
    axis_names: dict[str, Any] = {}

    # ------------------------------------------------------------------ export
    def export_spec(self, encoder: Any, x: Any, run_dir: str | None = None) -> dict[str, Any]:
        """Keyword arguments of :func:`keras_hardneg.export.export_encoder` for this data
        (``input_shape`` or ``input_signature``, ``assets``): :meth:`export_arguments` of
        :meth:`preset_spec`."""
        return self.export_arguments(*self.preset_spec(encoder, x, run_dir))

    def preset_spec(self, encoder: Any, x: Any, run_dir: str | None = None
                    ) -> tuple[dict[str, Any], dict[str, str] | None]:
        """``(input_spec, assets)`` of :func:`keras_hardneg.export.save_preset` for this
        data: images ``{"input_shape": [H, W, C]}``, graphs ``{"feature_dim": F}``, text
        ``{"max_length": L}`` with the tokenizer as an asset (:meth:`run_assets`)."""
        return self.default_preset_spec(encoder), self.run_assets(run_dir)

    # ---------------------------------------------------------------- signature
    def card_defaults(self) -> dict[str, Any]:
        """A model card's defaults for this modality: ``input_dtype``, ``input_range``,
        ``preprocessing`` (a card created with the image defaults gets these)."""
        return {"input_dtype": None, "input_range": None,
                "preprocessing": "None: pass the tensors of the input signature."}

    def input_signature(self, value: Any) -> dict[str, tuple] | None:
        """``{name: (full shape, dtype)}`` when ``value`` (``export_encoder``'s
        ``input_signature``) describes this modality's input, ``None`` when it describes
        another's. Raises ``ValueError`` when it is this modality's form but wrong."""
        return None

    def resolve_signature(self, encoder: Any, signature: dict[str, tuple] | None,
                          input_shape: Any = None) -> dict[str, tuple]:
        """The exported signature: ``signature`` checked against ``encoder`` (and fixed
        where the encoder fixes what it leaves open)."""
        if signature is None:
            raise ValueError(f"export_encoder: a {self.name} encoder needs input_signature "
                             f"({self.signature_form}).")
        return signature

    def build_input(self, signature: dict[str, tuple]) -> Any:
        """A smallest valid input of ``signature`` (one example), to build an unbuilt
        encoder before export: zeros, unknown axes of length 1."""
        arrays = {name: np.zeros([1 if d is None else d for d in shape], dtype)
                  for name, (shape, dtype) in signature.items()}
        return next(iter(arrays.values())) if len(arrays) == 1 else arrays

    def build_encoder(self, encoder: Any, signature: dict[str, tuple]) -> None:
        """Builds an unbuilt ``encoder`` for ``signature`` (called once on
        :meth:`build_input`)."""
        encoder(self.build_input(signature), training=False)

    def fill_card(self, card: Any, signature: dict[str, tuple], asset_names: list[str],
                  encoder: Any) -> None:
        """Fills in (and checks) the fields of ``card`` that describe the exported input:
        ``input_signature`` (JSON form) by default."""
        from keras_hardneg.modalities.signatures import signature_to_json

        json_signature = signature_to_json(signature)
        if card.input_signature is not None and card.input_signature != json_signature:
            raise ValueError(f"export_encoder: model_card.input_signature="
                             f"{card.input_signature} but the exported input signature is "
                             f"{json_signature}")
        card.input_signature = json_signature

    def card_problems(self, card: Any) -> list[str]:
        """What is wrong with ``card``'s input fields for this modality (one string each):
        by default the input is described by ``input_signature`` alone."""
        problems = []
        for field in ("input_shape", "input_dtype", "input_range"):
            if getattr(card, field) is not None:
                problems.append(f"{field} must be None for modality {self.name!r} "
                                "(its inputs are described by input_signature)")
        if card.input_signature is not None:
            problems += self._json_signature_problems(card)
        problems += self._max_length_problems(card)
        return problems

    def _max_length_problems(self, card: Any) -> list[str]:
        problems = []
        if card.max_length is not None:
            problems.append(f"max_length must be None for modality {self.name!r}")
            if not (isinstance(card.max_length, int) and not isinstance(card.max_length, bool)
                    and card.max_length > 0):
                problems.append("max_length must be a positive int or None, "
                                f"got {card.max_length!r}")
        return problems

    def _json_signature_problems(self, card: Any) -> list[str]:
        """Problems of a card's ``input_signature`` (JSON form)."""
        from keras_hardneg.modalities.signatures import signature_from_json

        signature = card.input_signature
        if not isinstance(signature, dict) or not all(
                isinstance(v, dict) and set(v) == {"shape", "dtype"}
                and isinstance(v["shape"], (list, tuple)) and isinstance(v["dtype"], str)
                for v in signature.values()):
            return [f"input_signature must map names to {{'shape': [...], 'dtype': str}}, "
                    f"got {signature!r}"]
        try:
            return self.signature_problems(signature_from_json(signature), card)
        except ValueError as e:
            return [str(e)]

    def signature_problems(self, signature: dict[str, tuple], card: Any) -> list[str]:
        """Problems of a card's signature ``{name: (full shape, dtype)}``: it must be what
        ``export_encoder`` makes of this modality's ``input_signature`` (one input: one
        example's ``(shape, dtype)``; several: the dict). ``ValueError`` reads as one."""
        from keras_hardneg.modalities.signatures import normalize_input_signature

        value: Any = signature
        if len(signature) == 1:
            ((shape, dtype),) = signature.values()
            if not shape or shape[0] is not None:
                return [f"input_signature must have a batch axis None first, got {signature!r}"]
            value = (shape[1:], dtype)
        got, _ = normalize_input_signature(value, prefer=self.name)
        if got != self.name:
            return [f"input_signature describes a {got} input, but modality is {self.name!r}"]
        return []

    def card_input_lines(self, card: Any) -> list[str]:
        """The model card's "Input contract" lines: the signature's table by default."""
        if card.input_signature is None:
            return ["- input signature: not recorded"]
        lines = ["| input | shape | dtype |", "| --- | --- | --- |"]
        single = len(card.input_signature) == 1  # its first axis is the batch
        for name, spec in card.input_signature.items():
            axes = self.axis_names.get(name, ("batch",) if single else ())
            dims = [(axes[i] if i < len(axes) else "?") if d is None else str(d)
                    for i, d in enumerate(spec["shape"])]
            lines.append(f"| `{name}` | `[{', '.join(dims)}]` | {spec['dtype']} |")
        return lines + [""]

    def card_usage(self, card: Any) -> list[str]:
        """The model card's "Usage" lines (Markdown)."""
        return preset_usage("inputs") + [
            "Reusable TF2 SavedModel (TF Hub format). `serving_default` signature: inputs "
            "as the input contract below, output `features`.",
            "",
            "```python",
            "import keras_hardneg as khn                         # Keras 3",
            "encoder = khn.export.load_encoder(export_dir)       # keras Layer (TensorFlow backend)",
            "```",
        ]

    def prepare_export_input(self, inputs: Any, card: Any, where: str) -> Any:
        """``inputs`` of a loaded export (``SavedModelEncoder``) as its signature's dtypes
        (TensorFlow tensors)."""
        import tensorflow as tf

        signature = card.input_signature or {}
        if len(signature) == 1:
            return tf.cast(inputs, next(iter(signature.values()))["dtype"])
        if not isinstance(inputs, dict) or not set(signature) <= set(inputs):
            got = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
            raise ValueError(f"{where}: this {self.name} encoder takes a dict with the keys "
                             f"{list(signature)}; got {got}")
        return {name: tf.cast(inputs[name], spec["dtype"]) for name, spec in signature.items()}

    def output_batch(self, input_shape: Any) -> Any:
        """The batch size of a loaded export's output for inputs of ``input_shape``."""
        return input_shape[0]

    def default_preset_spec(self, encoder: Any) -> dict[str, Any]:
        """What ``save_preset`` records of the input when its ``input_spec`` leaves it out."""
        return {}

    def complete_preset_card(self, card: dict[str, Any], spec: dict[str, Any]) -> None:
        """Fills the fields of a preset's card (a dict) that its ``spec`` knows."""

    def example_input(self, input_spec: dict[str, Any], seed: int = 0) -> Any:
        """A small random input as ``input_spec`` (a preset's ``"input"``) describes it, for
        building a subclassed encoder and comparing two encoders' features."""
        raise NotImplementedError(f"modality {self.name!r} gives no example input")

    def export_arguments(self, input_spec: dict[str, Any],
                         assets: dict[str, str] | None = None) -> dict[str, Any]:
        """``export_encoder``'s keyword arguments for a preset's ``input_spec`` and
        ``assets`` (``{name: path}``)."""
        raise NotImplementedError(f"modality {self.name!r} has no SavedModel export")

    def rebuild_spec(self, card: Any, export_dir: str) -> dict[str, Any]:
        """What rebuilding the encoder of a SavedModel export needs, from its card:
        ``{"input_spec": ..., "input_shape": ..., "assets": ..., "context": ...}``
        (``context``: :meth:`encoder_context`'s arguments)."""
        raise NotImplementedError(f"modality {self.name!r}: a preset cannot be made "
                                  "from its SavedModel export")

    def input_mismatch(self, expected: tuple, x: Any, where: str) -> str | None:
        """Why data ``x`` does not fit an encoder that takes ``expected`` (one line), or
        ``None``."""
        return None

