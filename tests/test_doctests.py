"""The docstrings' ``>>>`` examples run: every module of the package, one test per module.

Each example runs in its module's namespace plus the names the API pages assume
(``import numpy as np, keras, keras_hardneg as khn``), as keras.io's do. An example that
needs data a clean clone lacks, the network, an optional wheel or minutes of training is
marked ``# doctest: +SKIP`` in the docstring itself, with the reason beside it; a module
whose examples all need an optional package is skipped here with that reason.
"""

import doctest
import importlib
import importlib.util
import os
import pkgutil

import pytest

import keras_hardneg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: Modules whose import needs an optional package: skipped when it is absent.
NEEDS = {
    "keras_hardneg.encoders.pretrained_text": "keras_hub",
    "keras_hardneg.tuning.hypermodel": "keras_tuner",
    "keras_hardneg.tuning.search": "keras_tuner",
}

#: Whole modules left out, with the reason.
LEFT_OUT = {
    "keras_hardneg.cli": "the command line is tested through its commands (tests/test_cli.py)",
}


def _modules():
    names = [keras_hardneg.__name__]
    for info in pkgutil.walk_packages(keras_hardneg.__path__, "keras_hardneg."):
        names.append(info.name)
    return sorted(names)


def _with_examples(name):
    spec = importlib.util.find_spec(name)
    with open(spec.origin, encoding="utf-8") as f:
        return ">>>" in f.read()


MODULES = [name for name in _modules() if _with_examples(name)]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # an example that writes a file writes it here
    if name in LEFT_OUT:
        pytest.skip(LEFT_OUT[name])
    if name in NEEDS and importlib.util.find_spec(NEEDS[name]) is None:
        pytest.skip(f"needs {NEEDS[name]} (an optional extra)")
    import keras
    import numpy as np

    # Keras's defaults, whatever an earlier test file in this worker left set.
    policy, floatx = keras.config.dtype_policy(), keras.config.floatx()
    keras.config.set_dtype_policy("float32")
    keras.config.set_floatx("float32")
    try:
        _run_examples(name, keras, np)
    finally:
        keras.config.set_floatx(floatx)
        keras.config.set_dtype_policy(policy)


def _run_examples(name, keras, np):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = [t for t in finder.find(module, name) if t.examples]
    assert tests, f"{name} has '>>>' in its source but no example was collected"
    report = []
    for test in tests:
        test.globs = {**vars(module), "np": np, "keras": keras, "keras_hardneg": keras_hardneg,
                      "khn": keras_hardneg}
        keras.utils.set_random_seed(0)
        runner.run(test, out=report.append)
    summary = runner.summarize(verbose=False)
    assert summary.failed == 0, "".join(report)
