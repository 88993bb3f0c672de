"""Input signatures of exported encoders, one per modality (TensorFlow-free).

An export's input is described by a *signature*: the names, shapes and dtypes of the
tensors its ``serving_default`` (and ``__call__``) take. Three modalities:

- ``"image"``: ``images`` float32 ``[B, H, W, 3]`` in [0, 1] (``export_encoder``'s
  ``input_shape=(H, W, 3)``; the default, unchanged since wave 1).
- ``"graph"``: the padded disjoint union of a batch of ``B`` graphs (the six tensors of
  ``keras_hardneg.data.graphs``): ``nodes`` float32 ``[N, F]``, ``edges`` int32 ``[E, 2]``,
  ``node_graph`` int32 ``[N]``, ``node_mask`` float32 ``[N]``, ``edge_mask`` float32
  ``[E]``, ``graph_mask`` float32 ``[B]``. ``N``, ``E`` and ``B`` are ``None`` in the
  export, so batches of any budget work; the output batch is ``B`` (from ``graph_mask``).
- ``"text"``: ``token_ids`` int32 ``[B, L]`` (0 = padding); ``L`` is the ``max_length``
  the encoder was trained with (or ``None`` if the encoder takes any length).

``export_encoder(..., input_signature=...)`` takes either

- a dict ``{name: (shape, dtype)}`` of FULL tensor shapes (graph tensors have no separate
  batch axis; write ``None`` for ``N``, ``E``, ``B``), e.g. :func:`graph_input_signature`;
- or one ``(shape, dtype)`` pair giving the shape of ONE example (the batch axis is
  prepended): ``((L,), "int32")`` for token ids (:func:`text_input_signature`), or
  ``((H, W, 3), "float32")`` for images (same as ``input_shape``).

:func:`normalize_input_signature` turns either form into ``(modality, {name: (full shape,
dtype)})``; :func:`signature_to_json` gives the form stored in the model card.

Example:

>>> sig = graph_input_signature(feature_dim=7)
>>> sig["nodes"], sig["graph_mask"]
(((None, 7), 'float32'), ((None,), 'float32'))
>>> normalize_input_signature(text_input_signature(32))
('text', {'token_ids': ((None, 32), 'int32')})
>>> signature_to_json(normalize_input_signature(((4, 4, 3), "float32"))[1])
{'images': {'shape': [None, 4, 4, 3], 'dtype': 'float32'}}
"""

from __future__ import annotations

from typing import Any

import numpy as np

from keras_hardneg.registry import MODALITIES, get_modality

__all__ = [
    "GRAPH_INPUTS",
    "IMAGE_INPUT",
    "TEXT_INPUT",
    "graph_input_signature",
    "normalize_input_signature",
    "shape_and_dtype",
    "signature_from_json",
    "signature_to_json",
    "text_input_signature",
]

#: Serving input name of image exports.
IMAGE_INPUT = "images"
#: Serving input name of text exports (token ids).
TEXT_INPUT = "token_ids"
#: The graph batch tensors, in the order of the shared interface: name -> (rank, dtype).
GRAPH_INPUTS = {
    "nodes": (2, "float32"),
    "edges": (2, "int32"),
    "node_graph": (1, "int32"),
    "node_mask": (1, "float32"),
    "edge_mask": (1, "float32"),
    "graph_mask": (1, "float32"),
}

Signature = dict[str, tuple[tuple, str]]


def graph_input_signature(feature_dim: int | None = None) -> Signature:
    """The graph-batch signature with ``N``, ``E``, ``B`` unknown: ``{name: (shape, dtype)}``.

    ``feature_dim`` is ``F`` of ``nodes [N, F]`` (``None`` if the encoder takes any).

    >>> graph_input_signature(3)["edges"]
    ((None, 2), 'int32')
    """
    if feature_dim is not None:
        feature_dim = _positive_int(feature_dim, "feature_dim")
    dims = {"nodes": (None, feature_dim), "edges": (None, 2)}
    return {name: (dims.get(name, (None,)), dtype) for name, (_, dtype) in GRAPH_INPUTS.items()}


def text_input_signature(max_length: int | None = None) -> tuple[tuple, str]:
    """The token-id signature of one example: ``((max_length,), "int32")``.

    >>> text_input_signature(16)
    ((16,), 'int32')
    """
    if max_length is not None:
        max_length = _positive_int(max_length, "max_length")
    return ((max_length,), "int32")


def _positive_int(value, name):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
            or value <= 0:
        raise ValueError(f"{name} must be a positive int or None, got {value!r}")
    return int(value)


def _dtype_name(dtype, where):
    name = getattr(dtype, "name", dtype)  # tf.DType / np.dtype / str
    try:
        return np.dtype(name).name
    except TypeError:
        raise ValueError(f"input_signature: {where} has dtype {dtype!r}, which is not a "
                         "NumPy/TensorFlow dtype name such as 'float32' or 'int32'") from None


def _shape(shape, where):
    if not isinstance(shape, (tuple, list)):
        raise ValueError(f"input_signature: {where} shape must be a tuple of ints or None, "
                         f"got {shape!r}")
    out = []
    for d in shape:
        if d is None:
            out.append(None)
        else:
            out.append(_positive_int(d, f"input_signature: {where} dimension"))
    return tuple(out)


def shape_and_dtype(value: Any, where: str) -> tuple[tuple, str]:
    """``(shape, dtype name)`` of a ``(shape, dtype)`` pair of ``input_signature``, checked
    (``where`` names it in the error)."""
    if (not isinstance(value, (tuple, list)) or len(value) != 2
            or not isinstance(value[0], (tuple, list))):
        raise ValueError(f"input_signature: {where} must be a (shape, dtype) pair, e.g. "
                         f"((None, 7), 'float32'), got {value!r}")
    return _shape(value[0], where), _dtype_name(value[1], where)


def normalize_input_signature(input_signature: Any,
                              prefer: str | None = None) -> tuple[str, Signature]:
    """``(modality, {name: (full shape, dtype)})`` of an ``input_signature`` argument.

    Each modality registered in :data:`keras_hardneg.registry.MODALITIES` is asked in turn
    (``prefer``, a registered modality's name, first: two modalities may read the same
    input, e.g. retrieval and text both take token ids, and a model card names which one
    it is) whether the argument describes its input (``Modality.input_signature``): a graph dict
    (exactly the six keys of :data:`GRAPH_INPUTS`, full shapes), or one ``(shape, dtype)``
    pair for one example: integer rank 1 -> text ``token_ids``; float32 ``(H, W, 3)`` ->
    ``images``. Anything else raises ``ValueError`` naming ``input_signature`` and what is
    allowed.
    """
    forms = []
    names = MODALITIES.names()
    if prefer in names:
        names = [prefer] + [n for n in names if n != prefer]
    for name in names:
        modality = get_modality(name)
        signature = modality.input_signature(input_signature)
        if signature is not None:
            return name, signature
        if modality.signature_form:
            forms.append(modality.signature_form)
    allowed = ", ".join(forms[:-1]) + (", or " if len(forms) > 1 else "") + forms[-1]
    if isinstance(input_signature, dict):
        raise ValueError(f"input_signature: no modality takes a dict with the keys "
                         f"{sorted(input_signature)}; it must be {allowed}")
    shape, dtype = shape_and_dtype(input_signature, "the single input")
    raise ValueError(f"input_signature must be {allowed}; got ({shape}, {dtype!r})")


def signature_to_json(signature: Signature) -> dict[str, dict[str, Any]]:
    """``{name: {"shape": [...], "dtype": str}}`` (the model card's ``input_signature``)."""
    return {name: {"shape": list(shape), "dtype": dtype}
            for name, (shape, dtype) in signature.items()}


def signature_from_json(d: dict[str, dict[str, Any]]) -> Signature:
    """Inverse of :func:`signature_to_json`."""
    return {name: (tuple(v["shape"]), v["dtype"]) for name, v in d.items()}
