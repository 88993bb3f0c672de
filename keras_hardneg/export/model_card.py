"""Model card for an exported encoder: one dataclass, JSON + Markdown renderings.

An export directory written by :func:`keras_hardneg.export.export_encoder` holds,
next to ``saved_model.pb``::

    model_card.json   # machine-readable: ModelCard.to_json()
    model_card.md     # human-readable:   ModelCard.to_markdown()

Example::

    from keras_hardneg.export import ModelCard
    card = ModelCard(name="simclr-r18-cifar10", framework="SimCLR",
                     loss="HardNegativeContrastiveLoss",
                     hyperparameters={"temperature": 0.5, "tau_plus": 0.1, "beta": 1.0},
                     data="CIFAR-10 train (labels unused)", epochs=200,
                     knn_accuracy=0.83, linear_probe_accuracy=0.86)
    text = card.to_json()
    assert ModelCard.from_json(text) == card
    print(card.to_markdown())
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import os
from typing import Any

__all__ = ["ModelCard", "MODEL_CARD_JSON", "MODEL_CARD_MD", "CARD_FORMAT", "load_model_card"]

#: File names inside an export directory.
MODEL_CARD_JSON = "model_card.json"
MODEL_CARD_MD = "model_card.md"
#: Identifies our card schema inside the JSON (``"format"`` key).
CARD_FORMAT = "keras_hardneg.model_card/1"

_INPUT_RANGE = (0.0, 1.0)


@dataclasses.dataclass
class ModelCard:
    """Metadata describing an exported encoder.

    Fields filled in by ``export_encoder`` (leave them ``None``): ``input_shape``,
    ``output_dim``, ``library_version``, ``tensorflow_version``, ``keras_version``,
    ``created``. If you set ``input_shape`` / ``output_dim`` yourself, the export
    checks them against the encoder.

    Attributes:
        name: short identifier of the model.
        description: free text.
        framework: training framework, e.g. ``"SimCLR"``, ``"MoCo-v2"``.
        loss: loss name, e.g. ``"HardNegativeContrastiveLoss"``.
        hyperparameters: JSON-serializable dict (temperature, tau_plus, beta, batch size, ...).
        data: training data description, e.g. ``"CIFAR-10 train, 50k images"``.
        epochs: number of pre-training epochs (int >= 0) or ``None``.
        knn_accuracy: measured kNN top-1 accuracy in [0, 1], or ``None``.
        linear_probe_accuracy: measured linear-probe top-1 accuracy in [0, 1], or ``None``.
        evaluation: how the accuracies were measured (dataset, k, protocol).
        metrics: further measured metrics, name -> finite float.
        input_shape: ``(H, W, 3)``; ``H``/``W`` may be ``None`` (any size).
        input_dtype: always ``"float32"``.
        input_range: always ``(0.0, 1.0)``: RGB pixel values scaled to [0, 1].
        preprocessing: what the encoder does itself (callers must do nothing else).
        output_dim: feature dimension ``F`` of the output ``[B, F]``.
        library_version / tensorflow_version / keras_version: provenance.
        created: ISO-8601 timestamp with time zone (UTC by default).
        license: license of the weights.
    """

    name: str = "encoder"
    description: str = ""
    framework: str | None = None
    loss: str | None = None
    hyperparameters: dict[str, Any] = dataclasses.field(default_factory=dict)
    data: str | None = None
    epochs: int | None = None
    knn_accuracy: float | None = None
    linear_probe_accuracy: float | None = None
    evaluation: str | None = None
    metrics: dict[str, float] = dataclasses.field(default_factory=dict)
    input_shape: tuple | None = None
    input_dtype: str = "float32"
    input_range: tuple = _INPUT_RANGE
    preprocessing: str = (
        "None required: pass RGB images as float32 in [0, 1]; any normalization "
        "is done inside the encoder."
    )
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
            problems.append("metrics must be a dict name -> float")
        else:
            for k, v in self.metrics.items():
                if (not isinstance(k, str) or not isinstance(v, (int, float))
                        or isinstance(v, bool) or not math.isfinite(v)):
                    problems.append(f"metrics[{k!r}] must be a finite number, got {v!r}")
        if self.input_shape is not None:
            shape = self.input_shape
            if (not isinstance(shape, tuple) or len(shape) != 3 or shape[2] != 3
                    or not all(d is None or (is_int(d) and d > 0) for d in shape)):
                problems.append(
                    f"input_shape must be (H, W, 3) with positive ints or None, got {shape!r}")
        if self.input_dtype != "float32":
            problems.append(f"input_dtype must be 'float32', got {self.input_dtype!r}")
        if tuple(self.input_range) != _INPUT_RANGE:
            problems.append(f"input_range must be (0.0, 1.0), got {self.input_range!r}")
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
        d["input_range"] = list(self.input_range)
        return {"format": CARD_FORMAT, **d}

    def to_json(self, indent: int = 2) -> str:
        """Validates, then serializes to a JSON string (keys in field order)."""
        self.validate()
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False) + "\n"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ModelCard":
        """Inverse of :meth:`to_dict`; validates. Unknown keys raise ``ValueError``."""
        if not isinstance(d, dict):
            raise ValueError(f"Model card must be a JSON object, got {type(d).__name__}")
        d = dict(d)
        fmt = d.pop("format", None)
        if fmt != CARD_FORMAT:
            raise ValueError(f"Model card format is {fmt!r}, expected {CARD_FORMAT!r}")
        known = {f.name for f in dataclasses.fields(cls)}
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

        h, w = (self.input_shape or (None, None, 3))[:2]
        shape = f"[batch, {fmt(h, 'H')}, {fmt(w, 'W')}, 3]"
        lines = [
            f"# {self.name}",
            "",
            self.description or "Self-supervised image encoder exported by keras-hardneg.",
            "",
            "## Usage",
            "",
            "Reusable TF2 SavedModel (TF Hub format). `serving_default` signature: "
            "input `images`, output `features`.",
            "",
            "```python",
            "import keras_hardneg as khn                         # Keras 3",
            "encoder = khn.export.load_encoder(export_dir)       # keras Layer, fine-tunable",
            "",
            "import tensorflow_hub as hub                        # any TF2 program",
            "obj = hub.load(export_dir); features = obj(images, training=False)",
            "",
            "# tf_keras (TF_USE_LEGACY_KERAS=1): hub.KerasLayer(export_dir, trainable=True)",
            "# Keras 3 without keras-hardneg: keras.layers.TFSMLayer(export_dir)",
            "```",
            "",
            "## Input contract",
            "",
            f"- shape: `{shape}`",
            f"- dtype: `{self.input_dtype}`",
            f"- value range: `[{self.input_range[0]}, {self.input_range[1]}]` (RGB)",
            f"- preprocessing: {self.preprocessing}",
            f"- output: `[batch, {fmt(self.output_dim, 'F')}]` float32 features",
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
            f"- kNN accuracy: {pct(self.knn_accuracy)}",
            f"- linear-probe accuracy: {pct(self.linear_probe_accuracy)}",
        ]
        lines += [f"- {k}: {v:.6g}" for k, v in self.metrics.items()]
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
