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

* the histogram of anchor-negative cosines (:data:`COSINE_BINS` bins over the data's range,
  ``"cosine_range"``: :func:`cosine_range`);
* the effective number of negatives ``1 / sum_j wn_aj^2``, ``wn_aj = w_aj / sum_j w_aj``
  the anchor's weights normalised to sum 1 (:func:`~keras_hardneg.losses.effective_negatives`):
  ``N`` when every negative weighs the same, 1 when one takes all the weight; its mean over the
  ``2P`` anchors and its quartiles beside ``N``;
* the collapse check (:func:`collapse_statistics`): the standard deviation of the
  L2-normalised embeddings per dimension (mean over dimensions; ``1 / sqrt(d)`` when spread
  over the sphere, 0 when collapsed to a point) and their effective rank;
* the optimizer's learning rate at the end of the epoch (``"learning_rate"``);
* with labels, the share of same-class (false) negatives among all negatives, among each
  anchor's most-weighted :data:`TOP_FRACTION` (ties broken by similarity) and in the loss's
  weight (``sum_same w / sum w``);
* a fixed sample of :data:`SCATTER_POINTS` (cosine, weight, same class) pairs, kept for the
  first and the last epoch only (the weight-against-similarity plot), and for those two
  epochs the effective number of every anchor (``"anchor_effective"``) and the hardest
  negatives of :data:`GALLERY_ANCHORS` anchors (``"hardest"``: :func:`hardest_negatives`);
* with a graph sampler (BatchSampler), the mean in-batch cosine ("hardness") and
  false-negative rate of :data:`SAMPLER_BATCHES` batches drawn from a copy of the sampler
  against as many uniform batches, on the embedding bank the sampler's graph is built from
  (:func:`keras_hardneg.sampling.metrics.batch_statistics`).

The records go to ``RUN/probe.json`` (:data:`PROBE_FILE`) after every epoch; a resumed run
continues them. At the end of training the last epoch's probe projections and the probe
examples' labels are written for TensorBoard's projector (:func:`write_projector`,
``RUN/projector/``). Cost: one inference forward pass of ``2P`` examples and ``[2P, 2P]`` arithmetic
an epoch (1.8-2.7 % of an epoch's time on the digits job and on a CIFAR-10 folder).

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
           "pair_arrays", "compiled_probe", "cosine_range", "collapse_statistics",
           "hardest_negatives", "GALLERY_ANCHORS", "GALLERY_NEGATIVES", "PROJECTOR_DIR",
           "write_projector"]

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
#: Anchors of the hardest-negatives gallery, and negatives shown for each.
GALLERY_ANCHORS = 4
GALLERY_NEGATIVES = 6
#: Folder of the TensorBoard projector files in a run directory.
PROJECTOR_DIR = "projector"
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
            "mask": pairs.negative_mask,
            "embeddings": keras.ops.concatenate([_embeddings(z1), _embeddings(z2)], axis=0)}


def cosine_range(cosines: np.ndarray) -> tuple[float, float]:
    """The histogram's range: the cosines' minimum and maximum rounded out to 0.05, at
    least 0.2 wide, inside ``[-1, 1]`` (40 bins over ``[-1, 1]`` put a run whose
    negatives all lie within 0.1 of each other in one or two bins).

    >>> cosine_range(np.array([0.82, 0.97]))
    (0.8, 1.0)
    """
    lo = float(np.floor(np.min(cosines) * 20.0) / 20.0)
    hi = float(np.ceil(np.max(cosines) * 20.0) / 20.0)
    if hi - lo < 0.2:
        mid = 0.5 * (hi + lo)
        lo, hi = mid - 0.1, mid + 0.1
        lo, hi = (lo - (hi - 1.0), 1.0) if hi > 1.0 else (lo, hi)
        lo, hi = (-1.0, hi + (-1.0 - lo)) if lo < -1.0 else (lo, hi)
    return round(max(-1.0, lo), 4), round(min(1.0, hi), 4)


def collapse_statistics(embeddings: np.ndarray) -> dict[str, float]:
    """The collapse check of ``embeddings`` ``[n, d]``: each row L2-normalised, ``"std"`` the
    standard deviation over rows of each dimension, averaged over dimensions (``1/sqrt(d)``
    for directions spread evenly over the sphere, 0 for a collapse to one point);
    ``"effective_rank"`` ``exp(H(p))``, ``p`` the normalised singular values of the
    normalised rows (Roy & Vetterli 2007; RankMe, Garrido et al. 2023): ``d`` at most, 1 for a
    collapse to one direction; ``"dim"`` ``d``.

    >>> stats = collapse_statistics(np.eye(4))
    >>> round(stats["effective_rank"], 4), stats["dim"]
    (4.0, 4)
    """
    z = np.asarray(embeddings, np.float64)
    z = z / np.maximum(np.linalg.norm(z, axis=1, keepdims=True), 1e-12)
    s = np.linalg.svd(z, compute_uv=False)
    p = s / max(s.sum(), 1e-30)
    p = p[p > 0]
    return {"std": float(z.std(axis=0).mean()), "effective_rank": float(np.exp(-(p * np.log(
        p)).sum())), "dim": int(z.shape[1])}


def hardest_negatives(weights: np.ndarray, cosines: np.ndarray, mask: np.ndarray,
                      positive_cos: np.ndarray, labels: Any, seed: int,
                      anchors: int = GALLERY_ANCHORS,
                      negatives: int = GALLERY_NEGATIVES) -> list[dict[str, Any]]:
    """The gallery of the hardest negatives: ``anchors`` view-1 anchors (seeded choice),
    each with its ``negatives`` most-weighted negatives (ties by the larger cosine, as
    :data:`TOP_FRACTION`'s share; an example whose two views score the same cosine, as
    SimCSE's identical views do in inference mode, is listed once). Rows number the ``2P``
    projections: ``r < P`` is view 1 of probe example ``r``, ``r >= P`` view 2 of example
    ``r - P``. Each anchor:
    ``{"anchor": row, "positive_cosine": c, "negatives": [[row, weight, cosine, same]]}``
    (``same`` 1 / 0 for a shared label, None without labels).

    >>> from keras_hardneg.losses import HardNegativeContrastiveLoss
    >>> z1, z2 = np.random.default_rng(0).normal(size=(2, 8, 4)).astype("float32")
    >>> a = {k: np.asarray(v) for k, v in
    ...      pair_arrays(z1, z2, HardNegativeContrastiveLoss(beta=1.0)).items()}
    >>> gallery = hardest_negatives(a["weights"], a["negative_cos"], a["mask"].astype(bool),
    ...                             a["positive_cos"], np.arange(8) % 2, seed=0, anchors=2,
    ...                             negatives=3)
    >>> len(gallery), len(gallery[0]["negatives"])
    (2, 3)
    """
    a2 = mask.shape[0]
    p = a2 // 2
    chosen = np.sort(np.random.default_rng(seed).permutation(p)[:min(anchors, p)])
    k = min(negatives, int(mask[0].sum()))
    same = _same_class(labels, mask)[1] if labels is not None else None
    known = _same_class(labels, mask)[0] if labels is not None else None
    out = []
    for a in chosen:
        key = np.where(mask[a], weights[a] + 1e-9 * cosines[a], -np.inf)
        order, seen = [], {}
        for j in np.argsort(-key, kind="stable"):
            if not mask[a, j]:
                break
            twin = seen.get(int(j) % p)  # the example's other view, already listed
            if twin is not None and abs(cosines[a, j] - cosines[a, twin]) < 1e-6:
                continue  # identical views (SimCSE in inference mode): listed once
            seen[int(j) % p] = int(j)
            order.append(int(j))
            if len(order) == k:
                break
        out.append({"anchor": int(a), "positive_cosine": round(float(positive_cos[a]), 4),
                    "negatives": [[int(j), round(float(weights[a, j]), 5),
                                   round(float(cosines[a, j]), 4),
                                   None if same is None or not known[a, j]
                                   else int(same[a, j])] for j in order]})
    return out


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
    lo, hi = cosine_range(cosines[mask])
    hist, _ = np.histogram(cosines[mask], bins=COSINE_BINS, range=(lo, hi))
    record: dict[str, Any] = {
        "num_negatives": n,
        "positive_cosine": float(np.mean(arrays["positive_cos"])),
        "negative_cosine": float(cosines[mask].mean()),
        "cosine_histogram": hist.astype(int).tolist(),
        "cosine_range": [lo, hi],
        "effective_negatives": float(effective.mean()),
        "effective_negatives_quartiles": [float(q) for q in
                                          np.percentile(effective, [25, 50, 75])],
    }
    if "embeddings" in arrays:
        record["collapse"] = collapse_statistics(arrays["embeddings"])
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
        record.update(_epoch_samples(arrays, labels, scatter_seed))
    return record


def _epoch_samples(arrays: dict[str, Any], labels: Any, seed: int) -> dict[str, Any]:
    """What the first and the last record keep beside their numbers: the (cosine, weight)
    sample, every anchor's effective number, the hardest negatives of a few anchors."""
    arrays = {k: _numpy(v) for k, v in arrays.items()}
    mask = arrays["mask"].astype(bool)
    return {"scatter": scatter_sample(arrays, labels, seed),
            "anchor_effective": np.round(arrays["effective"].astype(np.float64),
                                         4).tolist(),
            "hardest": hardest_negatives(arrays["weights"].astype(np.float64),
                                         arrays["negative_cos"].astype(np.float64), mask,
                                         arrays["positive_cos"].astype(np.float64), labels,
                                         seed)}


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


def write_projector(folder: str, embeddings: np.ndarray, indices: np.ndarray, labels: Any,
                    epoch: int) -> str:
    """Writes ``embeddings`` ``[2P, d]`` (the probe's two views' projections, view 1's rows
    first) for TensorBoard's projector: ``tensors.tsv`` (one row each), ``metadata.tsv``
    (a header, then per row: the training example's index, the view 1 or 2, its
    label or empty) and ``projector_config.pbtxt`` naming both; plain files, TensorFlow not
    needed (``tensorboard --logdir FOLDER``, tab "Projector"). Returns ``folder``.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     _ = write_projector(folder, np.eye(4), np.array([5, 9]), None, epoch=3)
    ...     open(os.path.join(folder, "metadata.tsv")).read().splitlines()[:2]
    ['example\\tview\\tlabel', '5\\t1\\t']
    """
    z = np.asarray(embeddings, np.float64)
    indices = np.asarray(indices).reshape(-1)
    p = len(indices)
    if len(z) != 2 * p:
        raise ValueError(f"write_projector: `embeddings` must have 2 x {p} rows (two views "
                         f"of the probe examples), got {len(z)}")
    os.makedirs(folder, exist_ok=True)
    y = None if labels is None else np.asarray(labels).reshape(-1)
    with open(os.path.join(folder, "tensors.tsv"), "w") as f:
        f.write("".join("\t".join(f"{v:.6g}" for v in row) + "\n" for row in z))
    with open(os.path.join(folder, "metadata.tsv"), "w") as f:
        f.write("example\tview\tlabel\n")
        for r in range(2 * p):
            label = "" if y is None else str(y[r % p])
            f.write(f"{int(indices[r % p])}\t{r // p + 1}\t{label}\n")
    with open(os.path.join(folder, "projector_config.pbtxt"), "w") as f:
        f.write("embeddings {\n"
                f'  tensor_name: "probe projections, epoch {int(epoch)}"\n'
                '  tensor_path: "tensors.tsv"\n  metadata_path: "metadata.tsv"\n}\n')
    return folder


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
        try:
            record["learning_rate"] = float(_numpy(self.model.optimizer.learning_rate))
        except (AttributeError, TypeError, ValueError):  # no optimizer (yet)
            pass
        if self.records and self.records[-1] is not self.records[0]:
            for key in ("scatter", "anchor_effective", "hardest"):
                self.records[-1].pop(key, None)
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
            record.update(_epoch_samples(arrays, self.probe.labels, self.seed))
            self._write()
        if self.path is not None and "embeddings" in arrays:
            write_projector(os.path.join(os.path.dirname(self.path), PROJECTOR_DIR),
                            arrays["embeddings"], self.probe.indices, self.probe.labels,
                            record["epoch"])
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
