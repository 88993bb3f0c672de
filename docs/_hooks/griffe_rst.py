"""Griffe extension: the package's docstrings, written in Google style with a few
reStructuredText habits, rendered as Markdown by mkdocstrings.

- Sphinx roles (``:func:`~keras_hardneg.zoo.load```, ``:class:`ContrastiveLoss```) become
  cross-references to the API pages where the name resolves (relative names in the object's
  scope), as *optional* references: a docstring naming a private helper renders it as code
  instead of failing the build. (The site's own pages use required references, which
  ``mkdocs build --strict`` checks.)
- ``text::`` literal blocks and ``.. code-block:: LANG`` become fenced code blocks.
- ``>>>`` doctest runs become fenced ``pycon`` blocks (under ``Example:`` too).
- ``#:`` comments above a module or class attribute become its docstring (the
  Sphinx convention the package uses for constants).
- A parameter line naming several parameters (``z1, z2: [B, d] embeddings``) becomes one
  row per parameter, each with its own type and default from the signature (griffe reads
  the line as one parameter named ``"z1, z2"``, which matches no parameter of the
  signature, so its row would have neither). A class's parameter that its ``__init__``
  takes through ``**kwargs`` and forwards to a base class (``SimCLR``'s
  ``sync_batchnorm``) gets its type and default from the nearest base that names it.
"""

from __future__ import annotations

import functools
import html
import re

import griffe

ROLE = re.compile(r":(?:py:)?(func|class|mod|meth|data|attr|exc|obj|const):`(~?)([^`]+)`")
SECTION = re.compile(r"^(Examples?|Usage):\s*$")


class RstToMarkdown(griffe.Extension):
    def on_package(self, *, pkg, loader=None, **kwargs):  # noqa: D102
        if pkg.name != "keras_hardneg":
            return
        collection = loader.modules_collection if loader is not None else None
        shadowed = []
        _alias_lazy_exports(pkg, shadowed)
        seen = set()
        for obj in [o for root in (pkg, *shadowed) for o in _walk(root, seen)]:
            if obj.is_attribute and obj.docstring is None:
                text = _comment_doc(obj)
                if text:
                    obj.docstring = griffe.Docstring(text, lineno=obj.lineno, parent=obj)
            if obj.docstring is not None:
                obj.docstring.value = convert(obj.docstring.value, obj, collection)
                obj.docstring.__class__ = _SplitDocstring


class _SplitDocstring(griffe.Docstring):
    """A docstring whose parsed parameter rows are split and typed (see the module
    docstring) when mkdocstrings first reads them: by then every extension has run (the
    dataclasses extension, which gives a dataclass its ``__init__``, runs after this one)."""

    @functools.cached_property
    def parsed(self):  # noqa: D102
        sections = self.parse()
        _split_shared_parameters(self.parent, sections)
        return sections


def _split_shared_parameters(obj, sections) -> None:
    """One row per name of a ``"a, b: text"`` parameter line, typed from the signature."""
    if not (obj.is_function or obj.is_class):
        return
    try:
        signature = obj.parameters
    except Exception:  # noqa: BLE001 -- a class without a resolvable __init__
        return
    signatures = [signature]
    classes = [obj] if obj.is_class else []
    if obj.is_function and obj.returns is not None:
        # A factory forwarding ``**kwargs`` to the class it returns (``MoCo``).
        try:
            returned = obj.modules_collection.get_member(
                getattr(obj.returns, "canonical_path", str(obj.returns)))
            if returned.is_class:
                classes.append(returned)
                signatures.append(returned.parameters)
        except Exception:  # noqa: BLE001 -- not a class of the package
            pass
    for cls in classes:
        try:
            signatures += [base.parameters for base in cls.mro()]
        except Exception:  # noqa: BLE001 -- a base outside the package: its own only
            pass
    for section in sections:
        if section.kind not in (griffe.DocstringSectionKind.parameters,
                                griffe.DocstringSectionKind.other_parameters):
            continue
        rows = []
        for row in section.value:
            names = [n.strip() for n in row.name.split(",")]
            if len(names) == 1 and row.annotation is not None:
                rows.append(row)
                continue
            for name in names:
                param = _find_parameter(name, signatures)
                if param is None and len(names) == 1:
                    rows.append(row)
                    continue
                rows.append(griffe.DocstringParameter(
                    name=name, description=row.description,
                    annotation=param.annotation if param is not None else None,
                    value=param.default if param is not None else None))
        section.value = rows


def _find_parameter(name, signatures):
    """The parameter ``name`` (``**kwargs`` or ``kwargs``) of the first signature naming it
    with an annotation, else of the first naming it at all."""
    bare = name.lstrip("*")
    found = [sig[bare] for sig in signatures if bare in sig]
    typed = [p for p in found if p.annotation is not None]
    return (typed or found or [None])[0]


def _alias_lazy_exports(module, shadowed) -> None:
    """A name of a module's ``__all__`` that the module only provides through a lazy
    ``__getattr__`` (``keras_hardneg.sampling.make_dataset``, defined in its submodule
    ``dataset``) becomes an alias of the object of that name in one of its submodules, so
    the API page documents it under its public path."""
    for sub in list(module.modules.values()):
        _alias_lazy_exports(sub, shadowed)
    for name in module.exports or ():
        name = name if isinstance(name, str) else getattr(name, "name", str(name))
        member = module.members.get(name)
        if member is not None and not member.is_alias and member.is_module:
            # ``from .random_graph import random_graph``: at run time the package's
            # attribute is the function, which shadows its submodule; document that.
            inner = member.members.get(name)
            if inner is not None and not inner.is_alias and not inner.is_module:
                module.set_member(name, griffe.Alias(name, inner, parent=module))
                shadowed.append(member)  # still walked: its docstrings are converted
            continue
        if name in module.members:
            continue
        for sub in _submodules(module):
            member = sub.members.get(name)
            if member is not None and not member.is_alias:
                module.set_member(name, griffe.Alias(name, member, parent=module))
                break


def _submodules(module):
    for sub in module.modules.values():
        yield sub
        yield from _submodules(sub)


def _walk(obj, seen=None):
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return
    seen.add(id(obj))
    yield obj
    for member in list(obj.members.values()):
        if member.is_alias:
            continue
        yield from _walk(member, seen)


def _comment_doc(attr) -> str:
    """The ``#:`` comment lines right above ``attr``'s assignment."""
    try:
        lines = attr.parent.lines_collection[attr.filepath]
    except Exception:  # noqa: BLE001 -- no source: no comment
        return ""
    out = []
    i = attr.lineno - 2
    while i >= 0 and lines[i].strip().startswith("#:"):
        out.insert(0, lines[i].strip()[2:].strip())
        i -= 1
    return " ".join(out)


def _resolve(name: str, obj, collection) -> str | None:
    """The full path of ``name`` seen from ``obj``, if it is an object of the package."""
    name = name.strip().rstrip("()")
    if collection is None:
        return None
    head, _, rest = name.partition(".")
    candidates = [name]
    scope = obj
    while scope is not None:
        try:
            resolved = scope.resolve(head)
            candidates.insert(0, resolved + ("." + rest if rest else ""))
            break
        except Exception:  # noqa: BLE001 -- not in this scope
            scope = scope.parent
    for path in candidates:
        if not path.startswith("keras_hardneg"):
            continue
        try:
            collection.get_member(path)
        except Exception:  # noqa: BLE001 -- not an object of the package
            continue
        return path
    return None


def _role(match, obj, collection) -> str:
    tilde, target = match.group(2), match.group(3)
    shown = target.split(".")[-1] if tilde else target
    path = _resolve(target, obj, collection)
    if path is None:
        return f"``{shown}``"
    return (f'<autoref identifier="{html.escape(path)}" optional>'
            f"<code>{html.escape(shown)}</code></autoref>")


def convert(text: str, obj=None, collection=None) -> str:
    """``text`` (a docstring) with the reST habits above turned into Markdown."""
    text = ROLE.sub(lambda m: _role(m, obj, collection), text)
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    in_fence = False
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if stripped.startswith("```"):
            in_fence = not in_fence
            out.append(line)
            i += 1
            continue
        if in_fence:
            out.append(line)
            i += 1
            continue
        code_block = re.match(r"^\.\. code-block::\s*(\w*)\s*$", stripped)
        if code_block or (stripped.endswith("::") and not stripped.startswith(">>>")):
            lang = code_block.group(1) if code_block else "text"
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            block_indent = (len(lines[j]) - len(lines[j].lstrip())) if j < len(lines) else 0
            if j < len(lines) and block_indent > indent:
                if not code_block:
                    head = line.rstrip()[:-1]  # "text::" -> "text:"
                    if head.strip() != ":":
                        out.append(head)
                k = j
                body = []
                while k < len(lines) and (not lines[k].strip() or
                                          len(lines[k]) - len(lines[k].lstrip()) >= block_indent):
                    body.append(lines[k][block_indent:])
                    k += 1
                while body and not body[-1].strip():
                    body.pop()
                pad = " " * indent
                out += ["", pad + f"```{lang}", *[pad + b if b else "" for b in body],
                        pad + "```", ""]
                i = k
                continue
        if stripped.startswith(">>>"):
            k = i
            body = []
            while k < len(lines) and lines[k].strip() and \
                    len(lines[k]) - len(lines[k].lstrip()) >= indent:
                body.append(lines[k][indent:])
                k += 1
            pad = " " * indent
            if out and SECTION.match(out[-1].strip()) and \
                    len(out[-1]) - len(out[-1].lstrip()) == indent:
                # "Example:" followed by an unindented run: a section header in Google style
                # wants its body indented; keep it a plain paragraph instead.
                out[-1] = pad + "**" + out[-1].strip() + "**"
            out += ["", pad + "```pycon", *[pad + b for b in body], pad + "```", ""]
            i = k
            continue
        out.append(line)
        i += 1
    return "\n".join(out)
