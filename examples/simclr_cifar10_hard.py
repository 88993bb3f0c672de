"""
Title: SimCLR with hard negatives on your own image folder
Shows: pre-training a ResNet-18 with SimCLR and the hard-negative loss (Robinson et al.,
    ICLR 2021) on any folder of images -- class sub-folders (evaluated by kNN each epoch),
    a flat folder of unlabeled images (trained, not evaluated), or FOLDER/train beside
    FOLDER/test -- then a linear probe, a plot of the run and the encoder saved as .keras.
Run time: 4 min 35 s (CPU 3 min 24 s) with the defaults (2,500 CIFAR-10 images, ResNet-18
    width 16, 3 epochs) on 2 CPU cores shared with another job's benchmarks; `--smoke` (tiny
    data, a small ConvNet) is what the test suite runs.

    python examples/simclr_cifar10_hard.py                        # CIFAR-10, fetched once
    python examples/simclr_cifar10_hard.py --data ~/my_photos --epochs 20 --image-size 64
    python examples/simclr_cifar10_hard.py --smoke                # tiny: checks it runs

Uses the library directly (no recipe): image loading, augmentation inside the model, the
hard-negative loss, a kNN monitor, a warm-up + cosine schedule that fits any number of
epochs, and a plot of the loss and the kNN accuracy per epoch.
"""

import argparse
import math
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # no C++ start-up log lines
import keras
import numpy as np

import keras_hardneg as khn

parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
parser.add_argument("--data", default="cifar10",
                    help="CIFAR-10 (default: fetched once into ~/.keras/datasets, as "
                         "keras.datasets does) or an image folder: class sub-folders, flat, "
                         "or train/ + test/")
parser.add_argument("--output", default="runs/examples/simclr_hard",
                    help="where the plot and the encoder go")
parser.add_argument("--image-size", type=int, default=32)
parser.add_argument("--width", type=int, default=16, help="ResNet-18 width (64 = standard)")
parser.add_argument("--encoder", choices=("resnet18", "small_convnet"), default="resnet18",
                    help="a CIFAR ResNet-18 or a 3-layer ConvNet (what --smoke uses)")
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--batch-size", type=int, default=256)
parser.add_argument("--limit-per-class", type=int, default=250,
                    help="images per class (sub-folder) to read; 0 = all")
parser.add_argument("--beta", type=float, default=1.0, help="hardness concentration")
parser.add_argument("--tau-plus", type=float, default=0.1, help="class prior (debiasing)")
parser.add_argument("--smoke", action="store_true", help="tiny settings: checks the example runs")
args = parser.parse_args()
if args.smoke:
    args.width, args.epochs, args.batch_size, args.limit_per_class = 4, 1, 32, 6
    args.encoder = "small_convnet"
for name in ("image_size", "width", "epochs", "batch_size"):
    if getattr(args, name) < 1:
        parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
keras.utils.set_random_seed(0)
os.makedirs(args.output, exist_ok=True)

"""
## The data

CIFAR-10 by default (`khn.data.load_dataset("cifar10")`: the archive `keras.datasets`
fetches, once, checked by its SHA-256). Any folder works too. With class sub-folders the
labels feed a kNN monitor (they never reach the loss); a flat folder is read without
labels. `FOLDER/train` and `FOLDER/test` are used as the training and evaluation splits; a
single labelled folder is split 80/20 here.
"""


def has_class_folders(folder):
    return any(os.path.isdir(os.path.join(folder, e)) and not e.startswith(".")
               for e in os.listdir(folder))


def read(folder, limit):
    labelled = has_class_folders(folder)
    out = khn.data.load_image_folder_arrays(
        folder, image_size=args.image_size, limit_per_class=limit or None, labels=labelled)
    return out if labelled else (out, None)


data = os.path.abspath(os.path.expanduser(args.data))
limit = args.limit_per_class or None
if args.data == "cifar10":
    with khn.data.fetch.exit_on_fetch_error(parser.prog):  # one line, not a traceback
        (x, y), (x_test, y_test), _ = khn.data.load_dataset(
            "cifar10", image_size=args.image_size, limit_per_class=limit,
            test_limit_per_class=max(limit // 5, 2) if limit else None)
elif not os.path.isdir(data):
    parser.error(f"--data {args.data!r}: no such folder (give an image folder, or cifar10)")
elif os.path.isdir(os.path.join(data, "train")):
    x, y = read(os.path.join(data, "train"), args.limit_per_class)
    test = os.path.join(data, "test")
    x_test, y_test = (read(test, max(args.limit_per_class // 5, 2)) if os.path.isdir(test)
                      else (None, None))
else:
    x, y = read(data, args.limit_per_class)
    x_test = y_test = None
    if y is not None:  # one labelled folder: hold out a fifth for the kNN monitor
        order = np.random.default_rng(0).permutation(len(x))
        cut = max(1, len(x) // 5)
        x_test, y_test, x, y = x[order[:cut]], y[order[:cut]], x[order[cut:]], y[order[cut:]]
evaluate = y is not None and y_test is not None
print(f"training images {x.shape}, evaluation images "
      f"{None if x_test is None else x_test.shape}{'' if evaluate else ' (no labels: no kNN)'}")

"""
## The model

A CIFAR-style ResNet-18 (3x3 stem, no max-pool), SimCLR's two-layer projection head, and
the augmentation inside the model (random crop, flip, colour jitter, grey), so `fit` takes
plain images. The batch cannot exceed the data; the schedule warms up for a tenth of the
run (none in a very short run) and decays to 0 by its last step, whatever the epochs.
"""

batch_size = min(args.batch_size, len(x))
steps = math.ceil(len(x) / batch_size)
total_steps = steps * args.epochs
shape = (args.image_size, args.image_size, 3)
encoder = (khn.encoders.resnet18_cifar(input_shape=shape, width=args.width)
           if args.encoder == "resnet18" else
           khn.encoders.small_convnet(input_shape=shape, width=args.width))
model = khn.models.SimCLR(
    encoder, projection_dims=(512, 128),
    augmentation=khn.augment.simclr_augmentation(image_size=args.image_size, strength=0.5,
                                                 seed=0))
schedule = khn.optimizers.WarmupCosineDecay(1e-3, total_steps=total_steps,
                                            warmup_steps=total_steps // 10)
model.compile(optimizer=keras.optimizers.Adam(schedule),
              loss=khn.losses.HardNegativeContrastiveLoss(
                  temperature=0.5, tau_plus=args.tau_plus, beta=args.beta))

"""
## Training

`KNNMonitor` encodes both splits after each epoch and logs the weighted kNN accuracy
(k = 200, t = 0.1) as `knn_accuracy`. Labels passed to `fit` only feed the
`false_negative_rate` metric.
"""

callbacks = []
if evaluate:
    callbacks.append(khn.callbacks.KNNMonitor((x, y), (x_test, y_test),
                                              k=min(200, len(x)), temperature=0.1))
start = time.perf_counter()
history = model.fit(x, y, batch_size=batch_size, epochs=args.epochs, shuffle=True,
                    verbose=2, callbacks=callbacks)
seconds = time.perf_counter() - start
logs = history.history
print(f"trained {args.epochs} epochs of {steps} steps in {seconds:.1f} s "
      f"({total_steps * batch_size / seconds:.1f} images/s incl. the monitor)")

"""
## Evaluation and the plot

A linear probe (logistic regression on the frozen, standardised features) is the usual
figure; with no labels the example stops at the loss.
"""

fig_path = os.path.join(args.output, "examples_simclr_hard.png")
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

fig, ax = plt.subplots(1, 2 if evaluate else 1, figsize=(9 if evaluate else 4.5, 3.2),
                       squeeze=False)
epochs = np.arange(1, args.epochs + 1)
ax[0, 0].plot(epochs, logs["loss"], "o-")
ax[0, 0].set(xlabel="epoch", ylabel="hard-negative loss", title="training loss")
if evaluate:
    ax[0, 1].plot(epochs, logs["knn_accuracy"], "o-", color="C1")
    ax[0, 1].set(xlabel="epoch", ylabel="kNN accuracy", title="weighted kNN (k=200)")
fig.tight_layout()
fig.savefig(fig_path, dpi=100)
encoder.save(os.path.join(args.output, "encoder.keras"))
print(f"plot: {fig_path}; encoder: {os.path.join(args.output, 'encoder.keras')}")

if evaluate:
    feats = khn.evaluation.extract_features(encoder, x)
    feats_test = khn.evaluation.extract_features(encoder, x_test)
    probe = khn.evaluation.linear_probe_accuracy(feats, y, feats_test, y_test)
    print(f"kNN accuracy per epoch: {[round(float(a), 4) for a in logs['knn_accuracy']]}")
    print(f"RESULT linear probe accuracy {probe:.4f}, kNN accuracy "
          f"{logs['knn_accuracy'][-1]:.4f}")
else:
    print(f"RESULT final loss {logs['loss'][-1]:.4f} (unlabeled folder: no accuracy)")
