"""The shared contrastive core: similarities, positives, negatives and masks.

Every loss in :mod:`keras_hardneg.losses` and both frameworks build on the two
functions here, so that there is exactly one place where "which rows are an
anchor's positive and negatives" is decided.

Conventions (see ``spec/losses-and-sampler.md``):

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

__all__ = [
    "ContrastivePairs",
    "l2_normalize",
    "in_batch_pairs",
    "queue_pairs",
    "masked_logsumexp",
    "masked_mean",
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
    partner_index: Optional[tf.Tensor] = None
    anchor_features: Optional[tf.Tensor] = None
    negative_features: Optional[tf.Tensor] = None
    anchor_norms: Optional[tf.Tensor] = None
    negative_norms: Optional[tf.Tensor] = None

    @property
    def in_batch(self):
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


def in_batch_pairs(z1, z2):
    """Builds the SimCLR pairs of two views.

    Args:
        z1, z2: ``[B, d]`` float tensors (any float dtype), or UnReMix dicts
            ``{"embeddings": [B, d], "features": [B, m]}``. ``B >= 2``.

    Returns:
        A :class:`ContrastivePairs` with ``A = M = 2B`` and ``N = 2B - 2``.

    Example:
    >>> import numpy as np
    >>> p = in_batch_pairs(np.eye(3, 4, dtype="float32"), np.eye(3, 4, dtype="float32"))
    >>> p.num_negatives, tuple(p.negative_cos.shape)
    (4, (6, 6))
    """
    z1, f1 = _split_input(z1, "z1")
    z2, f2 = _split_input(z2, "z2")
    z1 = validate_embeddings(z1, "z1", min_rows=2)
    z2 = validate_embeddings(z2, "z2", min_rows=2)
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
        tf.debugging.assert_greater_equal(
            tf.shape(z1)[0], 2, message="a batch needs at least 2 examples"
        )
    if (f1 is None) != (f2 is None):
        raise ValueError("Give 'features' for both `z1` and `z2`, or for neither.")

    z = tf.concat([z1, z2], axis=0)
    norms, u = _norms_and_unit(z)
    batch = tf.shape(z1)[0]
    static_b = z1.shape[0]
    two_b = 2 * batch
    idx = tf.range(two_b)
    partner = tf.where(idx < batch, idx + batch, idx - batch)
    # Rolling the rows by B puts each anchor's partner at the same row index.
    positives = tf.roll(u, shift=batch, axis=0)
    sim = tf.matmul(u, u, transpose_b=True)
    pos_cos = tf.reduce_sum(u * positives, axis=-1)
    eye = tf.eye(two_b, dtype=tf.bool)
    partner_mask = tf.cast(tf.one_hot(partner, two_b, dtype=tf.int8), tf.bool)
    neg_mask = tf.logical_not(tf.logical_or(eye, partner_mask))
    feats = None if f1 is None else tf.concat([f1, f2], axis=0)
    n = (2 * static_b - 2) if static_b is not None else two_b - 2
    return ContrastivePairs(
        anchors=u,
        positives=positives,
        negatives=u,
        positive_cos=pos_cos,
        negative_cos=sim,
        negative_mask=neg_mask,
        num_negatives=n,
        partner_index=partner,
        anchor_features=feats,
        negative_features=feats,
        anchor_norms=norms,
        negative_norms=norms,
    )


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
    return ContrastivePairs(
        anchors=ua,
        positives=up,
        negatives=un,
        positive_cos=tf.reduce_sum(ua * up, axis=-1),
        negative_cos=tf.matmul(ua, un, transpose_b=True),
        negative_mask=None,
        num_negatives=k,
        anchor_features=fa,
        negative_features=fn,
        anchor_norms=a_norms,
        negative_norms=n_norms,
    )


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
