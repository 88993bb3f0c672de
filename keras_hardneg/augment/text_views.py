"""View makers for sentences: token ids -> two views (``modality="text"``).

* :class:`DropoutViews` -- unsupervised SimCSE (Gao et al. 2021, "SimCSE: Simple
  Contrastive Learning of Sentence Embeddings", section 3): the positive pair is the same
  sentence twice, ``[B, L] -> ([B, L], [B, L])`` with identical ids. What makes the views
  differ is the encoder's dropout: the frameworks encode both views in one batch of
  ``2B`` rows (SimCLR's ``project``), so every row draws its own dropout mask. An encoder
  without dropout (or with ``training=False``) makes the two views equal.
* :class:`AdjacentViews` -- quick-thought vectors (Logeswaran & Lee 2018, "An efficient
  framework for learning sentence representations"; the sentence setting of HCL, Robinson
  et al. 2021, and UnReMix): the positive of a sentence is the next one, ``[B, 2, L] ->
  (x[:, 0], x[:, 1])`` (the pairs come from the data:
  :class:`~keras_hardneg.data.TokenizedSentences` with ``pairs="adjacent"``). The original
  quick-thought model uses two encoders and classifies the true context among the batch;
  here one encoder and the contrastive loss family play that role.

Both return ``int32`` ids (integer or whole-number float input is cast), are pure
``keras.ops`` slicing (jit-compatible under TensorFlow XLA and ``jax.jit``), have no
weights, and are registered in :data:`~keras_hardneg.registry.VIEW_MAKERS` as ``"simcse"``
and ``"quick_thought"``.

Example:
>>> import numpy as np
>>> ids = np.array([[1, 5, 6, 0], [1, 7, 0, 0]], "int32")
>>> v1, v2 = DropoutViews()(ids)
>>> bool(np.array_equal(np.asarray(v1), np.asarray(v2)))
True
>>> pairs = np.stack([ids, ids[::-1]], axis=1)
>>> a, b = AdjacentViews()(pairs)
>>> tuple(a.shape), np.asarray(b)[0].tolist()
((2, 4), [1, 7, 0, 0])
"""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from keras_hardneg.augment.views import ViewMaker
from keras_hardneg.registry import VIEW_MAKERS

__all__ = ["AdjacentViews", "DropoutViews", "adjacent_views", "dropout_views"]


def _static_shape(x: Any) -> tuple | None:
    shape = getattr(x, "shape", None)
    if shape is None:
        return None
    try:
        return tuple(shape)
    except (TypeError, ValueError):  # a TF tensor of unknown rank
        return None


def _as_ids(x: Any) -> Any:
    return x if keras.backend.standardize_dtype(x.dtype) == "int32" else ops.cast(x, "int32")


class _TextViews(ViewMaker):
    modality = "text"
    jit_compatible = True

    def __init__(self, **kwargs: Any):
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        self.built = True  # no weights: usable in a stateless (JAX) step before any call

    def _check_dtype(self, x: Any) -> None:
        dtype = getattr(x, "dtype", None)
        if dtype is None:
            return
        dtype = keras.backend.standardize_dtype(dtype)
        if not ("int" in dtype or "float" in dtype):
            raise ValueError(f"{type(self).__name__} expects token ids (integers); got dtype "
                             f"{dtype}.")


@keras.saving.register_keras_serializable(package="keras_hardneg")
class DropoutViews(_TextViews):
    """Unsupervised SimCSE's views: token ids ``[B, L]`` twice (see the module docstring).

    The encoder's dropout makes the views differ, so use it with an encoder that has
    dropout (:func:`keras_hardneg.encoders.text_transformer`, default 0.1) in a
    framework that encodes both views in one batch (SimCLR).
    """

    def check_input(self, x: Any) -> None:
        self._check_dtype(x)
        shape = _static_shape(x)
        if shape is not None and len(shape) != 2:
            raise ValueError(f"DropoutViews (SimCSE) expects token ids [batch, length]; got "
                             f"shape {shape}. Adjacent-sentence pairs [batch, 2, length] go "
                             "with AdjacentViews (quick_thought).")

    def make_views(self, x: Any, training: bool | None) -> tuple[Any, Any]:
        ids = _as_ids(x)
        return ids, ids

    def compute_output_spec(self, x: Any, training: bool | None = None):
        view = keras.KerasTensor(x.shape, "int32")
        return view, view


@keras.saving.register_keras_serializable(package="keras_hardneg")
class AdjacentViews(_TextViews):
    """Quick-thought views: ``[B, 2, L]`` (sentence, next sentence) -> ``(x[:, 0],
    x[:, 1])``, each ``int32 [B, L]`` (see the module docstring)."""

    def check_input(self, x: Any) -> None:
        self._check_dtype(x)
        shape = _static_shape(x)
        if shape is not None and (len(shape) != 3 or shape[1] not in (None, 2)):
            raise ValueError(f"AdjacentViews (quick_thought) expects sentence pairs "
                             f"[batch, 2, length]; got shape {shape}. Load the data with "
                             "pairs='adjacent'.")

    def make_views(self, x: Any, training: bool | None) -> tuple[Any, Any]:
        ids = _as_ids(x)
        return ids[:, 0], ids[:, 1]

    def compute_output_spec(self, x: Any, training: bool | None = None):
        view = keras.KerasTensor((x.shape[0], x.shape[2]), "int32")
        return view, view


# seed: the run layer passes the recipe's seed to every view maker that takes one; these
# views are deterministic (the randomness is the encoder's dropout).
@VIEW_MAKERS.register("simcse", modality="text")
def dropout_views(seed: int | None = None) -> DropoutViews:
    """Unsupervised SimCSE: each sentence twice; the encoder's dropout makes the views."""
    return DropoutViews()


@VIEW_MAKERS.register("quick_thought", modality="text")
def adjacent_views(seed: int | None = None) -> AdjacentViews:
    """Quick-thought: a sentence and the next one (data loaded with pairs='adjacent')."""
    return AdjacentViews()
