"""No function of keras_hardneg/ has more than 80 lines of code (from its ``def`` line to its
last line, its docstring left out: the docstrings carry the runnable examples the API
reference shows, which should not push a function into being cut): a long one is cut into
named steps. The allow-list holds the functions not cut yet; an entry whose function
is cut (or gone) must leave the list, so the list only shrinks."""

import ast
import os

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       "keras_hardneg")

#: The most lines a function may have: from its ``def`` line to its last line, less its
#: docstring (decorators above the ``def`` are not counted).
MAX_LINES = 80

#: ``"path/in/keras_hardneg.py::qualified.name"`` of functions still over the limit, to be cut.
ALLOWED: set[str] = set()


def _functions(tree):
    """``(qualified name, node)`` of every function and method, nested ones included."""
    stack = [("", node) for node in tree.body]
    while stack:
        prefix, node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = f"{prefix}{node.name}"
            if not isinstance(node, ast.ClassDef):
                yield name, node
            stack.extend((f"{name}.", child) for child in ast.iter_child_nodes(node))
        else:
            stack.extend((prefix, child) for child in ast.iter_child_nodes(node))


def _docstring_lines(node) -> int:
    """Lines of ``node``'s docstring (0 without one)."""
    first = node.body[0] if node.body else None
    if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)):
        return first.end_lineno - first.lineno + 1
    return 0


def _long_functions():
    """``{"path::name": lines}`` of the package's functions over :data:`MAX_LINES`."""
    out = {}
    for folder, _, files in os.walk(PACKAGE):
        for file_name in files:
            if not file_name.endswith(".py"):
                continue
            path = os.path.join(folder, file_name)
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), filename=path)
            rel = os.path.relpath(path, PACKAGE).replace(os.sep, "/")
            for name, node in _functions(tree):
                lines = node.end_lineno - node.lineno + 1 - _docstring_lines(node)
                if lines > MAX_LINES:
                    out[f"{rel}::{name}"] = lines
    return out


def test_no_function_over_the_limit():
    long = _long_functions()
    new = {key: lines for key, lines in long.items() if key not in ALLOWED}
    assert not new, (f"functions over {MAX_LINES} lines (cut them into named steps): "
                     + ", ".join(f"{key} ({lines})" for key, lines in sorted(new.items())))


def test_allow_list_only_names_long_functions():
    stale = sorted(ALLOWED - set(_long_functions()))
    assert not stale, f"cut or gone, remove them from ALLOWED: {', '.join(stale)}"


def test_the_walk_finds_methods_and_nested_functions():
    tree = ast.parse("class A:\n    def f(self):\n        def g():\n            pass\n"
                     "def h():\n    pass\n")
    assert sorted(name for name, _ in _functions(tree)) == ["A.f", "A.f.g", "h"]
