"""Pre-train SimCLR with hard negatives (Robinson et al., ICLR 2021) on CIFAR-10 JPEG with a
narrow ResNet-18, printing the weighted kNN accuracy after every epoch.

    python examples/simclr_cifar10_hard.py --data ../shared/data/cifar10-jpg \
        --width 16 --epochs 3 --limit-per-class 1000

Uses the library directly (no recipe): data loading, augmentation inside the model, the
hard-negative loss, a kNN monitor on the test split, and a timing summary.
"""

import argparse
import os
import time

import keras

import keras_hardneg as khn


class Timer(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        seconds = time.perf_counter() - self.start
        images = self.params["steps"] * self.batch_size
        print(f"epoch {epoch + 1}: kNN accuracy {logs['knn_accuracy']:.4f}, loss {logs['loss']:.4f}, "
              f"{seconds:.1f} s, {images / seconds:.1f} images/s", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                       "shared", "data", "cifar10-jpg"))
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--limit-per-class", type=int, default=1000)
    parser.add_argument("--beta", type=float, default=1.0)
    parser.add_argument("--tau-plus", type=float, default=0.1)
    parser.add_argument("--precision", default="float32")
    args = parser.parse_args()

    keras.utils.set_random_seed(0)
    keras.config.set_dtype_policy(args.precision)
    x, y = khn.data.load_image_folder_arrays(os.path.join(args.data, "train"), image_size=(32, 32),
                                             limit_per_class=args.limit_per_class)
    x_test, y_test = khn.data.load_image_folder_arrays(os.path.join(args.data, "test"),
                                                       image_size=(32, 32), limit_per_class=200)
    print(f"train {x.shape}, test {x_test.shape}")

    encoder = khn.encoders.resnet18_cifar(width=args.width)
    model = khn.models.SimCLR(
        encoder, projection_dims=(512, 128),
        augmentation=khn.augment.simclr_augmentation(image_size=32, strength=0.5, seed=0))
    steps = len(x) // args.batch_size
    schedule = khn.optimizers.WarmupCosineDecay(1e-3, total_steps=steps * args.epochs,
                                                warmup_steps=steps)
    model.compile(optimizer=keras.optimizers.Adam(schedule),
                  loss=khn.losses.HardNegativeContrastiveLoss(
                      temperature=0.5, tau_plus=args.tau_plus, beta=args.beta))

    monitor = khn.callbacks.KNNMonitor((x, y), (x_test, y_test), k=200, temperature=0.1)
    timer = Timer()
    timer.batch_size = args.batch_size
    start = time.perf_counter()
    model.fit(x, y, batch_size=args.batch_size, epochs=args.epochs, shuffle=True, verbose=0,
              callbacks=[monitor, timer])
    total = time.perf_counter() - start
    print(f"done: {args.epochs} epochs in {total:.1f} s "
          f"({args.epochs * steps * args.batch_size / total:.1f} training images/s incl. monitor)")
    print("kNN accuracy per epoch:", [round(a, 4) for _, a in monitor.history])
    feats = khn.evaluation.extract_features(model.encoder, x)
    feats_test = khn.evaluation.extract_features(model.encoder, x_test)
    print(f"linear probe: {khn.evaluation.linear_probe_accuracy(feats, y, feats_test, y_test):.4f}")


if __name__ == "__main__":
    main()
