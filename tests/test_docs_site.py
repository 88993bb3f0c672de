"""The documentation site builds strictly, and what it links to exists.

``mkdocs build --strict`` (``mkdocs.yml``; the ``[docs]`` extra, which ``.ci/run``
installs) turns every warning into a failure: a broken cross-reference to the API, a link to
a missing page or anchor, a page left out of the navigation, a docstring that does not
parse. The tests then read the built HTML: every internal link and anchor resolves, every
public symbol has its API entry, and the examples and the zoo are pages generated from their
sources. A clean clone without the extra skips them (``pip install -e ".[docs]"``).
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

pytestmark = pytest.mark.skipif(
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


def test_the_site_builds_strictly(site):
    assert (site / "index.html").is_file()
    assert (site / "api" / "losses" / "index.html").is_file()


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
    assert missing == []


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
