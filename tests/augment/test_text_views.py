"""Sentence view makers on every backend (this module runs under TensorFlow and JAX): SimCSE's
identical ids, quick-thought's split pairs, input checks, compiled use, serialization and
the registrations."""

import keras
import numpy as np
import pytest

from keras_hardneg.augment import AdjacentViews, DropoutViews, ViewMaker
from keras_hardneg.registry import VIEW_MAKERS

pytestmark = pytest.mark.backends

IDS = np.array([[1, 5, 6, 0], [1, 7, 0, 0], [1, 8, 9, 4]], "int32")
PAIRS = np.stack([IDS, IDS[::-1]], axis=1)  # [3, 2, 4]


def _np(x):
    return keras.ops.convert_to_numpy(x)


def test_dropout_views_are_the_same_ids_twice():
    views = DropoutViews()
    assert isinstance(views, ViewMaker) and views.modality == "text" and views.jit_compatible
    v1, v2 = views(IDS, training=True)
    for v in (v1, v2):
        assert keras.backend.standardize_dtype(v.dtype) == "int32"
        np.testing.assert_array_equal(_np(v), IDS)
    # Whole-number float ids (e.g. a float feed) come back as int32 ids.
    f1, _ = views(IDS.astype("float32"))
    assert keras.backend.standardize_dtype(f1.dtype) == "int32"
    np.testing.assert_array_equal(_np(f1), IDS)


def test_adjacent_views_split_sentence_and_next():
    a, b = AdjacentViews()(PAIRS, training=True)
    np.testing.assert_array_equal(_np(a), IDS)
    np.testing.assert_array_equal(_np(b), IDS[::-1])
    assert keras.backend.standardize_dtype(b.dtype) == "int32"


def test_bad_shapes_name_the_expected_form():
    with pytest.raises(ValueError, match=r"\[batch, length\].*AdjacentViews"):
        DropoutViews()(PAIRS)
    with pytest.raises(ValueError, match=r"\[batch, 2, length\].*pairs='adjacent'"):
        AdjacentViews()(IDS)
    with pytest.raises(ValueError, match=r"\[batch, 2, length\]"):
        AdjacentViews()(np.zeros((2, 3, 4), "int32"))
    with pytest.raises(ValueError, match="token ids"):
        DropoutViews()(np.zeros((2, 4), "bool"))


def test_views_compile():
    if keras.backend.backend() == "jax":
        import jax

        compiled = jax.jit(lambda x: AdjacentViews()(x))
        same = jax.jit(lambda x: DropoutViews()(x))
    else:
        import tensorflow as tf

        compiled = tf.function(lambda x: AdjacentViews()(x), jit_compile=True)
        same = tf.function(lambda x: DropoutViews()(x), jit_compile=True)
    a, b = compiled(PAIRS)
    np.testing.assert_array_equal(_np(a), IDS)
    np.testing.assert_array_equal(_np(b), IDS[::-1])
    np.testing.assert_array_equal(_np(same(IDS)[1]), IDS)


def test_serialization_and_registrations():
    for views in (DropoutViews(), AdjacentViews()):
        # (keras.saving.serialize_keras_object imports TensorFlow even under JAX: the
        # registered name and the config are what it would use.)
        name = keras.saving.get_registered_name(type(views))
        assert name == f"keras_hardneg>{type(views).__name__}"
        clone = keras.saving.get_registered_object(name).from_config(views.get_config())
        assert type(clone) is type(views)
    assert {"simcse", "quick_thought"} <= set(VIEW_MAKERS.names(modality="text"))
    assert isinstance(VIEW_MAKERS.make("simcse", {}, seed=3), DropoutViews)
    assert isinstance(VIEW_MAKERS.make("quick_thought", None, seed=None), AdjacentViews)
    assert VIEW_MAKERS.defaults("simcse") == {}
