"""Model card for an exported encoder: one dataclass, JSON + Markdown renderings.

An export directory written by :func:`keras_hardneg.export.export_encoder` holds,
next to ``saved_model.pb``::

    model_card.json   # machine-readable: ModelCard.to_json()
    model_card.md     # human-readable:   ModelCard.to_markdown()

``modality`` is one registered in :data:`keras_hardneg.registry.MODALITIES`; what the card
holds for its inputs, its defaults and its wording are the modality object's
(``Modality.card_defaults``, ``card_problems``, ``card_input_lines``, ``card_usage``).
The built-in ones: ``"image"`` (the default; ``input_shape``, float32 in [0, 1], kNN /
linear-probe accuracies), ``"graph"`` and ``"text"`` (``input_signature``: the exported
tensors by name; text also ``max_length`` and the ``assets`` holding its tokenizer). ``metrics`` holds modality-specific figures as a (possibly nested) dict of
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

from keras_hardneg.modalities import DEFAULT_MODALITY, MODALITIES, get_modality
from keras_hardneg.modalities.artifact import (DEFAULT_INPUT_RANGE, DEFAULT_PREPROCESSING,
                                             preset_usage)

__all__ = ["ModelCard", "MODEL_CARD_JSON", "MODEL_CARD_MD", "CARD_FORMAT", "CARD_FORMATS",
           "TOKENIZER_ASSET", "DEFAULT_INPUT_RANGE", "DEFAULT_PREPROCESSING", "load_model_card",
           "preset_usage"]

#: File names inside an export directory.
MODEL_CARD_JSON = "model_card.json"
MODEL_CARD_MD = "model_card.md"
#: Identifies our card schema inside the JSON (``"format"`` key); what cards are written with.
CARD_FORMAT = "keras_hardneg.model_card/2"
#: Formats that load: ``/1`` (wave 1, images only) and ``/2`` (modalities).
CARD_FORMATS = ("keras_hardneg.model_card/1", CARD_FORMAT)
#: Asset file name of a text export's tokenizer (a ``tokenizers`` JSON file).
TOKENIZER_ASSET = "tokenizer.json"

_FIELD_DEFAULTS = {"input_dtype": "float32", "input_range": DEFAULT_INPUT_RANGE,
                   "preprocessing": DEFAULT_PREPROCESSING}


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
            any size; see ``keras_hardneg.modalities.signatures``). ``None`` for images.
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
    modality: str = DEFAULT_MODALITY
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
    input_range: tuple | None = DEFAULT_INPUT_RANGE
    preprocessing: str = DEFAULT_PREPROCESSING
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
        modality = _modality(self.modality)  # None: not registered (validate says so)
        if modality is not None:
            # Fields left at the (image) defaults take the modality's own.
            for field, value in modality.card_defaults().items():
                current = getattr(self, field)
                if current is not None and (tuple(current) if field == "input_range"
                                            else current) == _FIELD_DEFAULTS[field]:
                    setattr(self, field, value)

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
        modality = _modality(self.modality)
        if modality is None:
            problems.append(f"modality must be one of {MODALITIES.names()}, "
                            f"got {self.modality!r}")
        else:
            problems += modality.card_problems(self)
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

        modality = get_modality(self.modality)
        lines = [
            f"# {self.name}",
            "",
            self.description
            or f"Self-supervised {self.modality} encoder exported by keras-hardneg.",
            "",
            "## Usage",
            "",
        ]
        lines += modality.card_usage(self)
        lines += ["", "## Input contract", ""]
        lines += modality.card_input_lines(self)
        if self.assets:
            lines.append("- assets: " + ", ".join(f"`assets/{a}`" for a in self.assets))
        batch = modality.batch_axis
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
            if modality.knn_evaluation or value is not None:
                lines.append(f"- {label}: {pct(value)}")
        nested = []
        for k, v in self.metrics.items():
            if isinstance(v, dict):
                nested.append((k, v))
            else:
                lines.append(f"- {k}: {v:.6g}")
        if not self.metrics and not modality.knn_evaluation:
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


def _modality(name: Any) -> Any:
    """The registered modality object ``name``, or ``None``."""
    return get_modality(name) if isinstance(name, str) and name in MODALITIES.names() else None


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
