"""
Title: TF Hub: export an encoder, fine-tune it with hub.KerasLayer, use it frozen with hub.load
Shows: `khn.export.export_encoder` writes a zoo encoder as a TF2 SavedModel (TF Hub format);
    under tf_keras, `hub.KerasLayer(DIR, trainable=True)` fine-tunes it inside a model (its
    weights move), and in plain TensorFlow `hub.load(DIR)` gives frozen features for a
    softmax classifier trained with tf.GradientTape.
Run time: 1 min 37 s (CPU 1 min 01 s) with the defaults (the CPU-trained ResNet-18 width 8
    from the zoo, 1,000 CIFAR-10 training and 500 test images) on 2 CPU cores shared with
    another job's benchmarks; `--smoke` (tiny data, an untrained small ConvNet) is what the
    test suite runs. Needs `tensorflow_hub` and `tf_keras`.

    python examples/tf_hub_finetune.py
    python examples/tf_hub_finetune.py --entry simclr-hard-cifar10 --epochs 3   # the big one
    python examples/tf_hub_finetune.py --smoke

The export is written from Python (`khn.export.export_encoder`); it keeps the encoder's
trainable variables, which `hub.KerasLayer(trainable=True)` needs.
"""

import argparse
import os
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # no C++ start-up log lines
import keras_hardneg as khn

HERE = os.path.dirname(os.path.abspath(__file__))
# In a clone the zoo is models/ beside examples/ (else $KERAS_HARDNEG_ZOO, or the cache).
CLONE_ZOO = os.path.join(HERE, "..", "models")

parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
parser.add_argument("--data", default="cifar10",
                    help="CIFAR-10 (default: fetched once into ~/.keras/datasets, as keras.datasets does) or an image folder with train/ and test/")
parser.add_argument("--entry", default="simclr-hard-cifar10-r18w8-cpu", help="zoo entry")
parser.add_argument("--output", default="runs/examples/tf_hub")
parser.add_argument("--train-per-class", type=int, default=100)
parser.add_argument("--test-per-class", type=int, default=50)
parser.add_argument("--epochs", type=int, default=5,
                    help="epochs of each phase (head, then everything) under tf_keras")
parser.add_argument("--smoke", action="store_true", help="tiny settings: checks the example runs")
args = parser.parse_args()
if args.smoke:
    args.train_per_class, args.test_per_class, args.epochs = 4, 2, 1
    args.entry = None  # an untrained small ConvNet instead of a zoo entry: quick to export
if min(args.train_per_class, args.test_per_class, args.epochs) < 1:
    parser.error("--train-per-class, --test-per-class and --epochs must be >= 1")
os.makedirs(args.output, exist_ok=True)
start_all = time.perf_counter()

"""
## Export

Any Keras 3 encoder (TensorFlow backend) exports; here a zoo entry. The export is a folder
this example owns: `overwrite=True` replaces an export of this package, never other files.
"""

zoo = (CLONE_ZOO if khn.zoo.is_zoo_folder(CLONE_ZOO) and not os.environ.get(khn.zoo.ZOO_ENV)
       else None)
encoder = (khn.zoo.load(args.entry, zoo=zoo) if args.entry else
           khn.encoders.small_convnet((32, 32, 3), width=4))
hub_dir = os.path.join(args.output, "hub_encoder")
card = khn.export.export_encoder(encoder, hub_dir, overwrite=True)
print(f"exported {args.entry or 'a small ConvNet'} to {hub_dir}: {card.output_dim}-d features")

with khn.data.fetch.exit_on_fetch_error(parser.prog):  # one line, not a traceback
    (x, y), (x_test, y_test), _ = khn.data.load_dataset(
        args.data, image_size=32, limit_per_class=args.train_per_class,
        test_limit_per_class=args.test_per_class)
num_classes = int(y.max()) + 1

"""
## Fine-tuning with hub.KerasLayer under tf_keras

TF Hub's Keras layer is a tf_keras (Keras 2) layer: build the model with `tf_keras`, not
Keras 3. Keras's transfer-learning recipe in two phases: train the new head on the frozen
encoder, then unfreeze it (`trainable=True` exposes the SavedModel's trainable variables to
the optimizer; in `fit` the layer calls the export with `training=True`, so batch norm
trains too) and fine-tune everything at a ten times smaller learning rate (1e-2, then 1e-3).
"""

import tensorflow as tf  # noqa: E402
import tensorflow_hub as hub  # noqa: E402
import tf_keras  # noqa: E402

tf_keras.utils.set_random_seed(0)
hub_layer = hub.KerasLayer(hub_dir, trainable=True)
model = tf_keras.Sequential([tf_keras.Input((32, 32, 3)), hub_layer,
                             tf_keras.layers.Dense(num_classes)])
print(f"hub.KerasLayer: {len(hub_layer.trainable_variables)} trainable variables, "
      f"{len(hub_layer.non_trainable_variables)} non-trainable")


def fit(learning_rate):
    model.compile(optimizer=tf_keras.optimizers.Adam(learning_rate),
                  loss=tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    model.fit(x, y, batch_size=64, epochs=args.epochs, shuffle=True, verbose=2)
    return model.evaluate(x_test, y_test, batch_size=250, verbose=0)[1]


hub_layer.trainable = False  # phase 1: the head only
head_only = fit(1e-2)  # features are not standardised: a larger step
hub_layer.trainable = True  # phase 2: every layer
before = [v.numpy().copy() for v in hub_layer.trainable_variables]
fine_tuned = fit(1e-3)
moved = sum(not np.allclose(a, v.numpy()) for a, v in zip(before, hub_layer.trainable_variables))
print(f"test accuracy: head on the frozen encoder {head_only:.3f}, after fine-tuning "
      f"{fine_tuned:.3f} ({moved} of {len(before)} encoder variables changed)")

"""
## Frozen features with hub.load in plain TensorFlow

`hub.load` returns the restored object; calling it with `training=False` gives features
`[B, F]`. A softmax classifier on them is trained with a `tf.GradientTape` loop -- no Keras.
"""

frozen = hub.load(hub_dir)


def features(images):
    return tf.concat([frozen(tf.constant(images[i:i + 250]), training=False)
                      for i in range(0, len(images), 250)], axis=0)


f_train, f_test = features(x), features(x_test)
mean, std = tf.reduce_mean(f_train, 0), tf.math.reduce_std(f_train, 0) + 1e-6
f_train, f_test = (f_train - mean) / std, (f_test - mean) / std
w = tf.Variable(tf.zeros((f_train.shape[1], num_classes)))
b = tf.Variable(tf.zeros((num_classes,)))
labels = tf.constant(y)
for step in range(300):  # full-batch gradient descent on a convex loss
    with tf.GradientTape() as tape:
        logits = f_train @ w + b
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
        loss += 1e-3 * tf.reduce_sum(w * w)
    gw, gb = tape.gradient(loss, [w, b])
    w.assign_sub(0.1 * gw)
    b.assign_sub(0.1 * gb)
frozen_acc = float(tf.reduce_mean(tf.cast(tf.argmax(f_test @ w + b, 1) == y_test, tf.float32)))
print(f"frozen (hub.load + a softmax trained with tf.GradientTape): test accuracy "
      f"{frozen_acc:.3f}")
print(f"RESULT hub.KerasLayer: head only {head_only:.3f}, fine-tuned {fine_tuned:.3f} "
      f"({moved}/{len(before)} variables moved); hub.load frozen + softmax {frozen_acc:.3f} "
      f"({time.perf_counter() - start_all:.0f} s)")
