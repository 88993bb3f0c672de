"""The parity benchmark's arrays: one decode of the CIFAR-10 JPEG folders, shared by both sides.

The first ``--train-per-class`` sorted JPEGs of each class of ``cifar10-jpg/train`` and the
first ``--test-per-class`` of ``cifar10-jpg/test``, decoded once with Pillow to RGB
``uint8 [n, 32, 32, 3]`` (classes in sorted folder order: label = position), saved as one
``.npz``. Both sides read these arrays, so neither JPEG decoder is in the comparison.

Needs only NumPy and Pillow (it runs in either virtualenv)::

    python benchmarks/parity/data.py --cifar ../shared/data/cifar10-jpg \\
        --out benchmarks/results/tmp/parity/cifar10_10k_2k.npz
"""

import argparse
import os

import numpy as np
from PIL import Image

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")


def read_split(folder: str, per_class: int) -> tuple[np.ndarray, np.ndarray]:
    """``(images uint8 [n, H, W, 3], labels int64 [n])`` of the first ``per_class`` sorted
    images of each sorted class folder."""
    classes = sorted(d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d)))
    if not classes:
        raise SystemExit(f"--cifar: no class folders in {folder!r}")
    images, labels = [], []
    for label, name in enumerate(classes):
        files = sorted(f for f in os.listdir(os.path.join(folder, name))
                       if f.lower().endswith(IMAGE_SUFFIXES))[:per_class]
        if len(files) < per_class:
            raise SystemExit(f"{folder}/{name}: {len(files)} images, fewer than {per_class}")
        for f in files:
            with Image.open(os.path.join(folder, name, f)) as im:
                images.append(np.asarray(im.convert("RGB"), dtype=np.uint8))
            labels.append(label)
    return np.stack(images), np.asarray(labels, np.int64)


def load(path: str) -> dict[str, np.ndarray]:
    """The arrays of a file written by this script (``x_train``, ``y_train``, ``x_test``,
    ``y_test``)."""
    with np.load(path) as f:
        return {k: f[k] for k in ("x_train", "y_train", "x_test", "y_test")}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cifar", default=os.path.join(os.path.dirname(__file__), "..", "..", "..",
                                                   "shared", "data", "cifar10-jpg"))
    p.add_argument("--train-per-class", type=int, default=1000)
    p.add_argument("--test-per-class", type=int, default=200)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    x_train, y_train = read_split(os.path.join(args.cifar, "train"), args.train_per_class)
    x_test, y_test = read_split(os.path.join(args.cifar, "test"), args.test_per_class)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    tmp = args.out + ".part.npz"
    np.savez(tmp, x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test)
    os.replace(tmp, args.out)
    print(f"{args.out}: train {x_train.shape}, test {x_test.shape}")


if __name__ == "__main__":
    main()
