"""The README's quick start runs as written."""

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
    text = open(os.path.join(ROOT, "README.md")).read()
    block = re.search(r"The fine-tuned MiniLM from the zoo.*?```python\n(.*?)```", text,
                      re.S).group(1)
    namespace = {}
    exec(compile(block, "README.md", "exec"), namespace)
    assert tuple(namespace["features"].shape) == (2, 384)
