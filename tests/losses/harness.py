"""``run_loss_test``: the contract every contrastive loss of the package keeps, checked the same
way for each (as keras-hub's ``run_backbone_test`` checks every backbone). A loss's test calls
it with its class, its constructor's arguments and its NumPy reference
(:mod:`tests.losses.numpy_reference`); the calling tests are marked ``backends``, so
tests/test_backends.py runs them under JAX too (TF/JAX agreement: the same expected values on
both). No TensorFlow import at module level.

What it checks, on one small batch (``B = 4`` examples, ``d = 8``):

* the per-anchor losses (``reduction=None``, ``[2B]``) against the NumPy reference;
* every ``reduction`` with one weight per example (``[B]``, applied to both of an example's
  anchors), written out as Keras's ``Loss.__call__`` reduces; all-zero weights give 0;
* Keras masks (``keras.losses.Loss.__call__``'s ``apply_mask``): a mask on ``z2`` (and on
  ``z1``) gives the loss of the kept examples alone, with or without weights, for every
  reduction; an all-False mask gives 0, not NaN;
* dtypes: ``dtype="float16"``, ``"bfloat16"`` and the ``"mixed_float16"`` policy return the
  loss in that compute dtype, equal (to the dtype's precision) to the float32 loss of the
  inputs rounded to it; float16 / bfloat16 inputs to a float32 loss give a finite float32 loss;
* serialization: ``get_config`` / ``from_config`` and ``keras.saving``'s
  ``serialize_keras_object`` / ``deserialize_keras_object`` give the same loss (its dtype
  policy kept);
* the batch-of-one rule: a batch without negatives (one example, or a mask keeping one) has
  loss 0 for every reduction and zero, finite gradients -- also traced with an unknown batch
  size (TensorFlow's ``tf.function``), never NaN.
"""

import keras
import numpy as np

from tests.losses.backend_utils import backend, tensor, to_numpy, value_and_grad

B, D = 4, 8
REDUCTIONS = ("sum_over_batch_size", "mean", "sum", "mean_with_sample_weight", None, "none")
LOW_PRECISION = {"float16": "float16", "bfloat16": "bfloat16", "mixed_float16": "float16"}


def _views(b=B, seed=0):
    rng = np.random.default_rng(seed)
    z1, z2 = rng.normal(size=(2, b, D)).astype("float32")
    w = rng.uniform(0.2, 2.0, size=b).astype("float32")
    return z1, z2, w


def _masked(z, mask):
    """A backend tensor of ``z`` carrying the Keras mask ``mask`` (as a Keras layer leaves it)."""
    from keras.src.backend import set_keras_mask  # the way Keras hands a mask to a loss

    t = tensor(z)
    set_keras_mask(t, tensor(np.asarray(mask, bool)))
    return t


def keras_reduced(per_anchor, reduction, weights=None):
    """Keras's reduction of ``[A]`` values (``keras/src/losses/loss.py``), written out."""
    values = per_anchor if weights is None else per_anchor * weights
    if reduction in (None, "none"):
        return values
    if reduction == "sum":
        return values.sum()
    if reduction == "mean_with_sample_weight" and weights is not None:
        return values.sum() / weights.sum() if weights.sum() else 0.0
    return values.mean()


def _np(x):
    """A NumPy array (float32 for a low-precision tensor: TF's bfloat16 has no NumPy view)."""
    if not isinstance(x, np.ndarray) and "float" in keras.backend.standardize_dtype(x.dtype):
        x = keras.ops.cast(x, "float32")
    return to_numpy(x)


def _close(got, want, what, rtol=1e-4, atol=1e-5):
    got = _np(got)
    assert np.all(np.isfinite(got)), f"{what}: not finite: {got}"
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what)


def run_loss_test(loss_cls, init_kwargs, reference=None, rtol=1e-4):
    """Runs the contract (see the module docstring) for ``loss_cls(**init_kwargs)``.

    Args:
        loss_cls: a :class:`~keras_hardneg.losses.ContrastiveLoss` subclass.
        init_kwargs: its hyper-parameters.
        reference: ``fn(z1, z2) -> [2B]`` per-anchor losses in NumPy (float64), in the
            anchor order of :func:`tests.losses.numpy_reference.in_batch_triples`; None to
            skip that check.
        rtol: tolerance against the reference.
    """
    def make(**kw):
        return loss_cls(**init_kwargs, **kw)

    z1, z2, w = _views()
    per_anchor = _np(make(reduction=None)(tensor(z1), tensor(z2)))
    assert per_anchor.shape == (2 * B,), per_anchor.shape
    if reference is not None:
        _close(per_anchor, reference(z1, z2), "per-anchor losses vs the NumPy reference",
               rtol=rtol)
    _check_reductions(make, z1, z2, w, per_anchor)
    _check_masks(make, z1, z2, w)
    _check_dtypes(make, z1, z2)
    _check_serialization(loss_cls, make, z1, z2)
    _check_batch_of_one(make, z1, z2)


def _check_reductions(make, z1, z2, w, per_anchor):
    both = np.concatenate([w, w])
    for reduction in REDUCTIONS:
        loss = make(reduction=reduction)
        _close(loss(tensor(z1), tensor(z2)), keras_reduced(per_anchor, reduction),
               f"reduction={reduction!r}")
        _close(loss(tensor(z1), tensor(z2), sample_weight=w),
               keras_reduced(per_anchor, reduction, both),
               f"reduction={reduction!r} with one weight per example")
        zero = _np(loss(tensor(z1), tensor(z2), sample_weight=np.zeros(B, "float32")))
        assert np.all(zero == 0.0), f"reduction={reduction!r}, zero weights: {zero}"


def _check_masks(make, z1, z2, w):
    keep = np.array([True, False, True, True])
    for reduction in REDUCTIONS:
        loss = make(reduction=reduction)
        alone = _np(loss(tensor(z1[keep]), tensor(z2[keep])))
        alone_w = _np(loss(tensor(z1[keep]), tensor(z2[keep]), sample_weight=w[keep]))
        got = _np(loss(tensor(z1), _masked(z2, keep)))
        got_w = _np(loss(tensor(z1), _masked(z2, keep), sample_weight=w))
        if reduction in (None, "none"):  # the masked anchors' values are 0, the others kept
            anchors = np.concatenate([keep, keep])
            assert np.all(got[~anchors] == 0.0), got
            got, got_w = got[anchors], got_w[anchors]
        _close(got, alone, f"mask on z2, reduction={reduction!r}")
        _close(got_w, alone_w, f"mask and sample_weight, reduction={reduction!r}")
        # A mask on z1 counts too (both are embeddings).
        _close(loss(_masked(z1, keep), tensor(z2)), alone if reduction not in (None, "none")
               else _np(loss(_masked(z1, keep), tensor(z2))), "mask on z1")
        none = _np(loss(tensor(z1), _masked(z2, np.zeros(B, bool))))
        assert np.all(none == 0.0), f"all masked, reduction={reduction!r}: {none}"


def _check_dtypes(make, z1, z2):
    for dtype, compute in LOW_PRECISION.items():
        loss = make(dtype=dtype)
        assert loss.dtype == compute, (dtype, loss.dtype)
        out = loss(tensor(z1), tensor(z2))
        assert keras.backend.standardize_dtype(out.dtype) == compute, (dtype, out.dtype)
        rounded = [_np(tensor(z, dtype=compute)) for z in (z1, z2)]
        want = _np(make()(tensor(rounded[0]), tensor(rounded[1])))
        _close(out, want, f"dtype={dtype!r}", rtol=1e-2, atol=1e-2)
        # Low-precision inputs to a float32 loss: a finite float32 loss.
        out32 = make()(tensor(z1, dtype=compute), tensor(z2, dtype=compute))
        assert keras.backend.standardize_dtype(out32.dtype) == "float32"
        _close(out32, want, f"{compute} inputs to a float32 loss", rtol=1e-4)


def _check_serialization(loss_cls, make, z1, z2):
    loss = make(reduction="sum", name="custom_name")
    config = loss.get_config()
    again = loss_cls.from_config(config)
    assert again.get_config() == config
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(loss))
    assert type(restored) is loss_cls and restored.get_config() == config
    _close(restored(tensor(z1), tensor(z2)), _np(loss(tensor(z1), tensor(z2))),
           "after keras.saving round trip", rtol=1e-6)
    low = make(dtype="mixed_bfloat16")
    assert loss_cls.from_config(low.get_config()).dtype == "bfloat16"


def _check_batch_of_one(make, z1, z2):
    one1, one2 = z1[:1], z2[:1]
    for reduction in REDUCTIONS:
        out = _np(make(reduction=reduction)(tensor(one1), tensor(one2)))
        assert np.all(out == 0.0), f"batch of one, reduction={reduction!r}: {out}"
        kept_one = _np(make(reduction=reduction)(
            tensor(z1), _masked(z2, [False, True, False, False])))
        assert np.all(kept_one == 0.0), f"a mask keeping one, reduction={reduction!r}"
    loss = make(reduction="sum")
    value, grads = value_and_grad(lambda a, b: loss(a, b), one1, one2)
    assert value == 0.0
    for g in grads:
        assert np.all(np.isfinite(g)) and np.all(g == 0.0), g
    if backend() == "tensorflow":  # a batch size known only at run time
        import tensorflow as tf

        spec = tf.TensorSpec([None, D], tf.float32)
        traced = tf.function(lambda a, b: loss(a, b), input_signature=[spec, spec])
        assert float(traced(one1, one2)) == 0.0
        _close(traced(z1, z2), _np(loss(tensor(z1), tensor(z2))), "traced, B unknown")
