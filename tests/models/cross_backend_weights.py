"""Run as ``python cross_backend_weights.py train|load DIR`` (``train`` under
``KERAS_BACKEND=jax``, ``load`` under TensorFlow; ``test_cross_backend_weights.py`` calls
:func:`load` in its own TensorFlow process): the zoo's route, train with JAX and export with
TensorFlow.

``train`` fits SimCLR and MoCo v2 (batch-norm encoder, queue with labels) for 2 steps and
writes each model's ``.weights.h5``, every weight and the encoder's features of fixed images
(``.npz``). ``load`` builds the same models under TensorFlow, loads the weights, checks them
and the features against JAX's, exports the encoder as a SavedModel, loads the export, and
prints the largest differences as JSON."""

import json
import os
import sys

import numpy as np

import keras

import keras_hardneg as khn

KINDS = ("simclr", "moco_v2")


def build(kind):
    enc = khn.encoders.small_convnet(input_shape=(8, 8, 3), width=4)  # FusedBatchNormalization
    if kind == "simclr":
        model = khn.models.SimCLR(enc, projection_dims=(16, 8))
    else:
        model = khn.models.MoCo(enc, projection_dims=(16, 8), queue_size=16, momentum=0.9)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="hard")
    return model


def images(seed, n=16):
    return np.random.default_rng(seed).uniform(size=(n, 8, 8, 3)).astype("float32")


def features(encoder):
    return keras.ops.convert_to_numpy(encoder(images(99, 8), training=False))


def train(out_dir):
    """Fits each model 2 steps under this backend; writes its `.weights.h5` and an `.npz` of
    every weight and the encoder's features."""
    for kind in KINDS:
        path = os.path.join(out_dir, kind)
        keras.utils.set_random_seed(0)
        model = build(kind)
        v1 = images(1)
        x = {"view1": v1, "view2": np.clip(v1 + 0.05, 0, 1)}
        model.fit(x, np.arange(16) % 3, batch_size=8, epochs=1, shuffle=False, verbose=0)
        model.save_weights(path + ".weights.h5")
        np.savez(path + ".npz", features=features(model.encoder),
                 **{f"w{i}": keras.ops.convert_to_numpy(w) for i, w in enumerate(model.weights)})
    return {"backend": keras.backend.backend()}


def load(out_dir):
    """Builds each model under this backend, loads ``train``'s weights, exports the encoder;
    returns the largest differences to what ``train`` saved."""
    result = {"backend": keras.backend.backend()}
    for kind in KINDS:
        path = os.path.join(out_dir, kind)
        keras.utils.set_random_seed(1)  # other initial weights: the file must set them all
        model = build(kind)
        model.load_weights(path + ".weights.h5")
        saved = np.load(path + ".npz")
        result[kind] = {
            "weight_diff": max(float(np.max(np.abs(np.asarray(w, "float64") - saved[f"w{i}"])))
                               for i, w in enumerate(model.weights)),
            "feature_diff": float(np.max(np.abs(features(model.encoder) - saved["features"]))),
        }
        if kind == "moco_v2":
            result[kind]["queue_labels"] = np.asarray(model.queue_labels).tolist()
            result[kind]["queue_pointer"] = int(np.asarray(model.queue_pointer))
        export_dir = os.path.join(out_dir, kind + "_export")
        khn.export.export_encoder(model.encoder, export_dir)
        exported = khn.export.load_encoder(export_dir)
        result[kind]["export_diff"] = float(np.max(np.abs(
            np.asarray(exported(images(99, 8), training=False)) - saved["features"])))
    return result


if __name__ == "__main__":
    mode, out_dir = sys.argv[1], sys.argv[2]
    print("RESULT " + json.dumps({"train": train, "load": load}[mode](out_dir)))
