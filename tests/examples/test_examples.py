"""Every script in examples/ runs top to bottom at its smallest settings (``--smoke``).

The runs are the heavy tier (``KHN_HEAVY_TESTS=1``, ``.ci/run``; docs/notes/suite_time.md):
each example is an integration run of parts the default suite tests one by one, and
tests/test_anywhere.py (also heavy) runs them once more from a wheel outside the clone.
Only the list check below is in the default run.

The TensorFlow examples run one after the other in ONE child process (``_runner.py``:
``runpy`` with the script's own ``sys.argv``), so TensorFlow and the package are imported
once; the JAX example runs in a second child process, started first so that it overlaps
with them. Each test reads its example's record: it passed, printed its ``RESULT`` line
and wrote its plot. Each is given our local copy of its data explicitly (``--data`` /
``--corpus`` under ``../shared``; by default an example fetches it by name, which no test
may do: tests/test_anywhere.py runs them with a loopback server instead). An example whose
data (``../shared``) or optional package (tf_keras, tensorflow_hub, keras_tuner, tokenizers,
scann, jax) is absent is skipped, saying which.
"""

import importlib.util
import json
import os
import subprocess
import sys

import keras
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES_DIR = os.path.join(ROOT, "examples")
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "data")
RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_runner.py")
CIFAR = os.path.join(SHARED, "cifar10-jpg")
MUTAG = os.path.join(SHARED, "tudataset", "MUTAG")
CORPUS = [os.path.join(SHARED, "text", "corpus", "wiki1m_prefix.txt"),
          os.path.join(SHARED, "text", "corpus", "extra", "gensim_wiki.txt")]

# script -> (extra arguments, data paths it needs, modules it needs)
EXAMPLES = {
    "simclr_cifar10_hard": (["--data", CIFAR], [CIFAR], []),
    "few_labels_finetune": (["--data", CIFAR], [CIFAR], []),
    "tf_hub_finetune": (["--data", CIFAR], [CIFAR], ["tensorflow_hub", "tf_keras"]),
    "moco_ring_queue": (["--data", CIFAR], [CIFAR], []),
    "batchsampler_tfdata": (["--data", CIFAR], [CIFAR], []),
    "tune_beta_tau": ([], [], ["keras_tuner"]),
    "sentence_search": (["--corpus", *CORPUS], CORPUS, ["tokenizers", "scann"]),
    "graphcl_tu_svm": (["--data", MUTAG], [MUTAG], []),
    "simclr_jax_data_parallel": (["--data", CIFAR], [CIFAR], ["jax"]),
    # --smoke writes its own tiny BEIR folder (SciFact and MiniLM: the full run, not here)
    "retrieval_scifact": ([], [], ["tokenizers"]),
}
JAX_EXAMPLES = {"simclr_jax_data_parallel"}
NO_OUTPUT = {"sentence_search"}  # writes no file
PLOTS = {"simclr_cifar10_hard": "examples_simclr_hard.png",
         "few_labels_finetune": "examples_few_labels.png",
         "moco_ring_queue": "examples_moco_ring.png",
         "batchsampler_tfdata": "examples_batchsampler.png",
         "tune_beta_tau": "examples_tuner.png",
         "graphcl_tu_svm": "examples_graphcl.png",
         "simclr_jax_data_parallel": "examples_simclr_jax.png"}

pytestmark = pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                                reason="the examples pick their own backend (run once, "
                                       "under the TensorFlow test run)")


def missing(name):
    """Why ``name`` cannot run here (a data path or a module), or None."""
    _, paths, modules = EXAMPLES[name]
    for path in paths:
        if not os.path.exists(path):
            return f"needs {os.path.relpath(path, ROOT)}"
    for module in modules:
        if importlib.util.find_spec(module) is None:
            return f"needs the optional package {module}"
    return None


def _jobs(names, out):
    return [{"name": n, "script": os.path.join(EXAMPLES_DIR, n + ".py"),
             "argv": ["--smoke", *EXAMPLES[n][0]]
             + ([] if n in NO_OUTPUT else ["--output", os.path.join(out, n)])}
            for n in names]


def _start(names, out, tag, backend):
    jobs_path = os.path.join(out, f"{tag}_jobs.json")
    with open(jobs_path, "w") as f:
        json.dump(_jobs(names, out), f)
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
    if backend == "jax":  # the runner imports JAX before the example could ask for devices
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "")
                            + " --xla_force_host_platform_device_count=2").strip()
    log = open(os.path.join(out, f"{tag}.log"), "w")
    proc = subprocess.Popen([sys.executable, RUNNER, jobs_path, os.path.join(out, f"{tag}.json")],
                            cwd=out, env=env, stdout=log, stderr=subprocess.STDOUT)
    return proc, log


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("examples"))
    runnable = [n for n in EXAMPLES if missing(n) is None]
    children = []
    jax_names = [n for n in runnable if n in JAX_EXAMPLES]
    tf_names = [n for n in runnable if n not in JAX_EXAMPLES]
    if jax_names:  # first, so that it overlaps with the TensorFlow ones
        children.append(("jax", *_start(jax_names, out, "jax", "jax")))
    if tf_names:
        children.append(("tf", *_start(tf_names, out, "tf", "tensorflow")))
    result = {}
    for tag, proc, log in children:
        try:
            proc.wait(timeout=600)
        finally:
            if proc.poll() is None:
                proc.kill()
            log.close()
        path = os.path.join(out, f"{tag}.json")
        if os.path.isfile(path):
            with open(path) as f:
                result.update(json.load(f))
        with open(os.path.join(out, f"{tag}.log")) as f:
            tail = f.read()[-3000:]
        for job in (jax_names if tag == "jax" else tf_names):
            result.setdefault(job, {"ok": False, "error": f"the {tag} runner stopped (rc "
                                    f"{proc.returncode}) before this example; log:\n{tail}"})
    result["_out"] = out
    return result


def test_every_example_is_listed():
    scripts = sorted(f[:-3] for f in os.listdir(EXAMPLES_DIR) if f.endswith(".py"))
    assert scripts == sorted(EXAMPLES), "add new examples to EXAMPLES here"


@pytest.mark.heavy  # ~100-150 CPU-s of example runs: integration, not a unit's behaviour
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_runs_at_its_smallest_settings(name, records):
    reason = missing(name)
    if reason:
        pytest.skip(f"{name}: {reason}")
    record = records[name]
    assert record["ok"], f"{name} failed:\n{record['error']}"
    assert "RESULT" in record["output"], record["output"][-2000:]
    if name in PLOTS:
        assert os.path.isfile(os.path.join(records["_out"], name, PLOTS[name]))
    # issue 47, item 9: fit(shuffle=True) on a tf.data pipeline made Keras warn
    assert not [w for w in record.get("warnings", []) if "`shuffle=True` was passed" in w], (
        record["warnings"])
