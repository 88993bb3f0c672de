"""The documentation site builds strictly, and what it links to exists.

``mkdocs build --strict`` (``mkdocs.yml``; the ``[docs]`` extra, which ``.ci/run``
installs) turns every warning into a failure: a broken cross-reference to the API, a link to
a missing page or anchor, a page left out of the navigation, a docstring that does not
parse. The tests then read the built HTML: every internal link and anchor resolves, every
public symbol has its API entry, and the examples and the zoo are pages generated from their
sources. A clean clone without the extra skips them (``pip install -e ".[docs]"``).

The public pages' sources (``docs/`` but its maintainers' notes, the pages generated from the
examples and the zoo's index, ``README.md``) are also read without a build: they speak to a
user, not of the repository's workshop (its notes, folders outside a clone, tracker
numbers, who worked when).
"""

import html.parser
import importlib
import importlib.util
import json
import os
import posixpath
import re
import shutil
import subprocess
import sys
import urllib.parse

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

needs_docs = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("mkdocs", "material", "mkdocstrings_handlers")),
    reason='needs the [docs] extra (pip install -e ".[docs]")')


def _build(config_dir, site_dir):
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
         os.path.join(config_dir, "mkdocs.yml"), "--site-dir", str(site_dir)],
        cwd=config_dir, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    result = _build(ROOT, out)
    assert result.returncode == 0, result.stdout + result.stderr
    return out


class _Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.links = set(), []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("name"):
            self.ids.add(attrs["name"])
        for key in ("href", "src"):
            if tag in ("a", "img", "link", "script") and attrs.get(key):
                self.links.append(attrs[key])


def _pages(site):
    pages = {}
    for folder, _, files in os.walk(site):
        for name in files:
            if name.endswith(".html"):
                path = os.path.join(folder, name)
                parser = _Page()
                with open(path, encoding="utf-8") as f:
                    parser.feed(f.read())
                pages[os.path.relpath(path, site).replace(os.sep, "/")] = parser
    return pages


def _broken_links(site):
    """``[(page, link, why)]`` for every internal link of the built site that does not
    resolve: a missing file, or an anchor the target page lacks."""
    pages = _pages(site)
    broken = []
    for page, parsed in sorted(pages.items()):
        if page == "404.html":  # MkDocs writes it with root-relative links, for any depth
            continue
        for link in parsed.links:
            url = urllib.parse.urlsplit(link)
            if url.scheme or url.netloc or link.startswith(("mailto:", "data:")):
                continue
            if url.path:
                target = posixpath.normpath(posixpath.join(posixpath.dirname(page),
                                                           urllib.parse.unquote(url.path)))
                if url.path.endswith("/") or os.path.isdir(os.path.join(site, target)):
                    target = posixpath.join(target, "index.html")
            else:
                target = page
            if target.startswith("..") or not os.path.isfile(os.path.join(site, target)):
                broken.append((page, link, "no such file"))
            elif url.fragment and target.endswith(".html"):
                if urllib.parse.unquote(url.fragment) not in pages[target].ids:
                    broken.append((page, link, "no such anchor"))
    return broken


@needs_docs
def test_the_site_builds_strictly(site):
    assert (site / "index.html").is_file()
    assert (site / "api" / "losses" / "index.html").is_file()


@needs_docs
def test_internal_links_and_anchors_resolve(site):
    pages = _pages(site)
    assert len(pages) > 40
    links = sum(len(p.links) for p in pages.values())
    assert links > 1000
    assert _broken_links(site) == []


def test_the_link_check_finds_a_broken_link_and_anchor(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "index.html").write_text(
        '<a href="a/">ok</a><a href="a/#here">ok</a><a href="a/#gone">bad anchor</a>'
        '<a href="b/">bad page</a><a href="https://example.org/">external</a>')
    (tmp_path / "a" / "index.html").write_text('<h2 id="here">x</h2>')
    assert _broken_links(tmp_path) == [("index.html", "a/#gone", "no such anchor"),
                                       ("index.html", "b/", "no such file")]


@needs_docs
def test_every_public_symbol_has_an_api_entry(site):
    """What ``import keras_hardneg`` exposes and each submodule's ``__all__`` (read at run
    time, so a name the generator's static reading missed shows here) has its entry."""
    # Loaded under its own name: a module called "generate" elsewhere cannot displace it.
    spec = importlib.util.spec_from_file_location(
        "khn_docs_generate", os.path.join(ROOT, "docs", "_hooks", "generate.py"))
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    import keras_hardneg

    assert set(generate.API_MODULES) == set(keras_hardneg._SUBMODULES)  # noqa: SLF001
    missing = []
    pages = _pages(site)
    for module_name in generate.API_MODULES:
        page = pages[f"api/{module_name}/index.html"]
        module = importlib.import_module(f"keras_hardneg.{module_name}")
        for name in module.__all__:
            if f"keras_hardneg.{module_name}.{name}" not in page.ids:
                missing.append(f"keras_hardneg.{module_name}.{name}")
    for page_name, module_name in generate.EXTRA_API_MODULES.items():
        page = pages[f"api/{page_name}/index.html"]
        module = importlib.import_module(f"keras_hardneg.{module_name}")
        missing += [f"keras_hardneg.{module_name}.{name}" for name in module.__all__
                    if f"keras_hardneg.{module_name}.{name}" not in page.ids]
    assert missing == []


@needs_docs
def test_api_pages_lead_with_what_a_user_calls(site):
    """On the models page the frameworks come before their base classes, and the hooks a
    subclass overrides are in the last section, below the table of contents."""
    page = (site / "api" / "models" / "index.html").read_text(encoding="utf-8")
    simclr = page.index('id="keras_hardneg.models.SimCLR"')
    assert simclr < page.index('id="keras_hardneg.models.ContrastiveModel"')
    hooks = page.index('id="for-subclass-authors"')
    assert hooks < page.index('id="keras_hardneg.models.ContrastiveModel.make_projector"')
    assert hooks < page.index('id="keras_hardneg.models.SimCLR.pairs"')
    toc = page[page.index('class="md-nav md-nav--secondary"'):simclr]
    assert "keras_hardneg.models.SimCLR" in toc and ".make_projector" not in toc
    index = (site / "api" / "index.html").read_text(encoding="utf-8")
    assert "Contrastive losses: NT-Xent" in index  # each module's one-line summary


@needs_docs
def test_examples_and_zoo_are_pages_from_their_sources(site):
    examples = sorted(n[:-3] for n in os.listdir(os.path.join(ROOT, "examples"))
                      if n.endswith(".py") and not n.startswith("_"))
    assert len(examples) >= 9
    for name in examples:
        page = html.unescape(re.sub(r"<[^>]+>", "", (site / "examples" / name / "index.html")
                                    .read_text(encoding="utf-8")))
        with open(os.path.join(ROOT, "examples", f"{name}.py"), encoding="utf-8") as f:
            source = f.read()
        # The header's title and the script's first argparse line appear on its page.
        title = next(line for line in source.splitlines() if line.startswith("Title:"))
        assert title[len("Title:"):].strip() in page, name
        assert "argparse.ArgumentParser" in page, name
    with open(os.path.join(ROOT, "keras_hardneg", "zoo_index.json"), encoding="utf-8") as f:
        entries = json.load(f)["entries"]
    zoo = (site / "zoo" / "index.html").read_text(encoding="utf-8")
    assert [name for name in entries if f"<code>{name}</code>" not in zoo] == []


@needs_docs
@pytest.mark.heavy  # a second whole build (~20 CPU-s); the default run builds the site
# strictly once and checks its links and anchors in-process
def test_a_broken_cross_reference_fails_the_build(tmp_path):
    """The same site with one bad reference to the API, one link to a missing page and one
    to a missing anchor: the strict build refuses it and names all three."""
    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copy(os.path.join(ROOT, "mkdocs.yml"), copy / "mkdocs.yml")
    shutil.copytree(os.path.join(ROOT, "docs"), copy / "docs",
                    ignore=shutil.ignore_patterns("notes", "__pycache__"))
    for name in ("keras_hardneg", "examples", "models"):
        os.symlink(os.path.join(ROOT, name), copy / name)
    page = copy / "docs" / "guides" / "losses.md"
    page.write_text(page.read_text(encoding="utf-8")
                    + "\n\nSee [the loss][keras_hardneg.losses.NoSuchLoss], "
                      "[a page](no_such_page.md) and [an anchor](frameworks.md#no-such-anchor).\n",
                    encoding="utf-8")
    result = _build(copy, tmp_path / "site")
    log = result.stdout + result.stderr
    assert result.returncode != 0, log
    assert "keras_hardneg.losses.NoSuchLoss" in log
    assert "no_such_page.md" in log
    assert "no-such-anchor" in log


#: What no public page says, each with why a reader would stumble on it.
WORKSHOP = {
    "a maintainers' note (not on the site)": r"docs/notes",
    "a folder outside a clone": r"\.\./shared|/work/shared",
    "an issue number": r"\bissues? #?\d|(?<![\w/])#\d+\b",
    "a work session": r"\bsessions?\b",
    "a wave of work": r"\bwaves?\b",
    "a script from git history": r"\bgit show\b",
    "the workshop's own lists": r"retired scripts|open issues",
    "a stop of a work session": r"\bstops? \d+",
    "the task's brief": r"\bthe issue\b|\bthe lead\b",
}


def _generator():
    spec = importlib.util.spec_from_file_location(
        "khn_docs_generate_sources", os.path.join(ROOT, "docs", "_hooks", "generate.py"))
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    return generate


def public_sources(root: str = ROOT) -> dict[str, str]:
    """``{name: markdown}`` of every public page's source: ``docs/**.md`` but ``docs/notes``,
    the examples' and the zoo's generated pages, and ``README.md``."""
    sources = {}
    docs = os.path.join(root, "docs")
    for folder, dirs, files in os.walk(docs):
        dirs[:] = [d for d in dirs if os.path.relpath(os.path.join(folder, d), docs)
                   not in ("notes", "_hooks")]
        for name in files:
            if name.endswith(".md"):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as f:
                    sources[os.path.relpath(path, root)] = f.read()
    with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
        sources["README.md"] = f.read()
    generate = _generator()
    for name in sorted(os.listdir(os.path.join(root, "examples"))):
        if name.endswith(".py") and not name.startswith("_"):
            sources[f"examples/{name} (its page)"] = generate.example_page(
                os.path.join(root, "examples", name))
    sources["zoo.md (generated)"] = generate.zoo_page(
        os.path.join(root, "keras_hardneg", "zoo_index.json"), os.path.join(root, "models"))
    return sources


def workshop_mentions(sources: dict[str, str]) -> list[tuple[str, int, str, str]]:
    """``[(page, line, what, text)]`` for each mention of the workshop in the pages."""
    found = []
    for page, text in sorted(sources.items()):
        for number, line in enumerate(text.splitlines(), 1):
            for what, pattern in WORKSHOP.items():
                for match in re.finditer(pattern, line, flags=re.IGNORECASE):
                    found.append((page, number, what, match.group(0)))
    return found


def test_public_pages_speak_to_users():
    sources = public_sources()
    assert "docs/index.md" in sources and "README.md" in sources
    assert any(name.startswith("examples/") for name in sources)
    assert workshop_mentions(sources) == []


def test_the_workshop_check_finds_each_pattern():
    page = ("See docs/notes/x.md and ../shared/data (issue 16, #46); session 12, wave-2,\n"
            "`git show e9db6ef:PATH`; Retired scripts; Open issues; stop 36; as the issue asks.\n"
            "Fine: joshr17/HCL#8, keras.backend.clear_session(), a graph's wavelet.\n")
    found = workshop_mentions({"page.md": page})
    assert {what for _, _, what, _ in found} == set(WORKSHOP)
    assert all(line == 1 or line == 2 for _, line, _, _ in found)


# --------------------------------------------------------------------------- math, offline


def _config_list(key: str) -> list[str]:
    """The ``- item`` entries under the top-level ``key:`` of mkdocs.yml (read as text: no
    YAML parser needed)."""
    with open(os.path.join(ROOT, "mkdocs.yml"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    start = lines.index(f"{key}:") + 1
    items = []
    for line in lines[start:]:
        if line.startswith("  - "):
            items.append(line[4:].strip())
        elif line.strip() and not line.startswith("#"):
            break
    return items


def test_math_assets_are_in_the_repository():
    """KaTeX is vendored under docs/js/katex/ with its licence, the config loads it from
    there, and every font its stylesheet names first (woff2) is beside it."""
    katex = os.path.join(ROOT, "docs", "js", "katex")
    scripts, styles = _config_list("extra_javascript"), _config_list("extra_css")
    assert "js/katex/katex.min.js" in scripts and "js/katex/katex.min.css" in styles
    for path in scripts + styles:
        assert "://" not in path and os.path.isfile(os.path.join(ROOT, "docs", path)), path
    with open(os.path.join(katex, "LICENSE"), encoding="utf-8") as f:
        assert "MIT License" in f.read()
    with open(os.path.join(katex, "katex.min.css"), encoding="utf-8") as f:
        fonts = re.findall(r"url\((fonts/[\w-]+\.woff2)\)", f.read())
    assert len(fonts) >= 20
    assert [font for font in fonts if not os.path.isfile(os.path.join(katex, font))] == []


@needs_docs
def test_the_site_fetches_nothing_from_elsewhere(site):
    """No page loads a script, stylesheet or font from another host (the canonical link
    names the site's address, it fetches nothing), and the losses guide's formulas are
    marked for the KaTeX the site serves."""
    outside = []
    for path in site.rglob("*.html"):
        page = path.read_text(encoding="utf-8")
        for tag in re.findall(r"<(?:script|link)\b[^>]*>", page):
            if 'rel="canonical"' in tag:
                continue
            for url in re.findall(r'(?:src|href)="([^"]*)"', tag):
                if re.match(r"(?:[a-z]+:)?//", url):
                    outside.append((str(path.relative_to(site)), url))
    assert outside == []
    losses = (site / "guides" / "losses" / "index.html").read_text(encoding="utf-8")
    assert losses.count('class="arithmatex"') > 20
    assert 'src="../../js/katex/katex.min.js"' in losses
    assert (site / "js" / "katex" / "fonts" / "KaTeX_Main-Regular.woff2").is_file()


# --------------------------------------------------------------------------- API names


def _api_links():
    spec = importlib.util.spec_from_file_location(
        "khn_docs_api_links", os.path.join(ROOT, "docs", "_hooks", "api_links.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: Code spans that look like an API path but name no entry, each with its reason. Empty.
UNKNOWN_PATHS_ALLOWED: dict[str, str] = {}


def test_guides_link_every_api_name():
    """The hook (``docs/_hooks/api_links.py``, named in mkdocs.yml) turns every code span
    of the hand-written pages that names an API object into a link to its entry: after it,
    no such span is left unlinked; and no span names a ``khn.``/``keras_hardneg.`` path the
    API pages lack."""
    assert "docs/_hooks/api_links.py" in _config_list("hooks")
    links = _api_links()
    forms = links.inventory(ROOT)
    pages = {name: text for name, text in public_sources().items()
             if name.startswith("docs/") and not name.startswith("docs/api/")}
    assert "docs/guides/losses.md" in pages
    before = sum(len(links.unlinked_mentions(text, forms)) for text in pages.values())
    assert before > 100  # the guides' mentions the hook links at build time
    left = {name: links.unlinked_mentions(
        links.link_api_names(text, forms, name[len("docs/"):]), forms)
        for name, text in pages.items()}
    assert {name: found for name, found in left.items() if found} == {}
    unknown = [(name, line, span) for name, text in pages.items()
               for line, span in links.unknown_api_paths(text, forms)
               if span not in UNKNOWN_PATHS_ALLOWED]
    assert unknown == []


def test_the_api_link_rules_on_a_planted_page():
    links = _api_links()
    forms = links.inventory(ROOT)
    page = "\n".join([
        "# `HardNegativeContrastiveLoss`",
        "Use `HardNegativeContrastiveLoss`, `khn.zoo.load(NAME)`, `losses.get` and "
        "`ProximityGraph.build(x, k=5)`; see `keras_hardneg.losses`.",
        "Already linked: [`NTXentLoss`][keras_hardneg.losses.NTXentLoss]. Words: `train`, "
        "`load`, `beta`, `khn.export.load_encoder(p).embed([s])`, `BatchSampler.get_state()` "
        "(inherited: no entry of its own).",
        "```python", "`HardNegativeContrastiveLoss`", "```",
        "Stale: `khn.losses.NoSuchLoss`."])
    out = links.link_api_names(page, forms, "guides/x.md").split("\n")
    assert out[0] == page.split("\n")[0]  # headings stay as they are
    assert ("[`HardNegativeContrastiveLoss`][keras_hardneg.losses.HardNegativeContrastiveLoss]"
            in out[1])
    assert "[`khn.zoo.load(NAME)`][keras_hardneg.zoo.load]" in out[1]
    assert "[`losses.get`][keras_hardneg.losses.get]" in out[1]
    assert "[`ProximityGraph.build(x, k=5)`][keras_hardneg.sampling.ProximityGraph.build]" in out[1]
    assert "[`keras_hardneg.losses`](../api/losses.md)" in out[1]
    assert out[2] == page.split("\n")[2]  # a link's text, words and a chained call: as is
    assert out[4] == "`HardNegativeContrastiveLoss`"  # code blocks: as is
    assert links.unknown_api_paths(page, forms) == [(7, "khn.losses.NoSuchLoss")]


# --------------------------------------------------------------------------- the CLI page


@needs_docs
def test_the_cli_page_documents_every_option(site):
    """/cli/ has a section per command and a table row per option, from ``build_parser()``,
    and its usage blocks are wrapped to the column, never cut."""
    import argparse

    from keras_hardneg.cli import build_parser

    page = (site / "cli" / "index.html").read_text(encoding="utf-8")
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    missing = []
    parser = build_parser()
    subparsers = next(a for a in parser._actions  # noqa: SLF001
                      if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    for name, child in subparsers.choices.items():
        if f'id="keras-hardneg-{name}"' not in page:
            missing.append(name)
        for action in child._actions:  # noqa: SLF001
            missing += [f"{name} {o}" for o in action.option_strings if o not in text]
    assert missing == []
    assert page.count("<table>") >= 7
    usage = re.findall(r'<pre><span></span><code>(usage:.*?)</code></pre>', page, flags=re.S)
    assert len(usage) >= len(subparsers.choices)
    lines = [line for block in usage
             for line in html.unescape(re.sub(r"<[^>]+>", "", block)).splitlines()]
    assert max(len(line) for line in lines) <= 78
