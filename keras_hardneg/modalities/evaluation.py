"""A modality's evaluation and the report's hooks: its figures, their names, how they are shown.

:class:`Evaluation` is one of the three interfaces a
:class:`~keras_hardneg.modalities.Modality` is made of. It holds the final evaluation
(:meth:`Evaluation.evaluate`), the monitors during training, the untrained encoder's
figures ("epoch 0"), the run report's sections, and the *names* of what it measures: its
:class:`Figure` s (the ``results.json`` keys, how a summary, the run report and the zoo
name and scale them) and its throughput figure (:attr:`Evaluation.throughput_key`:
``images_per_second`` for images, ``graphs_per_second``, ``sentences_per_second``). The
command line, the run report and the zoo read these names here; none writes them out.

Example:
>>> class Toy(Evaluation):
...     examples = "rows"
...     figures = (Figure("knn_accuracy", "kNN accuracy", short="kNN", scale=100.0),
...                Figure("sts", "STS", short="STS avg", group=True))
>>> toy = Toy()
>>> toy.result_keys, toy.throughput_key
(('knn_accuracy', 'sts'), 'rows_per_second')
>>> toy.summary_rows({"knn_accuracy": 0.5, "knn_accuracy_epoch0": 0.25, "sts": {"avg": 70.0}})
[('kNN accuracy', '0.5000'), ('kNN before training', '0.2500 (the random encoder, epoch 0)'), ('STS', 'avg 70.00')]
>>> toy.figures_line({"knn_accuracy": 0.5, "sts": {"avg": 70.0}})
'kNN 0.500, STS avg 70.0'
>>> toy.index_metrics({"knn_accuracy": 0.5, "sts": {"avg": 70.0}})
{'knn_accuracy': 0.5, 'sts_avg': 70.0}
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

__all__ = ["Evaluation", "Figure"]


class _Blank(dict):
    def __missing__(self, key):
        return None


@dataclasses.dataclass(frozen=True)
class Figure:
    """One figure a modality's evaluation puts in ``results.json``.

    Attributes:
        key: its ``results.json`` key (``"knn_accuracy"``).
        label: how a summary names it (``"kNN accuracy"``).
        short: the short name of a one-line summary and of "``short`` before training"
            (``"kNN"``).
        scale: the zoo's display scale (100 for a fraction shown in %).
        group: whether the value is a dict of named scores (``{"avg": ..., "STS12": ...}``)
            rather than one number; the zoo then reads its ``"avg"``.
        std_key: the ``results.json`` key of its spread (``"svm_accuracy_std"``), if any.
        detail: what the summary adds after the value, formatted with the recipe's
            ``evaluation`` keys (``"(weighted, k={knn_k}, t={knn_temperature})"``).
        index_label: the zoo's label with its unit (default ``label``).
        note: what the one-line summary adds after the value (``"(10-fold)"``).
    """

    key: str
    label: str
    short: str = ""
    scale: float = 1.0
    group: bool = False
    std_key: str | None = None
    detail: str = ""
    index_label: str = ""
    note: str = ""

    @property
    def index_key(self) -> str:
        """The zoo index's metric name: ``key`` (a group: ``key + "_avg"``)."""
        return f"{self.key}_avg" if self.group else self.key

    def number(self, results: dict[str, Any]) -> float | None:
        """The figure as one number (a group's ``"avg"``), or ``None`` when absent."""
        value = results.get(self.key)
        if self.group:
            value = value.get("avg") if isinstance(value, dict) else None
        return float(value) if isinstance(value, (int, float, np.floating)) \
            and not isinstance(value, bool) else None


class Evaluation:
    """How a modality's encoder is measured, and how the figures are named and shown.

    Attributes:
        figures: the :class:`Figure` s :meth:`evaluate` puts in ``results.json``.
        examples: what one example is called, plural (``"images"``): the throughput
            figure is ``f"{examples}_per_second"`` (:attr:`throughput_key`).
        knn_evaluation: whether :meth:`evaluate` is weighted kNN (``knn_accuracy``; and a
            linear probe) fit on the labelled train split and scored on the test split:
            a run then measures the random encoder's kNN accuracy first (epoch 0), a run
            whose training data has no labels evaluates on a labelled test folder split
            in two (or not at all), and the model card's ``knn_accuracy`` /
            ``linear_probe_accuracy`` lines are shown even when not measured (otherwise
            the figures are the card's ``metrics``, "not measured" when empty).
        benchmark_sets: what the final evaluation reads instead of the recipe's data:
            ``None`` (the recipe's splits, :meth:`evaluate`), or benchmark sets in a folder
            (text: "STS/SentEval sets", :meth:`evaluate_benchmark` on ``benchmark_dir``).
    """

    figures: tuple[Figure, ...] = ()
    examples = "examples"
    knn_evaluation = False
    benchmark_sets: str | None = None

    # ------------------------------------------------------------------ names
    @property
    def result_keys(self) -> tuple[str, ...]:
        """The ``results.json`` keys of :attr:`figures` (their spreads included)."""
        keys: list[str] = []
        for f in self.figures:
            keys += [f.key] + ([f.std_key] if f.std_key else [])
        return tuple(keys)

    @property
    def throughput_key(self) -> str:
        """The ``results.json`` key of training examples per second (``images_per_second``)."""
        return f"{self.examples}_per_second"

    @property
    def throughput_label(self) -> str:
        """How a summary names the throughput (``"training images/s"``)."""
        return f"training {self.examples}/s"

    def summary_rows(self, results: dict[str, Any],
                     recipe: dict[str, Any] | None = None) -> list[tuple[str, str]]:
        """``[(label, text)]`` of the figures in ``results`` (the command line's summary):
        each figure, its spread and detail, and the random encoder's (``KEY_epoch0``)."""
        evaluation = _Blank((recipe or {}).get("evaluation") or {})
        rows = []
        for f in self.figures:
            value = results.get(f.key)
            if f.group:
                if isinstance(value, dict):
                    rows.append((f.label, ", ".join(
                        f"{k} {v:.2f}" for k, v in value.items()
                        if isinstance(v, (int, float)))))
                continue
            if not isinstance(value, (int, float)):
                continue
            text = f"{value:.4f}"
            if f.std_key and isinstance(results.get(f.std_key), (int, float)):
                text += f" +- {results[f.std_key]:.4f}"
            if f.detail:
                text += " " + f.detail.format_map(evaluation)
            rows.append((f.label, text))
            start = results.get(f"{f.key}_epoch0")
            if isinstance(start, (int, float)):
                rows.append((f"{f.short or f.label} before training",
                             f"{start:.4f} (the random encoder, epoch 0)"))
        return rows

    def report_figures(self, results: dict[str, Any],
                       recipe: dict[str, Any] | None = None) -> list[tuple[str, str, Any]]:
        """``[(key, label, value)]`` of the final figures in ``results`` (the run report's
        table; a group's scores one by one, under dotted keys ``"sts.STS12"``)."""
        evaluation = _Blank((recipe or {}).get("evaluation") or {})
        rows = []
        for f in self.figures:
            value = results.get(f.key)
            if f.group:
                if isinstance(value, dict):
                    rows += [(f"{f.key}.{k}", f"{f.label} {k}", v) for k, v in value.items()
                             if isinstance(v, (int, float))]
            elif f.key in results:
                detail = f.detail.format_map(evaluation) if recipe is not None else ""
                rows.append((f.key, f"{f.label} {detail}".strip(), value))
        return rows

    def figures_line(self, results: dict[str, Any] | None) -> str:
        """The figures in one line (the zoo's listing; ``"-"`` without any)."""
        results = results or {}
        parts = []
        for f in self.figures:
            value = f.number(results)
            if value is None:
                continue
            if f.group:
                parts.append(f"{f.short or f.label} {value:.1f}")
                continue
            text = f"{f.short or f.label} {value:.3f}"
            if f.std_key and isinstance(results.get(f.std_key), (int, float)):
                text += f" ± {results[f.std_key]:.3f}"
            parts.append(f"{text} {f.note}" if f.note else text)
        return ", ".join(parts) or "-"

    def index_metrics(self, results: dict[str, Any]) -> dict[str, float]:
        """``{index key: number}`` of the figures in ``results`` (the zoo index's metrics)."""
        out = {}
        for f in self.figures:
            value = f.number(results)
            if value is not None:
                out[f.index_key] = value
        return out

    def missing_evaluation(self, recipe: dict[str, Any]) -> str | None:
        """Why a run of ``recipe`` has no figures although its data is labelled (one line
        for the summary), or ``None``."""
        return None

    # ------------------------------------------------------------- evaluation
    def monitors(self, recipe: dict[str, Any], train: tuple, test: tuple) -> list:
        """Callbacks that measure the encoder during training."""
        return []

    def evaluate(self, encoder: Any, recipe: dict[str, Any], train: tuple, test: tuple,
                 extras: Any = None) -> dict[str, Any]:
        """The final evaluation's figures (keys of :attr:`result_keys`)."""
        raise NotImplementedError

    def baseline(self, encoder: Any, recipe: dict[str, Any], train: tuple,
                 test: tuple) -> dict[str, float] | None:
        """The untrained encoder's headline figure ("epoch 0": what pre-training bought),
        ``{result key: value}``, or ``None`` where the modality has none cheap enough."""
        return None

    def describe_evaluation(self, recipe: dict[str, Any]) -> str:
        """The evaluation protocol in one sentence (the report and the model card)."""
        return ""

    def method_name(self, recipe: dict[str, Any]) -> str:
        """What trained the encoder, as the report's title and the model card name it: the
        framework's registered name (``"simclr"``, ``"moco_v2"``, ``"graphcl"``); a
        modality whose methods are told apart by their views overrides it (sentences:
        ``"SimCSE"``)."""
        return recipe["framework"]["name"]

    def benchmark_embedder(self, encoder: Any, *, x_train: Any = None, preset: Any = None,
                           max_tokens: int | None = None) -> Any:
        """The function :meth:`evaluate_benchmark` scores, for ``encoder``: a loaded export
        (neither keyword), a run's (``x_train``) or a preset's (``preset``: its metadata)."""
        raise NotImplementedError(f"modality {getattr(self, 'name', '?')!r} is evaluated on "
                                  "its data")

    def evaluate_benchmark(self, embed: Any, benchmark_dir: str, *, senteval: bool = False,
                           seed: int = 0) -> dict[str, Any]:
        """The figures of ``embed`` on the benchmark sets in ``benchmark_dir``."""
        raise NotImplementedError(f"modality {getattr(self, 'name', '?')!r} is evaluated on "
                                  "its data")

    # ---------------------------------------------------------------- report
    def report_sections(self, encoder: Any, recipe: dict[str, Any], train: tuple,
                        test: tuple | None) -> list:
        """The run report's sections of this modality (``[(title, html)]``; drawn with
        :mod:`keras_hardneg.modalities.report`), from the trained ``encoder``."""
        return []
