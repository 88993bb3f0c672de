"""Issue 47, item 8, with real processes (the heavy tier: each child imports Keras, ~15 s):
several processes loading one entry at once (every worker of a multi-worker run calls
``zoo.load``) and a fetch killed with SIGKILL half-way leave one complete, verified copy or
none. Loopback only."""

import os
import signal
import subprocess
import sys
import time

import pytest

import keras_hardneg as khn
from keras_hardneg import zoo_store
from tests import _loopback
from tests.test_zoo_fetch import GRAPH, ROOT

pytestmark = pytest.mark.heavy

_LOAD = """
import sys
import keras_hardneg as khn
print("PATH", khn.zoo.load(sys.argv[1], trainable=False).preset_metadata["path"], flush=True)
"""


def _env(tmp_path, zoo_url):
    env = _loopback.loopback_env()
    env.update(KERAS_HOME=str(tmp_path / "keras_home"), PYTHONPATH=ROOT,
               KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3",
               **{khn.zoo.ZOO_ENV: zoo_url})
    return env


def test_processes_loading_one_entry_at_once_fetch_it_once(tmp_path):
    www = tmp_path / "www"
    _loopback.copy_entry(GRAPH, str(www / "models"))
    server = _loopback.Server(str(www), delay=0.3)
    env = _env(tmp_path, server.url + "/models")
    try:
        procs = [subprocess.Popen([sys.executable, "-c", _LOAD, GRAPH], env=env, cwd=str(
            tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(3)]
        outs = [p.communicate(timeout=600) for p in procs]
    finally:
        server.close()
    assert all(p.returncode == 0 for p in procs), [o[1][-1500:] for o in outs]
    paths = {line.split(" ", 1)[1] for out, _ in outs for line in out.splitlines()
             if line.startswith("PATH ")}
    files = zoo_store.read_index()[GRAPH]["files"]
    assert len(paths) == 1, outs
    assert len(server.requests) == len(files) == len(set(server.requests)), server.requests
    root = os.path.join(str(tmp_path / "keras_home"), "keras_hardneg", "zoo")
    assert sorted(os.listdir(root)) == [GRAPH]


def test_a_fetch_killed_half_way_leaves_no_entry_and_the_next_load_is_whole(
        tmp_path, monkeypatch):
    www = tmp_path / "www"
    _loopback.copy_entry(GRAPH, str(www / "models"))
    slow = _loopback.Server(str(www), delay=120)
    proc = subprocess.Popen([sys.executable, "-c", _LOAD, GRAPH],
                            env=_env(tmp_path, slow.url + "/models"), cwd=str(tmp_path),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert slow.started.wait(300), "the child never began to fetch"
        time.sleep(0.5)
        proc.send_signal(signal.SIGKILL)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
        slow.close()
    assert proc.returncode == -signal.SIGKILL
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras_home"))
    root = zoo_store.cache_root()
    left = sorted(os.listdir(root))
    assert GRAPH not in left, left  # no entry where a reader looks
    assert any(f.startswith(f".fetch-{GRAPH}-") for f in left), left  # killed mid-fetch
    for key in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(key, "127.0.0.1")
    server = _loopback.Server(str(www))
    try:
        model = khn.zoo.load(GRAPH, trainable=False, zoo=server.url + "/models")
    finally:
        server.close()
    record = zoo_store.read_index()[GRAPH]
    assert zoo_store.cached_entry(GRAPH, record) == os.path.join(root, GRAPH)
    assert model.preset_metadata["path"] == os.path.join(root, GRAPH, "preset")
    assert sorted(os.listdir(root)) == [GRAPH]  # the orphan removed
