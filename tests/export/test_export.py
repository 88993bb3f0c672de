"""Export round trips: hub.load, TFSMLayer, load_encoder, tf_keras hub.KerasLayer fine-tuning.

Loading is checked in fresh processes (Keras 3 and tf_keras cannot share one), started
together by the module fixture so their TensorFlow imports overlap.
"""

import json
import os
import shutil
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

import keras_hardneg  # noqa: E402
from keras_hardneg.export import (  # noqa: E402
    ModelCard,
    export_encoder,
    find_device_strings,
    load_encoder,
    load_model_card,
)
from keras_hardneg import _io  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(keras_hardneg.__file__)))
ATOL = 1e-5
SUBPROCESS_TIMEOUT = 240


def tiny_encoder(seed=0, regularize=True):
    """Conv2D + BN + ReLU + GAP: [B, 16, 16, 3] -> [B, 8]."""
    keras.utils.set_random_seed(seed)
    inp = keras.Input((16, 16, 3))
    reg = keras.regularizers.L2(1e-3) if regularize else None
    x = keras.layers.Conv2D(8, 3, kernel_regularizer=reg)(inp)
    x = keras.layers.BatchNormalization()(x)
    out = keras.layers.GlobalAveragePooling2D()(keras.layers.ReLU()(x))
    return keras.Model(inp, out)


# ----------------------------------------------------------------------------- scripts
# Each script: argv = [export_dir, work_dir]; asserts, prints "OK" last.
COMMON = """
import os, sys, json
import numpy as np
import tensorflow as tf
d, w = sys.argv[1], sys.argv[2]
ld = lambda n: np.load(os.path.join(w, n + ".npy"))
x, y, expected = ld("x"), ld("y"), ld("expected")
ATOL = 1e-5
def close(a, b, what):
    a = np.asarray(a); err = float(np.max(np.abs(a - b)))
    assert a.shape == b.shape and err <= ATOL, f"{what}: shape {a.shape} vs {b.shape}, max err {err}"
def changed(before, after, what):
    assert not np.allclose(before, after), f"{what} did not change"
"""

KERAS3_SCRIPT = COMMON + """
import keras, tensorflow_hub as hub
assert keras.__version__.startswith("3"), keras.__version__

# (a) tensorflow_hub.load: __call__ both modes, signature, variables, losses.
obj = hub.load(d)
sigs = [cf.structured_input_signature[0] for cf in obj.__call__.concrete_functions]
# float32 images and uint8 pixels (issue 33), each in both modes.
assert sorted((spec.dtype.name, training) for spec, training in sigs) == [
    ("float32", False), ("float32", True), ("uint8", False), ("uint8", True)], sigs
assert all(spec.shape.as_list() == [None, 16, 16, 3] for spec, _ in sigs), sigs
close(obj(x, training=False), expected, "hub.load __call__(training=False)")
close(obj.signatures["serving_default"](images=tf.constant(x))["features"], expected,
      "serving_default")
assert len(obj.variables) == 6 and len(obj.trainable_variables) == 4
tv = {id(v) for v in obj.trainable_variables}
bn_stats = [v for v in obj.variables if "moving" in v.name]
assert len(bn_stats) == 2 and not any(id(v) in tv for v in bn_stats), "BN stats trainable?"
assert len(obj.regularization_losses) == 1
close(obj.regularization_losses[0](), ld("reg_loss"), "regularization loss")
out = obj(x, training=True)              # updates BN moving statistics in place
close(out, ld("expected_train"), "__call__(training=True)")
close(bn_stats[0], ld("moving_mean_after"), "moving_mean after one training call")
close(bn_stats[1], ld("moving_variance_after"), "moving_variance after one training call")

# (b) Keras 3 TFSMLayer on the serving signature.
layer = keras.layers.TFSMLayer(d, call_endpoint="serving_default")
close(layer(x)["features"], expected, "TFSMLayer")
layer = keras.layers.TFSMLayer(d, call_training_endpoint="call_training")  # endpoint "serve"
close(layer(x), expected, "TFSMLayer serve")
assert len(layer.trainable_weights) == 4 and len(layer.non_trainable_weights) == 2
close(layer(x, training=True), ld("expected_train"), "TFSMLayer call_training")

# (c) load_encoder, then a Keras 3 fine-tune step.
from keras_hardneg.export import load_encoder, load_model_card
enc = load_encoder(d)
close(enc(x), expected, "load_encoder")
assert enc.model_card.output_dim == 8 and load_model_card(d).input_shape == (16, 16, 3)
assert len(enc.trainable_weights) == 4 and len(enc.non_trainable_weights) == 2
inp = keras.Input((16, 16, 3))
model = keras.Model(inp, keras.layers.Dense(10)(enc(inp)))
model.compile(optimizer=keras.optimizers.SGD(0.1),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
assert len(model.losses) == 1, model.losses            # the L2 kernel regularizer
close(model.losses[0], ld("reg_loss"), "Keras 3 model.losses")
before = [w.numpy().copy() for w in enc.weights]
hist = model.fit(x, y, batch_size=len(x), epochs=1, verbose=0)
assert np.isfinite(hist.history["loss"][0])
after = [w.numpy() for w in enc.weights]
for i, name in enumerate(["kernel", "bias", "gamma", "beta", "moving_mean", "moving_variance"]):
    changed(before[i], after[i], "Keras 3 fine-tune: " + name)
# .keras round trip of the fine-tuned model (the layer re-reads the export dir).
path = os.path.join(w, "finetuned.keras")
model.save(path)
reloaded = keras.models.load_model(path)
close(reloaded(x), model(x).numpy(), ".keras reload of fine-tuned model")
# The Keras weights are the SavedModel's variables, not copies.
assert enc.weights[4].value is enc._restored.variables[4]
# Frozen (trainable=False): inference mode, nothing moves.
frozen = load_encoder(d, trainable=False)
assert frozen.trainable_weights == []
s0 = frozen.weights[4].numpy().copy()
frozen(x, training=True)
assert np.allclose(s0, frozen.weights[4].numpy())
print("OK")
"""

TF_KERAS_SCRIPT = COMMON + """
import tf_keras, tensorflow_hub as hub
assert tf_keras.__version__.startswith("2"), tf_keras.__version__

# (d) hub.KerasLayer(trainable=True) under tf_keras: outputs, then one fit step.
layer = hub.KerasLayer(d, trainable=True)
assert isinstance(layer, tf_keras.layers.Layer)      # i.e. TF_USE_LEGACY_KERAS took effect
close(layer(x), expected, "hub.KerasLayer inference")
assert len(layer.trainable_weights) == 4 and len(layer.non_trainable_weights) == 2
model = tf_keras.Sequential([layer, tf_keras.layers.Dense(10)])
model.compile(optimizer=tf_keras.optimizers.SGD(0.1),
              loss=tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
before = {w.name: w.numpy().copy() for w in layer.weights}
hist = model.fit(x, y, batch_size=len(x), epochs=1, verbose=0)
assert np.isfinite(hist.history["loss"][0])
assert len(model.losses) == 1, model.losses           # the L2 kernel regularizer
for w in layer.weights:
    changed(before[w.name], w.numpy(), "tf_keras fine-tune: " + w.name)
print("OK")
"""

# Overwrites an existing export, but is SIGKILLed in the middle of writing.
KILL_SCRIPT = """
import os, signal, sys
import keras, tensorflow as tf
from keras_hardneg.export import export_encoder
d = sys.argv[1]
keras.utils.set_random_seed(1)
inp = keras.Input((16, 16, 3))
enc = keras.Model(inp, keras.layers.GlobalAveragePooling2D()(keras.layers.Conv2D(4, 3)(inp)))
real_save = tf.saved_model.save
def save_then_die(obj, path, **kwargs):
    real_save(obj, path, **kwargs)
    with open(os.path.join(path, "saved_model.pb"), "r+b") as f:
        f.truncate(10)                                  # half-written file
    os.kill(os.getpid(), signal.SIGKILL)
tf.saved_model.save = save_then_die
export_encoder(enc, d, overwrite=True)
"""


def _start(script, args, legacy_keras):
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env["CUDA_VISIBLE_DEVICES"] = ""
    if legacy_keras:
        env["TF_USE_LEGACY_KERAS"] = "1"
    else:
        env.pop("TF_USE_LEGACY_KERAS", None)
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(script), *map(str, args)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc):
    try:
        out, err = proc.communicate(timeout=SUBPROCESS_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    return proc.returncode, out, err


def _assert_ok(proc):
    rc, out, err = _finish(proc)
    tail = "\n".join(err.strip().splitlines()[-25:])
    assert rc == 0 and out.strip().endswith("OK"), f"rc={rc}\nstdout:\n{out}\nstderr:\n{tail}"


def _snapshot(directory):
    """{relative path: bytes} of every file under directory."""
    snap = {}
    for root, _, files in os.walk(directory):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                snap[os.path.relpath(path, directory)] = f.read()
    return snap


def _leftovers(parent):
    return [n for n in os.listdir(parent) if n.startswith((".khn-export-tmp-", ".khn-export-old-"))]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Exports the tiny encoder, saves inputs / expected outputs, starts the loader processes."""
    root = tmp_path_factory.mktemp("export")
    work = root / "work"
    work.mkdir()
    enc = tiny_encoder()
    rng = np.random.default_rng(0)
    # Non-trivial BN statistics before export.
    enc(rng.uniform(size=(16, 16, 16, 3)).astype("float32"), training=True)
    card = ModelCard(name="tiny", framework="SimCLR", loss="HardNegativeContrastiveLoss",
                     hyperparameters={"temperature": 0.5, "tau_plus": 0.1, "beta": 1.0},
                     data="random noise", epochs=1, knn_accuracy=0.5,
                     linear_probe_accuracy=0.6, evaluation="none: test fixture")
    export_dir = root / "enc"
    written = export_encoder(enc, export_dir, model_card=card)

    x = rng.uniform(size=(8, 16, 16, 3)).astype("float32")
    y = rng.integers(0, 10, size=(8,)).astype("int64")
    np.save(work / "x.npy", x)
    np.save(work / "y.npy", y)
    np.save(work / "expected.npy", enc(x, training=False).numpy())
    np.save(work / "reg_loss.npy", np.float32(sum(float(l) for l in enc.losses)))
    bn = enc.layers[2]
    np.save(work / "expected_train.npy", enc(x, training=True).numpy())  # moves BN stats
    np.save(work / "moving_mean_after.npy", bn.moving_mean.numpy())
    np.save(work / "moving_variance_after.npy", bn.moving_variance.numpy())

    kill_dir = root / "killed"
    export_encoder(tiny_encoder(seed=2), kill_dir)
    kill_snapshot = _snapshot(kill_dir)

    procs = {
        "keras3": _start(KERAS3_SCRIPT, [export_dir, work], legacy_keras=False),
        "tf_keras": _start(TF_KERAS_SCRIPT, [export_dir, work], legacy_keras=True),
        "kill": _start(KILL_SCRIPT, [kill_dir], legacy_keras=False),
    }
    yield dict(dir=export_dir, work=work, card=written, procs=procs, kill_dir=kill_dir,
               kill_snapshot=kill_snapshot)
    for p in procs.values():
        if p.poll() is None:
            p.kill()
            p.communicate()


# ----------------------------------------------------------------------------- fresh processes
@pytest.mark.heavy  # heavy tier since 2026-11-29 (suite time: docs/notes/suite_time.md)
def test_hub_load_tfsmlayer_load_encoder_and_keras3_finetune(exported):
    _assert_ok(exported["procs"]["keras3"])


@pytest.mark.heavy  # heavy tier since 2026-11-29 (suite time: docs/notes/suite_time.md)
def test_tf_keras_hub_keraslayer_finetune(exported):
    _assert_ok(exported["procs"]["tf_keras"])


def test_sigkill_during_overwrite_keeps_previous_export(exported):
    rc, _, err = _finish(exported["procs"]["kill"])
    assert rc == -9, f"expected SIGKILL, got rc={rc}\n{err[-2000:]}"
    kill_dir = exported["kill_dir"]
    assert _snapshot(kill_dir) == exported["kill_snapshot"]
    assert load_model_card(kill_dir).output_dim == 8
    # Only a stale temp dir remains (documented; safe to delete).
    assert all(n.startswith(".khn-export-tmp-") for n in _leftovers(kill_dir.parent))


# ----------------------------------------------------------------------------- layout, card, devices
def test_layout_card_and_no_device_pinning(exported):
    d = exported["dir"]
    assert {"saved_model.pb", "variables", "model_card.json", "model_card.md"} <= set(
        os.listdir(d))
    card = load_model_card(d)
    assert card == exported["card"]
    assert card.input_shape == (16, 16, 3) and card.output_dim == 8
    assert card.library_version == keras_hardneg.__version__
    assert card.tensorflow_version == tf.__version__ and card.created.endswith("+00:00")
    assert card.hyperparameters["tau_plus"] == 0.1 and card.knn_accuracy == 0.5
    md = (d / "model_card.md").read_text()
    for text in ("# tiny", "[0.0, 1.0]", "HardNegativeContrastiveLoss", "50.00%", "60.00%",
                 "[batch, 8]", "| tau_plus | 0.1 |"):
        assert text in md, text
    assert json.loads((d / "model_card.json").read_text())["format"].startswith("keras_hardneg")
    assert find_device_strings(d) == []
    assert keras_hardneg.export.export_encoder is export_encoder  # khn.export.* per the spec


def test_export_under_device_scope_is_still_device_free(tmp_path):
    with tf.device("/CPU:0"):
        export_encoder(tiny_encoder(regularize=False), tmp_path / "e")
    assert find_device_strings(tmp_path / "e") == []


def test_dropout_encoder_keeps_seed_state_and_modes(tmp_path):
    keras.utils.set_random_seed(0)
    inp = keras.Input((16, 16, 3))
    x = keras.layers.GlobalAveragePooling2D()(keras.layers.Conv2D(8, 3)(inp))
    enc = keras.Model(inp, keras.layers.Dropout(0.5)(x))
    export_encoder(enc, tmp_path / "e")
    obj = tf.saved_model.load(str(tmp_path / "e"))
    x = np.random.default_rng(0).uniform(size=(4, 16, 16, 3)).astype("float32")
    np.testing.assert_allclose(obj(x, training=False), enc(x), atol=ATOL)
    assert not np.allclose(obj(x, training=True), obj(x, training=False))
    assert len(obj.variables) == 3 and len(obj.trainable_variables) == 2  # + seed state


def test_model_card_round_trip_and_validation():
    card = ModelCard(name="m", hyperparameters={"t": 0.5, "dims": [512, 128]}, epochs=3,
                     metrics={"alignment": 0.3}, input_shape=(None, None, 3), output_dim=4,
                     created="2024-01-01T00:00:00+00:00")
    assert ModelCard.from_json(card.to_json()) == card
    assert "alignment" in card.to_markdown()
    bad = [dict(knn_accuracy=1.5), dict(input_shape=(16, 16, 1)), dict(epochs=-1),
           dict(output_dim=0), dict(input_range=(0, 255)), dict(hyperparameters={"f": object()}),
           dict(created="yesterday"), dict(created="2024-01-01T00:00:00"), dict(name="")]
    for kwargs in bad:
        with pytest.raises(ValueError, match="Invalid ModelCard"):
            ModelCard(**kwargs).validate()
    d = card.to_dict()
    with pytest.raises(ValueError, match="unknown fields"):
        ModelCard.from_dict({**d, "surprise": 1})
    with pytest.raises(ValueError, match="format"):
        ModelCard.from_dict({**d, "format": "other/1"})
    with pytest.raises(ValueError, match="not valid JSON"):
        ModelCard.from_json("{")


def test_card_must_match_encoder(tmp_path):
    with pytest.raises(ValueError, match="output_dim"):
        export_encoder(tiny_encoder(), tmp_path / "e", model_card=ModelCard(output_dim=7))
    with pytest.raises(ValueError, match="input shape"):
        export_encoder(tiny_encoder(), tmp_path / "e", input_shape=(32, 32, 3))
    assert os.listdir(tmp_path) == []


# ----------------------------------------------------------------------------- atomic writes
def test_overwrite_refused_then_atomic_swap(tmp_path, monkeypatch):
    d = tmp_path / "e"
    export_encoder(tiny_encoder(), d, model_card={"name": "first"})
    snap = _snapshot(d)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        export_encoder(tiny_encoder(), d, model_card={"name": "second"})
    assert _snapshot(d) == snap
    export_encoder(tiny_encoder(), d, model_card={"name": "second"}, overwrite=True)
    assert load_model_card(d).name == "second"
    # Fallback for systems without renameat2(RENAME_EXCHANGE): two renames.
    monkeypatch.setattr(_io, "_rename_exchange", lambda a, b: False)
    export_encoder(tiny_encoder(), d, model_card={"name": "third"}, overwrite=True)
    assert load_model_card(d).name == "third"
    assert _leftovers(tmp_path) == []


def test_failed_write_leaves_previous_export_and_no_temp_dir(tmp_path, monkeypatch):
    d = tmp_path / "e"
    export_encoder(tiny_encoder(), d, model_card={"name": "good"})
    snap = _snapshot(d)

    def partial_save(obj, path, **kwargs):
        os.makedirs(os.path.join(path, "variables"))
        with open(os.path.join(path, "saved_model.pb"), "wb") as f:
            f.write(b"\x08")
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(tf.saved_model, "save", partial_save)
    with pytest.raises(OSError, match="simulated"):
        export_encoder(tiny_encoder(), d, overwrite=True)
    with pytest.raises(OSError, match="simulated"):
        export_encoder(tiny_encoder(), tmp_path / "new")
    assert _snapshot(d) == snap
    assert sorted(os.listdir(tmp_path)) == ["e"]


# ----------------------------------------------------------------------------- bad directories
def _clean_error(excinfo, directory):
    msg = str(excinfo.value)
    assert str(directory) in msg and "\n" not in msg, msg
    assert excinfo.value.__cause__ is None
    return msg


def test_bad_directories(exported, tmp_path):
    missing = tmp_path / "missing"
    with pytest.raises(FileNotFoundError, match="no such directory") as e:
        load_encoder(missing)
    _clean_error(e, missing)

    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="no saved_model.pb") as e:
        load_encoder(empty)
    _clean_error(e, empty)

    corrupt = tmp_path / "corrupt"
    shutil.copytree(exported["dir"], corrupt)
    pb = corrupt / "saved_model.pb"
    pb.write_bytes(pb.read_bytes()[: pb.stat().st_size // 2])
    with pytest.raises(ValueError, match="corrupt") as e:
        load_encoder(corrupt)
    _clean_error(e, corrupt)

    no_vars = tmp_path / "no_vars"
    shutil.copytree(exported["dir"], no_vars)
    shutil.rmtree(no_vars / "variables")
    with pytest.raises(ValueError, match="could not load") as e:
        load_encoder(no_vars)
    _clean_error(e, no_vars)

    class Plain(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable(2.0)

        @tf.function(input_signature=[tf.TensorSpec([None, 16, 16, 3])])
        def __call__(self, x):
            return tf.reduce_mean(x, axis=[1, 2]) * self.w

    foreign = tmp_path / "foreign"
    tf.saved_model.save(Plain(), str(foreign))
    with pytest.raises(ValueError, match="model_card.json") as e:
        load_encoder(foreign)
    _clean_error(e, foreign)
    shutil.copy(exported["dir"] / "model_card.json", foreign)  # a card does not make it ours
    with pytest.raises(ValueError, match="training") as e:
        load_encoder(foreign)
    _clean_error(e, foreign)

    bad_card = tmp_path / "bad_card"
    shutil.copytree(exported["dir"], bad_card)
    (bad_card / "model_card.json").write_text('{"format": "keras_hardneg.model_card/1", "x": 1}')
    with pytest.raises(ValueError, match="bad model_card.json") as e:
        load_model_card(bad_card)
    _clean_error(e, bad_card)
