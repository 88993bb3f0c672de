"""Issue 15: ``import keras_hardneg`` and training under JAX never import TensorFlow.

Each test runs ``tests/_no_tensorflow_child.py`` in a subprocess with ``KERAS_BACKEND=jax``
where a meta-path finder makes ``import tensorflow*`` (and ``tf_keras``) fail, naming the
module that asked. The training scenarios need JAX's train step, loss and augmentation in
``keras.ops`` (none of them may import TensorFlow).
"""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytest.importorskip("jax")


def _child(*scenarios, timeout=600):
    env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3",
               JAX_PLATFORMS="cpu",  # tiny arrays: compiling dominates, optimise less
               XLA_FLAGS="--xla_backend_optimization_level=0")
    done = subprocess.run([sys.executable, "-m", "tests._no_tensorflow_child", *scenarios],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    passed = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("OK ")]
    assert done.returncode == 0 and passed == list(scenarios), (
        f"passed {passed} of {list(scenarios)}; stderr:\n{done.stderr[-4000:]}")


def test_import_of_every_subpackage_loads_no_tensorflow():
    # All of khn._SUBMODULES but tuning (keras_tuner imports TensorFlow), plus the CLI;
    # export included: its TensorFlow parts load on first use.
    _child("imports", timeout=300)


@pytest.mark.timeout(900)
def test_readme_quick_start_and_moco_v2_fit_without_tensorflow():
    # README "Quick start" as written (one epoch instead of ten); its export line must raise
    # the "needs the TensorFlow backend" error. Then a MoCo v2 fit on digits.
    _child("quickstart", "moco_v2")


@pytest.mark.timeout(600)
def test_run_and_zoo_presets_load_and_fine_tune_without_tensorflow():
    # Issue 24: a run's preset (trained under JAX) and the zoo's entries load as trainable
    # keras.Models with TensorFlow blocked; fine-tuning moves the weights and BN statistics.
    _child("presets")
