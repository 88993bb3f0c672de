"""
Title: MoCo v2 with Ring negatives from the queue, and the false-negative monitors
Shows: MoCo v2 (a momentum key encoder and a queue of past keys) trained with the Ring loss
    (Wu et al., ICLR 2021: only the negatives whose similarity rank lies in a percentile
    band count), the band annealed by `RingAnnealing`; the false-negative rate of the queue
    read out per epoch (`false_negative_rate`, from labels that never reach the loss), and
    after training by similarity rank: how often the queue's closest keys share the
    query's class -- the ones Ring's band leaves out.
Run time: 3 min 16 s (CPU 2 min 04 s) with the defaults (2,000 CIFAR-10 images, ResNet-18
    width 8, queue of 1,024 keys, 4 epochs) on 2 CPU cores shared with another job's
    benchmarks; `--smoke` (tiny data, a small ConvNet) is what the test suite runs.

    python examples/moco_ring_queue.py
    python examples/moco_ring_queue.py --epochs 20 --limit-per-class 1000 --queue-size 4096
    python examples/moco_ring_queue.py --smoke
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # no C++ start-up log lines
import keras
import numpy as np

import keras_hardneg as khn

parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
parser.add_argument("--data", default="cifar10",
                    help="CIFAR-10 (default: fetched once into ~/.keras/datasets, as keras.datasets does) or an image folder with train/ and test/")
parser.add_argument("--output", default="runs/examples/moco_ring")
parser.add_argument("--limit-per-class", type=int, default=200)
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--batch-size", type=int, default=128)
parser.add_argument("--queue-size", type=int, default=1024)
parser.add_argument("--encoder", choices=("resnet18", "small_convnet"), default="resnet18",
                    help="a CIFAR ResNet-18 or a 3-layer ConvNet (what --smoke uses)")
parser.add_argument("--lower", type=float, default=1.0, help="Ring's lower percentile")
parser.add_argument("--upper", type=float, default=10.0, help="Ring's final upper percentile")
parser.add_argument("--smoke", action="store_true", help="tiny settings: checks the example runs")
args = parser.parse_args()
if args.smoke:
    args.limit_per_class, args.epochs, args.batch_size, args.queue_size = 4, 1, 20, 40
    args.encoder = "small_convnet"
if min(args.limit_per_class, args.epochs, args.batch_size, args.queue_size) < 1:
    parser.error("--limit-per-class, --epochs, --batch-size and --queue-size must be >= 1")
keras.utils.set_random_seed(0)
os.makedirs(args.output, exist_ok=True)
start_all = time.perf_counter()

with khn.data.fetch.exit_on_fetch_error(parser.prog):  # one line, not a traceback
    (x, y), (x_test, y_test), _ = khn.data.load_dataset(
        args.data, image_size=32, limit_per_class=args.limit_per_class,
        test_limit_per_class=max(2, args.limit_per_class // 4))
print(f"train {x.shape}, kNN test {x_test.shape}")

"""
## The model

`MoCoV2` keeps a queue of `queue_size` unit-norm keys (the negatives) and their labels
(`-1` until a slot is filled: those never count as false negatives). The Ring loss keeps,
for each query, the queue keys whose similarity rank lies between the `lower` and `upper`
percentiles (rank 0 = the most similar); `RingAnnealing` moves `upper` from 100 (plain
InfoNCE) down to its final value over the run, as in the paper.
"""

batch_size = min(args.batch_size, len(x))
encoder = (khn.encoders.resnet18_cifar(input_shape=(32, 32, 3), width=8)
           if args.encoder == "resnet18" else khn.encoders.small_convnet((32, 32, 3), width=8))
model = khn.models.MoCoV2(
    encoder, projection_dims=(256, 64), queue_size=args.queue_size, momentum=0.99,
    augmentation=khn.augment.simclr_augmentation(image_size=32, strength=0.5, seed=0))
ring = khn.losses.RingContrastiveLoss(temperature=0.2, lower_percentile=args.lower,
                                      upper_percentile=100.0)
model.compile(optimizer=keras.optimizers.SGD(0.06, momentum=0.9), loss=ring)

"""
## Training, with the monitors

With labels in `fit`, every step logs `false_negative_rate`: the share of (query, queued
key) pairs whose labels agree, over the filled queue slots. It is what the batch would
wrongly push apart; about 1/10 on balanced CIFAR-10 whatever the encoder, since the
queue holds a random sample of the data. `negative_cosine` and `positive_cosine` are the
mean similarities of the negatives and the positives.
"""

monitor = khn.callbacks.KNNMonitor((x, y), (x_test, y_test), k=50, temperature=0.1)
history = model.fit(x, y, batch_size=batch_size, epochs=args.epochs, shuffle=True, verbose=2,
                    callbacks=[khn.callbacks.RingAnnealing(args.epochs, 100.0, args.upper),
                               monitor])
logs = history.history
for e in range(args.epochs):
    print(f"epoch {e + 1}: false-negative rate {logs['false_negative_rate'][e]:.3f}, negative "
          f"cosine {logs['negative_cosine'][e]:.3f}, positive cosine "
          f"{logs['positive_cosine'][e]:.3f}, kNN {logs['knn_accuracy'][e]:.3f}")

"""
## Where the false negatives sit in the queue

The queries of a held-out batch against the trained queue: rank each query's queue keys
by similarity and measure the false-negative rate by rank percentile with the library's
one statistic (`khn.evaluation.false_negative_rate` with a `negative_mask`). If the
encoder has learned anything, the closest keys share the class more often than chance --
exactly the keys below Ring's lower percentile, which it leaves out.
"""

from keras import ops  # noqa: E402

q = ops.convert_to_numpy(khn.losses.core.l2_normalize(model.query(x_test, training=False)))
queue = ops.convert_to_numpy(model.queue)
queue_labels = ops.convert_to_numpy(model.queue_labels)
rank = np.argsort(np.argsort(-(q @ queue.T), axis=1), axis=1) / queue.shape[0] * 100
edges = [0.0, args.lower, args.upper, 50.0, 100.0]
by_rank = []
for lo, hi in zip(edges[:-1], edges[1:]):
    mask = (rank >= lo) & (rank < hi)
    rate = khn.evaluation.false_negative_rate(y_test, queue_labels, negative_mask=mask)
    by_rank.append(float(ops.convert_to_numpy(rate)))
    print(f"queue keys ranked {lo:4.0f}-{hi:3.0f} %: false-negative rate {by_rank[-1]:.3f}")

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

fig, ax = plt.subplots(1, 2, figsize=(9.5, 3.3))
epochs = np.arange(1, args.epochs + 1)
ax[0].plot(epochs, logs["false_negative_rate"], "o-", label="false-negative rate (queue)")
ax[0].plot(epochs, logs["knn_accuracy"], "s-", label="kNN accuracy")
ax[0].set(xlabel="epoch", title="monitors during training")
ax[0].legend(fontsize=8)
names = [f"{lo:g}-{hi:g} %" for lo, hi in zip(edges[:-1], edges[1:])]
colors = ["C3", "C2", "C0", "C0"]
ax[1].bar(names, by_rank, color=colors)
ax[1].axhline(float(np.mean(y_test[:, None] == queue_labels[None, queue_labels >= 0])),
              color="grey", ls=":", label="all keys")
ax[1].set(xlabel="similarity rank of the queue key (green: Ring's band)",
          ylabel="false-negative rate", title="after training, held-out queries")
ax[1].legend(fontsize=8)
fig.tight_layout()
fig_path = os.path.join(args.output, "examples_moco_ring.png")
fig.savefig(fig_path, dpi=100)
print(f"plot: {fig_path}")
print(f"RESULT false-negative rate of the closest {args.lower:g} % of the queue "
      f"{by_rank[0]:.3f} vs {by_rank[2]:.3f} at {args.upper:g}-50 %; kNN "
      f"{logs['knn_accuracy'][-1]:.3f} ({time.perf_counter() - start_all:.0f} s)")
