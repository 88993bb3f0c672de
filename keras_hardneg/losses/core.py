"""The shared contrastive core: similarities, positives, negatives and masks.

Every loss in :mod:`keras_hardneg.losses` and both frameworks build on the two
functions here, so that there is exactly one place where "which rows are an
anchor's positive and negatives" is decided.

Conventions (those of the papers: Chen et al. 2020 for in-batch pairs, He et al. 2020 for
the queue):

* **In-batch** (SimCLR): ``z1``, ``z2`` are ``[B, d]`` projections of two views,
  row ``i`` of each is example ``i``. The ``2B`` rows of ``[z1; z2]`` are all
  anchors; anchor ``a``'s positive is the other view of its example and its
  negatives are the other ``N = 2B - 2`` rows. Negatives are returned as the full
  ``[2B, 2B]`` cosine matrix with a boolean ``negative_mask`` (no gather), which
  keeps shapes static for XLA.
* **Queue** (MoCo): ``anchors [B, d]``, ``positives [B, d]``, ``negatives [K, d]``.
  Every row of ``negatives`` is a negative of every anchor (``N = K``); the mask
  is ``None``.
* **Mined** (retrieval, :func:`mined_pairs`): queries ``[B, d]``, their positive documents
  ``[B, d]`` and ``K`` mined negative documents each ``[B, K, d]``. A query's negatives are
  the other examples' positives and every mined negative of the batch (or, hard negatives
  only, its own ``K``); optionally the documents are anchors too (the document->query
  direction). Full cosine matrix and mask, as in-batch.

All similarities are cosines in float32, whatever the input dtype; losses
divide them by the temperature themselves.

Written with ``keras.ops`` only: one implementation for every Keras backend (TensorFlow,
JAX), eager or compiled. Shape checks use static shapes (always known under JAX); under
TensorFlow with unknown batch sizes, views of different sizes fail at run time in a reshape
instead of giving the static check's message.
"""

import dataclasses
from typing import Any, Optional, Tuple, Union

import keras
from keras import ops

from keras_hardneg.losses import hardness
from keras_hardneg.losses.false_negatives import false_negative_rate_of_pairs

# The models' metric; the one implementation is in :mod:`keras_hardneg.losses.false_negatives`.
false_negative_fraction = false_negative_rate_of_pairs

__all__ = [
    "ContrastivePairs",
    "l2_normalize",
    "in_batch_pairs",
    "cross_view_pairs",
    "mined_pairs",
    "check_mined_options",
    "negatives_column",
    "queue_pairs",
    "mask_logits",
    "masked_logsumexp",
    "masked_mean",
    "false_negative_fraction",
    "validate_embeddings",
]

_NEG_INF = float("-inf")
_EPS = 1e-12

#: A backend tensor (``tf.Tensor``, ``jax.Array``, ...).
Tensor = Any


@dataclasses.dataclass
class ContrastivePairs:
    """Positives and negatives of a set of anchors, as cosine similarities.

    Attributes:
        anchors: ``[A, d]`` unit-norm anchor rows (``A = 2B`` in-batch, ``B`` queue).
        positives: ``[A, d]`` unit-norm positive rows, row ``a`` is anchor ``a``'s.
        negatives: ``[M, d]`` unit-norm pool of candidate negatives
            (``M = 2B`` in-batch, ``K`` queue).
        positive_cos: ``[A]`` cosine of each anchor with its positive.
        negative_cos: ``[A, M]`` cosine of each anchor with each pool row.
        negative_mask: ``[A, M]`` bool, ``True`` where the pool row is one of the
            anchor's negatives; ``None`` when every pool row is (queue case).
        num_negatives: ``N``, the number of negatives of every anchor: an int, a scalar
            int tensor (known at run time), or an ``[A]`` int tensor, one per anchor, where
            anchors have different counts (:func:`mined_pairs` with documents as anchors,
            a mask, a false-negative guard). :func:`negatives_column` broadcasts it.
        anchor_index: ``[A]`` int, SimCLR in-batch only: the pool row that is
            the anchor itself (``None`` otherwise).
        partner_index: ``[A]`` int, in-batch only: the pool row holding each
            anchor's positive (``None`` in the queue case).
        anchor_features / positive_features / negative_features: optional
            projection-head features ``[*, m]`` (the input of the head's last
            Dense layer), carried for UnReMix's uncertainty term.
        negative_norms / anchor_norms: ``[M]`` / ``[A]`` norms of the rows
            before normalisation (UnReMix needs them for exact gradients).
        negative_offset: optional ``[A, M]`` float32 offsets added to the negative logits
            ``cos / t`` by :meth:`~keras_hardneg.losses.ContrastiveLoss.logits`, before the
            loss's own weighting (the additive hardness of
            :mod:`~keras_hardneg.losses.hardness`); ``None``: none.
    """

    anchors: Tensor
    positives: Tensor
    negatives: Tensor
    positive_cos: Tensor
    negative_cos: Tensor
    negative_mask: Optional[Tensor]
    num_negatives: int
    anchor_index: Optional[Tensor] = None
    partner_index: Optional[Tensor] = None
    anchor_features: Optional[Tensor] = None
    negative_features: Optional[Tensor] = None
    anchor_norms: Optional[Tensor] = None
    negative_norms: Optional[Tensor] = None
    negative_offset: Optional[Tensor] = None

    @property
    def in_batch(self) -> bool:
        """True when the negatives come from the batch itself (masked pool)."""
        return self.negative_mask is not None


def _sum_sq(x, axis=-1, keepdims=False):
    return ops.sum(ops.square(x), axis=axis, keepdims=keepdims)


def l2_normalize(x, axis: int = -1) -> Tensor:
    """Unit-normalises rows in float32 (safe at zero: returns zeros, no NaN).

    ``x / sqrt(max(sum(x^2), 1e-12))``, as ``tf.math.l2_normalize``.

    Example:
    >>> import numpy as np
    >>> [round(float(v), 6) for v in l2_normalize(np.array([[3.0, 4.0]]))[0]]
    [0.6, 0.8]
    """
    x = ops.cast(x, "float32")
    return x * ops.rsqrt(ops.maximum(_sum_sq(x, axis, keepdims=True), _EPS))


def _split_input(z, name):
    """Accepts a tensor or UnReMix's ``{"embeddings", "features"}`` dict."""
    if isinstance(z, dict):
        unknown = set(z) - {"embeddings", "features"}
        if "embeddings" not in z or unknown:
            raise ValueError(
                f"`{name}` given as a dict must have the key 'embeddings' and "
                f"optionally 'features'; got keys {sorted(z)}."
            )
        feats = z.get("features")
        if feats is not None:
            feats = ops.cast(feats, "float32")
        return z["embeddings"], feats
    return z, None


def _static_shape(z):
    """``tuple`` of ints/None, or ``None`` when even the rank is unknown."""
    try:
        return tuple(z.shape)
    except (TypeError, ValueError):  # a TensorFlow tensor of unknown rank
        return None


def _fully_defined(shape):
    return shape is not None and all(s is not None for s in shape)


def validate_embeddings(z, name: str, min_rows: int = 1) -> Tensor:
    """Checks that ``z`` is a rank-2 float tensor; returns it as a backend tensor.

    Raises:
        ValueError: naming ``name`` when the dtype is not floating, the rank is not 2, or
            the static number of rows is below ``min_rows``.
    """
    z = ops.convert_to_tensor(z)
    dtype = keras.backend.standardize_dtype(z.dtype)
    if "float" not in dtype:
        raise ValueError(f"`{name}` must be a float tensor; got dtype {dtype}.")
    shape = _static_shape(z)
    if shape is not None and len(shape) != 2:
        raise ValueError(
            f"`{name}` must have rank 2 (shape [batch, dim]); got shape {shape}."
        )
    rows = None if shape is None else shape[0]
    if rows is not None and rows < min_rows:
        raise ValueError(
            f"`{name}` needs at least {min_rows} rows; got shape {shape}."
        )
    return z


def _check_same_shape(a, b, name_a, name_b, what="shape [batch, dim]"):
    """Static check with a clear error; with unknown dimensions (TensorFlow only) returns
    ``b`` reshaped to ``a``'s shape, which fails at run time if they differ."""
    sa, sb = _static_shape(a), _static_shape(b)
    if _fully_defined(sa) and _fully_defined(sb):
        if sa != sb:
            raise ValueError(
                f"`{name_a}` and `{name_b}` must have the same {what}; got {sa} and {sb}."
            )
        return b
    return ops.reshape(b, ops.shape(a))


def _norms_and_unit(z):
    z = ops.cast(z, "float32")
    sq = _sum_sq(z, keepdims=True)
    return ops.sqrt(sq[:, 0]), z * ops.rsqrt(ops.maximum(sq, _EPS))


def _dot_rows(a, b):
    """``[A, M]``: ``a @ b^T``."""
    return ops.matmul(a, ops.transpose(b))


def _assemble(anchors, positives, negatives, mask, num_negatives, anchor_norms,
              negative_norms, anchor_features=None, negative_features=None,
              anchor_index=None, partner_index=None):
    """The :class:`ContrastivePairs` of unit-norm ``anchors [A, d]``, ``positives [A, d]``
    and ``negatives [M, d]``: the one place the positive and negative cosines are computed."""
    return ContrastivePairs(
        anchors=anchors,
        positives=positives,
        negatives=negatives,
        positive_cos=ops.sum(anchors * positives, axis=-1),
        negative_cos=_dot_rows(anchors, negatives),
        negative_mask=mask,
        num_negatives=num_negatives,
        anchor_index=anchor_index,
        partner_index=partner_index,
        anchor_features=anchor_features,
        negative_features=negative_features,
        anchor_norms=anchor_norms,
        negative_norms=negative_norms,
    )


def _rows(z):
    """The number of rows: a Python int when static, else a scalar tensor."""
    shape = _static_shape(z)
    if shape is not None and shape[0] is not None:
        return shape[0]
    return ops.shape(z)[0]


def _one_hot_mask(index, m):
    """``[len(index), m]`` bool, True at ``[i, index[i]]``."""
    return ops.equal(index[:, None], ops.arange(m, dtype="int32")[None, :])


def in_batch_pairs(z1: Tensor, z2: Tensor,
                   pool: Optional[Tuple[Tensor, Tensor, Union[int, Tensor]]] = None,
                   keep: Optional[Tensor] = None) -> ContrastivePairs:
    """Builds the SimCLR pairs of two views.

    Args:
        z1, z2: ``[B, d]`` float tensors (any float dtype), or UnReMix dicts
            ``{"embeddings": [B, d], "features": [B, m]}``. ``B >= 1``: with ``B = 1``
            (or one kept example) the anchors have no negative (``N = 0``).
        pool: optional ``(all_z1, all_z2, offset)`` for many replicas: the
            views of the *global* batch (``[B_global, d]`` each, gathered from
            all replicas in replica order, same kind as ``z1``/``z2``) and the
            global row index of local row 0. The local ``2B`` rows stay the
            anchors; their negatives are the other ``2 B_global - 2`` rows of
            the global batch. ``None`` means the local batch is the whole batch.
        keep: optional ``[B]`` bool (a Keras mask): the examples kept. A dropped example
            is no one's negative (its anchors' rows are left for the reduction to mask);
            ``N = 2 * kept - 2`` (a scalar tensor). Not with ``pool``.

    Returns:
        A :class:`ContrastivePairs` with ``A = 2B``, ``M = 2 B_global`` and
        ``N = 2 B_global - 2``.

    Example:
    >>> import numpy as np
    >>> p = in_batch_pairs(np.eye(3, 4, dtype="float32"), np.eye(3, 4, dtype="float32"))
    >>> p.num_negatives, tuple(p.negative_cos.shape)
    (4, (6, 6))
    """
    z1, f1 = _split_input(z1, "z1")
    z2, f2 = _split_input(z2, "z2")
    z1 = validate_embeddings(z1, "z1", min_rows=1)
    z2 = validate_embeddings(z2, "z2", min_rows=1)
    if keep is not None and pool is not None:
        raise ValueError("`keep` (a mask) cannot be combined with `pool` (many replicas).")
    z2 = _check_same_shape(z1, z2, "z1", "z2")
    if (f1 is None) != (f2 is None):
        raise ValueError("Give 'features' for both `z1` and `z2`, or for neither.")

    norms, u = _norms_and_unit(ops.concatenate([z1, z2], axis=0))
    feats = None if f1 is None else ops.concatenate([f1, f2], axis=0)
    batch = _rows(z1)
    positives = ops.roll(u, shift=batch, axis=0)  # row a now holds a's partner
    if pool is None:
        pool_u, pool_norms, pool_feats = u, norms, feats
        global_batch, offset = batch, 0
        static_gb = batch if isinstance(batch, int) else None
    else:
        all_z1, all_z2, offset = pool
        all_z1, af1 = _split_input(all_z1, "pool z1")
        all_z2, af2 = _split_input(all_z2, "pool z2")
        pool_norms, pool_u = _norms_and_unit(ops.concatenate([all_z1, all_z2], axis=0))
        pool_feats = None if af1 is None else ops.concatenate([af1, af2], axis=0)
        global_batch = _rows(all_z1)
        static_gb = global_batch if isinstance(global_batch, int) else None
        offset = offset if isinstance(offset, int) else ops.cast(offset, "int32")
    local = ops.arange(2 * batch, dtype="int32")
    view = local // batch  # 0 for z1 rows, 1 for z2 rows
    row = local % batch + offset
    self_index = view * global_batch + row
    partner_index = (1 - view) * global_batch + row
    m = 2 * global_batch
    neg_mask = ops.logical_not(ops.logical_or(_one_hot_mask(self_index, m),
                                              _one_hot_mask(partner_index, m)))
    n = (2 * static_gb - 2) if static_gb is not None else m - 2
    if keep is not None:
        kept = ops.reshape(ops.cast(keep, "bool"), (-1,))
        neg_mask = ops.logical_and(neg_mask, ops.concatenate([kept, kept], axis=0)[None, :])
        n = 2 * ops.sum(ops.cast(kept, "int32")) - 2
    return _assemble(u, positives, pool_u, neg_mask, n, norms, pool_norms, feats, pool_feats,
                     anchor_index=self_index, partner_index=partner_index)


def cross_view_pairs(anchors, keys, pool=None) -> ContrastivePairs:
    """MoCo v3 in-batch pairs: anchor ``i``'s positive is ``keys[i]``, its
    negatives are the keys of the *other* examples of the (global) batch.

    Args:
        anchors: ``[B, d]`` queries (or UnReMix dict).
        keys: ``[B, d]`` keys of the same examples (or UnReMix dict).
        pool: optional ``(all_keys, offset)``: keys gathered from all replicas
            and the global index of local row 0.

    Returns:
        :class:`ContrastivePairs` with ``A = B``, ``M = B_global``, ``N = B_global - 1``.

    Example:
    >>> import numpy as np
    >>> p = cross_view_pairs(np.eye(3, 4, dtype="float32"), np.eye(3, 4, dtype="float32"))
    >>> p.num_negatives, tuple(p.negative_cos.shape)
    (2, (3, 3))
    """
    a, fa = _split_input(anchors, "anchors")
    k, fk = _split_input(keys, "keys")
    a = validate_embeddings(a, "anchors", min_rows=1)
    k = validate_embeddings(k, "keys", min_rows=1)
    a_norms, ua = _norms_and_unit(a)
    _, uk = _norms_and_unit(k)
    if pool is None:
        pool_u, pool_feats, offset = uk, fk, 0
        pool_norms = ops.sqrt(_sum_sq(ops.cast(k, "float32")))
        m = _rows(k)
    else:
        all_k, offset = pool
        all_k, pool_feats = _split_input(all_k, "pool keys")
        pool_norms, pool_u = _norms_and_unit(all_k)
        m = _rows(all_k)
        offset = offset if isinstance(offset, int) else ops.cast(offset, "int32")
    index = ops.arange(_rows(a), dtype="int32") + offset
    neg_mask = ops.logical_not(_one_hot_mask(index, m))
    return _assemble(ua, uk, pool_u, neg_mask, m - 1, a_norms, pool_norms, fa, pool_feats,
                     partner_index=index)


def queue_pairs(anchors, positives, negatives) -> ContrastivePairs:
    """Builds MoCo pairs: each anchor against its positive and a shared pool.

    Args:
        anchors: ``[B, d]`` (or UnReMix dict), the queries.
        positives: ``[B, d]`` (or UnReMix dict), the keys of the same examples.
        negatives: ``[K, d]`` (or UnReMix dict), e.g. a MoCo queue. ``K >= 1``.

    Returns:
        A :class:`ContrastivePairs` with ``A = B``, ``M = N = K`` and no mask.

    Example:
    >>> import numpy as np
    >>> q = np.ones((2, 4), "float32"); k = np.ones((5, 4), "float32")
    >>> queue_pairs(q, q, k).num_negatives
    5
    """
    a, fa = _split_input(anchors, "anchors")
    p, _ = _split_input(positives, "positives")
    n, fn = _split_input(negatives, "negatives")
    a = validate_embeddings(a, "anchors", min_rows=1)
    p = validate_embeddings(p, "positives", min_rows=1)
    n = validate_embeddings(n, "negatives", min_rows=1)
    p = _check_same_shape(a, p, "anchors", "positives")
    sa, sn = _static_shape(a), _static_shape(n)
    if sa[-1] is not None and sn[-1] is not None and sa[-1] != sn[-1]:
        raise ValueError(
            "`negatives` must have the anchors' dimension; got "
            f"anchors {sa} and negatives {sn}."
        )
    a_norms, ua = _norms_and_unit(a)
    _, up = _norms_and_unit(p)
    n_norms, un = _norms_and_unit(n)
    return _assemble(ua, up, un, None, _rows(n), a_norms, n_norms, fa, fn)


def negatives_column(num_negatives):
    """``N`` (:attr:`ContrastivePairs.num_negatives`) as it broadcasts against ``[A, M]``: an
    int or a scalar tensor unchanged, a per-anchor ``[A]`` tensor as ``[A, 1]``.

    Example:
    >>> import numpy as np
    >>> tuple(negatives_column(np.array([3, 1], "int32")).shape), negatives_column(4)
    ((2, 1), 4)
    """
    if isinstance(num_negatives, int):
        return num_negatives
    n = ops.convert_to_tensor(num_negatives)
    return n[:, None] if len(n.shape) == 1 else n


def _mined_negatives(negatives, dim):
    """``(negatives [B, K, d], features [B, K, m] or None, K)``; ``K`` must be static."""
    n, feats = _split_input(negatives, "negatives")
    n = ops.convert_to_tensor(n)
    dtype = keras.backend.standardize_dtype(n.dtype)
    if "float" not in dtype:
        raise ValueError(f"`negatives` must be a float tensor; got dtype {dtype}.")
    shape = _static_shape(n)
    if shape is None or len(shape) != 3 or shape[1] is None:
        raise ValueError("`negatives` must have rank 3 with a static K (shape [B, K, d]: K "
                         f"mined negatives per anchor, K >= 0); got shape {shape}.")
    if shape[2] is not None and dim is not None and shape[2] != dim:
        raise ValueError(f"`negatives` must have the anchors' dimension {dim}; got shape "
                         f"{shape}.")
    return n, feats, shape[1]


def _mined_layout(b, k, in_batch, symmetric):
    """The static-shape masks of :func:`mined_pairs`' pool ``[positives; negatives;
    (queries)]``: ``(negative_mask [A, M], explicit [A, M] (the query's own mined
    negatives), query_anchor [A], column_example [M], anchor_index, partner_index)``."""
    bk = b * k
    cols = ops.arange(2 * b + bk if symmetric else b + bk, dtype="int32")
    is_pos = cols < b
    is_neg = ops.logical_and(cols >= b, cols < b + bk)
    column_example = ops.where(is_pos, cols,
                               ops.where(is_neg, (cols - b) // max(k, 1), cols - b - bk))
    rows = ops.arange(2 * b if symmetric else b, dtype="int32")
    row_example = rows % b
    query_anchor = rows < b
    own = ops.equal(row_example[:, None], column_example[None, :])
    if in_batch:
        query_negatives = ops.logical_or(ops.logical_and(is_pos[None, :], ops.logical_not(own)),
                                         is_neg[None, :])
    else:
        query_negatives = ops.logical_and(is_neg[None, :], own)
    document_negatives = ops.logical_and((cols >= b + bk)[None, :], ops.logical_not(own))
    mask = ops.where(query_anchor[:, None], query_negatives, document_negatives)
    explicit = ops.logical_and(ops.logical_and(is_neg[None, :], own), query_anchor[:, None])
    partner_index = ops.where(query_anchor, row_example, b + bk + row_example)
    anchor_index = (ops.where(query_anchor, b + bk + row_example, row_example)
                    if symmetric else None)
    return mask, explicit, query_anchor, column_example, anchor_index, partner_index


def _mined_rows(anchors, positives, negatives, symmetric):
    """Unit rows, norms and features of :func:`mined_pairs`: ``(anchors, positives, pool,
    anchor norms, pool norms, anchor features, pool features, K)``."""
    q, fq = _split_input(anchors, "anchors")
    p, fp = _split_input(positives, "positives")
    q = validate_embeddings(q, "anchors", min_rows=1)
    p = _check_same_shape(q, validate_embeddings(p, "positives", min_rows=1), "anchors",
                          "positives")
    dim = _static_shape(q)[-1]
    n, fn, k = _mined_negatives(negatives, dim)
    sq, sn = _static_shape(q), _static_shape(n)
    if sq[0] is not None and sn[0] is not None and sq[0] != sn[0]:
        raise ValueError(f"`negatives` must have one row of K negatives per anchor (shape "
                         f"[B, K, d]); got anchors {sq} and negatives {sn}.")
    given = [f is not None for f in ((fq, fp, fn) if k else (fq, fp))]
    if any(given) and not all(given):
        raise ValueError("Give 'features' for `anchors`, `positives` and `negatives`, or for "
                         "none of them.")
    q_norms, uq = _norms_and_unit(q)
    p_norms, up = _norms_and_unit(p)
    pool, norms, feats = [up], [p_norms], [fp]
    if k:
        n_norms, un = _norms_and_unit(ops.reshape(n, (-1, ops.shape(n)[-1])))
        pool, norms = pool + [un], norms + [n_norms]
        feats.append(None if fn is None else ops.reshape(fn, (-1, ops.shape(fn)[-1])))
    if symmetric:
        pool, norms, feats = pool + [uq], norms + [q_norms], feats + [fq]

    def cat(parts):
        return None if parts[0] is None else ops.concatenate(parts, axis=0)

    if symmetric:
        return (cat([uq, up]), cat([up, uq]), cat(pool), cat([q_norms, p_norms]), cat(norms),
                cat([fq, fp]), cat(feats), k)
    return uq, up, cat(pool), q_norms, cat(norms), fq, cat(feats), k


def check_mined_options(num_negatives, in_batch: bool, symmetric: bool) -> int:
    """Validates the layout options of :func:`mined_pairs` (``num_negatives`` the ``K`` of
    ``negatives [B, K, d]``); returns ``K``. Raises ``ValueError`` naming the parameter.

    Example:
    >>> check_mined_options(1, in_batch=True, symmetric=True)
    1
    """
    if isinstance(num_negatives, bool) or not isinstance(num_negatives, int) or num_negatives < 0:
        raise ValueError(f"`num_negatives` must be an int >= 0 (K mined negatives per query); "
                         f"got {num_negatives!r}.")
    for name, value in (("in_batch", in_batch), ("symmetric", symmetric)):
        if not isinstance(value, bool):
            raise ValueError(f"`{name}` must be True or False; got {value!r}.")
    if symmetric and not in_batch:
        raise ValueError("`symmetric=True` needs `in_batch=True` (the document->query "
                         "direction's negatives are the batch's other queries).")
    if not in_batch and num_negatives < 1:
        raise ValueError("`negatives` must hold K >= 1 mined negatives per anchor with "
                         f"`in_batch=False` (hard negatives only); got K = {num_negatives}.")
    return num_negatives


def mined_pairs(anchors: Tensor, positives: Tensor, negatives: Tensor, *,
                in_batch: bool = True, symmetric: bool = False,
                keep: Optional[Tensor] = None, hardness_strength: float = 0.0,
                hardness_mode: Optional[str] = None) -> ContrastivePairs:
    """The pairs of queries with their positive documents and ``K`` mined negatives each.

    The pool is ``[positives (B); mined negatives (B K, example-major); queries (B, with
    symmetric)]``, the full cosine matrix with a mask (static shapes, no gather).

    * Query ``i`` (anchor ``i``) has positive ``positives[i]``. ``in_batch=True`` (as
      sentence-transformers' MultipleNegativesRankingLoss): its negatives are the other
      ``B - 1`` positives and all ``B K`` mined negatives of the batch (another query's mined
      negative is everyone's), ``N = B - 1 + B K``; ``in_batch=False`` (hard negatives only,
      ``K >= 1``): its own ``K``, ``N = K``.
    * ``symmetric=True`` (as MultipleNegativesSymmetricRankingLoss, ``in_batch`` only) adds
      the document->query direction: anchors ``B + i`` are the positives, each with positive
      ``anchors[i]`` and the other ``B - 1`` queries as negatives (mined negatives are no
      anchors). ``A = 2B``, the queries first; a mean over the ``2B`` anchors is the mean of
      the two directions' means. With ``K > 0`` the two directions' ``N`` differ: ``N`` is
      then ``[A]``.

    Args:
        anchors: ``[B, d]`` queries (or an UnReMix dict ``{"embeddings", "features"}``).
        positives: ``[B, d]`` their positive documents (or a dict).
        negatives: ``[B, K, d]`` their mined negatives, ``K >= 0`` static (or a dict with
            ``[B, K, m]`` features).
        keep: optional ``[B]`` bool (a Keras mask): a dropped example's rows are no one's
            negatives; ``N`` becomes ``[A]`` (its anchors' rows are left for the reduction).
        hardness_strength, hardness_mode: sentence-transformers' additive hardness
            (:mod:`keras_hardneg.losses.hardness`), stored as ``negative_offset`` on the
            query anchors' selected negatives (the document anchors get none, as there).

    Returns:
        :class:`ContrastivePairs` with ``A = B`` (``2B`` symmetric), ``M = B + B K``
        (``+ B`` symmetric).

    Example:
    >>> import numpy as np
    >>> q = p = np.eye(2, 4, dtype="float32"); n = np.ones((2, 1, 4), "float32")
    >>> pairs = mined_pairs(q, p, n)
    >>> pairs.num_negatives, np.asarray(pairs.negative_mask).astype(int).tolist()
    (3, [[0, 1, 1, 1], [1, 0, 1, 1]])
    >>> mined_pairs(q, p, n, in_batch=False).num_negatives
    1
    """
    strength = hardness.check_hardness(hardness_strength, hardness_mode)
    (u_anchors, u_positives, pool, anchor_norms, pool_norms, anchor_feats, pool_feats,
     k) = _mined_rows(anchors, positives, negatives, symmetric)
    check_mined_options(k, in_batch, symmetric)
    b = _rows(u_positives) if not symmetric else _rows(u_positives) // 2
    mask, explicit, query_anchor, column_example, anchor_index, partner_index = (
        _mined_layout(b, k, in_batch, symmetric))
    if keep is not None:
        kept = ops.reshape(ops.cast(keep, "bool"), (-1,))
        mask = ops.logical_and(mask, ops.take(kept, column_example)[None, :])
    if keep is not None or (symmetric and k > 0):
        n = ops.sum(ops.cast(mask, "int32"), axis=1)
    else:
        n = (b - 1 + b * k) if in_batch else k
    pairs = _assemble(u_anchors, u_positives, pool, mask, n, anchor_norms, pool_norms,
                      anchor_feats, pool_feats, anchor_index=anchor_index,
                      partner_index=partner_index)
    if strength > 0.0:
        by_query = query_anchor[:, None]
        selected = {"hard_negatives": explicit,
                    "in_batch_negatives": ops.logical_and(
                        ops.logical_and(mask, by_query), ops.logical_not(explicit)),
                    "all_negatives": ops.logical_and(mask, by_query)}[hardness_mode]
        pairs.negative_offset = hardness.hardness_offset(pairs.negative_cos, selected, strength)
    return pairs


def mask_logits(logits, mask):
    """Sets entries outside ``mask`` to ``-inf`` (identity when ``mask`` is None)."""
    if mask is None:
        return logits
    return ops.where(mask, logits, ops.cast(_NEG_INF, logits.dtype))


def masked_logsumexp(logits, mask=None, axis: int = -1) -> Tensor:
    """``log(sum_{mask} exp(logits))`` along ``axis``, stable and NaN-free.

    Masked entries contribute nothing, also to the gradient.

    Example:
    >>> import numpy as np
    >>> x = np.log(np.array([[1.0, 2.0, 100.0]], "float32"))
    >>> round(float(masked_logsumexp(x, np.array([[True, True, False]]))[0]), 5)
    1.09861
    """
    return ops.logsumexp(mask_logits(logits, mask), axis=axis)


def masked_mean(values, mask=None, axis: int = -1) -> Tensor:
    """Mean of ``values`` over the entries where ``mask`` is True."""
    if mask is None:
        return ops.mean(values, axis=axis)
    m = ops.cast(mask, values.dtype)
    return ops.sum(values * m, axis=axis) / ops.maximum(ops.sum(m, axis=axis), 1.0)
