"""The negatives probe: what a run's negatives did, measured cheaply once an epoch.

A fixed *probe batch* (:func:`probe_size` training examples, seeded, with two views
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

from keras_hardneg.losses import core, effective_negatives

__all__ = ["PROBE_FILE", "PROBE_SIZE", "PROBE_FRACTION", "PROBE_MIN", "probe_size",
           "COSINE_BINS", "TOP_FRACTION", "SCATTER_POINTS",
           "SAMPLER_BATCHES", "ProbeBatch", "make_probe_batch", "score_pairs",
           "sampler_statistics", "NegativesProbe", "read_probe", "store", "scatter_sample",
           "pair_arrays", "compiled_probe"]

#: File of the per-epoch records in a run directory.
PROBE_FILE = "probe.json"
#: The probe batch holds at most this many examples (:func:`probe_size`).
PROBE_SIZE = 256
#: ... and at most this share of the training set, but at least :data:`PROBE_MIN` examples:
#: its one inference pass of ``2P`` examples is then about 1 % of an epoch's training
#: compute (``N / B`` steps, each a forward and backward pass of ``2B``: about 3x a forward).
PROBE_FRACTION = 0.03
PROBE_MIN = 64
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


def probe_size(num_examples: int, batch_size: int) -> int:
    """Examples in the probe batch: ``min(PROBE_SIZE, B, max(PROBE_MIN, PROBE_FRACTION N),
    N)`` (at least 2): like a training batch, but small beside a short epoch.

    >>> probe_size(1437, 128), probe_size(50000, 512), probe_size(188, 32)
    (64, 256, 32)
    """
    size = min(PROBE_SIZE, int(batch_size), max(PROBE_MIN, int(PROBE_FRACTION * num_examples)),
               int(num_examples))
    return max(2, size)


def make_probe_batch(recipe: dict[str, Any], modality: Any, x: Any, y: Any,
                     view_maker: Any) -> ProbeBatch:
    """The probe batch of a run: :func:`probe_size` training examples drawn with the
    recipe's seed (plus :data:`PROBE_SEED_OFFSET`), their views drawn once by
    ``view_maker`` (a fresh one, seeded likewise: the model's own generators are not
    touched) through :meth:`~keras_hardneg.modalities.Modality.probe_views`."""
    n = modality.num_examples(x)
    size = probe_size(n, recipe["batch_size"])
    seed = int(recipe["seed"]) + PROBE_SEED_OFFSET
    indices = np.sort(np.random.default_rng(seed).choice(n, size=size, replace=False))
    view1, view2, labels = modality.probe_views(x, y, indices, view_maker, seed)
    return ProbeBatch(indices, view1, view2, labels)


def _numpy(x: Any) -> np.ndarray:
    return np.asarray(keras.ops.convert_to_numpy(x))


def _embeddings(z: Any) -> Any:
    return z["embeddings"] if isinstance(z, dict) else z


def _top_rows(weights: np.ndarray, cosines: np.ndarray, mask: np.ndarray, k: int) -> np.ndarray:
    """``[A, M]`` bool: each anchor's ``k`` negatives of largest weight, equal weights (NT-Xent,
    the debiased loss, a Ring band) ordered by the larger cosine: the key ``w + 1e-9 cos``
    (float64) changes no order between weights further apart than ``2e-9``."""
    key = np.where(mask, weights + 1e-9 * cosines, -np.inf)
    order = np.argpartition(-key, k - 1, axis=-1)[:, :k]
    top = np.zeros_like(mask)
    np.put_along_axis(top, order, True, axis=-1)
    return top & mask


def pair_arrays(z1: Any, z2: Any, loss: Any) -> dict[str, Any]:
    """The tensors a probe record is made of: the in-batch pairs of ``z1``, ``z2`` and the
    loss's weights of their negatives (``keras.ops``: compilable)."""
    pairs = core.in_batch_pairs(z1, z2)
    weights = loss.negative_weights(pairs)
    return {"weights": weights, "effective": effective_negatives(weights),
            "negative_cos": pairs.negative_cos, "positive_cos": pairs.positive_cos,
            "mask": pairs.negative_mask}


def score_pairs(z1: Any, z2: Any, loss: Any, labels: Any = None,
                scatter_seed: int = 0, arrays: dict[str, Any] | None = None,
                scatter: bool = True) -> dict[str, Any]:
    """One probe record of two views' projections ``z1``, ``z2`` (``[P, d]``, or UnReMix
    dicts), weighed by ``loss`` (see the module docstring); ``labels`` ``[P]`` or None.
    ``arrays``: :func:`pair_arrays` of them, computed already (``z1``, ``z2`` unused);
    ``scatter``: add the (cosine, weight) sample (:func:`scatter_sample`)."""
    arrays = pair_arrays(z1, z2, loss) if arrays is None else arrays
    arrays = {k: _numpy(v) for k, v in arrays.items()}
    weights = arrays["weights"].astype(np.float64)
    effective = arrays["effective"]
    mask = arrays["mask"].astype(bool)
    cosines = arrays["negative_cos"].astype(np.float64)
    n = int(mask[0].sum())
    hist, _ = np.histogram(cosines[mask], bins=COSINE_BINS, range=(-1.0, 1.0))
    record: dict[str, Any] = {
        "num_negatives": n,
        "positive_cosine": float(np.mean(arrays["positive_cos"])),
        "negative_cosine": float(cosines[mask].mean()),
        "cosine_histogram": hist.astype(int).tolist(),
        "effective_negatives": float(effective.mean()),
        "effective_negatives_quartiles": [float(q) for q in
                                          np.percentile(effective, [25, 50, 75])],
    }
    if labels is not None:
        known, same = _same_class(labels, mask)
        top = _top_rows(weights, cosines, mask, max(1, int(round(TOP_FRACTION * n)))) & known
        record["false_negatives"] = {
            "all": float(same.sum() / max(known.sum(), 1)),
            "most_weighted": float((same & top).sum() / max(top.sum(), 1)),
            "weight": float((weights * same).sum() / max((weights * known).sum(), 1e-30)),
            "top_fraction": TOP_FRACTION,
        }
    if scatter:
        record["scatter"] = scatter_sample(arrays, labels, scatter_seed)
    return record


def _same_class(labels: Any, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(known, same)`` ``[2P, 2P]``: negative pairs with both labels known, and those of
    one class (the ``2P`` anchors and pool rows: view 1's, then view 2's)."""
    y = np.asarray(labels).reshape(-1)
    y = np.concatenate([y, y])
    known = (y >= 0)[:, None] & (y >= 0)[None, :] & mask
    return known, (y[:, None] == y[None, :]) & known


def scatter_sample(arrays: dict[str, Any], labels: Any, seed: int) -> dict[str, list]:
    """A fixed sample (``seed``) of :data:`SCATTER_POINTS` (anchor, negative) pairs of
    :func:`pair_arrays`: their cosine, weight and (with labels) whether they share a class."""
    mask = _numpy(arrays["mask"]).astype(bool)
    rows, cols = np.nonzero(mask)
    pick = np.sort(np.random.default_rng(seed).permutation(len(rows))[:SCATTER_POINTS])
    rows, cols = rows[pick], cols[pick]
    out = {"cosine": np.round(_numpy(arrays["negative_cos"])[rows, cols].astype(np.float64),
                              4).tolist(),
           "weight": np.round(_numpy(arrays["weights"])[rows, cols].astype(np.float64),
                              5).tolist()}
    if labels is not None:
        out["same_class"] = _same_class(labels, mask)[1][rows, cols].astype(int).tolist()
    return out


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


def _loss_key(loss: Any) -> str:
    return json.dumps(loss.get_config(), sort_keys=True, default=str)


def compiled_probe(model: Any, loss: Any):
    """``(view1, view2) -> pair_arrays`` of ``model``'s probe projections, compiled for the
    running backend (``tf.function``; ``jax.jit`` over the model's variables, stateless),
    eager elsewhere. The loss's hyper-parameters are read when it is traced: build a new
    one when they change (annealing)."""
    def arrays(view1, view2):
        projections = model.probe_projections(view1, view2)
        return pair_arrays(*projections, loss)

    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(arrays, reduce_retracing=True)
    if backend == "jax":
        import jax

        variables = list(model.variables)

        @jax.jit
        def stateless(values, view1, view2):
            with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                return arrays(view1, view2)

        return lambda view1, view2: stateless([v.value for v in variables], view1, view2)
    return arrays


def store(path: str, **fields: Any) -> None:
    """Adds ``fields`` to the ``probe.json`` at ``path`` (replaced whole)."""
    stored = read_probe(path)
    if stored is None:
        return
    stored.update(fields)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(json.dumps(stored, default=float))
    os.replace(tmp, path)


def read_probe(path: str) -> dict[str, Any] | None:
    """The records of a ``probe.json`` (``{"records": [...], ...}``), or None."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _base_probe_projections():
    from keras_hardneg.models.base import ContrastiveModel

    return ContrastiveModel.probe_projections


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
        self._compiled = None
        self._encoded: list[str] = []  # the records before the last, as JSON
        self._last = None  # (arrays, record) of the latest scoring
        if start_epoch and path is not None:
            stored = read_probe(path) or {}
            self.records = [r for r in stored.get("records", [])
                            if int(r.get("epoch", 0)) <= start_epoch]
            self.seconds = float(stored.get("seconds", 0.0))

    def _score(self, epoch: int) -> None:
        import time

        start, cpu = time.perf_counter(), time.process_time()
        loss = self.model.contrastive_loss
        key = _loss_key(loss)
        if self._compiled is None or self._compiled[0] != key:
            self._compiled = (key, compiled_probe(self.model, loss))
        arrays = {k: _numpy(v) for k, v in
                  self._compiled[1](self.probe.view1, self.probe.view2).items()}
        # The (cosine, weight) sample: the first record's now, the last one's at the end.
        first = not self.records
        record = score_pairs(None, None, loss, self.probe.labels, arrays=arrays,
                             scatter_seed=self.seed, scatter=first)
        record["epoch"] = int(epoch)
        record["loss"] = {"name": type(loss).__name__, **{
            k: v for k, v in loss.get_config().items()
            if k not in ("name", "reduction", "dtype")}}
        bank = getattr(self.model, "embedding_bank", None)
        if self.sampler is not None and bank is not None:
            bank = _numpy(bank)
            # Before the first epoch the bank is empty (zeros): nothing to measure yet.
            if np.mean(~bank.any(axis=1)) < 0.01:
                record["batches"] = sampler_statistics(
                    self.sampler, bank, self.sampler_labels, self.seed + int(epoch))
        if self.records and self.records[-1] is not self.records[0]:
            self.records[-1].pop("scatter", None)
        kept = [r for r in self.records if r["epoch"] < epoch]
        self._encoded = self._encoded[:len(kept)]
        self.records = kept + [record]
        self._last = (arrays, record)
        record["seconds"] = round(time.perf_counter() - start, 5)
        record["cpu_seconds"] = round(time.process_time() - cpu, 5)  # every thread's
        self._write()
        self.seconds += time.perf_counter() - start

    def _write(self) -> None:
        """``probe.json``, replaced whole (a reader sees the old or the new file; not
        fsynced: a record lost with the machine is scored again by the resumed epoch).
        Each record is encoded once (json.dumps: the C encoder)."""
        if self.path is None:
            return
        while len(self._encoded) < len(self.records) - 1:
            self._encoded.append(json.dumps(self.records[len(self._encoded)]))
        head = json.dumps({"probe_size": int(len(self.probe.indices)),
                           "indices": self.probe.indices.tolist(), "pairing": "in_batch",
                           "seconds": round(self.seconds, 4)})
        text = (head[:-1] + ', "records": [' + ", ".join(
            self._encoded + [json.dumps(self.records[-1])]) + "]}")
        tmp = f"{self.path}.tmp-{os.getpid()}"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, self.path)

    def on_train_end(self, logs=None):
        if self._last is None:
            return
        arrays, record = self._last
        if "scatter" not in record and record is self.records[-1]:
            record["scatter"] = scatter_sample(arrays, self.probe.labels, self.seed)
            self._write()
        self._last = None

    def on_train_begin(self, logs=None):
        # A framework without two projections (InfoGraph) has nothing to probe.
        own = getattr(type(self.model), "probe_projections", None)
        self.available = own is not None and own is not _base_probe_projections()
        if self.available and not self.records:
            self._score(0)

    def on_epoch_end(self, epoch, logs=None):
        if self.available:
            self._score(epoch + 1)
