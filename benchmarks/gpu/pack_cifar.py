"""Packs CIFAR-10 JPEGs into one file that travels to a GPU machine (~46 MB for the train split).

The GPU machine cannot read ../shared; the throughput benchmark reads this pack instead:
an ``.npz`` with ``jpeg`` (uint8, all files' bytes concatenated), ``offsets`` (int64
``[n + 1]``) and ``labels`` (int64 ``[n]``). Usage, from the repository root::

    python benchmarks/gpu/pack_cifar.py ../shared/data/cifar10-jpg/train .gpu_data/cifar10_train.npz

(put ``.gpu_data/`` in ``.git/info/exclude`` and carry it).
"""

import argparse
import os

import numpy as np


def pack(folder: str, output: str) -> int:
    classes = sorted(d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d)))
    chunks, labels = [], []
    for label, name in enumerate(classes):
        for file in sorted(os.listdir(os.path.join(folder, name))):
            with open(os.path.join(folder, name, file), "rb") as f:
                chunks.append(np.frombuffer(f.read(), np.uint8))
            labels.append(label)
    offsets = np.concatenate([[0], np.cumsum([len(c) for c in chunks])]).astype(np.int64)
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    np.savez(output, jpeg=np.concatenate(chunks), offsets=offsets,
             labels=np.asarray(labels, np.int64))
    return len(labels)


def load_pack(path: str):
    """``(list of JPEG byte strings, labels)`` of a pack."""
    with np.load(path) as z:
        data, offsets, labels = z["jpeg"], z["offsets"], z["labels"]
    return [data[offsets[i]:offsets[i + 1]].tobytes() for i in range(len(labels))], labels


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder")
    p.add_argument("output")
    a = p.parse_args()
    n = pack(a.folder, a.output)
    print(f"packed {n} images into {a.output} ({os.path.getsize(a.output) / 2**20:.1f} MiB)")
