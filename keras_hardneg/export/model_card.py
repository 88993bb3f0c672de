"""Model card for an exported encoder: one dataclass, JSON + Markdown renderings.

An export directory written by :func:`keras_hardneg.export.export_encoder` holds,
next to ``saved_model.pb``::

    model_card.json   # machine-readable: ModelCard.to_json()
    model_card.md     # human-readable:   ModelCard.to_markdown()

Three modalities (``modality``): ``"image"`` (the default; ``input_shape``, float32 in
[0, 1], kNN / linear-probe accuracies), ``"graph"`` and ``"text"`` (``input_signature``:
the exported tensors by name; text also ``max_length`` and the ``assets`` holding its
tokenizer). ``metrics`` holds modality-specific figures as a (possibly nested) dict of
finite numbers, e.g. ``{"svm_accuracy": 0.89, "svm_accuracy_std": 0.02}`` for graphs or
``{"sts": {"STS12": 0.61, "avg": 0.7}}`` for text.

Cards are written with ``"format": "keras_hardneg.model_card/2"``; cards of format ``/1``
(wave 1: images only, flat ``metrics``) still load, as image cards.

Example:

>>> card = ModelCard(name="simclr-r18-cifar10", framework="SimCLR",
...                  loss="HardNegativeContrastiveLoss",
...                  hyperparameters={"temperature": 0.5, "tau_plus": 0.1, "beta": 1.0},
...                  data="CIFAR-10 train (labels unused)", epochs=200,
...                  knn_accuracy=0.83, linear_probe_accuracy=0.86)
>>> ModelCard.from_json(card.to_json()) == card
True
>>> text = ModelCard(name="simcse", modality="text", max_length=32,
...                  metrics={"sts": {"STS12": 0.61, "avg": 0.7}})
>>> "| STS12 | 0.61 |" in text.to_markdown()
True
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import os
from typing import Any

from keras_hardneg.export.signatures import (
    MODALITIES,
    TEXT_INPUT,
    normalize_input_signature,
    signature_from_json,
)

__all__ = ["ModelCard", "MODEL_CARD_JSON", "MODEL_CARD_MD", "CARD_FORMAT", "CARD_FORMATS",
           "TOKENIZER_ASSET", "load_model_card"]

#: File names inside an export directory.
MODEL_CARD_JSON = "model_card.json"
MODEL_CARD_MD = "model_card.md"
#: Identifies our card schema inside the JSON (``"format"`` key); what cards are written with.
CARD_FORMAT = "keras_hardneg.model_card/2"
#: Formats that load: ``/1`` (wave 1, images only) and ``/2`` (modalities).
CARD_FORMATS = ("keras_hardneg.model_card/1", CARD_FORMAT)
#: Asset file name of a text export's tokenizer (a ``tokenizers`` JSON file).
TOKENIZER_ASSET = "tokenizer.json"

_INPUT_RANGE = (0.0, 1.0)
_IMAGE_PREPROCESSING = (
    "None required: pass RGB images as float32 in [0, 1]; any normalization "
    "is done inside the encoder."
)
_PREPROCESSING = {
    "image": _IMAGE_PREPROCESSING,
    "graph": ("None: pass a padded batch of graphs (the tensors of the input signature; "
              "padding nodes and edges have mask 0, padding nodes belong to graph B)."),
    "text": (f"Token ids from the tokenizer in assets/{TOKENIZER_ASSET} (its special tokens "
             "added), truncated to max_length and right-padded with 0; "
             "load_encoder(dir).embed_sentences(sentences) does this."),
}
#: Text preprocessing when the export ships no tokenizer.
TEXT_PREPROCESSING_NO_TOKENIZER = (
    "Token ids (0 = padding, right-padded to max_length) from the tokenizer the encoder "
    "was trained with; it is not shipped with this export."
)


@dataclasses.dataclass
class ModelCard:
    """Metadata describing an exported encoder.

    Fields filled in by ``export_encoder`` (leave them ``None``): ``input_shape``
    (images), ``input_signature`` (graph, text), ``max_length`` (text, when the
    signature fixes ``L``), ``assets``, ``output_dim``, ``library_version``,
    ``tensorflow_version``, ``keras_version``, ``created``. If you set ``input_shape``,
    ``input_signature``, ``max_length`` or ``output_dim`` yourself, the export checks
    them against the encoder; ``modality`` must match the exported input.

    Attributes:
        name: short identifier of the model.
        description: free text.
        modality: ``"image"`` (default), ``"graph"`` or ``"text"``.
        framework: training framework, e.g. ``"SimCLR"``, ``"MoCo-v2"``.
        loss: loss name, e.g. ``"HardNegativeContrastiveLoss"``.
        hyperparameters: JSON-serializable dict (temperature, tau_plus, beta, batch size, ...).
        data: training data description, e.g. ``"CIFAR-10 train, 50k images"``.
        epochs: number of pre-training epochs (int >= 0) or ``None``.
        knn_accuracy: measured kNN top-1 accuracy in [0, 1], or ``None`` (images).
        linear_probe_accuracy: measured linear-probe top-1 accuracy in [0, 1], or ``None``.
        evaluation: how the accuracies / metrics were measured (dataset, k, protocol).
        metrics: further measured metrics, name -> finite float or a nested dict of them
            (e.g. ``{"sts": {"STS12": 0.6, "avg": 0.7}}``).
        input_shape: images: ``(H, W, 3)``; ``H``/``W`` may be ``None`` (any size).
            ``None`` for graph and text.
        input_signature: graph and text: the exported input tensors,
            ``{name: {"shape": [...], "dtype": "..."}}`` with full shapes (``None`` =
            any size; see ``keras_hardneg.export.signatures``). ``None`` for images.
        max_length: text: the number ``L`` of token ids per sentence the encoder was
            trained with (strings are truncated / padded to it). ``None`` otherwise.
        input_dtype: images: always ``"float32"``; ``None`` for graph and text (the
            dtypes are in ``input_signature``).
        input_range: images: always ``(0.0, 1.0)``: RGB pixel values scaled to [0, 1];
            ``None`` for graph and text.
        preprocessing: what callers must do to their data (defaults per modality).
        assets: file names under the export's ``assets/`` (e.g. ``["tokenizer.json"]``).
        output_dim: feature dimension ``F`` of the output ``[B, F]``.
        library_version / tensorflow_version / keras_version: provenance.
        created: ISO-8601 timestamp with time zone (UTC by default).
        license: license of the weights.
    """

    name: str = "encoder"
    description: str = ""
    modality: str = "image"
    framework: str | None = None
    loss: str | None = None
    hyperparameters: dict[str, Any] = dataclasses.field(default_factory=dict)
    data: str | None = None
    epochs: int | None = None
    knn_accuracy: float | None = None
    linear_probe_accuracy: float | None = None
    evaluation: str | None = None
    metrics: dict[str, Any] = dataclasses.field(default_factory=dict)
    input_shape: tuple | None = None
    input_signature: dict[str, Any] | None = None
    max_length: int | None = None
    input_dtype: str | None = "float32"
    input_range: tuple | None = _INPUT_RANGE
    preprocessing: str = _IMAGE_PREPROCESSING
    assets: list[str] = dataclasses.field(default_factory=list)
    output_dim: int | None = None
    library_version: str | None = None
    tensorflow_version: str | None = None
    keras_version: str | None = None
    created: str | None = None
    license: str | None = None

    # ------------------------------------------------------------------ validation
    def __post_init__(self):
        # Normalize JSON lists back to tuples so that round trips compare equal.
        if isinstance(self.input_shape, list):
            self.input_shape = tuple(self.input_shape)
        if isinstance(self.input_range, list):
            self.input_range = tuple(self.input_range)
        if isinstance(self.assets, tuple):
            self.assets = list(self.assets)
        if self.modality in ("graph", "text"):
            # The image defaults do not apply; the dtypes are in input_signature.
            if self.input_dtype == "float32":
                self.input_dtype = None
            if self.input_range is not None and tuple(self.input_range) == _INPUT_RANGE:
                self.input_range = None
            if self.preprocessing == _IMAGE_PREPROCESSING:
                self.preprocessing = _PREPROCESSING[self.modality]

    def validate(self) -> "ModelCard":
        """Checks every field; raises ``ValueError`` listing all problems. Returns self."""
        problems = []

        def is_int(x):
            return isinstance(x, int) and not isinstance(x, bool)

        if not isinstance(self.name, str) or not self.name.strip():
            problems.append("name must be a non-empty string")
        for field in ("description", "preprocessing"):
            if not isinstance(getattr(self, field), str):
                problems.append(f"{field} must be a string")
        for field in ("framework", "loss", "data", "evaluation", "library_version",
                      "tensorflow_version", "keras_version", "license"):
            value = getattr(self, field)
            if value is not None and not isinstance(value, str):
                problems.append(f"{field} must be a string or None, got {value!r}")
        if not isinstance(self.hyperparameters, dict):
            problems.append("hyperparameters must be a dict")
        else:
            try:
                json.dumps(self.hyperparameters, allow_nan=False)
            except (TypeError, ValueError) as e:
                problems.append(f"hyperparameters must be JSON-serializable ({e})")
        if self.epochs is not None and (not is_int(self.epochs) or self.epochs < 0):
            problems.append(f"epochs must be an int >= 0 or None, got {self.epochs!r}")
        for field in ("knn_accuracy", "linear_probe_accuracy"):
            value = getattr(self, field)
            if value is None:
                continue
            if (not isinstance(value, (int, float)) or isinstance(value, bool)
                    or not 0.0 <= float(value) <= 1.0):
                problems.append(f"{field} must be a number in [0, 1] or None, got {value!r}")
        if not isinstance(self.metrics, dict):
            problems.append("metrics must be a dict name -> float (or a nested dict of them)")
        else:
            problems += _metric_problems(self.metrics, "metrics")
        if self.modality not in MODALITIES:
            problems.append(f"modality must be one of {list(MODALITIES)}, "
                            f"got {self.modality!r}")
        elif self.modality == "image":
            if self.input_shape is not None:
                shape = self.input_shape
                if (not isinstance(shape, tuple) or len(shape) != 3 or shape[2] != 3
                        or not all(d is None or (is_int(d) and d > 0) for d in shape)):
                    problems.append("input_shape must be (H, W, 3) with positive ints or "
                                    f"None, got {shape!r}")
            if self.input_dtype != "float32":
                problems.append(f"input_dtype must be 'float32', got {self.input_dtype!r}")
            if self.input_range is None or tuple(self.input_range) != _INPUT_RANGE:
                problems.append(f"input_range must be (0.0, 1.0), got {self.input_range!r}")
            for field in ("input_signature", "max_length"):
                if getattr(self, field) is not None:
                    problems.append(f"{field} must be None for modality 'image' "
                                    "(images are described by input_shape)")
        else:
            for field in ("input_shape", "input_dtype", "input_range"):
                if getattr(self, field) is not None:
                    problems.append(f"{field} must be None for modality {self.modality!r} "
                                    "(its inputs are described by input_signature)")
            if self.input_signature is not None:
                problems += _signature_problems(self.input_signature, self.modality,
                                                self.max_length)
            if self.modality == "graph" and self.max_length is not None:
                problems.append("max_length must be None for modality 'graph'")
            if self.max_length is not None and not (is_int(self.max_length)
                                                    and self.max_length > 0):
                problems.append("max_length must be a positive int or None, "
                                f"got {self.max_length!r}")
        if (not isinstance(self.assets, list)
                or not all(_is_asset_name(a) for a in self.assets)):
            problems.append("assets must be a list of plain file names (no '/', not starting "
                            f"with '.'), got {self.assets!r}")
        if self.output_dim is not None and (not is_int(self.output_dim) or self.output_dim <= 0):
            problems.append(f"output_dim must be a positive int or None, got {self.output_dim!r}")
        if self.created is not None:
            try:
                stamp = datetime.datetime.fromisoformat(self.created)
                if stamp.tzinfo is None:
                    problems.append(f"created must include a time zone, got {self.created!r}")
            except (TypeError, ValueError):
                problems.append(f"created must be an ISO-8601 timestamp, got {self.created!r}")
        if problems:
            raise ValueError("Invalid ModelCard: " + "; ".join(problems))
        return self

    # ------------------------------------------------------------------ JSON
    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (tuples become lists), with a ``"format"`` key."""
        d = dataclasses.asdict(self)
        d["input_shape"] = None if self.input_shape is None else list(self.input_shape)
        d["input_range"] = None if self.input_range is None else list(self.input_range)
        return {"format": CARD_FORMAT, **d}

    def to_json(self, indent: int = 2) -> str:
        """Validates, then serializes to a JSON string (keys in field order)."""
        self.validate()
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False) + "\n"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ModelCard":
        """Inverse of :meth:`to_dict`; validates. Unknown keys raise ``ValueError``.

        Accepts the formats of :data:`CARD_FORMATS`; a ``/1`` card (wave 1) is an image
        card and may not carry the fields added in ``/2``.
        """
        if not isinstance(d, dict):
            raise ValueError(f"Model card must be a JSON object, got {type(d).__name__}")
        d = dict(d)
        fmt = d.pop("format", None)
        if fmt not in CARD_FORMATS:
            raise ValueError(f"Model card format is {fmt!r}, expected one of "
                             f"{list(CARD_FORMATS)}")
        known = {f.name for f in dataclasses.fields(cls)}
        if fmt == CARD_FORMATS[0]:
            known -= {"modality", "input_signature", "max_length", "assets"}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"Model card has unknown fields: {unknown}")
        return cls(**d).validate()

    @classmethod
    def from_json(cls, text: str) -> "ModelCard":
        """Parses a string written by :meth:`to_json`; raises ``ValueError`` if invalid."""
        try:
            d = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"Model card is not valid JSON: {e}") from None
        return cls.from_dict(d)

    # ------------------------------------------------------------------ Markdown
    def to_markdown(self) -> str:
        """Human-readable card (Markdown), including how to load the model."""
        self.validate()

        def fmt(x, missing="not recorded"):
            return missing if x is None or x == "" else str(x)

        def pct(x):
            return "not measured" if x is None else f"{100.0 * x:.2f}%"

        lines = [
            f"# {self.name}",
            "",
            self.description
            or f"Self-supervised {self.modality} encoder exported by keras-hardneg.",
            "",
            "## Usage",
            "",
        ]
        lines += _USAGE[self.modality](self)
        lines += ["", "## Input contract", ""]
        if self.modality == "image":
            h, w = (self.input_shape or (None, None, 3))[:2]
            lines += [
                f"- shape: `[batch, {fmt(h, 'H')}, {fmt(w, 'W')}, 3]`",
                f"- dtype: `{self.input_dtype}`",
                f"- value range: `[{self.input_range[0]}, {self.input_range[1]}]` (RGB; what "
                "else is read, e.g. 0-255 pixels, the preprocessing line says)",
            ]
        else:
            if self.input_signature is None:
                lines.append("- input signature: not recorded")
            else:
                lines += ["| input | shape | dtype |", "| --- | --- | --- |"]
                for name, spec in self.input_signature.items():
                    dims = [_axis_name(name, i) if d is None else str(d)
                            for i, d in enumerate(spec["shape"])]
                    lines.append(f"| `{name}` | `[{', '.join(dims)}]` | {spec['dtype']} |")
                lines.append("")
            if self.modality == "text":
                lines.append(f"- max_length (L): {fmt(self.max_length)}")
        if self.assets:
            lines.append("- assets: " + ", ".join(f"`assets/{a}`" for a in self.assets))
        batch = "B" if self.modality == "graph" else "batch"
        lines += [
            f"- preprocessing: {self.preprocessing}",
            f"- output: `[{batch}, {fmt(self.output_dim, 'F')}]` float32 features",
            "",
            "## Training",
            "",
            f"- framework: {fmt(self.framework)}",
            f"- loss: {fmt(self.loss)}",
            f"- data: {fmt(self.data)}",
            f"- epochs: {fmt(self.epochs)}",
        ]
        if self.hyperparameters:
            lines += ["", "| hyper-parameter | value |", "| --- | --- |"]
            lines += [f"| {k} | {json.dumps(v)} |" for k, v in self.hyperparameters.items()]
        lines += [
            "",
            "## Evaluation",
            "",
        ]
        for label, value in (("kNN accuracy", self.knn_accuracy),
                             ("linear-probe accuracy", self.linear_probe_accuracy)):
            if self.modality == "image" or value is not None:
                lines.append(f"- {label}: {pct(value)}")
        nested = []
        for k, v in self.metrics.items():
            if isinstance(v, dict):
                nested.append((k, v))
            else:
                lines.append(f"- {k}: {v:.6g}")
        if not self.metrics and self.modality != "image":
            lines.append("- metrics: not measured")
        for k, v in nested:
            lines += ([""] if lines[-1] else []) + [f"| {k} | value |", "| --- | --- |"]
            lines += [f"| {name} | {value:.6g} |" for name, value in _flatten(v)]
        if nested and self.evaluation:
            lines.append("")
        if self.evaluation:
            lines.append(f"- protocol: {self.evaluation}")
        lines += [
            "",
            "## Provenance",
            "",
            f"- keras-hardneg: {fmt(self.library_version)}",
            f"- TensorFlow: {fmt(self.tensorflow_version)}; Keras: {fmt(self.keras_version)}",
            f"- created: {fmt(self.created)}",
            f"- license: {fmt(self.license)}",
            "",
            "Machine-readable metadata: `model_card.json`.",
            "",
        ]
        return "\n".join(lines)


def _metric_problems(metrics, where):
    problems = []
    for k, v in metrics.items():
        if not isinstance(k, str):
            problems.append(f"{where} keys must be strings, got {k!r}")
        elif isinstance(v, dict):
            problems += _metric_problems(v, f"{where}[{k!r}]")
        elif (not isinstance(v, (int, float)) or isinstance(v, bool)
              or not math.isfinite(v)):
            problems.append(f"{where}[{k!r}] must be a finite number or a dict of them, "
                            f"got {v!r}")
    return problems


def _flatten(metrics, prefix=""):
    for k, v in metrics.items():
        if isinstance(v, dict):
            yield from _flatten(v, f"{prefix}{k} / ")
        else:
            yield f"{prefix}{k}", v


def _is_asset_name(name):
    return (isinstance(name, str) and name.strip() == name and name not in ("", ".", "..")
            and not name.startswith(".") and "/" not in name and "\\" not in name)


def _signature_problems(signature, modality, max_length):
    """Problems of a card's ``input_signature`` (JSON form) for ``modality``."""
    where = "input_signature"
    if not isinstance(signature, dict) or not all(
            isinstance(v, dict) and set(v) == {"shape", "dtype"}
            and isinstance(v["shape"], (list, tuple)) and isinstance(v["dtype"], str)
            for v in signature.values()):
        return [f"{where} must map names to {{'shape': [...], 'dtype': str}}, "
                f"got {signature!r}"]
    try:
        sig = signature_from_json(signature)
        if modality == "graph":
            got, _ = normalize_input_signature(sig)
        else:
            shape, dtype = sig.get(TEXT_INPUT, ((), None))
            if set(sig) != {TEXT_INPUT} or len(shape) != 2 or shape[0] is not None:
                return [f"{where} of a text encoder must be {{'{TEXT_INPUT}': {{'shape': "
                        f"[None, L], 'dtype': 'int32'}}}}, got {signature!r}"]
            got, _ = normalize_input_signature((shape[1:], dtype))
            if max_length is not None and shape[1] is not None and shape[1] != max_length:
                return [f"max_length={max_length!r} but {where} fixes L={shape[1]}"]
    except ValueError as e:
        return [str(e)]
    if got != modality:
        return [f"{where} describes a {got} input, but modality is {modality!r}"]
    return []


_AXES = {"nodes": "NF", "edges": "E2", "node_graph": "N", "node_mask": "N", "edge_mask": "E",
         "graph_mask": "B", TEXT_INPUT: ("batch", "L")}


def _axis_name(name, axis):
    names = _AXES.get(name, ())
    return names[axis] if axis < len(names) else "?"


def _preset_usage(call):
    """The Keras-native load (any backend, trainable), shown first in every card."""
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


def _usage_image(card):
    return _preset_usage("images") + [
        "Reusable TF2 SavedModel (TF Hub format). `serving_default` signature: "
        "input `images`, output `features`.",
        "",
        "```python",
        "import keras_hardneg as khn                         # Keras 3",
        "encoder = khn.export.load_encoder(export_dir)       # keras Layer (TensorFlow backend)",
        "",
        "import tensorflow_hub as hub                        # any TF2 program",
        "obj = hub.load(export_dir); features = obj(images, training=False)",
        "",
        "# tf_keras (TF_USE_LEGACY_KERAS=1): hub.KerasLayer(export_dir, trainable=True)",
        "# Keras 3 without keras-hardneg, inference only: keras.layers.TFSMLayer(export_dir)",
        "```",
    ]


def _usage_graph(card):
    return _preset_usage("graph") + [
        "Reusable TF2 SavedModel (TF Hub format). `serving_default` signature: inputs "
        "`nodes`, `edges`, `node_graph`, `node_mask`, `edge_mask`, `graph_mask` (a padded "
        "batch of B graphs, any budget), output `features` `[B, F]`.",
        "",
        "```python",
        "# graph = {'nodes': ..., 'edges': ..., 'node_graph': ..., 'node_mask': ...,",
        "#          'edge_mask': ..., 'graph_mask': ...}   (keras_hardneg GraphSet.batch)",
        "import keras_hardneg as khn                         # Keras 3",
        "encoder = khn.export.load_encoder(export_dir)       # keras Layer (TensorFlow backend)",
        "features = encoder(graph)",
        "",
        "import tensorflow_hub as hub                        # any TF2 program",
        "obj = hub.load(export_dir); features = obj(graph, training=False)",
        "features = obj.signatures['serving_default'](**graph)['features']",
        "",
        "# inference only: keras.layers.TFSMLayer(export_dir)(graph)",
        "```",
    ]


def _usage_text(card):
    has_tokenizer = TOKENIZER_ASSET in card.assets
    lines = _preset_usage("token_ids") + [
        "Reusable TF2 SavedModel (TF Hub format). `serving_default` signature: input "
        f"`{TEXT_INPUT}` (int32 `[batch, L]`, 0 = padding), output `features`."
        + (f" The tokenizer is `assets/{TOKENIZER_ASSET}` (a `tokenizers` JSON file); "
           "strings are tokenized in Python, not inside the SavedModel." if has_tokenizer
           else " No tokenizer is shipped: pass token ids."),
        "",
        "```python",
        "import keras_hardneg as khn                         # Keras 3",
        "encoder = khn.export.load_encoder(export_dir)       # keras Layer (TensorFlow backend)",
        "features = encoder(token_ids)                       # int32 [batch, L]",
    ]
    if has_tokenizer:
        lines.append("features = encoder.embed_sentences(['a sentence', 'another one'])"
                     "  # needs `tokenizers`")
    lines += [
        "",
        "import tensorflow_hub as hub                        # any TF2 program",
        "obj = hub.load(export_dir); features = obj(token_ids, training=False)",
        "",
        "# inference only: keras.layers.TFSMLayer(export_dir)(token_ids)",
        "```",
    ]
    return lines


_USAGE = {"image": _usage_image, "graph": _usage_graph, "text": _usage_text}


def load_model_card(export_dir) -> ModelCard:
    """Reads ``export_dir/model_card.json``; ``FileNotFoundError``/``ValueError`` if missing/bad.

    Example: ``load_model_card("/tmp/enc").output_dim``.
    """
    export_dir = os.path.abspath(os.fspath(export_dir))
    if not os.path.isdir(export_dir):
        raise FileNotFoundError(f"{export_dir}: no such directory")
    path = os.path.join(export_dir, MODEL_CARD_JSON)
    if not os.path.isfile(path):
        raise ValueError(f"{export_dir}: no {MODEL_CARD_JSON}; this SavedModel was not "
                         "written by keras_hardneg.export.export_encoder")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        return ModelCard.from_json(text)
    except ValueError as e:
        raise ValueError(f"{export_dir}: bad {MODEL_CARD_JSON}: {e}") from None
