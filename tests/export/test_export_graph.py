"""Graph encoders exported as SavedModels whose signature takes the six graph-batch tensors
(issue #16): the export gives the in-memory encoder's vectors for any budget (padding
included), through __call__, serving_default, serve (TFSMLayer) and load_encoder."""

import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

if keras.backend.backend() != "tensorflow":  # collected by the JAX run of tests/test_backends.py
    pytest.skip("SavedModel export needs the TensorFlow backend (tested there)",
                allow_module_level=True)

import tensorflow as tf  # noqa: E402

from keras import ops  # noqa: E402
from keras_hardneg.data.graphs import pad_graphs  # noqa: E402
from keras_hardneg.export import (  # noqa: E402
    ModelCard,
    export_encoder,
    find_device_strings,
    graph_input_signature,
    load_encoder,
    load_model_card,
)

ATOL = 1e-5
F = 4
NAMES = ["nodes", "edges", "node_graph", "node_mask", "edge_mask", "graph_mask"]
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# tensorflow_hub in a fresh process (it imports tf_keras): argv = [export_dir, data.npz].
HUB_SCRIPT = """
import sys
import numpy as np, tensorflow as tf, tensorflow_hub as hub
d, data = sys.argv[1], dict(np.load(sys.argv[2]))
expected = data.pop("expected")
obj = hub.load(d)
for out in (obj(data, training=False),
            obj.signatures["serving_default"](**{k: tf.constant(v) for k, v in data.items()})[
                "features"]):
    err = float(np.max(np.abs(np.asarray(out) - expected)))
    assert out.shape == expected.shape and err <= 1e-5, (out.shape, err)
print("OK")
"""


class StandIn(keras.Model):
    """Dense, one sum message-passing step, BatchNorm, masked sum pooling: [B, 6]."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dense = keras.layers.Dense(6, kernel_regularizer=keras.regularizers.L2(1e-3))
        self.norm = keras.layers.BatchNormalization()

    def call(self, g, training=False):
        h = self.dense(g["nodes"])
        n = ops.shape(g["nodes"])[0]
        b = ops.shape(g["graph_mask"])[0]
        messages = ops.take(h, g["edges"][:, 0], axis=0) * g["edge_mask"][:, None]
        h = ops.relu(h + ops.segment_sum(messages, g["edges"][:, 1], num_segments=n))
        h = self.norm(h, training=training) * g["node_mask"][:, None]
        return ops.segment_sum(h, g["node_graph"], num_segments=b + 1)[:b]


def random_graphs(count, seed=0):
    rng = np.random.default_rng(seed)
    graphs = []
    for _ in range(count):
        n = int(rng.integers(2, 6))
        src = rng.integers(0, n, size=n)
        dst = rng.integers(0, n, size=n)
        edges = np.concatenate([np.stack([src, dst], 1), np.stack([dst, src], 1)])
        graphs.append((rng.normal(size=(n, F)).astype("float32"), edges.astype("int64")))
    return graphs


def in_memory(enc, batch):
    return np.asarray(enc({k: batch[k] for k in NAMES}, training=False))


@pytest.fixture(scope="module")
def graphs():
    g = random_graphs(5)
    small = pad_graphs(g, (24, 48))                   # a tight budget
    large = pad_graphs(g, (64, 96), num_graphs=8)     # more padding and 3 empty graphs
    return dict(small=small, large=large)


@pytest.fixture(scope="module")
def exported(tmp_path_factory, graphs):
    root = tmp_path_factory.mktemp("graph_export")
    keras.utils.set_random_seed(0)
    enc = StandIn()
    enc(graphs["small"], training=True)  # builds; non-trivial BN statistics
    card = ModelCard(name="standin-gin", modality="graph", framework="GraphCL",
                     metrics={"svm_accuracy": 0.81, "svm_accuracy_std": 0.02},
                     evaluation="10-fold SVM")
    written = export_encoder(enc, root / "enc", input_signature=graph_input_signature(F),
                             model_card=card)
    np.savez(root / "data.npz", expected=in_memory(enc, graphs["large"]), **graphs["large"])
    hub_proc = start_python(HUB_SCRIPT, root / "enc", root / "data.npz")
    obj = tf.saved_model.load(str(root / "enc"))
    yield dict(enc=enc, dir=root / "enc", card=written, obj=obj, hub=hub_proc)
    if hub_proc.poll() is None:
        hub_proc.kill()
        hub_proc.communicate()


def start_python(script, *args):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
               TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    env.pop("TF_USE_LEGACY_KERAS", None)
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(script), *map(str, args)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def assert_ok(proc, timeout=240):
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    tail = "\n".join(err.strip().splitlines()[-20:])
    assert proc.returncode == 0 and out.strip().endswith("OK"), f"{out}\n{tail}"


def test_same_vectors_for_two_budgets_and_padding(exported, graphs):
    enc, obj = exported["enc"], exported["obj"]
    small, large = graphs["small"], graphs["large"]
    expected = in_memory(enc, small)
    assert expected.shape == (5, 6)
    np.testing.assert_allclose(obj(small, training=False), expected, atol=ATOL)
    out_large = obj(large, training=False).numpy()
    np.testing.assert_allclose(out_large, in_memory(enc, large), atol=ATOL)
    assert out_large.shape == (8, 6)  # the batch is B = len(graph_mask), not N or E
    np.testing.assert_allclose(out_large[:5], expected, atol=ATOL)   # padding changes nothing
    np.testing.assert_allclose(out_large[5:], 0.0, atol=ATOL)         # empty graphs


def test_serving_default_and_serve_endpoints(exported, graphs):
    obj, batch = exported["obj"], graphs["large"]
    expected = in_memory(exported["enc"], batch)
    sig = obj.signatures["serving_default"]
    args, kwargs = sig.structured_input_signature
    assert args == () and sorted(kwargs) == sorted(NAMES)
    assert kwargs["nodes"].shape.as_list() == [None, F]
    assert kwargs["graph_mask"].shape.as_list() == [None]
    assert kwargs["edges"].dtype == tf.int32 and kwargs["node_mask"].dtype == tf.float32
    out = sig(**{k: tf.constant(v) for k, v in batch.items()})
    assert list(out) == ["features"]
    np.testing.assert_allclose(out["features"], expected, atol=ATOL)
    np.testing.assert_allclose(obj.serve(batch), expected, atol=ATOL)
    layer = keras.layers.TFSMLayer(str(exported["dir"]))  # Keras 3, endpoint "serve"
    np.testing.assert_allclose(layer(batch), expected, atol=ATOL)


def test_reusable_interface(exported, graphs):
    obj, enc = exported["obj"], exported["enc"]
    sigs = [cf.structured_input_signature[0] for cf in obj.__call__.concrete_functions]
    assert sorted(training for _, training in sigs) == [False, True]
    assert all(sorted(spec) == sorted(NAMES) for spec, _ in sigs)
    assert len(obj.variables) == len(enc.variables) == 6
    assert len(obj.trainable_variables) == 4
    assert len(obj.regularization_losses) == 1
    np.testing.assert_allclose(obj.regularization_losses[0](), sum(enc.losses), atol=ATOL)
    assert find_device_strings(exported["dir"]) == []
    assert dict(obj.assets) == {}


def test_load_encoder_keras3_layer(exported, graphs):
    batch = dict(graphs["large"], index=np.arange(8))   # extra keys are ignored
    enc = load_encoder(exported["dir"])
    assert enc.modality == "graph" and enc.output_dim == 6
    expected = in_memory(exported["enc"], graphs["large"])
    np.testing.assert_allclose(enc(batch), expected, atol=ATOL)
    int64 = dict(batch, edges=batch["edges"].astype("int64"))   # cast to the signature
    np.testing.assert_allclose(enc(int64), expected, atol=ATOL)
    assert enc.compute_output_shape({k: v.shape for k, v in batch.items()}) == (8, 6)
    # In a functional model with dict inputs, and trainable: gradients reach the weights.
    shapes = {"nodes": (F,), "edges": (2,)}
    inputs = {k: keras.Input(shapes.get(k, ()), dtype="int32" if k in ("edges", "node_graph")
                             else "float32", name=k) for k in NAMES}
    model = keras.Model(inputs, keras.layers.Dense(3)(enc(inputs)))
    assert model.output_shape == (None, 3)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(graphs["small"], training=True) ** 2)
    grads = tape.gradient(loss, enc.trainable_weights)
    assert len(grads) == 4 and all(g is not None for g in grads)
    with pytest.raises(ValueError, match="node_mask"):
        enc({k: v for k, v in batch.items() if k != "node_mask"})


def test_model_card(exported):
    card = load_model_card(exported["dir"])
    assert card == exported["card"]
    assert card.modality == "graph" and card.output_dim == 6
    assert card.input_shape is None and card.input_dtype is None
    assert card.input_signature["nodes"] == {"shape": [None, F], "dtype": "float32"}
    assert card.input_signature["graph_mask"] == {"shape": [None], "dtype": "float32"}
    assert card.metrics == {"svm_accuracy": 0.81, "svm_accuracy_std": 0.02}
    md = (exported["dir"] / "model_card.md").read_text()
    for text in ("| `nodes` | `[N, 4]` | float32 |", "| `edges` | `[E, 2]` | int32 |",
                 "| `graph_mask` | `[B]` | float32 |", "svm_accuracy: 0.81",
                 "output: `[B, 6]`", "protocol: 10-fold SVM"):
        assert text in md, text
    assert "kNN accuracy" not in md   # image-only lines are left out when not measured


def test_bad_graph_exports(tmp_path, graphs):
    enc = StandIn()
    enc(graphs["small"])
    sig = graph_input_signature(F)
    with pytest.raises(ValueError, match="missing \\['graph_mask'\\]"):
        export_encoder(enc, tmp_path / "e",
                       input_signature={k: v for k, v in sig.items() if k != "graph_mask"})
    with pytest.raises(ValueError, match="'edges' must be int32"):
        export_encoder(enc, tmp_path / "e",
                       input_signature=dict(sig, edges=((None, 2), "int64")))
    with pytest.raises(ValueError, match="not both"):
        export_encoder(enc, tmp_path / "e", input_shape=(8, 8, 3), input_signature=sig)
    with pytest.raises(ValueError, match="modality='image'.*ModelCard\\(modality='graph'"):
        export_encoder(enc, tmp_path / "e", input_signature=sig, model_card=ModelCard())
    with pytest.raises(ValueError, match="output_dim"):
        export_encoder(enc, tmp_path / "e", input_signature=sig,
                       model_card=ModelCard(modality="graph", output_dim=5))
    assert os.listdir(tmp_path) == []


def test_real_gin_encoder(tmp_path, graphs):
    gin_module = pytest.importorskip("keras_hardneg.encoders.gin")
    keras.utils.set_random_seed(1)
    enc = gin_module.gin(input_shape=(F,), width=8, num_layers=2)
    enc(graphs["small"], training=True)  # non-trivial BN statistics
    card = export_encoder(enc, tmp_path / "gin", input_signature=graph_input_signature(F),
                          model_card={"name": "gin"})   # a dict gets modality filled in
    assert card.modality == "graph" and card.output_dim == enc.output_shape[1] == 16
    obj = tf.saved_model.load(str(tmp_path / "gin"))
    expected = in_memory(enc, graphs["small"])
    for batch in (graphs["small"], graphs["large"]):
        np.testing.assert_allclose(obj(batch, training=False), in_memory(enc, batch),
                                   atol=ATOL)
        out = obj.signatures["serving_default"](**{k: tf.constant(v) for k, v in
                                                   batch.items()})["features"].numpy()
        np.testing.assert_allclose(out[:5], expected, atol=ATOL)   # either budget
    np.testing.assert_allclose(load_encoder(tmp_path / "gin")(graphs["large"])[:5], expected,
                               atol=ATOL)


# Last, so the fresh process runs alongside the tests above.
@pytest.mark.heavy  # heavy tier since 2026-11-29 (suite time: docs/notes/suite_time.md)
def test_hub_load_in_a_fresh_process(exported):
    pytest.importorskip("tensorflow_hub")
    assert_ok(exported["hub"])
