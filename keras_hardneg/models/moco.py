"""MoCo v2 (Chen, Fan, Girshick & He 2020, "Improved Baselines with Momentum Contrastive
Learning") and MoCo v3 (Chen, Xie & He, "An Empirical Study of Training Self-Supervised
Vision Transformers", ICCV 2021) as Keras models.

Two algorithms on one momentum encoder (:class:`~keras_hardneg.models.momentum.MomentumContrast`):

* :class:`MoCoV2` -- query ``q = head(enc(view1))``, key ``k = key_head(key_enc(view2))``;
  the negatives are a first-in first-out queue of past keys (``model.queue``).
* :class:`MoCoV3` -- symmetric, no queue: a predictor on the query branch, and each
  query's negatives are the other examples' keys of the (global) batch.
* :func:`MoCo` -- ``MoCo(..., version="v2" | "v3")`` builds the one or the other (a
  function; configs saved before the split, under the name ``MoCo``, still load).
"""

from __future__ import annotations

from typing import Any, Sequence

import keras
from keras import ops

from keras_hardneg.encoders import prediction_head
from keras_hardneg.losses import core
from keras_hardneg.models.base import concat_batches
from keras_hardneg.models.momentum import MomentumContrast, check_momentum
from keras_hardneg.registry import FRAMEWORKS, Param

__all__ = ["MoCo", "MoCoV2", "MoCoV3"]

_MOMENTUM = Param(float, low=0, high=1, help="EMA coefficient of the key encoder")


def _unit_rows_initializer(seed):
    normal = keras.initializers.RandomNormal(seed=seed)

    def init(shape, dtype=None):
        return core.l2_normalize(normal(shape, dtype="float32"))

    return init


def _check_queue_size(queue_size):
    if isinstance(queue_size, bool) or not isinstance(queue_size, int) or queue_size < 1:
        raise ValueError(f"`queue_size` must be an int >= 1; got {queue_size!r}.")
    return int(queue_size)


# `seed` (of the initial queue) is not a config key: the run layer passes the run's seed.
@FRAMEWORKS.register("moco_v2", params={
    "queue_size": Param(int, low=1, help="number K of queued keys (the negatives)"),
    "momentum": _MOMENTUM,
    "symmetric": Param(bool, help="both view orders against the same queue, the loss their "
                                  "mean, both keys enqueued (MoCo's CIFAR-10 demo)"),
})
@keras.saving.register_keras_serializable(package="keras_hardneg")
class MoCoV2(MomentumContrast):
    """MoCo v2: a momentum key encoder and a queue of past keys as negatives.

    Each step: the key branch takes the momentum update, then query
    ``q = head(enc(view1))`` and key ``k = key_head(key_enc(view2))``; the loss is
    ``loss.call_with_negatives(q, k, queue)`` (any loss of the family); then the keys
    of all replicas are enqueued (first-in first-out). Shuffle-BN (MoCo's multi-GPU
    trick) is not implemented.

    ``symmetric=True`` (the symmetric loss of the MoCo authors' CIFAR-10 demo, and of
    lightly's MoCo benchmark): each view is also a query against the other view's key,
    ``loss = (ctr(q1, k2; queue) + ctr(q2, k1; queue)) / 2`` with the same queue (the one
    before this step) in both terms, and both keys ``[k2; k1]`` (``2B`` rows) are
    enqueued. Each of the four passes (two query, two key) is its own batch-norm batch
    of ``B``. It costs a second query and key pass per step.

    Attributes:
        queue: ``[queue_size, d]`` non-trainable variable of unit-norm keys.
        queue_labels: ``[queue_size]`` labels of the queued keys, ``-1`` if unknown,
            used only for the ``false_negative_rate`` metric.
        queue_pointer: the next slot to write.
        key_encoder, key_projector: the momentum copies.

    Args:
        encoder: keras.Model, images ``[B, H, W, 3]`` in ``[0, 1]`` -> ``[B, F]``.
        projection_dims: ``(hidden..., output)``, e.g. ``(2048, 128)``.
        queue_size: ``K``.
        momentum: EMA coefficient in ``[0, 1]``.
        head_version: projection head (default ``"moco_v2"``).
        symmetric: both view orders (see above); default False (the paper's one order).
        seed: seed of the initial (random unit-norm) queue.
        augmentation, gather_across_replicas, memory_bank_size, sync_batchnorm:
            as in :class:`SimCLR`.

    Example:
    >>> import numpy as np, keras_hardneg as khn
    >>> enc = khn.encoders.small_convnet(input_shape=(8, 8, 3), width=4)
    >>> model = MoCoV2(enc, projection_dims=(16, 8), queue_size=32, momentum=0.99)
    >>> model.compile(optimizer="sgd", loss=khn.losses.NTXentLoss(temperature=0.2))
    >>> x = np.random.default_rng(0).uniform(size=(8, 8, 8, 3)).astype("float32")
    >>> h = model.fit({"view1": x, "view2": x[:, ::-1]}, batch_size=8, epochs=1, verbose=0)
    """

    version = "v2"

    def __init__(self, encoder: keras.Model, projection_dims: Sequence[int] = (2048, 128),
                 queue_size: int = 65536, momentum: float = 0.999, augmentation: Any = None,
                 head_version: str | None = None, seed: int = 0, symmetric: bool = False,
                 **kwargs: Any):
        check_momentum(momentum)
        queue_size = _check_queue_size(queue_size)
        if not isinstance(symmetric, bool):
            raise ValueError(f"`symmetric` must be True or False; got {symmetric!r}.")
        super().__init__(encoder, projection_dims=projection_dims, momentum=momentum,
                         head_version=head_version or "moco_v2", augmentation=augmentation,
                         **kwargs)
        self.queue_size = queue_size
        self.seed = seed
        self.symmetric = symmetric
        dim = self.projection_dims[-1]
        self.queue = self.add_weight(
            shape=(self.queue_size, dim), initializer=_unit_rows_initializer(seed),
            trainable=False, name="queue", aggregation="only_first_replica")
        self.queue_labels = self.add_weight(
            shape=(self.queue_size,), initializer=keras.initializers.Constant(-1),
            dtype="int64", trainable=False, name="queue_labels",
            aggregation="only_first_replica")
        self.queue_pointer = self.add_weight(
            shape=(), initializer="zeros", dtype="int64", trainable=False,
            name="queue_pointer", aggregation="only_first_replica")
        self.built = True  # every sub-model is built: weights can be saved before fit

    def enqueue(self, keys: Any, labels: Any = None, step_finite: Any = True) -> None:
        """Writes unit-norm ``keys [B, d]`` (all replicas') at the queue pointer, FIFO.
        Nothing is written when ``step_finite`` is False or a key is not finite."""
        keys = self.gathered(ops.stop_gradient(core.l2_normalize(keys)))
        n = keys.shape[0]
        if n is None:  # an unknown batch size (TensorFlow graph)
            n = ops.shape(keys)[0]
        pointer = self.queue_pointer.value
        slots = (ops.cast(pointer, "int32") + ops.arange(n, dtype="int32")) % self.queue_size
        # A batch larger than the queue keeps its last `queue_size` keys.
        keep = max(n - self.queue_size, 0) if isinstance(n, int) else \
            ops.maximum(n - self.queue_size, 0)
        slots, keys = slots[keep:], keys[keep:]
        # Non-finite keys (a broken batch) are not enqueued: the queue stays clean.
        ok = ops.logical_and(ops.all(ops.isfinite(keys)), step_finite)
        queue = self.queue.value
        self.queue.assign(ops.where(ok, ops.scatter_update(queue, slots[:, None], keys), queue))
        old_labels = self.queue_labels.value
        if labels is None:
            labels = -ops.ones((n,), old_labels.dtype)
        else:
            labels = self.gathered(ops.cast(ops.reshape(labels, (-1,)), old_labels.dtype))
        self.queue_labels.assign(ops.where(
            ok, ops.scatter_update(old_labels, slots[:, None], labels[keep:]), old_labels))
        self.queue_pointer.assign(ops.where(
            ok, (pointer + ops.cast(n, pointer.dtype)) % self.queue_size, pointer))

    def contrastive_forward(self, view1: Any, view2: Any, labels: Any, training: bool,
                            sample_weight: Any = None) -> dict:
        k = self.keys(view2)
        negatives = ops.stop_gradient(self.queue.value)
        q = self.query(view1, training)
        pairs = core.queue_pairs(q, k, negatives)
        terms = self.contrastive_loss.compute_terms(pairs)
        per_anchor, per_example = terms["loss"], 1
        queue_labels = self.queue_labels.value
        if labels is not None:
            labels = ops.cast(labels, queue_labels.dtype)
        keys, key_labels, projections = k, labels, (q, k)
        if self.symmetric:  # the other order, against the same queue
            k1 = self.keys(view1)
            q2 = self.query(view2, training)
            terms_b = self.contrastive_loss.compute_terms(core.queue_pairs(q2, k1, negatives))
            # Both orders' B anchors, reduced together (the mean: the mean of the two terms).
            per_anchor = ops.concatenate([terms["loss"], terms_b["loss"]], axis=0)
            per_example = 2
            terms = {key: 0.5 * (terms[key] + terms_b[key]) for key in terms if key != "loss"}
            # Enqueued one order after the other (each gathered across replicas), so that
            # under a strategy the queue's slots hold what one device would write.
            keys, key_labels = (k, k1), (labels, labels)
            projections = (q, k, q2, k1)
        loss_value = self.reduce_loss(per_anchor, sample_weight,
                                      anchors_per_example=per_example)
        return {"loss": loss_value, "terms": terms, "projections": projections,
                "bank": q["embeddings"] if isinstance(q, dict) else q,
                "false_negatives": self.false_negatives(pairs, labels, queue_labels),
                "keys": keys, "labels": key_labels, "num_negatives": pairs.num_negatives}

    def after_update(self, step: dict, finite: Any) -> None:
        """Health, bank, then the keys of all replicas into the queue (if finite): with
        ``symmetric``, ``k2`` then ``k1``."""
        super().after_update(step, finite)
        if isinstance(step["keys"], tuple):
            for keys, labels in zip(step["keys"], step["labels"]):
                self.enqueue(keys, labels, step_finite=finite)
        else:
            self.enqueue(step["keys"], step["labels"], step_finite=finite)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(queue_size=self.queue_size, seed=self.seed, symmetric=self.symmetric)
        return config


@FRAMEWORKS.register("moco_v3", params={"momentum": _MOMENTUM})
@keras.saving.register_keras_serializable(package="keras_hardneg")
class MoCoV3(MomentumContrast):
    """MoCo v3: a momentum key encoder, a predictor, and in-batch negatives.

    Symmetric and without a queue: both views go through the query branch (encoder,
    head, predictor) and the key branch; each query's negatives are the other
    examples' keys of the (global, under a strategy) batch, and the loss is the mean
    of ``ctr(q1, k2)`` and ``ctr(q2, k1)``. The heads use synchronized BN when there
    are several replicas.

    Attributes:
        key_encoder, key_projector: the momentum copies.
        predictor: the prediction head on the query branch.

    Args:
        encoder: keras.Model, images ``[B, H, W, 3]`` in ``[0, 1]`` -> ``[B, F]``.
        projection_dims: ``(hidden..., output)``, e.g. ``(2048, 128)``.
        momentum: EMA coefficient in ``[0, 1]``.
        predictor_dims: ``(hidden, output)`` of the predictor (default ``(4 * d, d)``
            with ``d = projection_dims[-1]``).
        head_version: projection head (default ``"moco_v3"``).
        augmentation, gather_across_replicas, memory_bank_size, sync_batchnorm:
            as in :class:`SimCLR`.

    Example:
    >>> import numpy as np, keras_hardneg as khn
    >>> enc = khn.encoders.small_convnet(input_shape=(8, 8, 3), width=4)
    >>> model = MoCoV3(enc, projection_dims=(16, 8), momentum=0.99)
    >>> model.compile(optimizer="sgd", loss=khn.losses.NTXentLoss(temperature=0.2))
    >>> x = np.random.default_rng(0).uniform(size=(8, 8, 8, 3)).astype("float32")
    >>> h = model.fit({"view1": x, "view2": x[:, ::-1]}, batch_size=8, epochs=1, verbose=0)
    """

    version = "v3"

    def __init__(self, encoder: keras.Model, projection_dims: Sequence[int] = (2048, 128),
                 momentum: float = 0.999, predictor_dims: Sequence[int] | None = None,
                 augmentation: Any = None, head_version: str | None = None, **kwargs: Any):
        super().__init__(encoder, projection_dims=projection_dims, momentum=momentum,
                         head_version=head_version or "moco_v3", augmentation=augmentation,
                         **kwargs)
        dim = self.projection_dims[-1]
        self.predictor_dims = tuple(predictor_dims or (4 * dim, dim))
        self.predictor = prediction_head(dim, self.predictor_dims[0], self.predictor_dims[1],
                                         sync_batchnorm=self.sync_batchnorm)
        if self.predictor_dims[1] != dim:
            raise ValueError(
                f"`predictor_dims[-1]` must equal the projection size {dim}; got "
                f"{self.predictor_dims}."
            )
        self.built = True  # every sub-model is built: weights can be saved before fit

    def query_layers(self) -> list:
        return super().query_layers() + [self.predictor]

    def query_head(self, z: Any, feats: Any, training: bool) -> tuple:
        return self.predictor(z, training=training, return_features=True)

    def contrastive_forward(self, view1: Any, view2: Any, labels: Any, training: bool,
                            sample_weight: Any = None) -> dict:
        both = concat_batches(view1, view2)  # views may be dicts of tensors
        k1, k2 = ops.split(self.keys(both), 2, axis=0)
        q = self.query(both, training)
        if isinstance(q, dict):
            halves = {key: ops.split(v, 2, axis=0) for key, v in q.items()}
            q1 = {key: v[0] for key, v in halves.items()}
            q2 = {key: v[1] for key, v in halves.items()}
        else:
            q1, q2 = ops.split(q, 2, axis=0)
        offset = self.replica_offset(ops.shape(k1)[0])
        pairs_a = core.cross_view_pairs(q1, k2, pool=(self.gathered(k2), offset))
        pairs_b = core.cross_view_pairs(q2, k1, pool=(self.gathered(k1), offset))
        terms_a = self.contrastive_loss.compute_terms(pairs_a)
        terms_b = self.contrastive_loss.compute_terms(pairs_b)
        # ctr(q1, k2) and ctr(q2, k1): 2B anchors reduced together (the mean: their mean).
        loss_value = self.reduce_loss(ops.concatenate([terms_a["loss"], terms_b["loss"]], 0),
                                      sample_weight, anchors_per_example=2)
        terms = {key: 0.5 * (terms_a[key] + terms_b[key]) for key in terms_a if key != "loss"}
        false_negatives = None
        if labels is not None:
            false_negatives = self.false_negatives(pairs_a, labels, self.gathered(labels))
        return {"loss": loss_value, "terms": terms, "projections": (q, k1, k2),
                "bank": q1["embeddings"] if isinstance(q1, dict) else q1,
                "false_negatives": false_negatives, "num_negatives": pairs_a.num_negatives}

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(predictor_dims=list(self.predictor_dims))
        return config


_CLASSES = {"v2": MoCoV2, "v3": MoCoV3}


def _check_version(version: Any) -> None:
    if version not in _CLASSES:
        raise ValueError(f"`version` must be 'v2' (queue) or 'v3' (in-batch); got {version!r}.")


def MoCo(encoder: keras.Model, projection_dims: Sequence[int] = (2048, 128),  # noqa: N802
         queue_size: int = 65536, momentum: float = 0.999, version: str = "v2",
         predictor_dims: Sequence[int] | None = None, augmentation: Any = None,
         head_version: str | None = None, seed: int = 0, **kwargs: Any) -> MomentumContrast:
    """Momentum contrast: ``MoCo(..., version="v2")`` returns a :class:`MoCoV2` (queue of
    past keys), ``version="v3"`` a :class:`MoCoV3` (predictor, in-batch negatives).

    A function, not a class: the models are :class:`MoCoV2` / :class:`MoCoV3`, whose common
    base is :class:`~keras_hardneg.models.momentum.MomentumContrast` (use those for
    ``isinstance``, ``issubclass`` and subclassing).

    A query encoder trained by gradient, a key encoder that is its exponential moving
    average: before each step the key encoder and head take
    ``key = momentum * key + (1 - momentum) * query`` for every trainable weight (in
    the same order as ``encoder.weights``); the key branch runs batch norm in training
    mode (batch statistics, its own moving averages), as in MoCo.

    * ``version="v2"``: the loss is ``loss.call_with_negatives(q, k, queue)``, then the
      keys of all replicas are enqueued (first-in first-out).
    * ``version="v3"``: the loss is the mean of ``ctr(q1, k2)`` and ``ctr(q2, k1)``,
      each query against the other examples' keys of the (global) batch.

    Args:
        encoder: keras.Model, images ``[B, H, W, 3]`` in ``[0, 1]`` -> ``[B, F]``.
        projection_dims: ``(hidden..., output)``, e.g. ``(2048, 128)``.
        queue_size: ``K`` (v2), default 65536 (checked, and unused, for v3).
        momentum: EMA coefficient in ``[0, 1]``, default 0.999.
        version: ``"v2"`` or ``"v3"``.
        predictor_dims: ``(hidden, output)`` of the v3 predictor (default
            ``(4 * d, d)`` with ``d = projection_dims[-1]``).
        augmentation, head_version, gather_across_replicas, memory_bank_size, sync_batchnorm:
            as in :class:`SimCLR`.
        seed: seed of the v2 initial queue (unused for v3).

    Returns:
        a :class:`MoCoV2` or :class:`MoCoV3`.

    Example:
    >>> import numpy as np, keras_hardneg as khn
    >>> enc = khn.encoders.small_convnet(input_shape=(8, 8, 3), width=4)
    >>> model = MoCo(enc, projection_dims=(16, 8), queue_size=32, momentum=0.99)
    >>> model.compile(optimizer="sgd", loss=khn.losses.NTXentLoss(temperature=0.2))
    >>> x = np.random.default_rng(0).uniform(size=(8, 8, 8, 3)).astype("float32")
    >>> h = model.fit({"view1": x, "view2": x[:, ::-1]}, batch_size=8, epochs=1, verbose=0)
    >>> type(model).__name__, isinstance(model, MomentumContrast)
    ('MoCoV2', True)
    """
    _check_version(version)
    check_momentum(momentum)
    _check_queue_size(queue_size)
    common = dict(projection_dims=projection_dims, momentum=momentum,
                  augmentation=augmentation, head_version=head_version, **kwargs)
    if version == "v2":
        return MoCoV2(encoder, queue_size=queue_size, seed=seed, **common)
    # v3 has no queue: its size and seed (of the initial queue) do not apply.
    return MoCoV3(encoder, predictor_dims=predictor_dims, **common)


class _SavedMoCo:
    """Loads configs saved under the name ``"keras_hardneg>MoCo"`` (before the split into
    :class:`MoCoV2` / :class:`MoCoV3`, when ``MoCo`` was a class holding ``version``): never
    instantiated, only its :meth:`from_config` is called, by Keras's deserialization."""

    @classmethod
    def from_config(cls, config: dict) -> MomentumContrast:
        config = dict(config)
        version = config.pop("version", "v2")
        _check_version(version)
        if version == "v2":
            config.pop("predictor_dims", None)
        else:
            config.pop("queue_size", None)
            config.pop("seed", None)
        return _CLASSES[version].from_config(config)


keras.saving.get_custom_objects()["keras_hardneg>MoCo"] = _SavedMoCo
