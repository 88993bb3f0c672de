"""The negatives probe: what a run's negatives did, measured cheaply once an epoch.

A fixed *probe batch* (at most :data:`PROBE_SIZE` training examples, seeded, with two views
drawn once by the recipe's own view maker under a seed of its own) is scored at the start of
training ("epoch 0") and at the end of every epoch (:class:`NegativesProbe`), never inside a
step: the model's :meth:`~keras_hardneg.models.ContrastiveModel.probe_projections` (inference
mode: no random draw, no state written) give the two views' projections, which are paired as
SimCLR pairs them (:func:`keras_hardneg.losses.core.in_batch_pairs`: ``2P`` anchors, ``2P - 2``
negatives each, whatever the framework), and the run's own loss object weighs each negative
(:meth:`~keras_hardneg.losses.ContrastiveLoss.negative_weights`, the ``w_aj`` of its negative
term ``R_a = sum_j w_aj e^{s_aj}``). Each epoch's record (:func:`score_pairs`) holds:

* the histogram of anchor-negative cosines (:data:`COSINE_BINS` bins over ``[-1, 1]``);
* the effective number of negatives ``1 / sum_j wn_aj^2`` (mean over anchors;
  :func:`~keras_hardneg.losses.effective_negatives`) beside ``N``;
* with labels, the share of same-class (false) negatives among all negatives, among each
  anchor's most-weighted :data:`TOP_FRACTION` (ties broken by similarity) and in the loss's
  weight (``sum_same w / sum w``);
* a fixed sample of :data:`SCATTER_POINTS` (cosine, weight, same class) pairs, kept for the
  first and the last epoch only (the weight-against-similarity plot);
* with a graph sampler (BatchSampler), the mean in-batch cosine ("hardness") and
  false-negative rate of :data:`SAMPLER_BATCHES` batches drawn from a copy of the sampler
  against as many uniform batches, on the embedding bank the sampler's graph is built from
  (:func:`keras_hardneg.sampling.metrics.batch_statistics`).

The records go to ``RUN/probe.json`` (:data:`PROBE_FILE`) after every epoch; a resumed run
continues them. Cost: one inference forward pass of ``2P`` examples and ``[2P, 2P]`` arithmetic
an epoch (measured in ``docs/notes/run_report.md``).

Example:
>>> import numpy as np
>>> from keras_hardneg.losses import HardNegativeContrastiveLoss
>>> z1, z2 = np.random.default_rng(0).normal(size=(2, 8, 4)).astype("float32")
>>> record = score_pairs(z1, z2, HardNegativeContrastiveLoss(beta=1.0), np.arange(8) % 2)
>>> record["num_negatives"], round(record["false_negatives"]["all"], 4)
(14, 0.4286)
"""

from __future__ import annotations

import copy
import json
import os
from typing import Any

import keras
import numpy as np

from keras_hardneg._io import atomic_write_json
from keras_hardneg.losses import core, effective_negatives

__all__ = ["PROBE_FILE", "PROBE_SIZE", "COSINE_BINS", "TOP_FRACTION", "SCATTER_POINTS",
           "SAMPLER_BATCHES", "ProbeBatch", "make_probe_batch", "score_pairs",
           "sampler_statistics", "NegativesProbe", "read_probe"]

#: File of the per-epoch records in a run directory.
PROBE_FILE = "probe.json"
#: The probe batch holds at most this many examples (fewer: the recipe's batch size or N).
PROBE_SIZE = 256
#: Histogram bins of the anchor-negative cosines over [-1, 1].
COSINE_BINS = 40
#: "Most-weighted" negatives: this share of each anchor's negatives (at least one).
TOP_FRACTION = 0.05
#: (cosine, weight) pairs kept for the weight-against-similarity plot.
SCATTER_POINTS = 3000
#: Batches drawn from the sampler (and uniformly) for the batch statistics.
SAMPLER_BATCHES = 8
#: Added to the recipe's seed for the probe's examples and views.
PROBE_SEED_OFFSET = 104729


class ProbeBatch:
    """The fixed probe: ``indices`` of the training examples, their two views (as the model
    takes them) and their labels (``None`` without labels)."""

    def __init__(self, indices: np.ndarray, view1: Any, view2: Any, labels: Any):
        self.indices = np.asarray(indices, np.int64)
        self.view1, self.view2 = view1, view2
        self.labels = None if labels is None else np.asarray(labels).reshape(-1)


def make_probe_batch(recipe: dict[str, Any], modality: Any, x: Any, y: Any,
                     view_maker: Any) -> ProbeBatch:
    """The probe batch of a run: ``min(PROBE_SIZE, batch_size, N)`` training examples drawn
    with the recipe's seed (plus :data:`PROBE_SEED_OFFSET`), their views drawn once by
    ``view_maker`` (a fresh one, seeded likewise: the model's own generators are not
    touched) through :meth:`~keras_hardneg.run.modality.Modality.probe_views`."""
    n = modality.num_examples(x)
    size = max(2, min(PROBE_SIZE, int(recipe["batch_size"]), n))
    seed = int(recipe["seed"]) + PROBE_SEED_OFFSET
    indices = np.sort(np.random.default_rng(seed).choice(n, size=size, replace=False))
    view1, view2, labels = modality.probe_views(x, y, indices, view_maker, seed)
    return ProbeBatch(indices, view1, view2, labels)


def _numpy(x: Any) -> np.ndarray:
    return np.asarray(keras.ops.convert_to_numpy(x))


def _embeddings(z: Any) -> Any:
    return z["embeddings"] if isinstance(z, dict) else z


def _top_rows(weights: np.ndarray, cosines: np.ndarray, mask: np.ndarray, k: int) -> np.ndarray:
    """``[A, M]`` bool: each anchor's ``k`` negatives of largest weight, ties broken by the
    larger cosine."""
    key_w = np.where(mask, weights, -np.inf)
    key_c = np.where(mask, cosines, -np.inf)
    order = np.lexsort((-key_c, -key_w), axis=-1)[:, :k]
    top = np.zeros_like(mask)
    np.put_along_axis(top, order, True, axis=-1)
    return top & mask


def score_pairs(z1: Any, z2: Any, loss: Any, labels: Any = None,
                scatter_seed: int = 0) -> dict[str, Any]:
    """One probe record of two views' projections ``z1``, ``z2`` (``[P, d]``, or UnReMix
    dicts), weighed by ``loss`` (see the module docstring); ``labels`` ``[P]`` or None."""
    pairs = core.in_batch_pairs(z1, z2)
    weights = _numpy(loss.negative_weights(pairs)).astype(np.float64)
    effective = _numpy(effective_negatives(weights))
    mask = _numpy(pairs.negative_mask).astype(bool)
    cosines = _numpy(pairs.negative_cos).astype(np.float64)
    n = int(pairs.num_negatives)
    hist, _ = np.histogram(cosines[mask], bins=COSINE_BINS, range=(-1.0, 1.0))
    record: dict[str, Any] = {
        "num_negatives": n,
        "positive_cosine": float(np.mean(_numpy(pairs.positive_cos))),
        "negative_cosine": float(cosines[mask].mean()),
        "cosine_histogram": hist.astype(int).tolist(),
        "effective_negatives": float(effective.mean()),
        "effective_negatives_quartiles": [float(q) for q in
                                          np.percentile(effective, [25, 50, 75])],
    }
    same = None
    if labels is not None:
        y = np.asarray(labels).reshape(-1)
        y = np.concatenate([y, y])  # the 2P anchors and pool rows: view 1's, then view 2's
        known = (y >= 0)[:, None] & (y >= 0)[None, :] & mask
        same = (y[:, None] == y[None, :]) & known
        top = _top_rows(weights, cosines, mask, max(1, int(round(TOP_FRACTION * n)))) & known
        record["false_negatives"] = {
            "all": float(same.sum() / max(known.sum(), 1)),
            "most_weighted": float((same & top).sum() / max(top.sum(), 1)),
            "weight": float((weights * same).sum() / max((weights * known).sum(), 1e-30)),
            "top_fraction": TOP_FRACTION,
        }
    rows, cols = np.nonzero(mask)
    pick = np.random.default_rng(scatter_seed).permutation(len(rows))[:SCATTER_POINTS]
    pick.sort()
    rows, cols = rows[pick], cols[pick]
    record["scatter"] = {
        "cosine": np.round(cosines[rows, cols], 4).tolist(),
        "weight": np.round(weights[rows, cols], 5).tolist(),
    }
    if same is not None:
        record["scatter"]["same_class"] = same[rows, cols].astype(int).tolist()
    return record


def sampler_statistics(sampler: Any, embeddings: np.ndarray, labels: Any, seed: int,
                       batches: int = SAMPLER_BATCHES) -> dict[str, Any]:
    """Hardness (mean in-batch cosine) and false-negative rate of ``batches`` batches drawn
    from a *copy* of ``sampler`` (the run's walk is not advanced) against as many uniform
    batches, on ``embeddings`` ``[N, d]``."""
    from keras_hardneg.sampling.metrics import batch_statistics

    clone = sampler.sampler_copy() if hasattr(sampler, "sampler_copy") else copy.deepcopy(sampler)
    drawn = [np.asarray(clone.next_batch()).reshape(-1) for _ in range(batches)]
    b = len(drawn[0])
    rng = np.random.default_rng(seed)
    n = len(embeddings)
    uniform = [rng.choice(n, size=b, replace=False) for _ in range(batches)]
    out = {}
    for name, idx in (("sampler", drawn), ("uniform", uniform)):
        stats = batch_statistics(idx, embeddings, labels)
        out[name] = {"hardness": float(stats["mean_cosine"])}
        if "false_negative_fraction" in stats:
            out[name]["false_negative_rate"] = float(stats["false_negative_fraction"])
    return out


def read_probe(path: str) -> dict[str, Any] | None:
    """The records of a ``probe.json`` (``{"records": [...], ...}``), or None."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


class NegativesProbe(keras.callbacks.Callback):
    """Scores the probe batch at the start of training and after every epoch (see the
    module docstring) and writes the records to ``path`` (None: kept in memory only).

    Args:
        probe: the :class:`ProbeBatch`.
        path: the ``probe.json`` to write, or None.
        start_epoch: a resumed run's first epoch: records after it (from an epoch that
            was not committed) are dropped, those before kept.
        sampler: the run's graph sampler (the shard's inner sampler), or None.
        sampler_labels: labels ``[N]`` of the training set for the sampler statistics.
        seed: seeds the scatter sample and the uniform batches.

    Attributes:
        records: one dict per scored epoch (``"epoch"``: 0 before training).
        seconds: time spent scoring, in total.
    """

    def __init__(self, probe: ProbeBatch, path: str | None = None, start_epoch: int = 0,
                 sampler: Any = None, sampler_labels: Any = None, seed: int = 0):
        super().__init__()
        self.probe, self.path = probe, path
        self.sampler, self.sampler_labels, self.seed = sampler, sampler_labels, int(seed)
        self.records: list[dict[str, Any]] = []
        self.seconds = 0.0
        self.available = True
        if start_epoch and path is not None:
            stored = read_probe(path) or {}
            self.records = [r for r in stored.get("records", [])
                            if int(r.get("epoch", 0)) <= start_epoch]
            self.seconds = float(stored.get("seconds", 0.0))

    def _score(self, epoch: int) -> None:
        import time

        start = time.perf_counter()
        views = self.model.probe_projections(self.probe.view1, self.probe.view2)
        if views is None:  # a framework without two projections (InfoGraph)
            self.available = False
            return
        loss = self.model.contrastive_loss
        record = score_pairs(*views, loss, self.probe.labels, scatter_seed=self.seed)
        record["epoch"] = int(epoch)
        record["loss"] = {"name": type(loss).__name__, **{
            k: v for k, v in loss.get_config().items()
            if k not in ("name", "reduction", "dtype")}}
        bank = getattr(self.model, "embedding_bank", None)
        if self.sampler is not None and bank is not None:
            record["batches"] = sampler_statistics(
                self.sampler, _numpy(bank), self.sampler_labels, self.seed + int(epoch))
        # Only the first and the latest record keep their scatter sample.
        if len(self.records) > 1:
            self.records[-1].pop("scatter", None)
        self.records = [r for r in self.records if r["epoch"] < epoch] + [record]
        self.seconds += time.perf_counter() - start
        self._write()

    def _write(self) -> None:
        if self.path is None:
            return
        atomic_write_json(self.path, {
            "probe_size": int(len(self.probe.indices)), "indices": self.probe.indices.tolist(),
            "pairing": "in_batch", "seconds": round(self.seconds, 4),
            "records": self.records}, indent=None)

    def on_train_begin(self, logs=None):
        if not self.records:
            self._score(0)

    def on_epoch_end(self, epoch, logs=None):
        if self.available:
            self._score(epoch + 1)
