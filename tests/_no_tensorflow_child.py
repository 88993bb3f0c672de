"""Child process of tests/test_no_tensorflow.py: runs a scenario where ``import tensorflow``
fails (a meta-path finder raises ImportError for ``tensorflow*`` and ``tf_keras``), under
``KERAS_BACKEND=jax``.

    python -m tests._no_tensorflow_child SCENARIO [SCENARIO ...]

Scenarios: ``imports``, ``views``, ``quickstart`` (README), ``moco_v2``, ``presets`` (a
run with BatchSampler batches writes a preset; it and the zoo's Keras presets load and
fine-tune). The error of a
blocked import names the keras_hardneg module that asked for TensorFlow. Prints
``OK <scenario>`` after each scenario that passed.
"""

import importlib.abc
import os
import re
import sys
import traceback

BLOCKED = ("tensorflow", "tf_keras")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class BlockTensorFlow(importlib.abc.MetaPathFinder):
    """Makes every ``import tensorflow...`` fail, naming who asked."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0].startswith(BLOCKED):
            frames = [f for f in traceback.extract_stack()
                      if "keras_hardneg" in f.filename or f.filename.startswith(ROOT)]
            who = (f"{os.path.relpath(frames[-1].filename, ROOT)}:{frames[-1].lineno}"
                   if frames else "outside keras_hardneg")
            raise ImportError(f"blocked import of {name!r} (TensorFlow is unavailable in this "
                              f"test), imported from {who}")
        return None


def _readme_quick_start():
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    section = text[text.index("## Quick start"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def imports():
    import keras_hardneg as khn

    for name in khn._SUBMODULES:
        if name != "tuning":  # keras_tuner imports TensorFlow
            getattr(khn, name)
    import keras_hardneg.cli  # noqa: F401


def views():
    """``simclr_views`` makes two views eagerly (moved here from
    tests/augment/test_simclr_compiled.py, which started a process of its own for it)."""
    import numpy as np

    import keras_hardneg.augment as aug

    v1, v2 = aug.simclr_views(image_size=8, seed=0)(
        np.random.rand(2, 10, 10, 3).astype("float32"), training=True)
    assert tuple(v1.shape) == tuple(v2.shape) == (2, 8, 8, 3), (v1.shape, v2.shape)


def quickstart():
    code = _readme_quick_start()
    # Shorter (one epoch of two batches instead of ten epochs of all 1,437 images: under
    # XLA's level 0 a JAX step runs slowly, and the whole epoch cost ~15 CPU-s); the export
    # line must raise the backend error.
    fit = "model.fit(x, y, batch_size=128, epochs=10)"
    assert code.count(fit) == 1, "the quick start's fit line changed: update this scenario"
    code = code.replace(fit, "model.fit(x[:256], y[:256], batch_size=128, epochs=1)")
    lines = code.splitlines()
    export = [i for i, line in enumerate(lines) if "export_encoder" in line]
    assert len(export) == 1, "the quick start has one export line"
    start = end = export[0]  # the statement, continuation lines included
    while "".join(lines[start:end + 1]).count("(") > "".join(lines[start:end + 1]).count(")"):
        end += 1
    export_line = "\n".join(line.strip() for line in lines[start:end + 1])
    del lines[start:end + 1]
    scope = {}
    exec(compile("\n".join(lines), "README.md quick start", "exec"), scope)
    feats, x_test = scope["feats"], scope["x_test"]
    assert feats.shape[0] == x_test.shape[0] and feats.ndim == 2, feats.shape
    import numpy as np

    assert np.isfinite(feats).all()
    try:
        exec(export_line.strip(), scope)
    except RuntimeError as err:
        assert "TensorFlow backend" in str(err) and "export under TF" in str(err), err
    else:
        raise AssertionError("export_encoder under JAX did not raise")


def moco_v2():
    import keras
    import numpy as np

    import keras_hardneg as khn

    (x, y), _ = khn.data.load_digits()
    encoder = khn.encoders.small_convnet(input_shape=(8, 8, 3), width=8)
    model = khn.models.MoCo(encoder, projection_dims=(32, 16), queue_size=256, momentum=0.99,
                            version="v2",
                            augmentation=khn.augment.simclr_augmentation(image_size=8,
                                                                         strength=0.5))
    model.compile(optimizer="adam",
                  loss=khn.losses.HardNegativeContrastiveLoss(temperature=0.5, tau_plus=0.1,
                                                             beta=1.0))
    queue = keras.ops.convert_to_numpy(model.queue)
    history = model.fit(x[:512], y[:512], batch_size=64, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all(), history.history
    assert not np.allclose(keras.ops.convert_to_numpy(model.queue), queue), \
        "the queue did not change"


def _fine_tune_moves(model, x):
    """One epoch of fit on ``x``: (trainable weights moved, BN moving statistics moved)."""
    import keras
    import numpy as np

    bn = [v for v in model.non_trainable_weights if "moving_mean" in v.path]
    before = [keras.ops.convert_to_numpy(v).copy() for v in model.trainable_weights + bn]
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    target = np.zeros((len(x), model.output_shape[-1]), "float32")
    model.fit(x, target, batch_size=len(x), epochs=1, verbose=0)
    after = [keras.ops.convert_to_numpy(v) for v in model.trainable_weights + bn]
    n = len(model.trainable_weights)
    moved = [not np.allclose(a, b) for a, b in zip(before, after)]
    return any(moved[:n]), bool(bn) and any(moved[n:])


def presets():
    """A run with BatchSampler batches (its proximity graph must not reach for ScaNN's
    TensorFlow ops) writes a preset under JAX; that preset and the zoo's shipped presets
    load as trainable Keras models without TensorFlow, and fine-tune: weights move, BN
    statistics update."""
    import tempfile

    import numpy as np

    import keras_hardneg as khn
    from keras_hardneg import run
    from keras_hardneg.export import load_preset

    recipe = {"encoder": {"name": "small_convnet", "width": 8}, "projection_dims": [16, 8],
              "data": {"name": "digits", "test_fraction": 0.75}, "batch_size": 64,
              "epochs": 1, "sampler": {"name": "batchsampler", "num_candidates": 40,
                                       "num_neighbors": 8, "refresh_every": 4},
              "evaluation": {"monitor_every": 0, "linear_probe": False, "knn_k": 20}}
    x = np.random.default_rng(0).random((16, 8, 8, 3), dtype=np.float32)
    with tempfile.TemporaryDirectory() as out:
        result = run.train(recipe, out, verbose=0)
        assert "export_skipped" in result and result["preset_dir"] == out + "/preset", result
        encoder = load_preset(out)  # the run folder: its preset/
        assert encoder.preset_metadata["backend"] == "jax", encoder.preset_metadata
        assert _fine_tune_moves(encoder, x) == (True, True)
    names = khn.zoo.list()
    for name in ("simclr-ntxent-cifar10-r18w8-cpu", "graphcl-ntxent-mutag",
                 "quickthought-ntxent-wiki", "simclr-hard-cifar10"):
        assert name in names, names
        model = khn.zoo.load(name)
        assert model.trainable and model.preset_metadata["modality"] in ("image", "graph", "text")
    x = np.random.default_rng(1).random((8, 32, 32, 3), dtype=np.float32)
    gpu = khn.zoo.load("simclr-hard-cifar10", trainable=False)  # a GPU entry (float16 preset)
    assert np.asarray(gpu(x, training=False)).shape == (8, 512)
    image = khn.zoo.load("simclr-ntxent-cifar10-r18w8-cpu")
    assert np.isfinite(np.asarray(image(x, training=False))).all()
    assert _fine_tune_moves(image, x) == (True, True)


SCENARIOS = {"imports": imports, "views": views, "quickstart": quickstart, "moco_v2": moco_v2,
             "presets": presets}

if __name__ == "__main__":
    sys.meta_path.insert(0, BlockTensorFlow())
    for scenario in sys.argv[1:]:
        SCENARIOS[scenario]()
        leaked = sorted(m for m in sys.modules if m.split(".")[0].startswith(BLOCKED))
        assert not leaked, leaked
        print("OK", scenario, flush=True)
