"""Issue 15: ``import keras_hardneg`` and training under JAX never import TensorFlow.

One subprocess (``tests/_no_tensorflow_child.py``, ``KERAS_BACKEND=jax``) runs every
scenario, where a meta-path finder makes ``import tensorflow*`` (and ``tf_keras``) fail,
naming the module that asked; after each scenario it checks that no such module was loaded
and prints ``OK <scenario>``. (One child instead of one per test: each start paid the
imports and JAX's start-up again, ~15 CPU-s; docs/notes/suite_time.md.) Each test reads its
scenarios' lines. The training scenarios need JAX's train step, loss and augmentation in
``keras.ops`` (none of them may import TensorFlow).

The default run's child runs the imports, the views and the README quick start (a SimCLR
fit and feature extraction under JAX); the MoCo v2 fit and the presets scenario (a run
with BatchSampler batches, the zoo's presets loaded and fine-tuned) are the heavy tier
(``KHN_HEAVY_TESTS=1``; docs/notes/suite_time.md): the same code paths without TensorFlow,
more of them.
"""

import os
import subprocess
import sys

import pytest

from tests import conftest  # the heavy tier's variable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# "imports" first: it imports every subpackage before anything else has.
SCENARIOS = ("imports", "views", "quickstart", "moco_v2", "presets")
HEAVY_SCENARIOS = ("moco_v2", "presets")

pytest.importorskip("jax")


#: Each test -> the scenarios it reads.
TEST_SCENARIOS = {
    "test_import_of_every_subpackage_loads_no_tensorflow": ("imports",),
    "test_simclr_views_without_tensorflow": ("views",),
    "test_readme_quick_start_fits_without_tensorflow": ("quickstart",),
    "test_moco_v2_fits_without_tensorflow": ("moco_v2",),
    "test_run_and_zoo_presets_load_and_fine_tune_without_tensorflow": ("presets",),
}


def _scenarios(selected=None):
    """The scenarios whose tests run, in :data:`SCENARIOS`' order: the heavy ones only with
    the heavy tier on; of those, only the ones a selected test reads when ``selected`` (the
    names of this file's tests in the session) is given, so the heavy tier's ``-m heavy``
    does not run the default run's scenarios again."""
    scenarios = SCENARIOS if os.environ.get(conftest.HEAVY_ENV) == "1" else tuple(
        s for s in SCENARIOS if s not in HEAVY_SCENARIOS)
    if selected is None or not set(selected) & set(TEST_SCENARIOS):
        return scenarios  # e.g. only the exit check selected: run them all
    wanted = {s for name in selected for s in TEST_SCENARIOS.get(name, ())}
    return tuple(s for s in scenarios if s in wanted)


@pytest.fixture(scope="module")
def child(request):
    selected = [item.originalname for item in request.session.items
                if item.path == request.path]
    scenarios = _scenarios(selected)
    env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3",
               JAX_PLATFORMS="cpu")  # XLA_FLAGS: the suite's level (tests/conftest.py)
    done = subprocess.run([sys.executable, "-m", "tests._no_tensorflow_child", *scenarios],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    passed = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("OK ")]
    return passed, done, scenarios


def _check(child, *scenarios):
    passed, done, _ = child
    missing = [s for s in scenarios if s not in passed]
    assert not missing, (f"{missing} did not pass (passed: {passed}, rc {done.returncode}); "
                         f"stderr:\n{done.stderr[-4000:]}")


def test_import_of_every_subpackage_loads_no_tensorflow(child):
    # All of khn._SUBMODULES but tuning (keras_tuner imports TensorFlow), plus the CLI;
    # export included: its TensorFlow parts load on first use.
    _check(child, "imports")


def test_simclr_views_without_tensorflow(child):
    _check(child, "views")


@pytest.mark.timeout(900)
def test_readme_quick_start_fits_without_tensorflow(child):
    # README "Quick start" as written but shorter (one epoch of two batches instead of ten
    # epochs; tests/test_readme.py runs it whole under TensorFlow); its export line must
    # raise the "needs the TensorFlow backend" error.
    _check(child, "quickstart")


@pytest.mark.heavy
@pytest.mark.timeout(900)
def test_moco_v2_fits_without_tensorflow(child):
    # A MoCo v2 fit on digits: the queue changes.
    _check(child, "moco_v2")


@pytest.mark.heavy
@pytest.mark.timeout(900)
def test_run_and_zoo_presets_load_and_fine_tune_without_tensorflow(child):
    # Issue 24: a run's preset (trained under JAX, on BatchSampler batches: the sampler's
    # graph must not reach for ScaNN's TensorFlow ops) and the zoo's entries load as
    # trainable keras.Models with TensorFlow blocked; fine-tuning moves the weights and BN
    # statistics.
    _check(child, "presets")


def test_the_child_ran_every_scenario_and_exited_cleanly(child):
    passed, done, scenarios = child
    assert scenarios and passed == list(scenarios) and done.returncode == 0, \
        done.stderr[-4000:]


def test_the_scenarios_are_those_of_the_selected_tests():
    names = [n for n, f in globals().items() if n.startswith("test_") and callable(f)]
    assert set(TEST_SCENARIOS) <= set(names)  # every entry names a test of this file
    assert set(SCENARIOS) == {s for v in TEST_SCENARIOS.values() for s in v}
    heavy = ["test_moco_v2_fits_without_tensorflow",
             "test_run_and_zoo_presets_load_and_fine_tune_without_tensorflow",
             "test_the_child_ran_every_scenario_and_exited_cleanly"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(conftest.HEAVY_ENV, "1")
        assert _scenarios(heavy) == ("moco_v2", "presets")
        assert _scenarios(["test_the_child_ran_every_scenario_and_exited_cleanly"]) == SCENARIOS
        mp.delenv(conftest.HEAVY_ENV)
        assert _scenarios(names) == ("imports", "views", "quickstart")
