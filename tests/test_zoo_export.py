"""`keras-hardneg zoo export` writes a SavedModel that fine-tunes through TF Hub (issue 33).

The zoo loads an entry frozen for export; the export must still carry the weights as
trainable variables, so that ``hub.KerasLayer(DIR, trainable=True)`` inside a tf_keras
model changes them in one ``fit`` step. Checked on the smallest image entry and the small
text entry (tf_keras runs in a fresh process: it cannot share one with Keras 3).
"""

import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

if keras.backend.backend() != "tensorflow":
    pytest.skip("SavedModel export needs the TensorFlow backend", allow_module_level=True)

import keras_hardneg as khn  # noqa: E402
from keras_hardneg import cli  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(khn.__file__)))
IMAGE_ENTRY = "simclr-ntxent-cifar10-r18w8-cpu"   # the smallest image entry (980 KB)
TEXT_ENTRY = "quickthought-ntxent-wiki"

FINE_TUNE = """
import sys
import numpy as np
import tensorflow as tf, tensorflow_hub as hub, tf_keras
for d, kind in zip(sys.argv[1::2], sys.argv[2::2]):
    obj = hub.load(d)
    assert len(obj.trainable_variables) > 0, (d, len(obj.variables))
    layer = hub.KerasLayer(d, trainable=True)
    if kind == "text":
        inp = tf_keras.Input((32,), dtype="int32")
        x = np.random.default_rng(0).integers(1, 100, (4, 32)).astype("int32")
    else:
        inp = tf_keras.Input((32, 32, 3))
        x = np.random.default_rng(0).random((4, 32, 32, 3)).astype("float32")
    model = tf_keras.Model(inp, tf_keras.layers.Dense(3)(layer(inp)))
    model.compile(tf_keras.optimizers.SGD(0.1),
                  tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    before = [w.numpy().copy() for w in layer.trainable_weights]
    assert len(before) == len(obj.trainable_variables), (len(before), d)
    model.fit(x, np.array([0, 1, 2, 0]), batch_size=4, epochs=1, verbose=0)
    moved = sum(not np.array_equal(b, w.numpy()) for b, w in zip(before, layer.trainable_weights))
    assert moved > 0.8 * len(before), (d, moved, len(before))
    print(kind, len(before), "trainable,", moved, "moved")
print("OK")
"""


@pytest.mark.heavy  # a tf_keras process (~34 CPU-s); by default: the trainable-variables test
# below and tests/export/test_export.py's hub.KerasLayer fine-tune of an export
def test_zoo_export_fine_tunes_through_hub_keras_layer(tmp_path, capsys):
    pytest.importorskip("tensorflow_hub")
    pytest.importorskip("tf_keras")
    dirs = []
    for name, kind in ((IMAGE_ENTRY, "image"), (TEXT_ENTRY, "text")):
        out = str(tmp_path / name)
        assert cli.main(["zoo", "export", name, out]) == 0
        dirs += [out, kind]
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2",
               CUDA_VISIBLE_DEVICES="")
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(FINE_TUNE), *dirs], env=env,
                          capture_output=True, text=True, timeout=300)
    tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
    assert proc.returncode == 0 and proc.stdout.strip().endswith("OK"), \
        f"rc={proc.returncode}\n{proc.stdout}\n{tail}"


def test_fine_tunable_variables_of_a_frozen_or_partly_frozen_encoder():
    """What an export lists as trainable: a frozen encoder's weights as if unfrozen (never
    BN statistics), a partly frozen one's as its user froze them; the encoder unchanged."""
    from keras_hardneg.export.saved_object import fine_tunable_variables

    inp = keras.Input((8, 8, 3))
    conv = keras.layers.Conv2D(4, 3)
    bn = keras.layers.BatchNormalization()
    enc = keras.Model(inp, keras.layers.GlobalAveragePooling2D()(bn(conv(inp))))
    everything = [v.path for v in enc.trainable_variables]
    assert len(everything) == 4
    enc.trainable = False
    assert [v.path for v in fine_tunable_variables(enc)] == everything
    assert enc.trainable_variables == [] and not conv.trainable and not bn.trainable
    assert not any(v.trainable for v in enc.variables)
    enc.trainable = True
    conv.trainable = False  # the user's choice: kept
    assert [v.path for v in fine_tunable_variables(enc)] == [v.path for v in bn.trainable_variables]
    assert enc.trainable and not conv.trainable and bn.trainable
