"""
Title: SimCLR with hard negatives under JAX, data-parallel with keras.distribution
Shows: the same SimCLR + hard-negative pre-training as `simclr_cifar10_hard.py`, under
    `KERAS_BACKEND=jax` (no TensorFlow imported: the step, augmentation included, is one
    XLA program) and `keras.distribution.DataParallel` over every local device: each
    device gets its share of the batch, the loss sees the global batch's negatives. On a
    CPU the example asks XLA for 2 host devices, so the data parallelism is real here too.
Run time: 3 min 09 s (CPU 2 min 20 s) with the defaults (2,000 CIFAR-10 images, ResNet-18
    width 8, 3 epochs, 2 CPU devices) on 2 CPU cores shared with another job's benchmarks;
    `--smoke` (tiny data, a small ConvNet) is what the test suite runs. Needs `jax` (the
    [jax] extra).

    python examples/simclr_jax_data_parallel.py
    python examples/simclr_jax_data_parallel.py --limit-per-class 5000 --epochs 50  # on GPUs
    python examples/simclr_jax_data_parallel.py --smoke
"""

import os

# The backend (and, on a CPU, the number of host devices) is chosen before Keras loads.
os.environ["KERAS_BACKEND"] = "jax"
if "--xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_force_host_platform_device_count=2").strip()

import argparse  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_hardneg as khn  # noqa: E402


parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
parser.add_argument("--data", default="cifar10",
                    help="CIFAR-10 (default: fetched once into ~/.keras/datasets, as keras.datasets does) or an image folder with train/ and test/")
parser.add_argument("--output", default="runs/examples/simclr_jax")
parser.add_argument("--limit-per-class", type=int, default=200)
parser.add_argument("--width", type=int, default=8)
parser.add_argument("--encoder", choices=("resnet18", "small_convnet"), default="resnet18",
                    help="a CIFAR ResNet-18 or a 3-layer ConvNet (what --smoke uses)")
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--batch-size", type=int, default=128, help="global batch")
parser.add_argument("--smoke", action="store_true", help="tiny settings: checks the example runs")
args = parser.parse_args()
if args.smoke:
    args.limit_per_class, args.width, args.epochs, args.batch_size = 4, 4, 1, 20
    args.encoder = "small_convnet"
if min(args.limit_per_class, args.width, args.epochs, args.batch_size) < 1:
    parser.error("--limit-per-class, --width, --epochs and --batch-size must be >= 1")
# keras.utils.set_random_seed would also seed TensorFlow -- importing it, when installed --
# so seed Python's and NumPy's generators (Keras draws its default seeds from Python's).
random.seed(0)
np.random.seed(0)
os.makedirs(args.output, exist_ok=True)
start_all = time.perf_counter()

"""
## The distribution

`DataParallel()` takes every local device (GPUs, TPU cores, or here the host devices XLA
was asked for) and splits each global batch across them. The global batch must divide
evenly.
"""

devices = jax.devices()
keras.distribution.set_distribution(keras.distribution.DataParallel())
batch_size = args.batch_size - args.batch_size % len(devices)
print(f"backend {keras.backend.backend()}, {len(devices)} devices: "
      f"{[str(d) for d in devices]}; global batch {batch_size}")

with khn.data.fetch.exit_on_fetch_error(parser.prog):  # one line, not a traceback
    (x, y), (x_test, y_test), _ = khn.data.load_dataset(
        args.data, image_size=32, limit_per_class=args.limit_per_class,
        test_limit_per_class=max(2, args.limit_per_class // 4))
steps = len(x) // batch_size  # full batches only: every device gets the same share
x, y = x[:steps * batch_size], y[:steps * batch_size]

"""
## The model: the same code as under TensorFlow

`compile` jit-compiles the step under JAX by default.
"""

encoder = (khn.encoders.resnet18_cifar(input_shape=(32, 32, 3), width=args.width)
           if args.encoder == "resnet18" else
           khn.encoders.small_convnet((32, 32, 3), width=args.width))
model = khn.models.SimCLR(
    encoder, projection_dims=(256, 64),
    augmentation=khn.augment.simclr_augmentation(image_size=32, strength=0.5, seed=0))
total = steps * args.epochs
model.compile(optimizer=keras.optimizers.Adam(khn.optimizers.WarmupCosineDecay(
                  1e-3, total_steps=total, warmup_steps=total // 10)),
              loss=khn.losses.HardNegativeContrastiveLoss(temperature=0.5, tau_plus=0.1,
                                                          beta=1.0))


class Throughput(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.t0 = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        seconds = time.perf_counter() - self.t0
        print(f"epoch {epoch + 1}: loss {logs['loss']:.4f}, kNN {logs['knn_accuracy']:.4f}, "
              f"{seconds:.1f} s ({len(x) / seconds:.0f} images/s incl. the monitor"
              f"{', and the compilation' if epoch == 0 else ''})", flush=True)


monitor = khn.callbacks.KNNMonitor((x, y), (x_test, y_test), k=200, temperature=0.1)
history = model.fit(x, y, batch_size=batch_size, epochs=args.epochs, shuffle=True, verbose=0,
                    callbacks=[monitor, Throughput()])
logs = history.history

"""
## Save under JAX, use anywhere

Weights saved under JAX load under TensorFlow (and the reverse); export a TF Hub SavedModel
from a TensorFlow process.
"""

weights = os.path.join(args.output, "simclr_jax.weights.h5")
model.save_weights(weights)

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

fig, ax = plt.subplots(figsize=(4.5, 3.2))
epochs = np.arange(1, args.epochs + 1)
ax.plot(epochs, logs["loss"], "o-", label="loss")
ax.set(xlabel="epoch", ylabel="hard-negative loss",
       title=f"SimCLR under JAX, {len(devices)} devices")
ax2 = ax.twinx()
ax2.plot(epochs, logs["knn_accuracy"], "s-", color="C1", label="kNN accuracy")
ax2.set_ylabel("kNN accuracy")
fig.tight_layout()
fig_path = os.path.join(args.output, "examples_simclr_jax.png")
fig.savefig(fig_path, dpi=100)
print(f"plot: {fig_path}; weights: {weights}")
print(f"TensorFlow imported in this process: {'tensorflow' in sys.modules}")
print(f"RESULT JAX DataParallel over {len(devices)} devices: kNN accuracy "
      f"{logs['knn_accuracy'][-1]:.4f} after {args.epochs} epochs "
      f"({time.perf_counter() - start_all:.0f} s)")
