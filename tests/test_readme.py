"""The README's quick start runs as written, its zoo block too, its zoo table is the index's,
and .ci/run's test command is the README's."""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_quick_start_runs_as_written_and_again(tmp_path, monkeypatch):
    """The quick start as written, then again in the same folder: the second run exports
    again (it used to train and then fail on the existing export, losing the model). The
    second run's ``fit`` does nothing (~12 CPU-s saved): what it checks is the export."""
    import keras_hardneg as khn

    text = open(os.path.join(ROOT, "README.md")).read()
    block = re.search(r"## Quick start\n\n```python\n(.*?)```", text, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    stamps = []
    for again in (False, True):
        if again:
            monkeypatch.setattr(khn.models.SimCLR, "fit", lambda self, *a, **k: None)
        namespace = {}
        exec(compile(block, "README.md", "exec"), namespace)
        assert namespace["feats"].shape[0] == len(namespace["x_test"])
        saved = tmp_path / "my_encoder" / "saved_model.pb"
        assert saved.is_file()
        stamps.append(saved.stat().st_mtime_ns)
    assert stamps[1] > stamps[0]  # exported again, not kept from the first run


def test_ci_runs_the_readme_test_commands():
    """Every pytest line of .ci/run is in the README, the heavy tier after the default."""
    lines = [line for line in open(os.path.join(ROOT, ".ci", "run")).read().splitlines()
             if "pytest" in line and not line.lstrip().startswith("#")]
    readme = open(os.path.join(ROOT, "README.md")).read()
    assert len(lines) == 2 and "-m heavy" in lines[1] and "KHN_HEAVY_TESTS=1" in lines[1]
    for line in lines:
        assert line in readme, line


def test_zoo_block_runs():
    text = open(os.path.join(ROOT, "README.md")).read()
    block = re.search(r"## Pretrained encoders.*?```python\n(.*?)```", text, re.S).group(1)
    namespace = {}
    exec(compile(block, "README.md", "exec"), namespace)
    assert namespace["encoder"].output_shape == (None, 512) and namespace["encoder"].trainable


def test_fine_tuned_minilm_block_runs():
    """The README's sentence block loads the zoo's fine-tuned MiniLM with its tokenizer."""
    import importlib.util

    import pytest

    if importlib.util.find_spec("keras_hub") is None:
        pytest.skip("needs the [pretrained] extra (keras-hub)")
    # The block moved with the sentence section to the site's guide.
    text = open(os.path.join(ROOT, "docs", "guides", "graphs_sentences.md")).read()
    block = re.search(r"The fine-tuned MiniLM from the zoo.*?```python\n(.*?)```", text,
                      re.S).group(1)
    namespace = {}
    exec(compile(block, "README.md", "exec"), namespace)
    assert tuple(namespace["features"].shape) == (2, 384)


def test_zoo_table_is_the_index():
    """The README's table of entries with weights names exactly the index's entries with
    weights, with the index's figures (a retrained or new entry cannot leave it behind)."""
    import json

    with open(os.path.join(ROOT, "keras_hardneg", "zoo_index.json")) as f:
        index = json.load(f)["entries"]
    text = open(os.path.join(ROOT, "README.md")).read()
    section = text[text.index("## Pretrained encoders"):text.index("## Examples")]
    rows = {m.group(1): [c.strip() for c in m.group(2).split("|")]
            for m in re.finditer(r"^\| `([^`]+)` \|(.*)\|$", section, re.M)}
    weights = {name: r for name, r in index.items() if r["status"] == "weights"}
    assert sorted(rows) == sorted(weights)
    for name, cells in rows.items():
        assert weights[name]["figures"] in cells, (name, cells)


def test_site_home_quick_start_is_the_readme_one():
    """The site's home page shows the README's quick start (run above), not a copy that can
    drift."""
    def block(name):
        text = open(os.path.join(ROOT, name)).read()
        return re.search(r"## Quick start\n\n```python\n(.*?)```", text, re.S).group(1)

    assert block(os.path.join("docs", "index.md")) == block("README.md")


def test_readme_links_resolve():
    """Every relative link and image of the README names a file of the repository (the
    README links to the site's sources, docs/...)."""
    text = open(os.path.join(ROOT, "README.md")).read()
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [t for t in targets if "://" not in t]
    assert local, "the README links to no file"
    assert [t for t in local if not os.path.exists(os.path.join(ROOT, t))] == []
