"""Training on (query, positive, K mined negatives) tuples with ``model.compile(loss=...)``."""

from typing import Any, Dict, Optional, Union

import keras
from keras import ops

from keras_hardneg.losses import core
from keras_hardneg.losses import guide_guard
from keras_hardneg.losses import hardness
from keras_hardneg.losses.base import (REDUCTIONS, ContrastiveLoss, keras_mask,
                                       reduce_anchor_losses, scale_for_replicas)

__all__ = ["MinedNegativesLoss", "GUARDS", "split_tuples"]

#: The ``guard`` values of :class:`MinedNegativesLoss`: none, the encoder itself (under
#: ``stop_gradient``) as its own guide, or a frozen guide's embeddings given as ``y_true``.
GUARDS = (None, "self", "guide")


def split_tuples(z, num_negatives: int, name: str = "y_pred"):
    """``(queries [B, d], positives [B, d], negatives [B, K, d])`` of a flat batch of tuples
    ``z [B (2 + K), d]`` laid out example-major ``[q_0, p_0, n_0_1 .. n_0_K, q_1, ...]`` (an
    UnReMix dict ``{"embeddings", "features"}`` gives three dicts).

    Raises ``ValueError`` when the (static) number of rows is not a multiple of ``2 + K``.

    Example:
    >>> import numpy as np
    >>> q, p, n = split_tuples(np.arange(12, dtype="float32").reshape(6, 2), 1)
    >>> np.asarray(q).tolist(), tuple(n.shape)
    ([[0.0, 1.0], [6.0, 7.0]], (2, 1, 2))
    """
    if isinstance(z, dict):
        parts = {key: split_tuples(value, num_negatives, f"{name}[{key!r}]")
                 for key, value in z.items()}
        return tuple({key: part[i] for key, part in parts.items()} for i in range(3))
    z = ops.convert_to_tensor(z)
    width = 2 + num_negatives
    shape = tuple(z.shape)
    if len(shape) != 2:
        raise ValueError(f"`{name}` must have rank 2 (shape [B*(2+K), d], the tuples' rows); "
                         f"got shape {shape}.")
    if shape[0] is not None and shape[0] % width:
        raise ValueError(f"`{name}` must hold whole tuples: a multiple of 2 + K = {width} rows "
                         f"(query, positive, K = {num_negatives} negatives); got {shape[0]} rows.")
    dim = shape[1] if shape[1] is not None else ops.shape(z)[1]
    tuples = ops.reshape(z, (-1, width, dim))
    return tuples[:, 0], tuples[:, 1], tuples[:, 2:]


@keras.saving.register_keras_serializable(package="keras_hardneg")
class MinedNegativesLoss(keras.losses.Loss):
    """Any loss of the family on tuples (query, positive, ``K`` mined negatives), as
    ``model.compile(loss=...)`` takes it: the stock single-input embedding model sees one flat
    batch of ``B (2 + K)`` rows and this loss knows ``K``.

    ``y_pred`` ``[B (2 + K), d]`` is example-major ``[q_0, p_0, n_0_1 .. n_0_K, q_1, ...]``
    (:func:`split_tuples`); the pairs are :func:`~keras_hardneg.losses.core.mined_pairs`':
    a query's negatives are the batch's other positives and all its mined negatives
    (``in_batch``, as sentence-transformers' MultipleNegativesRankingLoss) or its own ``K``
    only; ``symmetric`` adds the document->query direction (``2B`` anchors). Options:

    * ``hardness_strength`` / ``hardness_mode``: sentence-transformers' additive hardness
      ``strength * stop_gradient(cos)`` on the selected negative logits
      (:mod:`~keras_hardneg.losses.hardness`; Lan et al. 2025, Schechter Vera et al. 2025),
      before the wrapped loss's own weighting -- which, for
      :class:`~keras_hardneg.losses.HardNegativeContrastiveLoss`, is HCL's tilt
      ``e^{beta s}`` (Robinson et al., ICLR 2021).
    * ``guard``: GISTEmbed's false-negative guard (Solatorio 2024;
      :mod:`~keras_hardneg.losses.guide_guard`): a negative the guide scores above the
      anchor's guide positive minus ``guard_margin`` is dropped. ``"self"``: the encoder's
      own embeddings under ``stop_gradient``; ``"guide"``: a frozen guide's embeddings of the
      same rows arrive as ``y_true`` ``[B (2 + K), d_g]`` (same layout). The same margins
      select negatives offline (NV-Retriever, Moreira et al. 2024).

    ``y_true`` is read only with ``guard="guide"``; otherwise give no targets:
    ``model.fit(x)`` or ``fit(x, None)`` pass ``y_true = None``, which this loss accepts (its
    ``__call__`` is its own, like every loss of the family). ``sample_weight``: a scalar,
    one per row ``[B (2 + K)]`` as ``fit`` passes it (the query row's weight is its
    example's), or one per example ``[B]``. A Keras mask on ``y_pred`` keeps the examples all
    of whose rows are kept. The per-anchor losses (``[B]``, ``[2B]`` symmetric) are reduced
    by this loss's ``reduction`` (the wrapped loss's is not used) and scaled for the replicas
    as every loss of the family.

    Args:
        loss: the wrapped loss: an instance, a registry name (``"nt_xent"``, ``"hard"``, ...),
            a recipe section or a serialized config (:func:`keras_hardneg.losses.get`).
            UnReMix without head features uses its bias-gradient uncertainty.
        num_negatives: ``K >= 0``, the mined negatives per tuple (required: a wrong ``K``
            would cut the rows into wrong tuples).
        in_batch, symmetric: the pairs (:func:`~keras_hardneg.losses.core.mined_pairs`).
        hardness_strength, hardness_mode: ``>= 0``; None or ``"in_batch_negatives"`` /
            ``"hard_negatives"`` / ``"all_negatives"``.
        guard: None, ``"self"`` or ``"guide"``.
        guard_margin, guard_strategy: the guard's margin, ``"absolute"`` or ``"relative"``.

    Example:
    >>> import numpy as np
    >>> loss = MinedNegativesLoss("nt_xent", num_negatives=1, hardness_strength=5.0,
    ...                           hardness_mode="hard_negatives")
    >>> rows = np.random.default_rng(0).normal(size=(4 * 3, 8)).astype("float32")
    >>> tuple(MinedNegativesLoss("hard", num_negatives=1, reduction=None)(None, rows).shape)
    (4,)
    >>> float(loss(None, rows)) > 0
    True
    """

    def __init__(self, loss: Union[str, Dict[str, Any], ContrastiveLoss] = "nt_xent", *,
                 num_negatives: int, in_batch: bool = True,
                 symmetric: bool = False, hardness_strength: float = 0.0,
                 hardness_mode: Optional[str] = None, guard: Optional[str] = None,
                 guard_margin: float = 0.0, guard_strategy: str = "absolute",
                 name: Optional[str] = None, reduction: Optional[str] = "sum_over_batch_size",
                 dtype=None):
        from keras_hardneg import losses as family  # the package's `get` (imports this module)

        if reduction not in REDUCTIONS:
            raise ValueError(f"`reduction` must be one of {list(REDUCTIONS)}; got "
                             f"{reduction!r}.")
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        self.loss = family.get(loss)
        if self.loss is None:
            raise ValueError("`loss` must name a contrastive loss of keras_hardneg; got None.")
        self.num_negatives = core.check_mined_options(num_negatives, in_batch, symmetric)
        self.in_batch, self.symmetric = in_batch, symmetric
        self.hardness_strength = hardness.check_hardness(hardness_strength, hardness_mode)
        self.hardness_mode = hardness_mode
        if guard not in GUARDS:
            raise ValueError(f"`guard` must be one of {list(GUARDS)}; got {guard!r}.")
        self.guard = guard
        self.guard_margin = guide_guard.check_guard(guard_margin, guard_strategy)
        self.guard_strategy = guard_strategy

    def _options(self):
        return dict(in_batch=self.in_batch, symmetric=self.symmetric,
                    hardness_strength=self.hardness_strength, hardness_mode=self.hardness_mode,
                    guard_margin=self.guard_margin, guard_strategy=self.guard_strategy)

    def _as_dtype(self, z):
        if isinstance(z, dict):
            return {key: self._as_dtype(value) for key, value in z.items()}
        z = ops.convert_to_tensor(z)
        if "float" in keras.backend.standardize_dtype(z.dtype):
            return ops.cast(z, self.dtype)
        return z

    def _guide(self, y_true):
        if self.guard is None:
            return None
        if self.guard == "self":
            return "self"
        if y_true is None:
            raise ValueError("`guard='guide'` needs the guide's embeddings as y_true (shape "
                             "[B*(2+K), d_g], the rows of y_pred); got None.")
        return split_tuples(self._as_dtype(y_true), self.num_negatives, "y_true")

    def _example_keep(self, y_true, y_pred):
        masks = [keras_mask(y_pred)] + ([keras_mask(y_true)] if self.guard == "guide" else [])
        masks = [m for m in masks if m is not None]
        if not masks:
            return None
        rows = masks[0] if len(masks) == 1 else ops.logical_and(masks[0], masks[1])
        return ops.all(ops.reshape(rows, (-1, 2 + self.num_negatives)), axis=1)

    def _example_weights(self, sample_weight, num_rows):
        """``sample_weight`` per example: a per-row ``[B (2 + K)]`` weight becomes its query
        row's; a scalar or ``[B]`` (or per anchor) is left to the reduction."""
        if sample_weight is None:
            return None
        w = ops.cast(ops.convert_to_tensor(sample_weight), "float32")
        if len(w.shape) == 2 and w.shape[-1] == 1:
            w = ops.squeeze(w, axis=-1)
        if len(w.shape) != 1:
            return w  # a scalar, or a shape the reduction refuses with its message

        def per_row():
            return ops.reshape(w, (-1, 2 + self.num_negatives))[:, 0]

        if w.shape[0] is not None and isinstance(num_rows, int):
            return per_row() if w.shape[0] == num_rows else w
        return ops.cond(ops.equal(ops.shape(w)[0], num_rows), per_row, lambda: w)

    def __call__(self, y_true, y_pred, sample_weight=None):
        """The reduced loss of the tuples ``y_pred [B (2 + K), d]`` (see the class
        docstring); ``y_true`` None unless ``guard="guide"``."""
        keep = self._example_keep(y_true, y_pred)
        with keras.name_scope(self.name):
            y_pred = self._as_dtype(y_pred)
            rows = y_pred["embeddings"] if isinstance(y_pred, dict) else y_pred
            num_rows = rows.shape[0] if rows.shape[0] is not None else ops.shape(rows)[0]
            values = self.loss.mined_anchor_losses(
                *split_tuples(y_pred, self.num_negatives), keep=keep,
                guide=self._guide(y_true), **self._options())
            anchor_mask = None if keep is None else (
                ops.concatenate([keep, keep], axis=0) if self.symmetric else keep)
            value = reduce_anchor_losses(values, self._example_weights(sample_weight, num_rows),
                                         anchor_mask, self.reduction,
                                         2 if self.symmetric else 1, dtype=self.dtype)
            return scale_for_replicas(value, self.reduction)

    def call(self, y_true, y_pred):
        """Keras's entry point: the ``[B]`` (``[2B]`` symmetric) per-anchor losses."""
        return self.loss.mined_anchor_losses(
            *split_tuples(y_pred, self.num_negatives), guide=self._guide(y_true),
            **self._options())

    def get_config(self):
        config = super().get_config()
        config.update(loss=keras.saving.serialize_keras_object(self.loss),
                      num_negatives=self.num_negatives, in_batch=self.in_batch,
                      symmetric=self.symmetric, hardness_strength=self.hardness_strength,
                      hardness_mode=self.hardness_mode, guard=self.guard,
                      guard_margin=self.guard_margin, guard_strategy=self.guard_strategy)
        if self._dtype_policy.name != keras.backend.floatx():
            config["dtype"] = self._dtype_policy.name
        return config
