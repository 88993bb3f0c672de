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

All similarities are cosines in float32, whatever the input dtype; losses
divide them by the temperature themselves.
"""

import dataclasses
from typing import Optional

import tensorflow as tf

from keras_hardneg.losses.false_negatives import false_negative_rate_of_pairs

# The models' metric; the one implementation is in :mod:`keras_hardneg.losses.false_negatives`.
false_negative_fraction = false_negative_rate_of_pairs

__all__ = [
    "ContrastivePairs",
    "l2_normalize",
    "in_batch_pairs",
    "cross_view_pairs",
    "queue_pairs",
    "masked_logsumexp",
    "masked_mean",
    "false_negative_fraction",
    "validate_embeddings",
]

_NEG_INF = float("-inf")


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
        num_negatives: ``N``, the number of negatives of every anchor (an int).
        anchor_index: ``[A]`` int, SimCLR in-batch only: the pool row that is
            the anchor itself (``None`` otherwise).
        partner_index: ``[A]`` int, in-batch only: the pool row holding each
            anchor's positive (``None`` in the queue case).
        anchor_features / positive_features / negative_features: optional
            projection-head features ``[*, m]`` (the input of the head's last
            Dense layer), carried for UnReMix's uncertainty term.
        negative_norms / anchor_norms: ``[M]`` / ``[A]`` norms of the rows
            before normalisation (UnReMix needs them for exact gradients).
    """

    anchors: tf.Tensor
    positives: tf.Tensor
    negatives: tf.Tensor
    positive_cos: tf.Tensor
    negative_cos: tf.Tensor
    negative_mask: Optional[tf.Tensor]
    num_negatives: int
    anchor_index: Optional[tf.Tensor] = None
    partner_index: Optional[tf.Tensor] = None
    anchor_features: Optional[tf.Tensor] = None
    negative_features: Optional[tf.Tensor] = None
    anchor_norms: Optional[tf.Tensor] = None
    negative_norms: Optional[tf.Tensor] = None

    @property
    def in_batch(self):
        """True when the negatives come from the batch itself (masked pool)."""
        return self.negative_mask is not None


def l2_normalize(x, axis=-1):
    """Unit-normalises rows in float32 (safe at zero: returns zeros, no NaN)."""
    x = tf.cast(x, tf.float32)
    return tf.math.l2_normalize(x, axis=axis, epsilon=1e-12)


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
            feats = tf.cast(feats, tf.float32)
        return z["embeddings"], feats
    return z, None


def validate_embeddings(z, name, min_rows=1):
    """Checks that ``z`` is a rank-2 float tensor; returns it as float32.

    Raises:
        ValueError: naming ``name`` when the rank is not 2, or when the static
            number of rows is below ``min_rows``.
    """
    z = tf.convert_to_tensor(z)
    if not (z.dtype.is_floating):
        raise ValueError(f"`{name}` must be a float tensor; got dtype {z.dtype.name}.")
    if z.shape.rank is not None and z.shape.rank != 2:
        raise ValueError(
            f"`{name}` must have rank 2 (shape [batch, dim]); got shape {z.shape}."
        )
    rows = z.shape[0]
    if rows is not None and rows < min_rows:
        raise ValueError(
            f"`{name}` needs at least {min_rows} rows; got shape {z.shape}."
        )
    return z


def _norms_and_unit(z):
    z = tf.cast(z, tf.float32)
    norms = tf.norm(z, axis=-1)
    return norms, l2_normalize(z)


def _assemble(anchors, positives, negatives, mask, num_negatives, anchor_norms,
              negative_norms, anchor_features=None, negative_features=None,
              anchor_index=None, partner_index=None):
    """The :class:`ContrastivePairs` of unit-norm ``anchors [A, d]``, ``positives [A, d]``
    and ``negatives [M, d]``: the one place the positive and negative cosines are computed."""
    return ContrastivePairs(
        anchors=anchors,
        positives=positives,
        negatives=negatives,
        positive_cos=tf.reduce_sum(anchors * positives, axis=-1),
        negative_cos=tf.matmul(anchors, negatives, transpose_b=True),
        negative_mask=mask,
        num_negatives=num_negatives,
        anchor_index=anchor_index,
        partner_index=partner_index,
        anchor_features=anchor_features,
        negative_features=negative_features,
        anchor_norms=anchor_norms,
        negative_norms=negative_norms,
    )


def in_batch_pairs(z1, z2, pool=None):
    """Builds the SimCLR pairs of two views.

    Args:
        z1, z2: ``[B, d]`` float tensors (any float dtype), or UnReMix dicts
            ``{"embeddings": [B, d], "features": [B, m]}``. ``B >= 2``.
        pool: optional ``(all_z1, all_z2, offset)`` for many replicas: the
            views of the *global* batch (``[B_global, d]`` each, gathered from
            all replicas in replica order, same kind as ``z1``/``z2``) and the
            global row index of local row 0. The local ``2B`` rows stay the
            anchors; their negatives are the other ``2 B_global - 2`` rows of
            the global batch. ``None`` means the local batch is the whole batch.

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
    z1 = validate_embeddings(z1, "z1", min_rows=2 if pool is None else 1)
    z2 = validate_embeddings(z2, "z2", min_rows=2 if pool is None else 1)
    if z1.shape.is_fully_defined() and z2.shape.is_fully_defined():
        if z1.shape != z2.shape:
            raise ValueError(
                "`z1` and `z2` must have the same shape [batch, dim]; got "
                f"{z1.shape} and {z2.shape}."
            )
    else:
        tf.debugging.assert_equal(
            tf.shape(z1), tf.shape(z2), message="`z1` and `z2` must have the same shape"
        )
    if (f1 is None) != (f2 is None):
        raise ValueError("Give 'features' for both `z1` and `z2`, or for neither.")

    norms, u = _norms_and_unit(tf.concat([z1, z2], axis=0))
    feats = None if f1 is None else tf.concat([f1, f2], axis=0)
    batch = tf.shape(z1)[0]
    positives = tf.roll(u, shift=batch, axis=0)  # row a now holds a's partner
    if pool is None:
        pool_u, pool_norms, pool_feats = u, norms, feats
        global_batch, offset, static_gb = batch, 0, z1.shape[0]
        tf.debugging.assert_greater_equal(batch, 2, message="a batch needs at least 2 examples")
    else:
        all_z1, all_z2, offset = pool
        all_z1, af1 = _split_input(all_z1, "pool z1")
        all_z2, af2 = _split_input(all_z2, "pool z2")
        pool_norms, pool_u = _norms_and_unit(tf.concat([all_z1, all_z2], axis=0))
        pool_feats = None if af1 is None else tf.concat([af1, af2], axis=0)
        global_batch, static_gb = tf.shape(all_z1)[0], all_z1.shape[0]
    local = tf.range(2 * batch)
    view = local // batch  # 0 for z1 rows, 1 for z2 rows
    row = local % batch + offset
    self_index = view * global_batch + row
    partner_index = (1 - view) * global_batch + row
    m = 2 * global_batch
    self_mask = tf.cast(tf.one_hot(self_index, m, dtype=tf.int8), tf.bool)
    partner_mask = tf.cast(tf.one_hot(partner_index, m, dtype=tf.int8), tf.bool)
    neg_mask = tf.logical_not(tf.logical_or(self_mask, partner_mask))
    n = (2 * static_gb - 2) if static_gb is not None else m - 2
    return _assemble(u, positives, pool_u, neg_mask, n, norms, pool_norms, feats, pool_feats,
                     anchor_index=self_index, partner_index=partner_index)


def cross_view_pairs(anchors, keys, pool=None):
    """MoCo v3 in-batch pairs: anchor ``i``'s positive is ``keys[i]``, its
    negatives are the keys of the *other* examples of the (global) batch.

    Args:
        anchors: ``[B, d]`` queries (or UnReMix dict).
        keys: ``[B, d]`` keys of the same examples (or UnReMix dict).
        pool: optional ``(all_keys, offset)``: keys gathered from all replicas
            and the global index of local row 0.

    Returns:
        :class:`ContrastivePairs` with ``A = B``, ``M = B_global``, ``N = B_global - 1``.
    """
    a, fa = _split_input(anchors, "anchors")
    k, fk = _split_input(keys, "keys")
    a = validate_embeddings(a, "anchors", min_rows=1)
    k = validate_embeddings(k, "keys", min_rows=1)
    a_norms, ua = _norms_and_unit(a)
    _, uk = _norms_and_unit(k)
    if pool is None:
        pool_u, pool_feats, offset, static_m = uk, fk, 0, k.shape[0]
        pool_norms = tf.norm(tf.cast(k, tf.float32), axis=-1)
    else:
        all_k, offset = pool
        all_k, pool_feats = _split_input(all_k, "pool keys")
        pool_norms, pool_u = _norms_and_unit(all_k)
        static_m = all_k.shape[0]
    m = tf.shape(pool_u)[0]
    index = tf.range(tf.shape(a)[0]) + offset
    neg_mask = tf.logical_not(tf.cast(tf.one_hot(index, m, dtype=tf.int8), tf.bool))
    n = (static_m - 1) if static_m is not None else m - 1
    return _assemble(ua, uk, pool_u, neg_mask, n, a_norms, pool_norms, fa, pool_feats,
                     partner_index=index)


def queue_pairs(anchors, positives, negatives):
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
    if a.shape.is_fully_defined() and p.shape.is_fully_defined() and a.shape != p.shape:
        raise ValueError(
            "`anchors` and `positives` must have the same shape [batch, dim]; got "
            f"{a.shape} and {p.shape}."
        )
    if a.shape[-1] is not None and n.shape[-1] is not None and a.shape[-1] != n.shape[-1]:
        raise ValueError(
            "`negatives` must have the anchors' dimension; got "
            f"anchors {a.shape} and negatives {n.shape}."
        )
    a_norms, ua = _norms_and_unit(a)
    _, up = _norms_and_unit(p)
    n_norms, un = _norms_and_unit(n)
    k = n.shape[0] if n.shape[0] is not None else tf.shape(n)[0]
    return _assemble(ua, up, un, None, k, a_norms, n_norms, fa, fn)


def mask_logits(logits, mask):
    """Sets entries outside ``mask`` to ``-inf`` (identity when ``mask`` is None)."""
    if mask is None:
        return logits
    return tf.where(mask, logits, tf.constant(_NEG_INF, logits.dtype))


def masked_logsumexp(logits, mask=None, axis=-1):
    """``log(sum_{mask} exp(logits))`` along ``axis``, stable and NaN-free.

    Masked entries contribute nothing, also to the gradient.
    """
    return tf.reduce_logsumexp(mask_logits(logits, mask), axis=axis)


def masked_mean(values, mask=None, axis=-1):
    """Mean of ``values`` over the entries where ``mask`` is True."""
    if mask is None:
        return tf.reduce_mean(values, axis=axis)
    m = tf.cast(mask, values.dtype)
    return tf.reduce_sum(values * m, axis=axis) / tf.maximum(
        tf.reduce_sum(m, axis=axis), 1.0
    )
