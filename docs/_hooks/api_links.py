"""MkDocs hook: an inline code span naming a documented API object links to its entry.

In the hand-written pages (guides, benchmarks, the home page; not the generated API pages),
`` `HardNegativeContrastiveLoss` ``, `` `khn.zoo.load` ``, `` `keras_hardneg.losses.get` ``,
`` `losses.get` ``, `` `BatchSampler.get_state()` `` or `` `khn.zoo.load(NAME)` `` becomes
the mkdocstrings cross-reference ``[`...`][keras_hardneg.MODULE.NAME]``, so the strict build
fails if the entry is gone. The names are those the API pages are generated from
(``generate.py``: each page module's ``__all__``, read statically); only exact, unambiguous
names link:

- a full path (``keras_hardneg.M.N``, ``khn.M.N``, ``M.N``) and a module
  (``keras_hardneg.M``, ``khn.M``: a link to its page);
- a bare name exported by one module only (or by several that re-export one definition),
  holding an upper-case letter or an underscore (``train``, ``load``, ``gin`` stay code:
  they are also commands, registry names and words);
- ``Class.method`` for a method the class defines itself, with a docstring (so its entry
  exists);

each optionally followed by a call, ``(...)``, and nothing else. Code blocks, headings,
and spans already inside a link's text are left alone. The functions are plain so the tests
can call them on the Markdown sources without a build.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import posixpath
import re

_HERE = os.path.dirname(os.path.abspath(__file__))


def _generate():
    spec = importlib.util.spec_from_file_location(
        "_khn_docs_generate_for_links", os.path.join(_HERE, "generate.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _module_trees(generate, module: str, root: str):
    base = os.path.join(root, generate.PACKAGE, *module.split("."))
    files = ([os.path.join(base, f) for f in sorted(os.listdir(base)) if f.endswith(".py")]
             if os.path.isdir(base) else [base + ".py"])
    for path in files:
        with open(path, encoding="utf-8") as f:
            yield ast.parse(f.read())


def _definitions(generate, module: str, root: str) -> dict[str, ast.AST]:
    """``{name: node}`` of the classes and functions defined at the top of the module's
    files (its package folder's modules, or its file)."""
    found = {}
    for tree in _module_trees(generate, module, root):
        for node in tree.body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                found.setdefault(node.name, node)
    return found


def inventory(root: str | None = None) -> dict[str, str]:
    """``{written form: identifier}`` of every name a code span may link by."""
    generate = _generate()
    root = root or generate.ROOT
    package = generate.PACKAGE
    modules = list(generate.API_MODULES) + list(generate.EXTRA_API_MODULES.values())
    forms: dict[str, str] = {}
    bare: dict[str, set[str]] = {}
    defined: dict[str, dict[str, ast.AST]] = {}
    pages = {m: m for m in generate.API_MODULES}
    pages.update({m: p for p, m in generate.EXTRA_API_MODULES.items()})
    for module in modules:
        full = f"{package}.{module}"
        # A module has no entry of its own to link to (its page opens with its docstring):
        # its form links to the page, a path under docs/.
        forms[full] = forms[f"khn.{module}"] = f"api/{pages[module]}.md"
        defined[module] = _definitions(generate, module, root)
        for name in generate.public_names(module, root):
            ident = f"{full}.{name}"
            for form in (ident, f"khn.{module}.{name}", f"{module}.{name}"):
                forms[form] = ident
            bare.setdefault(name, set()).add(module)
            node = defined[module].get(name)
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if (isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                            and not item.name.startswith("_") and ast.get_docstring(item)):
                        for prefix in ("", f"{module}.", f"khn.{module}.", f"{full}."):
                            forms.setdefault(f"{prefix}{name}.{item.name}",
                                             f"{ident}.{item.name}")
    for name, owners in bare.items():
        if not (re.search(r"[A-Z_]", name) and not name.startswith("_")):
            continue
        if len(owners) > 1:  # a re-export: link to the module that defines it
            owners = {m for m in owners if name in defined[m]}
        if len(owners) == 1:
            forms.setdefault(name, f"{package}.{owners.pop()}.{name}")
    return forms


_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")
_LINK = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\](?:\([^)]*\)|\[[^\]]*\])")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
# A name, then at most one call whose arguments nest one level: `f(a, (b, c))`, not
# `f(a).g(b)` (that names what `f` returns).
_CALL = re.compile(r"^([A-Za-z_][\w.]*)(\((?:[^()]|\([^()]*\))*\))?$")


def target(text: str, forms: dict[str, str]) -> str | None:
    """The identifier the code span ``text`` names, or None."""
    match = _CALL.match(text.strip())
    if not match or text != text.strip():
        return None
    return forms.get(match.group(1))


def _spans(markdown: str):
    """``(line number, line, match)`` for each inline code span outside code blocks,
    headings, front matter and links' texts."""
    fence = None
    lines = markdown.split("\n")
    front = lines[0].strip() == "---"
    for number, line in enumerate(lines):
        if front:
            if number > 0 and line.strip() == "---":
                front = False
            continue
        opener = _FENCE.match(line)
        if fence:
            if opener and opener.group(1)[0] == fence[0] and len(opener.group(1)) >= len(fence):
                fence = None
            continue
        if opener:
            fence = opener.group(1)
            continue
        if line.lstrip().startswith("#") or line.lstrip().startswith(":::"):
            continue
        links = [m.span() for m in _LINK.finditer(line)]
        for match in _SPAN.finditer(line):
            if any(a <= match.start() and match.end() <= b for a, b in links):
                continue
            yield number, line, match


def link_api_names(markdown: str, forms: dict[str, str], page: str = "index.md") -> str:
    """``markdown`` (the page ``page``, a path under docs/) with each code span naming an
    API object made a link to its entry (a module: to its page)."""
    lines = markdown.split("\n")
    edits: dict[int, list] = {}
    for number, _, match in _spans(markdown):
        ident = target(match.group(2), forms)
        if ident:
            edits.setdefault(number, []).append((match.span(), ident))
    for number, spans in edits.items():
        line = lines[number]
        for (start, end), ident in reversed(spans):
            if ident.endswith(".md"):
                href = posixpath.relpath(ident, posixpath.dirname(page) or ".")
                line = f"{line[:start]}[{line[start:end]}]({href}){line[end:]}"
            else:
                line = f"{line[:start]}[{line[start:end]}][{ident}]{line[end:]}"
        lines[number] = line
    return "\n".join(lines)


def unlinked_mentions(markdown: str, forms: dict[str, str]) -> list[tuple[int, str]]:
    """``[(line, span)]``: code spans naming an API object that are not a link's text."""
    return [(number + 1, match.group(2)) for number, _, match in _spans(markdown)
            if target(match.group(2), forms)]


_PATH = re.compile(r"^(?:khn|keras_hardneg)(?:\.\w+)+")


def unknown_api_paths(markdown: str, forms: dict[str, str]) -> list[tuple[int, str]]:
    """``[(line, span)]``: code spans that start with a ``khn.``/``keras_hardneg.`` path
    naming nothing the API pages document (a renamed or removed name), links' texts
    included. The path is read up to its first call: ``khn.zoo.load(NAME).x`` names
    ``khn.zoo.load``."""
    found = []
    for number, line in enumerate(markdown.split("\n")):
        for match in _SPAN.finditer(line):
            path = _PATH.match(match.group(2))
            if not path:
                continue
            # (the package's own attributes: its version)
            if path.group(0) not in forms and not path.group(0).endswith(".__version__"):
                found.append((number + 1, match.group(2)))
    return found


# --------------------------------------------------------------------------- the hook

_FORMS: dict[str, str] | None = None


def on_pre_build(config):  # noqa: D103 -- MkDocs's hook: the names, read once per build
    global _FORMS
    _FORMS = inventory()


def on_page_markdown(markdown, page, config, files):  # noqa: D103 -- MkDocs's hook
    if page.file.src_uri.startswith("api/"):
        return markdown
    return link_api_names(markdown, _FORMS if _FORMS is not None else inventory(),
                          page.file.src_uri)
