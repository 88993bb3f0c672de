"""Mined negatives (retrieval tuples): ``core.mined_pairs``, the additive hardness, the GIST
guard, ``ContrastiveLoss.call_with_mined_negatives`` and ``MinedNegativesLoss``, against the
independent NumPy transcription (``numpy_reference.mined_losses``), for every loss of the
family; limiting cases, errors, masks and weights, serialization and one tiny ``fit``.
Backend-sensitive: re-run under JAX (no TensorFlow import at module level)."""

import keras
import numpy as np
import pytest

from keras_hardneg import losses as L
from keras_hardneg.losses import core
from tests.losses import numpy_reference as ref
from tests.losses.backend_utils import backend, grid, on_jax, tensor, to_numpy, value_and_grad

pytestmark = pytest.mark.backends

B, K, D, T = 3, 2, 6, 0.5

#: (loss, its NumPy per-anchor function, that function's keyword arguments).
FAMILY = {
    "nt_xent": (lambda: L.NTXentLoss(temperature=T), ref.ntxent, {}),
    "debiased": (lambda: L.DebiasedContrastiveLoss(temperature=T, tau_plus=0.1), ref.debiased,
                 {"tau_plus": 0.1}),
    "hard": (lambda: L.HardNegativeContrastiveLoss(temperature=T, tau_plus=0.1, beta=1.0),
             ref.hard, {"tau_plus": 0.1, "beta": 1.0}),
    "ring": (lambda: L.RingContrastiveLoss(temperature=T, lower_percentile=10,
                                           upper_percentile=80),
             ref.ring, {"lower": 10, "upper": 80}),
}

#: Options of the mined convention, each checked against the reference for every loss.
OPTIONS = [
    {},
    {"in_batch": False},
    {"symmetric": True},
    {"hardness_strength": 3.0, "hardness_mode": "hard_negatives"},
    {"hardness_strength": 2.0, "hardness_mode": "in_batch_negatives", "symmetric": True},
    {"hardness_strength": 4.0, "hardness_mode": "all_negatives", "in_batch": False},
    {"guide": "external", "guard_margin": 0.05},
    {"guide": "external", "guard_margin": 0.2, "guard_strategy": "relative", "symmetric": True},
    {"guide": "self", "guard_margin": 0.1, "hardness_strength": 1.0,
     "hardness_mode": "all_negatives"},
]


def _tuples(b=B, k=K, d=D, seed=0):
    rng = np.random.default_rng(seed)
    q, p = rng.normal(size=(2, b, d)).astype("float32")
    p = (p + q).astype("float32")  # positives related to their queries
    n = (rng.normal(size=(b, k, d)) + 0.7 * q[:, None]).astype("float32")  # hard-ish
    return q, p, n


def _guide(q, p, n, seed=1):
    """A 'frozen guide': another view of the same rows (d_g = 4)."""
    w = np.random.default_rng(seed).normal(size=(D, 4)).astype("float32")
    return q @ w, p @ w, n @ w


def _reference_kwargs(option, q, p, n):
    kw = {"in_batch": option.get("in_batch", True), "symmetric": option.get("symmetric", False),
          "strength": option.get("hardness_strength", 0.0), "mode": option.get("hardness_mode"),
          "margin": option.get("guard_margin", 0.0),
          "strategy": option.get("guard_strategy", "absolute")}
    if option.get("guide") == "self":
        kw["guide"] = (q, p, n)
    elif option.get("guide") == "external":
        kw["guide"] = _guide(q, p, n)
    return kw


def _mined(loss, q, p, n, **kw):
    """``[A]`` per-anchor losses of ``loss.call_with_mined_negatives``, eagerly (every case
    has the same shapes, so JAX's per-op compilations are shared; a ``jax.jit`` per case
    costs more)."""
    loss.reduction = None
    return to_numpy(loss.call_with_mined_negatives(tensor(q), tensor(p), tensor(n), **kw))


def _family():
    """The losses a limiting case loops over: all under TensorFlow, HCL under JAX (every loss
    meets JAX in the reference grid)."""
    return [FAMILY[name][0] for name in (["hard"] if on_jax() else sorted(FAMILY))]


def _call_kwargs(option, q, p, n):
    kw = dict(option)
    if kw.get("guide") == "external":
        kw["guide"] = tuple(tensor(g) for g in _guide(q, p, n))
    return kw


@pytest.mark.parametrize("name,option", grid(sorted(FAMILY), range(len(OPTIONS))))
def test_every_option_matches_the_numpy_reference(name, option):
    make, fn, fn_kw = FAMILY[name]
    option = OPTIONS[option]
    q, p, n = _tuples()
    got = _mined(make(), q, p, n, **_call_kwargs(option, q, p, n))
    want = ref.mined_losses(fn, q, p, n, T, **_reference_kwargs(option, q, p, n), **fn_kw)
    assert got.shape == want.shape, (option, got.shape)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5, err_msg=f"{name} {option}")


def test_the_guard_drops_some_negatives_in_the_reference_cases():
    """The guard cases above are not vacuous: the margins drop some negatives, not all."""
    q, p, n = _tuples()
    for option in (o for o in OPTIONS if "guide" in o):
        kw = _call_kwargs(option, q, p, n)
        plain = core.mined_pairs(q, p, n, symmetric=kw.get("symmetric", False))
        guide = kw["guide"] if kw["guide"] != "self" else (q, p, n)
        guarded = L.guard_negatives(plain, core.mined_pairs(
            *guide, symmetric=kw.get("symmetric", False)), kw["guard_margin"],
            kw.get("guard_strategy", "absolute"))
        before = to_numpy(plain.negative_mask).sum()
        after = to_numpy(guarded.negative_mask).sum()
        assert 0 < after < before, (option, before, after)


def test_k0_in_batch_is_the_cross_view_pairs_computed_by_hand():
    q, p, _ = _tuples()
    empty = np.zeros((B, 0, D), "float32")
    got = _mined(L.NTXentLoss(temperature=T), q, p, empty)
    uq = q / np.linalg.norm(q, axis=1, keepdims=True)
    up = p / np.linalg.norm(p, axis=1, keepdims=True)
    logits = (uq @ up.T / T).astype(np.float64)  # MNRL: row i's target is column i
    by_hand = -np.diag(logits) + np.log(np.exp(logits).sum(axis=1))
    np.testing.assert_allclose(got, by_hand, rtol=1e-5)
    for make in _family():
        loss = make()
        loss.reduction = None
        cross = to_numpy(loss.per_anchor_terms(core.cross_view_pairs(q, p))["loss"])
        mined = _mined(loss, q, p, empty)
        np.testing.assert_allclose(mined, cross, rtol=1e-5, atol=1e-6)


def test_hard_negatives_only_with_one_negative_is_a_two_way_softmax():
    q, p, n = _tuples(k=1)
    got = _mined(L.NTXentLoss(temperature=T), q, p, n, in_batch=False)
    cos = lambda a, b: np.sum(a * b, -1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)
    pos, neg = cos(q, p) / T, cos(q, n[:, 0]) / T
    np.testing.assert_allclose(got, np.log1p(np.exp(neg - pos)), rtol=1e-5)


def test_strength_zero_and_a_guard_that_drops_nothing_are_the_plain_loss():
    q, p, n = _tuples()
    for make in _family():
        loss = make()
        plain = _mined(loss, q, p, n, symmetric=True)
        for mode in L.HARDNESS_MODES:
            zero = _mined(loss, q, p, n, symmetric=True, hardness_strength=0.0,
                          hardness_mode=mode)
            np.testing.assert_array_equal(zero, plain)
        # A cosine is at most 1 above the guide positive's -1: margin -2 drops nothing.
        loose = _mined(loss, q, p, n, symmetric=True, guide="self", guard_margin=-2.0)
        np.testing.assert_allclose(loose, plain, rtol=1e-6, atol=1e-7)


def test_a_guard_that_drops_everything_gives_zero_loss_and_finite_zero_gradients():
    q, p, n = _tuples()
    for make in _family():
        loss = make()
        value, grads = value_and_grad(
            lambda a, b, c: loss.call_with_mined_negatives(a, b, c, guide="self",
                                                           guard_margin=2.5), q, p, n)
        assert value == 0.0
        for g in grads:
            assert np.all(np.isfinite(g)) and np.all(g == 0.0)


def test_hardness_modes_split_the_query_negatives_and_spare_the_document_anchors():
    q, p, n = _tuples()
    offset = {mode: to_numpy(core.mined_pairs(q, p, n, symmetric=True, hardness_strength=3.0,
                                              hardness_mode=mode).negative_offset)
              for mode in L.HARDNESS_MODES}
    np.testing.assert_allclose(offset["all_negatives"],
                               offset["hard_negatives"] + offset["in_batch_negatives"], atol=1e-7)
    own = np.zeros((2 * B, 2 * B + B * K), bool)
    for i in range(B):
        own[i, B + i * K:B + (i + 1) * K] = True
    assert np.all(offset["hard_negatives"][~own] == 0.0) and np.all(offset["hard_negatives"][own])
    assert np.all(offset["all_negatives"][B:] == 0.0)  # the document->query direction


def test_unremix_runs_on_mined_pairs_and_its_similarity_part_is_hcl():
    q, p, n = _tuples()
    hcl = L.HardNegativeContrastiveLoss(temperature=T, tau_plus=0.1, beta=1.0)
    similarity_only = L.UnReMixContrastiveLoss(temperature=T, tau_plus=0.1, beta=1.0,
                                               weights=(0, 1, 0))
    full = L.UnReMixContrastiveLoss(temperature=T)
    # Symmetric; the guard with hardness (under JAX the latter only).
    for option in (OPTIONS[-1],) if on_jax() else (OPTIONS[2], OPTIONS[-1]):
        kw = _call_kwargs(option, q, p, n)
        np.testing.assert_allclose(_mined(similarity_only, q, p, n, **kw),
                                   _mined(hcl, q, p, n, **kw), rtol=1e-5, atol=1e-6)
        values = _mined(full, q, p, n, **kw)
        assert np.all(np.isfinite(values)) and np.all(values >= 0.0), option


def test_symmetric_mean_is_the_mean_of_the_two_directions():
    q, p, n = _tuples()
    loss = L.NTXentLoss(temperature=T)
    both = float(loss.call_with_mined_negatives(q, p, n, symmetric=True))
    forward = to_numpy(L.NTXentLoss(temperature=T, reduction=None).call_with_mined_negatives(
        q, p, n))
    backward = ref.mined_losses(ref.ntxent, q, p, n, T, symmetric=True)[B:]
    np.testing.assert_allclose(both, (forward.mean() + backward.mean()) / 2, rtol=1e-5)


def _flat(q, p, n):
    """The tuple layout: [q_0, p_0, n_0_1 .. n_0_K, q_1, ...]."""
    return np.concatenate([q[:, None], p[:, None], n], axis=1).reshape(-1, q.shape[-1])


def test_the_keras_entry_reads_the_tuple_layout():
    q, p, n = _tuples()
    rows = _flat(q, p, n)
    guide_rows = _flat(*_guide(q, p, n))
    hard = L.HardNegativeContrastiveLoss(temperature=T, tau_plus=0.1, beta=1.0)
    options = dict(symmetric=True, hardness_strength=2.0, hardness_mode="all_negatives",
                   guard_margin=0.05, guard_strategy="relative")
    wrapped = L.MinedNegativesLoss(hard, num_negatives=K, guard="guide", **options)
    direct = hard.call_with_mined_negatives(q, p, n, guide=_guide(q, p, n), **options)
    np.testing.assert_allclose(to_numpy(wrapped(tensor(guide_rows), tensor(rows))),
                               to_numpy(direct), rtol=1e-6)
    per_anchor = to_numpy(wrapped.call(tensor(guide_rows), tensor(rows)))
    assert per_anchor.shape == (2 * B,)
    np.testing.assert_allclose(per_anchor.mean(), to_numpy(direct), rtol=1e-6)


def test_sample_weight_per_row_per_example_and_masks():
    q, p, n = _tuples()
    rows = _flat(q, p, n)
    w = np.array([1.5, 0.5, 0.0], "float32")
    for symmetric in (False, True):
        per_anchor = to_numpy(L.MinedNegativesLoss("nt_xent", num_negatives=K, reduction=None,
                                                   symmetric=symmetric)(None, rows))
        both = np.concatenate([w, w]) if symmetric else w
        for reduction in ("sum_over_batch_size", "mean_with_sample_weight"):
            loss = L.MinedNegativesLoss("nt_xent", num_negatives=K, reduction=reduction,
                                        symmetric=symmetric)
            weighted = per_anchor * both
            want = weighted.mean() if reduction == "sum_over_batch_size" else \
                weighted.sum() / both.sum()
            by_example = loss(None, rows, sample_weight=w)
            by_row = loss(None, rows, sample_weight=np.repeat(w, 2 + K))
            np.testing.assert_allclose([float(by_example), float(by_row)], [want, want],
                                       rtol=1e-5)
    # A Keras mask on y_pred: the example whose rows are masked is in no one's pool.
    from keras.src.backend import set_keras_mask

    keep = np.array([True, False, True])
    masked = tensor(rows)
    set_keras_mask(masked, tensor(np.repeat(keep, 2 + K)))
    loss = L.MinedNegativesLoss("hard", num_negatives=K)
    alone = float(loss(None, _flat(q[keep], p[keep], n[keep])))
    np.testing.assert_allclose(float(loss(None, masked)), alone, rtol=1e-5)


def test_errors_name_the_parameter():
    q, p, n = _tuples()
    loss = L.NTXentLoss()
    cases = [
        (lambda: loss.call_with_mined_negatives(q, p, n[:, :0], in_batch=False), "`negatives`"),
        (lambda: loss.call_with_mined_negatives(q, p, n, in_batch=False, symmetric=True),
         "`symmetric=True`"),
        (lambda: loss.call_with_mined_negatives(q, p, n, hardness_strength=1.0),
         "`hardness_strength`"),
        (lambda: loss.call_with_mined_negatives(q, p, n, hardness_strength=1.0,
                                                hardness_mode="hardest"), "`hardness_mode`"),
        (lambda: loss.call_with_mined_negatives(q, p, n, guide="teacher"), "`guide`"),
        (lambda: loss.call_with_mined_negatives(q, p, n, guide="self", guard_strategy="x"),
         "`guard_strategy`"),
        (lambda: loss.call_with_mined_negatives(q, p, n[:, :, :2]), "`negatives`"),
        (lambda: loss.call_with_mined_negatives(q, p, n[0]), "`negatives`"),
        (lambda: L.MinedNegativesLoss(num_negatives=-1), "`num_negatives`"),
        (lambda: L.MinedNegativesLoss(num_negatives=1, guard="gist"), "`guard`"),
        (lambda: L.MinedNegativesLoss(num_negatives=1, guard="guide")(None, _flat(q, p, n[:, :1])),
         "y_true"),
        (lambda: L.MinedNegativesLoss(num_negatives=K)(None, _flat(q, p, n)[:-1]), "`y_pred`"),
    ]
    for fn, name in cases:
        with pytest.raises(ValueError, match=name.replace("`", "`?")) as info:
            fn()
        assert "\n" not in str(info.value).strip(), str(info.value)


def test_serialization_round_trip():
    loss = L.MinedNegativesLoss({"name": "ring", "lower_percentile": 5, "upper_percentile": 60},
                                num_negatives=K, symmetric=True, hardness_strength=1.5,
                                hardness_mode="in_batch_negatives", guard="self",
                                guard_margin=0.1, guard_strategy="relative", reduction="sum",
                                name="tuples", dtype="mixed_bfloat16")
    config = loss.get_config()
    back = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(loss))
    assert type(back) is L.MinedNegativesLoss and back.get_config() == config
    assert type(back.loss) is L.RingContrastiveLoss and back.loss.upper_percentile == 60
    assert back.dtype == "bfloat16"
    rows = _flat(*_tuples())
    hcl = L.MinedNegativesLoss("hard", num_negatives=K, hardness_strength=1.0,
                               hardness_mode="hard_negatives", guard="self", guard_margin=0.1)
    again = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(hcl))
    np.testing.assert_allclose(float(again(None, rows)), float(hcl(None, rows)), rtol=1e-6)


def test_fit_without_targets_trains_a_tiny_embedding_model():
    keras.utils.set_random_seed(0)
    rows = _flat(*_tuples(b=4))
    model = keras.Sequential([keras.Input((D,)), keras.layers.Dense(4)])
    model.compile(optimizer=keras.optimizers.SGD(0.1),
                  loss=L.MinedNegativesLoss("nt_xent", num_negatives=K, hardness_strength=1.0,
                                            hardness_mode="hard_negatives"))
    history = model.fit(rows, None, batch_size=2 * (2 + K), epochs=2, shuffle=False, verbose=0)
    losses = history.history["loss"]
    assert len(losses) == 2 and all(np.isfinite(losses)) and losses[1] < losses[0], losses


def test_traced_with_an_unknown_batch_size_matches_eager():
    if backend() != "tensorflow":
        pytest.skip("an unknown batch size is TensorFlow's (JAX traces static shapes)")
    import tensorflow as tf

    rows = _flat(*_tuples())
    loss = L.MinedNegativesLoss("nt_xent", num_negatives=K, guard="self", guard_margin=0.2,
                                hardness_strength=1.0, hardness_mode="all_negatives")
    spec = tf.TensorSpec([None, D], tf.float32)
    traced = tf.function(lambda y, w: loss(None, y, sample_weight=w),
                         input_signature=[spec, tf.TensorSpec([None], tf.float32)])
    w = np.linspace(0.5, 1.5, len(rows)).astype("float32")
    np.testing.assert_allclose(float(traced(rows, w)), float(loss(None, rows, sample_weight=w)),
                               rtol=1e-5)
