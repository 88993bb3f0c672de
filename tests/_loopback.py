"""A loopback HTTP server standing in for the public hosts, and the small fake files it
serves (TU zips with the published counts, a CIFAR archive of a few images, a tiny BEIR
zip, a sentence file). No test reaches the internet: fetching code is pointed here through
``$KERAS_HARDNEG_DATA_MIRROR`` (data) or ``$KERAS_HARDNEG_ZOO`` (the zoo).

    python tests/_loopback.py ROOT PORT_FILE   # serve ROOT until killed (for child processes)
"""

from __future__ import annotations

import http.server
import io
import os
import pickle
import shutil
import sys
import tarfile
import threading
import time
import zipfile

import numpy as np


class Server:
    """``http.server`` over ``root`` on 127.0.0.1, counting GET requests (``self.requests``;
    ``GET /_count`` answers their number and is not counted, for child processes).

    ``delay``: seconds to sleep after sending the first half of each file (a fetch that
    can be killed half-way); ``started``: set when a file has begun to be sent."""

    def __init__(self, root: str, delay: float = 0.0):
        self.requests: list[str] = []
        self.started = threading.Event()
        server = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, directory=root, **kwargs)

            def do_GET(self):  # noqa: N802 -- http.server's name
                if self.path == "/_count":
                    body = str(len(server.requests)).encode()
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                server.requests.append(self.path)
                if not delay:
                    return super().do_GET()
                path = self.translate_path(self.path)
                if not os.path.isfile(path):
                    return self.send_error(404)
                with open(path, "rb") as f:
                    body = f.read()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body[:len(body) // 2])
                self.wfile.flush()
                server.started.set()
                time.sleep(delay)
                self.wfile.write(body[len(body) // 2:])

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def copy_entry(name: str, dest: str) -> None:
    """The files the shipped zoo index lists for entry ``name``, copied from the clone's
    models/ to ``dest/name`` (a zoo host's layout)."""
    from keras_hardneg import zoo_store

    models = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "models")
    for rel in zoo_store.read_index()[name]["files"]:
        target = os.path.join(dest, name, *rel.split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(os.path.join(models, name, *rel.split("/")), target)


def in_threads(fn, n: int = 4, timeout: float = 300):
    """Calls ``fn()`` in ``n`` threads at once; returns ``(results, errors)`` (lists)."""
    got, errors = [], []

    def call():
        try:
            got.append(fn())
        except Exception as e:  # noqa: BLE001 -- returned to the test
            errors.append(e)

    threads = [threading.Thread(target=call) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    return got, errors


def loopback_env(env: dict | None = None) -> dict:
    """``env`` (default: a copy of ``os.environ``) with proxies bypassed for 127.0.0.1."""
    env = dict(os.environ if env is None else env)
    for key in ("NO_PROXY", "no_proxy"):
        env[key] = "127.0.0.1,localhost"
    return env


# ------------------------------------------------------------------------ fake data
def tu_zip(path: str, name: str, graphs: int, class_sizes, nodes: int, seed: int = 0) -> str:
    """A TU zip (``NAME/NAME_A.txt``, ``_graph_indicator``, ``_graph_labels``,
    ``_node_labels``) of random ring graphs with exactly these counts."""
    rng = np.random.default_rng(seed)
    assert sum(class_sizes) == graphs and nodes >= 2 * graphs
    per = np.full(graphs, nodes // graphs)
    per[: nodes % graphs] += 1
    indicator, edges, start = [], [], 1
    for g, n in enumerate(per, start=1):
        indicator += [g] * int(n)
        for i in range(int(n)):
            a, b = start + i, start + (i + 1) % int(n)
            edges += [(a, b), (b, a)]
        start += int(n)
    labels = np.concatenate([np.full(s, c) for c, s in enumerate(class_sizes)])
    rng.shuffle(labels)
    files = {
        "A": "\n".join(f"{a}, {b}" for a, b in edges),
        "graph_indicator": "\n".join(map(str, indicator)),
        "graph_labels": "\n".join(map(str, labels)),
        "node_labels": "\n".join(map(str, rng.integers(0, 4, nodes))),
    }
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        for part, text in files.items():
            archive.writestr(f"{name}/{name}_{part}.txt", text + "\n")
        archive.writestr(f"{name}/README.txt", "fake\n")
    return path


def published_tu_zip(folder: str, name: str = "MUTAG") -> str:
    """``folder/NAME.zip`` with the published counts of ``NAME``."""
    from keras_hardneg.data.public import TU_STATISTICS

    stats = TU_STATISTICS[name]
    return tu_zip(os.path.join(folder, f"{name}.zip"), name, stats["graphs"],
                  stats["class_sizes"], stats["nodes"])


def beir_files() -> dict[str, bytes]:
    """The files of a tiny BEIR set (paths inside its folder -> bytes): 6 documents, 4
    queries; ``qrels/train.tsv`` judges q1-q3 (3 judgements), ``qrels/test.tsv`` q4 (2)."""
    import json

    docs = [("d1", "Cats", "Cats purr when they are content."),
            ("d2", "Dogs", "Dogs bark at strangers near the house."),
            ("d3", "", "Cows graze on grass and give milk."),
            ("d4", "Birds", "Birds sing at dawn in the spring."),
            ("d5", "Owls", "Owls hunt mice at night."),
            ("d6", "Fish", "Fish swim in schools in the sea.")]
    queries = [("q1", "what purrs"), ("q2", "which animal barks"), ("q3", "who gives milk"),
               ("q4", "birds at dawn and night")]

    def jsonl(rows):
        return "".join(json.dumps(r) + "\n" for r in rows).encode()

    header = "query-id\tcorpus-id\tscore\n"
    return {
        "corpus.jsonl": jsonl({"_id": i, "title": t, "text": x, "metadata": {}}
                              for i, t, x in docs),
        "queries.jsonl": jsonl({"_id": i, "text": x, "metadata": {}} for i, x in queries),
        "qrels/train.tsv": (header + "q1\td1\t1\nq2\td2\t1\nq3\td3\t1\n").encode(),
        "qrels/test.tsv": (header + "q4\td4\t1\nq4\td5\t1\n").encode(),
    }


def beir_zip(folder: str, name: str = "tiny", extra: dict | None = None) -> str:
    """``folder/NAME.zip`` as BEIR's host serves a set: ``NAME/corpus.jsonl``,
    ``NAME/queries.jsonl``, ``NAME/qrels/train.tsv``, ``NAME/qrels/test.tsv`` (the tiny set of
    :func:`beir_files`), plus ``extra`` entries (zip name -> bytes) as given."""
    path = os.path.join(folder, f"{name}.zip")
    os.makedirs(folder, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{name}/", b"")
        for rel, data in beir_files().items():
            archive.writestr(f"{name}/{rel}", data)
        for entry, data in (extra or {}).items():
            archive.writestr(entry, data)
    return path


def cifar_batches(per_batch: int = 20, classes: int = 10, seed: int = 0):
    """``{file name: pickled batch bytes}`` of a fake CIFAR-10 python version."""
    rng = np.random.default_rng(seed)
    out = {}
    for i, name in enumerate([f"data_batch_{k}" for k in range(1, 6)] + ["test_batch"]):
        labels = [int(v) for v in (np.arange(per_batch) + i) % classes]
        data = rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8)
        out[name] = pickle.dumps({b"batch_label": name.encode(), b"labels": labels,
                                  b"data": data}, protocol=2)
    return out


def fill_cifar_cache(keras_home: str, per_batch: int = 20) -> str:
    """Keras's extracted CIFAR-10 cache (``KERAS_HOME/datasets/cifar-10-batches-py-target/
    cifar-10-batches-py``) holding a fake of ``6 * per_batch`` images."""
    folder = os.path.join(keras_home, "datasets", "cifar-10-batches-py-target",
                          "cifar-10-batches-py")
    os.makedirs(folder, exist_ok=True)
    for name, data in cifar_batches(per_batch).items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    return folder


def cifar_archive(path: str, per_batch: int = 20) -> str:
    """A ``cifar-10-python.tar.gz`` of the fake batches."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for name, data in cifar_batches(per_batch).items():
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


if __name__ == "__main__":  # serve a folder for child processes until killed
    srv = Server(sys.argv[1])
    with open(sys.argv[2] + ".tmp", "w") as f:
        f.write(srv.url)
    os.replace(sys.argv[2] + ".tmp", sys.argv[2])
    threading.Event().wait()
