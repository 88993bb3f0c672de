"""Every public symbol has a docstring of its own, and the ones that take or give arrays
state their shapes: what the API reference (docs/api/, generated from the docstrings) shows.

Public = what ``import keras_hardneg`` exposes (its submodules) and every name of those
submodules' ``__all__``. A constant is documented by a ``#:`` comment above its assignment
(the convention the site's API pages render). The tests list every symbol that falls short,
so a gap reads as one failure naming them all.
"""

import ast
import importlib
import inspect
import os
import re

import keras

import keras_hardneg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: A shape as the docstrings write one: ``[B, d]``, ``[n, 8, 8, 3]``, ``(batch, 32)``, or
#: the word "shape" with its value.
SHAPE = re.compile(r"\[[^\]\n]*\b(B|N|K|n|d|D|H|W|C|F|L|M|V|T|A|batch|rows|dim)\b[^\]\n]*\]"
                   r"|\bshape\b|\[B\]|\[N\]|\[n\]")

#: Parameter names that carry arrays or tensors: a function taking one states its shapes.
ARRAY_PARAMS = {
    "x", "y", "images", "inputs", "features", "embeddings", "z", "z1", "z2", "anchors",
    "positives", "negatives", "queries", "keys", "labels", "train_features", "test_features",
    "train_labels", "test_labels", "pairs", "view1", "view2", "x_train", "x_test",
    "points", "vectors", "logits",
}


def _public():
    """``[(module name, symbol name, object)]`` of every public symbol."""
    out = []
    for module_name in keras_hardneg._SUBMODULES:  # noqa: SLF001 -- the package's list
        module = importlib.import_module(f"keras_hardneg.{module_name}")
        out.append(("keras_hardneg", module_name, module))
        for name in getattr(module, "__all__", ()):
            out.append((f"keras_hardneg.{module_name}", name, getattr(module, name)))
    return out


def _own_doc(obj):
    """The docstring written for ``obj`` itself (a class's, not one inherited)."""
    if inspect.isclass(obj):
        return obj.__dict__.get("__doc__") or ""
    if inspect.ismodule(obj) or inspect.isroutine(obj):
        return obj.__doc__ or ""
    return None  # data: documented in the source


def _comment_doc(module_name, name, seen=None):
    """The ``#:`` comment above ``name``'s assignment, following ``from X import name``."""
    seen = set() if seen is None else seen
    if module_name in seen:
        return ""
    seen.add(module_name)
    spec = importlib.util.find_spec(module_name)
    with open(spec.origin, encoding="utf-8") as f:
        source = f.read()
    lines = source.splitlines()
    for node in ast.parse(source).body:
        targets = (node.targets if isinstance(node, ast.Assign) else
                   [node.target] if isinstance(node, ast.AnnAssign) else [])
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            comment = []
            i = node.lineno - 2
            while i >= 0 and lines[i].strip().startswith("#:"):
                comment.insert(0, lines[i].strip()[2:].strip())
                i -= 1
            return " ".join(comment)
        if isinstance(node, ast.ImportFrom) and node.module and any(
                (a.asname or a.name) == name for a in node.names):
            return _comment_doc(node.module, name, seen)
    return ""


def _doc(module_name, name, obj):
    doc = _own_doc(obj)
    return _comment_doc(module_name, name) if doc is None else doc


def _takes_arrays(obj):
    target = obj.__init__ if inspect.isclass(obj) else obj
    try:
        params = inspect.signature(target).parameters
    except (TypeError, ValueError):
        return False
    return any(name in ARRAY_PARAMS and not isinstance(p.default, (bool, str))
               and p.annotation not in (bool, str, "bool", "str")
               for name, p in params.items())


def _tensor_class(obj):
    return inspect.isclass(obj) and issubclass(
        obj, (keras.layers.Layer, keras.losses.Loss))


def _full_doc(obj):
    """A class's docstring with its ``__init__``'s and ``call``'s (the API page merges the
    first and lists the second)."""
    parts = [_own_doc(obj) or ""]
    if inspect.isclass(obj):
        for method in ("__init__", "call", "__call__"):
            fn = obj.__dict__.get(method)
            parts.append(getattr(fn, "__doc__", None) or "")
    return "\n".join(parts)


def test_every_public_symbol_has_a_docstring():
    missing = [f"{module}.{name}" for module, name, obj in _public()
               if not (_doc(module, name, obj) or "").strip()]
    assert not missing, f"public symbols without a docstring: {missing}"


def test_array_symbols_state_their_shapes():
    """Layers, models and losses, and every function or class taking an array argument,
    say what shapes go in and come out."""
    lacking = []
    for module, name, obj in _public():
        if inspect.ismodule(obj) or not callable(obj):
            continue
        if (_tensor_class(obj) or _takes_arrays(obj)) and not SHAPE.search(_full_doc(obj)):
            lacking.append(f"{module}.{name}")
    assert not lacking, f"docstrings that do not state shapes: {lacking}"
