"""What a run shows its user: short progress lines and ``history.png``.

:class:`ShortProgress` is Keras's progress logger showing only the figures that change and
matter (the loss, the kNN monitor, annealed knobs, and counters only when they are not 0),
so that a line fits an 80-column terminal; every metric stays in ``history.json``.
:func:`resolve_verbose` turns ``"auto"`` into 1 on a terminal and 2 otherwise (no ``\\r``
or colour codes in log files). :func:`plot_history` draws ``history.png`` (matplotlib, Agg;
skipped when matplotlib is missing).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import keras

__all__ = ["ShortProgress", "resolve_verbose", "plot_history", "clamp_warning",
           "HIDDEN_METRICS", "HISTORY_PLOT", "CLAMP_WARNING_FRACTION"]

#: Metrics left out of progress lines (they are in history.json): the per-batch diagnostics
#: and the epoch's own time (the line shows it).
HIDDEN_METRICS = ("positive_cosine", "negative_cosine", "false_negative_rate", "epoch_seconds")
#: Shown only when not 0 (a clamp that acts, an update skipped, a batch without negatives).
SHOWN_WHEN_NONZERO = ("clamp_fraction", "nonfinite_steps", "dropped_batches")
#: File name of the plot beside ``history.json``.
HISTORY_PLOT = "history.png"
#: A debiasing clamp holding at least this share of the anchors in the last epoch is
#: reported at the end of training (:func:`clamp_warning`).
CLAMP_WARNING_FRACTION = 0.5


def clamp_warning(history: dict[str, list]) -> str | None:
    """One line when the loss's debiasing clamp (debiased, hard, UnReMix: the negative term's
    floor ``N e^(-1/t)``, Chuang et al. 2020 eq. 7) held at least
    :data:`CLAMP_WARNING_FRACTION` of the anchors in the last epoch: there the loss is at its
    floor and gives no gradient (seen with SimCSE's t = 0.05 from a pretrained start: the
    encoder did not move). ``None`` otherwise."""
    fractions = history.get("clamp_fraction") or []
    if not fractions or float(fractions[-1]) < CLAMP_WARNING_FRACTION:
        return None
    return (f"the loss's debiasing clamp held {float(fractions[-1]):.0%} of the anchors at its "
            "floor N*exp(-1/t) in the last epoch, where they give no gradient: lower tau_plus "
            "(0 turns the debiasing off) or raise the temperature.")


def resolve_verbose(verbose: Any, stream: Any = None) -> int:
    """``verbose`` as Keras's 0/1/2: ``"auto"`` is 1 when ``stream`` (stdout) is a terminal,
    else 2 (one plain line per epoch)."""
    if verbose == "auto":
        stream = sys.stdout if stream is None else stream
        isatty = getattr(stream, "isatty", None)
        return 1 if isatty is not None and isatty() else 2
    if verbose not in (0, 1, 2) or isinstance(verbose, bool):
        raise ValueError(f"`verbose` must be 0, 1, 2 or 'auto'; got {verbose!r}.")
    return int(verbose)


def _shown(logs: dict[str, Any] | None) -> dict[str, Any]:
    out = {}
    for key, value in (logs or {}).items():
        if key in HIDDEN_METRICS:
            continue
        if key in SHOWN_WHEN_NONZERO:
            try:
                if float(value) == 0.0:
                    continue
            except (TypeError, ValueError):
                pass
        out[key] = value
    return out


class ShortProgress(keras.callbacks.ProgbarLogger):
    """Keras's progress bar / epoch line with the figures that matter (see module doc)."""

    def _update_progbar(self, batch, logs=None):
        super()._update_progbar(batch, _shown(logs))

    def _finalize_progbar(self, logs):
        super()._finalize_progbar(_shown(logs))


def plot_knn_curve(ax, epochs: int, knn: list[float],
                   baseline: dict[str, Any] | None = None) -> None:
    """Draws on the matplotlib axes ``ax`` the kNN accuracies ``knn`` of the last
    ``len(knn)`` of ``epochs`` epochs, with ``baseline``'s ``knn_accuracy`` (the starting
    encoder's) at epoch 0 and as a dotted line."""
    xs = list(range(epochs - len(knn) + 1, epochs + 1))
    ys = list(knn)
    if baseline and baseline.get("knn_accuracy") is not None:
        xs, ys = [0] + xs, [baseline["knn_accuracy"]] + ys
        ax.axhline(baseline["knn_accuracy"], color="gray", ls=":", lw=1,
                   label="starting encoder (epoch 0)")
        ax.legend(loc="lower right", fontsize=8)
    ax.plot(xs, ys, marker="o", ms=3, color="tab:green")


def plot_history(history: dict[str, list], path: str,
                 baseline: dict[str, Any] | None = None) -> str | None:
    """Draws the loss and the kNN accuracy (when monitored) per epoch into ``path`` (PNG);
    ``baseline``'s ``knn_accuracy`` (the random encoder's) is drawn at epoch 0. Returns
    ``path``, or ``None`` when matplotlib is not installed or there is nothing to draw."""
    loss = history.get("loss") or []
    if not loss:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    knn = history.get("knn_accuracy") or []
    epochs = list(range(1, len(loss) + 1))
    fig, axes = plt.subplots(1, 2 if knn else 1, figsize=(9 if knn else 4.5, 3.2),
                             squeeze=False)
    ax = axes[0][0]
    ax.plot(epochs, loss, marker="o", ms=3)
    ax.set(xlabel="epoch", ylabel="loss", title="training loss")
    ax.grid(alpha=0.3)
    if knn:
        ax = axes[0][1]
        plot_knn_curve(ax, len(loss), knn, baseline)
        ax.set(xlabel="epoch", ylabel="kNN accuracy", title="kNN monitor (test split)")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    tmp = f"{path}.tmp-{os.getpid()}.png"
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    os.replace(tmp, path)
    return path
