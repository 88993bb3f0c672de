"""The base class of every contrastive loss, and the debiasing step they share.

Written with ``keras.ops`` only: every loss runs on every Keras backend.
"""

import dataclasses
import math
from typing import Any, Dict, Optional, Tuple, Union

import keras
from keras import ops

from keras_hardneg import distribute
from keras_hardneg._validation import describe_interval, outside_interval
from keras_hardneg.losses import core
from keras_hardneg.losses import guide_guard
from keras_hardneg.losses import hyperparameters as hp
from keras_hardneg.registry import Param

try:  # Keras keeps a tensor's mask beside it (an attribute, or a table for JAX arrays).
    from keras.src.backend import get_keras_mask as _get_keras_mask
except ImportError:  # pragma: no cover - older Keras 3
    def _get_keras_mask(x):
        return getattr(x, "_keras_mask", None)

__all__ = ["ContrastiveLoss", "debiased_log_negatives", "check_float", "check_param",
           "effective_negatives", "REDUCTIONS", "anchor_weights", "reduce_anchor_losses",
           "scale_for_replicas", "keras_mask"]

#: The ``reduction`` values of a loss (those of ``keras.losses.Loss``).
REDUCTIONS = ("sum_over_batch_size", "mean", "sum", "mean_with_sample_weight", None, "none")
_MEANS = ("sum_over_batch_size", "mean", "mean_with_sample_weight")


def check_float(name: str, value, low=None, high=None, low_inclusive=True,
                high_inclusive=True) -> float:
    """Validates a float hyper-parameter; raises ``ValueError`` naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"`{name}` must be a number; got {value!r}.")
    value = float(value)
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"`{name}` must be finite; got {value}.")
    if outside_interval(value, low, high, low_inclusive, high_inclusive):
        allowed = describe_interval(low, high, low_inclusive, high_inclusive)
        raise ValueError(f"`{name}` must be {allowed}; got {value:g}.")
    return value


def check_param(name: str, value, param: Param) -> float:
    """Validates a float hyper-parameter against its :class:`~keras_hardneg.registry.Param`
    (:mod:`keras_hardneg.losses.hyperparameters`: the one place its range is stated);
    raises ``ValueError`` naming it."""
    return check_float(name, value, param.low, param.high, param.low_inclusive,
                       param.high_inclusive)


def keras_mask(z) -> Any:
    """The Keras mask ``[B]`` carried by embeddings ``z`` (a tensor, or UnReMix's dict: its
    ``"embeddings"``), as ``keras.losses.Loss.__call__`` reads it; None without one."""
    if isinstance(z, dict):
        z = z.get("embeddings")
    if z is None:
        return None
    try:
        mask = _get_keras_mask(z)
    except (TypeError, AttributeError):  # e.g. a NumPy array
        return None
    if mask is None:
        return None
    mask = ops.convert_to_tensor(mask)
    if len(mask.shape) == 2 and mask.shape[-1] == 1:
        mask = ops.squeeze(mask, axis=-1)
    return ops.cast(mask, "bool")


def _embeddings_of(z):
    """``stop_gradient`` of embeddings (a tensor, or an UnReMix dict's ``"embeddings"``)."""
    return ops.stop_gradient(z["embeddings"] if isinstance(z, dict) else z)


def _both_masks(a, b):
    if a is None or b is None:
        return b if a is None else a
    return ops.logical_and(a, b)


def _log_count(num_negatives):
    """``log N`` for an int (a Python float) or a scalar tensor (a float32 tensor)."""
    if isinstance(num_negatives, int):
        return math.log(num_negatives) if num_negatives > 0 else float("-inf")
    return ops.log(ops.cast(num_negatives, "float32"))


def debiased_log_negatives(log_r, pos_logit, num_negatives, tau_plus: float,
                           temperature: float) -> Tuple[Any, Any]:
    """The debiased negative term of Chuang et al. (2020), in log space.

    Computes ``log Ng`` with
    ``Ng = max((R - tau_plus * N * e^pos) / (1 - tau_plus), N * e^(-1/t))``
    from ``log R`` without ever exponentiating a logit.

    Args:
        log_r: ``[A]`` log of the (possibly importance-weighted) negative sum ``R``.
        pos_logit: ``[A]`` positive logit ``cos / t``.
        num_negatives: ``N`` (int or scalar tensor).
        tau_plus: class prior in ``[0, 1)`` (Python float).
        temperature: ``t > 0`` (Python float).

    Returns:
        ``(log_ng [A], clamped [A] bool)``; ``clamped`` marks anchors where the
        lower bound ``N e^{-1/t}`` is active (they get no gradient from negatives).

    Example:
    >>> import numpy as np
    >>> log_ng, clamped = debiased_log_negatives(np.log([10.0], dtype="float32"),
    ...                                          np.zeros(1, "float32"), 4, 0.0, 0.5)
    >>> round(float(log_ng[0]), 4), bool(clamped[0])
    (2.3026, False)
    """
    log_n = _log_count(num_negatives)
    log_clamp = log_n - 1.0 / temperature
    if tau_plus == 0.0:
        candidate = log_r
    else:
        # c = log(tau N e^pos / R); the difference R - tau N e^pos is positive iff c < 0.
        c = math.log(tau_plus) + log_n + pos_logit - log_r
        valid = c < 0.0
        c_safe = ops.where(valid, c, -1.0)
        candidate = log_r + ops.log(-ops.expm1(c_safe)) - math.log1p(-tau_plus)
        candidate = ops.where(valid, candidate, float("-inf"))
    log_ng = ops.maximum(candidate, log_clamp)
    clamped = candidate <= log_clamp
    return log_ng, clamped


def effective_negatives(weights: core.Tensor) -> Any:
    """``[A]`` effective number of negatives of each anchor: ``1 / sum_j wn_aj^2`` with the
    normalised weights ``wn_aj = w_aj / sum_j w_aj`` (Kish's effective sample size,
    ``(sum w)^2 / sum w^2``). ``N`` for uniform weights over ``N`` negatives, the band size
    for Ring, fewer the more a loss concentrates on some negatives; 0 for an anchor without
    weight (an empty Ring band).

    Args:
        weights: ``[A, M]`` non-negative weights, 0 where the pool row is not a negative
            (:meth:`ContrastiveLoss.negative_weights`).

    Example:
    >>> import numpy as np
    >>> w = np.array([[1.0, 1.0, 0.0], [3.0, 1.0, 0.0]])
    >>> [round(float(v), 4) for v in effective_negatives(w)]
    [2.0, 1.6]
    """
    w = ops.cast(weights, "float32")
    total = ops.sum(w, axis=-1)
    squares = ops.sum(ops.square(w), axis=-1)
    return ops.where(squares > 0.0, ops.square(total) / ops.maximum(squares, 1e-30), 0.0)


def _static_len(x):
    shape = getattr(x, "shape", None)
    try:
        return None if shape is None or len(shape) == 0 else shape[0]
    except TypeError:  # a TensorFlow tensor of unknown rank
        return None


def anchor_weights(sample_weight, values, anchors_per_example: int = 1):
    """``sample_weight`` as float32 weights of the per-anchor losses ``values`` ``[A]``.

    A scalar scales every anchor; ``[A]`` (or ``[A, 1]``) is one weight per anchor; with
    ``anchors_per_example = k > 1`` (the in-batch convention: ``k = 2``, view 1's ``B``
    rows then view 2's), ``[B]`` with ``A = k B`` is one weight per example, repeated so
    that example ``i``'s weight goes to its anchors ``i``, ``B + i``, ... Anything else
    raises ``ValueError``.
    """
    w = ops.cast(ops.convert_to_tensor(sample_weight), "float32")
    rank = len(w.shape)
    if rank == 2 and w.shape[-1] == 1:
        w, rank = ops.squeeze(w, axis=-1), 1
    if rank == 0:
        return w
    k = int(anchors_per_example)
    a, b = _static_len(values), _static_len(w)
    if rank != 1 or (a is not None and b is not None and b != a and b * k != a):
        allowed = (f"[{a // k}] (one per example) or [{a}] (one per anchor)" if k > 1 and a
                   else f"[{a}] (one per example)")
        raise ValueError(f"`sample_weight` must have one weight per example or per anchor: "
                         f"a scalar, {allowed}; got shape {tuple(w.shape)}.")
    if k == 1 or (a is not None and a == b):
        return w
    if a is not None and b is not None:
        return ops.tile(w, (k,))
    # Unknown sizes (a TensorFlow graph): per anchor when the lengths agree, else per example.
    tiled = ops.reshape(ops.broadcast_to(w[None, :], (k, ops.shape(w)[0])), (-1,))
    return ops.cond(ops.shape(w)[0] == ops.shape(values)[0], lambda: w, lambda: tiled)


def reduce_anchor_losses(values, sample_weight=None, mask=None,
                         reduction="sum_over_batch_size", anchors_per_example: int = 1,
                         dtype=None):
    """Reduces per-anchor losses ``[A]`` as ``keras.losses.Loss.__call__`` reduces a loss's
    values (``keras/src/losses/loss.py``), before the per-replica scaling
    (:func:`scale_for_replicas`).

    ``sample_weight`` (:func:`anchor_weights`, with ``anchors_per_example``) multiplies the
    values; ``mask`` ``[A]``
    (bool, e.g. InfoGraph's real nodes) drops anchors: for ``"sum_over_batch_size"`` and
    ``"mean"`` the mean is then over the kept anchors, otherwise the mask multiplies the
    weights. ``"sum"``: the sum; ``"sum_over_batch_size"`` / ``"mean"``: the sum over ``A``;
    ``"mean_with_sample_weight"``: the sum over the sum of the weights (``A`` without
    weights); ``None`` / ``"none"``: the weighted values ``[A]``. Division by zero gives 0.
    Computed in float32; the result in ``dtype`` (default float32).

    Example:
    >>> import numpy as np
    >>> v = np.array([1.0, 2.0, 3.0, 4.0], "float32")
    >>> w = np.array([1.0, 0.0], "float32")  # two examples, two anchors each
    >>> float(reduce_anchor_losses(v, sample_weight=w, anchors_per_example=2))
    1.0
    """
    if reduction not in REDUCTIONS:
        raise ValueError(f"`reduction` must be one of {list(REDUCTIONS)}; got {reduction!r}.")
    values = ops.cast(values, "float32")
    weight = (None if sample_weight is None
              else anchor_weights(sample_weight, values, anchors_per_example))
    if mask is not None:
        kept = ops.cast(mask, "float32")
        if reduction in ("sum_over_batch_size", "mean"):
            # Kept anchors weigh A / kept, so that the sum over A is the mean over the kept.
            total = ops.cast(ops.shape(kept)[0], "float32")
            kept = kept * ops.divide_no_nan(total, ops.sum(kept))
        weight = kept if weight is None else weight * kept
    if weight is not None:
        values = values * weight
    dtype = dtype or "float32"
    if reduction in (None, "none"):
        return ops.cast(values, dtype)
    loss = ops.sum(values)
    if reduction == "sum":
        return ops.cast(loss, dtype)
    if reduction == "mean_with_sample_weight" and weight is not None:
        divisor = ops.sum(weight * ops.ones_like(values))
    else:
        divisor = ops.cast(ops.shape(values)[0], "float32")
    return ops.cast(ops.divide_no_nan(loss, divisor), dtype)


def scale_for_replicas(value, reduction="sum_over_batch_size"):
    """``value / R`` for the mean reductions under a ``tf.distribute`` strategy of ``R``
    replicas (their gradients are summed, so ``R`` local means give the global mean), as
    Keras scales a loss; ``"sum"``, ``None`` and JAX (one step over the global batch) are
    unchanged."""
    replicas = distribute.num_replicas()
    if replicas == 1 or reduction not in _MEANS:
        return value
    return value * ops.cast(1.0 / replicas, value.dtype)


class ContrastiveLoss(keras.losses.Loss):
    """Base class: one anchor-positive-negatives loss, in-batch or against a queue.

    Subclasses implement :meth:`anchor_terms`, mapping a
    :class:`~keras_hardneg.losses.core.ContrastivePairs` to per-anchor losses.
    This class supplies the two call conventions of the library:

    * ``loss(z1, z2, sample_weight=None)``: SimCLR, two views ``[B, d]``; ``2B`` anchors.
    * ``loss.call_with_negatives(anchors, positives, negatives, sample_weight=None)``:
      MoCo, with ``[B, d]``, ``[B, d]``, ``[K, d]``; ``B`` anchors.
    * ``loss.call_with_mined_negatives(anchors, positives, negatives, sample_weight=None,
      **options)``: retrieval, queries ``[B, d]``, positives ``[B, d]`` and their ``K``
      mined negatives ``[B, K, d]`` (:func:`~keras_hardneg.losses.core.mined_pairs`); ``B``
      anchors (``2B`` symmetric). :class:`~keras_hardneg.losses.MinedNegativesLoss` is its
      ``model.compile`` form.

    and :meth:`compute_terms`, which frameworks use for the per-anchor losses and the
    diagnostics. Written in ``keras.ops`` (any backend).

    Reduction (one path, :meth:`reduce`, Keras's semantics): the per-anchor losses are
    reduced by ``reduction`` as ``keras.losses.Loss`` reduces (default
    ``"sum_over_batch_size"``: the mean over the anchors; ``"sum"``; ``"mean"``;
    ``"mean_with_sample_weight"``; ``None``/``"none"``: the ``[A]`` losses), then, for the
    mean reductions under a ``tf.distribute`` strategy, divided by the number of replicas
    (as Keras does: the replicas' gradients are summed). Both call conventions and the
    frameworks' training steps go through it. ``sample_weight``: a scalar, one weight per
    example ``[B]`` (in-batch, example ``i``'s weight goes to both its anchors, ``i`` and
    ``B + i``) or one per anchor ``[A]``.

    ``dtype`` (as ``keras.losses.Loss``'s: a dtype or a policy, whose compute dtype counts;
    default ``keras.backend.floatx()``): the inputs are cast to it, as
    ``keras.losses.Loss.__call__`` casts them, and the loss is returned in it (also the
    ``[A]`` losses of ``reduction=None``). In between, the similarities, log-sum-exps and
    the reduction are float32 arithmetic whatever the dtype (a 16-bit ``1e-12`` norm floor
    underflows to 0, and Ring's selection reads float32 bits).

    Masks (as ``keras.losses.Loss.__call__`` honours them): a Keras mask ``[B]`` on ``z2``
    (``y_pred``), and on ``z1`` too (both are embeddings; they are combined with AND), drops
    the masked examples: they are neither anchors nor anyone's negatives, and the reduction
    is Keras's ``apply_mask`` (for ``"sum_over_batch_size"`` / ``"mean"`` the mean over the
    kept anchors; combined with ``sample_weight``; all masked gives 0). In the queue
    convention a mask on ``anchors`` (or ``positives``) drops those anchors.

    No negatives (a batch of one example in-batch or cross-view; a mask that keeps one):
    an anchor without a negative has loss 0 and no gradient -- the negative sum is empty,
    ``-log(e^pos / (e^pos + 0)) = 0`` -- in every loss, on every backend, whether the batch
    size is known when traced or only at run time, never NaN. The frameworks do not train
    on such a batch (they drop it with one warning per ``fit``).

    Example:
    >>> import numpy as np
    >>> from keras_hardneg.losses import NTXentLoss
    >>> z1, z2 = np.random.default_rng(0).normal(size=(2, 4, 8)).astype("float32")
    >>> per_anchor = NTXentLoss(reduction=None)(z1, z2)
    >>> tuple(per_anchor.shape)
    (8,)
    >>> w = np.array([1.0, 1.0, 0.0, 0.0], "float32")  # drop examples 2 and 3
    >>> summed = NTXentLoss(reduction="sum")(z1, z2, sample_weight=w)
    >>> bool(np.isclose(float(summed), float(np.sum(np.asarray(per_anchor)[[0, 1, 4, 5]]))))
    True
    >>> float(NTXentLoss()(z1[:1], z2[:1]))  # one example: no negative
    0.0
    """

    has_clamp = False
    #: True when the loss uses the head's last-layer input (UnReMix's uncertainty).
    needs_features = False
    #: ``annealing`` recipe key -> the hyper-parameter its schedule changes (what
    #: ``keras_hardneg.run`` checks a recipe's ``annealing`` section against).
    annealing: Dict[str, str] = {}

    def __init__(self, temperature: float = 0.5, name: Optional[str] = None,
                 reduction: Optional[str] = "sum_over_batch_size", dtype=None):
        if reduction not in REDUCTIONS:
            raise ValueError(f"`reduction` must be one of {list(REDUCTIONS)}; got "
                             f"{reduction!r}.")
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        self.temperature = check_param("temperature", temperature, hp.TEMPERATURE)

    # --- subclass hook ------------------------------------------------------
    def anchor_terms(self, pairs: core.ContrastivePairs) -> Dict[str, Any]:
        """Returns ``{"loss": [A]}`` plus optional ``"clamped": [A] bool``, for pairs whose
        every anchor has at least one negative (:meth:`per_anchor_terms` sees to that)."""
        raise NotImplementedError

    def hcl_parameters(self) -> Optional[Dict[str, float]]:
        """``{"beta", "tau_plus"}``: where this loss sits in Robinson et al.'s (2021) family
        (NT-Xent is ``beta = 0, tau_plus = 0``; the debiased loss ``beta = 0``); None for a
        loss outside it (Ring). What a search over the family reports."""
        return {"beta": float(getattr(self, "beta", 0.0)),
                "tau_plus": float(getattr(self, "tau_plus", 0.0))}

    # --- conventions --------------------------------------------------------
    def _as_dtype(self, z):
        """``z`` (or a dict's entries) cast to the loss's dtype, as Keras casts a loss's
        inputs; non-float input is left for the shape checks to refuse."""
        if isinstance(z, dict):
            return {k: self._as_dtype(v) for k, v in z.items()}
        z = ops.convert_to_tensor(z)
        if "float" in keras.backend.standardize_dtype(z.dtype):
            return ops.cast(z, self.dtype)
        return z

    def __call__(self, y_true, y_pred, sample_weight=None):
        """``loss(z1, z2, sample_weight=None)``: the in-batch loss of two views ``[B, d]``,
        reduced by :meth:`reduce` (``[2B]`` per-anchor losses with ``reduction=None``);
        Keras masks on the views drop examples (see the class docstring)."""
        keep = _both_masks(keras_mask(y_true), keras_mask(y_pred))
        with keras.name_scope(self.name):
            pairs = core.in_batch_pairs(self._as_dtype(y_true), self._as_dtype(y_pred),
                                        keep=keep)
            anchor_mask = None if keep is None else ops.concatenate([keep, keep], axis=0)
            return self.reduce(self.per_anchor_terms(pairs)["loss"], sample_weight,
                               anchor_mask, anchors_per_example=2)

    def call(self, y_true, y_pred):
        """Keras entry point: ``y_true`` is ``z1``, ``y_pred`` is ``z2``; ``[2B]`` losses."""
        return self.per_anchor_terms(core.in_batch_pairs(y_true, y_pred))["loss"]

    def call_with_negatives(self, anchors, positives, negatives, sample_weight=None):
        """The queue convention (MoCo): the ``B`` anchors' losses reduced by :meth:`reduce`
        (``sample_weight``: a scalar or ``[B]``; a Keras mask on ``anchors`` or
        ``positives`` drops those anchors)."""
        keep = _both_masks(keras_mask(anchors), keras_mask(positives))
        with keras.name_scope(self.name):
            pairs = core.queue_pairs(self._as_dtype(anchors), self._as_dtype(positives),
                                     self._as_dtype(negatives))
            return self.reduce(self.per_anchor_terms(pairs)["loss"], sample_weight, keep)

    def call_with_mined_negatives(self, anchors, positives, negatives, sample_weight=None,
                                  **options):
        """The mined-negatives convention (retrieval): queries ``anchors [B, d]``, their
        positive documents ``positives [B, d]`` and ``K`` mined negatives each
        ``negatives [B, K, d]`` (:func:`~keras_hardneg.losses.core.mined_pairs`); the
        ``B`` (``2B`` with ``symmetric``) anchors' losses reduced by :meth:`reduce`
        (``sample_weight``: a scalar, ``[B]`` one per example, or one per anchor; a Keras mask
        on ``anchors`` or ``positives`` drops those examples).

        ``options``: ``in_batch``, ``symmetric``, ``hardness_strength``, ``hardness_mode``,
        ``guide``, ``guard_margin``, ``guard_strategy`` (:meth:`mined_anchor_losses`).

        Example:
        >>> import numpy as np
        >>> from keras_hardneg.losses import NTXentLoss
        >>> rng = np.random.default_rng(0)
        >>> q, p = rng.normal(size=(2, 4, 8)).astype("float32")
        >>> n = rng.normal(size=(4, 2, 8)).astype("float32")
        >>> loss = NTXentLoss(temperature=0.05)
        >>> float(loss.call_with_mined_negatives(q, p, n, hardness_strength=5.0,
        ...                                      hardness_mode="hard_negatives")) > 0
        True
        """
        keep = _both_masks(keras_mask(anchors), keras_mask(positives))
        symmetric = bool(options.get("symmetric", False))
        with keras.name_scope(self.name):
            values = self.mined_anchor_losses(self._as_dtype(anchors), self._as_dtype(positives),
                                              self._as_dtype(negatives), keep=keep, **options)
            anchor_mask = None if keep is None else (
                ops.concatenate([keep, keep], axis=0) if symmetric else keep)
            return self.reduce(values, sample_weight, anchor_mask,
                               anchors_per_example=2 if symmetric else 1)

    def mined_anchor_losses(self, anchors: core.Tensor, positives: core.Tensor,
                            negatives: core.Tensor, *, keep: Optional[core.Tensor] = None,
                            in_batch: bool = True, symmetric: bool = False,
                            hardness_strength: float = 0.0,
                            hardness_mode: Optional[str] = None,
                            guide: Union[None, str, Tuple[core.Tensor, core.Tensor,
                                                          core.Tensor]] = None,
                            guard_margin: float = 0.0,
                            guard_strategy: str = "absolute") -> core.Tensor:
        """``[A]`` per-anchor losses of the mined-negatives convention, unreduced: the one
        place its options meet (:meth:`call_with_mined_negatives` and
        :class:`~keras_hardneg.losses.MinedNegativesLoss` reduce them).

        Args:
            anchors, positives, negatives: ``[B, d]``, ``[B, d]``, ``[B, K, d]`` (or UnReMix
                dicts), as :func:`~keras_hardneg.losses.core.mined_pairs` takes them.
            keep: optional ``[B]`` bool, the examples kept.
            in_batch, symmetric, hardness_strength, hardness_mode: passed to
                :func:`~keras_hardneg.losses.core.mined_pairs`.
            guide: None (no guard); ``"self"``: the inputs themselves under
                ``stop_gradient``; or a tuple ``(anchors [B, d_g], positives [B, d_g],
                negatives [B, K, d_g])`` of a frozen guide's embeddings of the same rows.
                Negatives the guide flags are dropped
                (:func:`~keras_hardneg.losses.guide_guard.guard_negatives`).
            guard_margin, guard_strategy: the guard's margin and ``"absolute"`` /
                ``"relative"``.
        """
        layout = dict(in_batch=in_batch, symmetric=symmetric, keep=keep)
        pairs = core.mined_pairs(anchors, positives, negatives,
                                 hardness_strength=hardness_strength,
                                 hardness_mode=hardness_mode, **layout)
        if guide is not None:
            margin = guide_guard.check_guard(guard_margin, guard_strategy)
            if isinstance(guide, str) and guide == "self":
                guide = tuple(_embeddings_of(z) for z in (anchors, positives, negatives))
            elif not (isinstance(guide, (tuple, list)) and len(guide) == 3):
                raise ValueError("`guide` must be None, 'self' or a tuple of the guide's "
                                 f"(anchors, positives, negatives) embeddings; got {guide!r}.")
            guide_pairs = core.mined_pairs(*(self._as_dtype(g) for g in guide), **layout)
            pairs = guide_guard.guard_negatives(pairs, guide_pairs, margin, guard_strategy)
        return self.per_anchor_terms(pairs)["loss"]

    def per_anchor_terms(self, pairs: core.ContrastivePairs) -> Dict[str, Any]:
        """:meth:`anchor_terms` with the package's rule for anchors without a negative
        (loss 0, no gradient, never NaN; see the class docstring). When ``N`` is a static
        positive int every anchor has ``N`` negatives and the terms are the subclass's as
        they are; otherwise (``N`` 0, or known only at run time) such anchors are computed
        on a stand-in (their whole pool row) and their loss set to 0."""
        n = pairs.num_negatives
        if (isinstance(n, int) and n > 0) or pairs.negative_mask is None:
            return self.anchor_terms(pairs)
        has = ops.any(pairs.negative_mask, axis=1)
        stand_in = dataclasses.replace(
            pairs, negative_mask=ops.logical_or(pairs.negative_mask,
                                                ops.logical_not(has)[:, None]),
            num_negatives=max(n, 1) if isinstance(n, int) else ops.maximum(n, 1))
        terms = dict(self.anchor_terms(stand_in))
        terms["loss"] = ops.where(has, terms["loss"], ops.zeros_like(terms["loss"]))
        if "clamped" in terms:
            terms["clamped"] = ops.logical_and(terms["clamped"], has)
        return terms

    def reduce(self, per_anchor, sample_weight=None, mask=None, *, anchors_per_example=1,
               for_replica=True):
        """The one reduction of this loss: per-anchor losses ``[A]`` reduced by
        ``self.reduction`` as Keras reduces (:func:`reduce_anchor_losses`: ``sample_weight``
        a scalar, ``[A]``, or ``[A / anchors_per_example]`` one per example; ``mask``
        ``[A]``), in the loss's ``dtype``, then scaled for the replicas
        (:func:`scale_for_replicas`; ``for_replica=False`` leaves that out: the frameworks
        log the unscaled value and scale what they differentiate)."""
        value = reduce_anchor_losses(per_anchor, sample_weight, mask, self.reduction,
                                     anchors_per_example, dtype=self.dtype)
        return scale_for_replicas(value, self.reduction) if for_replica else value

    def scale_for_replicas(self, value):
        """``value`` (a reduced loss) scaled as :meth:`reduce` scales it for the replicas."""
        return scale_for_replicas(value, self.reduction)

    def compute_terms(self, pairs: core.ContrastivePairs) -> Dict[str, Any]:
        """Per-anchor losses and diagnostics for a :class:`ContrastivePairs`.

        Returns a dict with ``"loss"`` (``[A]``, :meth:`per_anchor_terms`),
        ``"positive_cosine"`` and ``"negative_cosine"`` (batch means) and, for losses with
        the debiasing clamp, ``"clamp_fraction"`` (share of clamped anchors).
        """
        terms = self.per_anchor_terms(pairs)
        out = {
            "loss": terms["loss"],
            "positive_cosine": ops.mean(pairs.positive_cos),
            "negative_cosine": ops.mean(
                core.masked_mean(pairs.negative_cos, pairs.negative_mask)
            ),
        }
        if self.has_clamp:
            out["clamp_fraction"] = ops.mean(ops.cast(terms["clamped"], "float32"))
        return out

    def negative_weights(self, pairs: core.ContrastivePairs):
        """``[A, M]`` float32: the weight ``w_aj`` with which pool row ``j`` enters anchor
        ``a``'s negative term ``R_a = sum_j w_aj e^{s_aj}`` (``s_aj = cos / t``); 0 where
        the row is not one of the anchor's negatives.

        This base (NT-Xent, and the debiased loss, whose correction subtracts a term tied to
        the positive, not to a negative) weighs every negative 1. The hard-negative loss
        gives ``N softmax_j(beta s_aj)`` (mean 1), UnReMix its mixture (mean 1), Ring 1
        inside its rank band and 0 outside. :func:`effective_negatives` of these weights is
        the effective number of negatives. Computed in ``keras.ops`` from the same
        quantities as the loss, without gradients of interest (a diagnostic).

        Example:
        >>> import numpy as np
        >>> from keras_hardneg.losses import NTXentLoss, in_batch_pairs
        >>> z = np.eye(3, 4, dtype="float32")
        >>> w = NTXentLoss().negative_weights(in_batch_pairs(z, z))
        >>> [float(v) for v in np.asarray(w)[0]]
        [0.0, 1.0, 1.0, 0.0, 1.0, 1.0]
        """
        indicator = self.negative_indicator(pairs, pairs.negative_cos)
        n = pairs.num_negatives
        if not ((isinstance(n, int) and n > 0) or pairs.negative_mask is None):
            has = ops.any(pairs.negative_mask, axis=1)[:, None]
            pairs = dataclasses.replace(
                pairs, negative_mask=ops.logical_or(pairs.negative_mask, ops.logical_not(has)),
                num_negatives=max(n, 1) if isinstance(n, int) else ops.maximum(n, 1))
        _, neg = self.logits(pairs)
        return self.weights_of_negatives(pairs, neg) * indicator

    def weights_of_negatives(self, pairs: core.ContrastivePairs, neg_logits):
        """:meth:`negative_weights` from the temperature-scaled logits ``[A, M]`` (the hook
        subclasses override)."""
        return self.negative_indicator(pairs, neg_logits)

    @staticmethod
    def negative_indicator(pairs: core.ContrastivePairs, neg_logits):
        """``[A, M]`` float32: 1 where the pool row is a negative of the anchor, else 0."""
        if pairs.negative_mask is None:
            return ops.ones_like(ops.cast(neg_logits, "float32"))
        return ops.cast(pairs.negative_mask, "float32")

    def diagnostics(self, z1, z2) -> Dict[str, Any]:
        """In-batch diagnostics of two views (see :meth:`compute_terms`), without the loss."""
        terms = self.compute_terms(core.in_batch_pairs(z1, z2))
        terms.pop("loss")
        return terms

    # --- helpers for subclasses --------------------------------------------
    def logits(self, pairs: core.ContrastivePairs):
        """``(pos [A], neg [A, M])``: cosines divided by the temperature, plus the pairs'
        ``negative_offset`` on the negatives when they carry one."""
        t = self.temperature
        neg = pairs.negative_cos / t
        if pairs.negative_offset is not None:  # the additive hardness (losses.hardness)
            neg = neg + pairs.negative_offset
        return pairs.positive_cos / t, neg

    def get_config(self):
        config = super().get_config()
        config["temperature"] = self.temperature
        if self._dtype_policy.name != keras.backend.floatx():
            # keras.losses.Loss leaves its dtype out of its config: kept when not the default.
            config["dtype"] = self._dtype_policy.name
        return config
