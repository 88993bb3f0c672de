"""Lightly's SimCLR views, epoch by epoch, for the Keras side to train on (issue 32's
views swap): with the model, loss and optimizer at parity (``step_check.py``), training
ours on lightly's own views says whether the views are what costs the kNN points.

Run in the peers' virtualenv (torch, lightly), started by ``keras_side.py`` for a
``VIEWS_FROM_LIGHTLY`` variant::

    PEER/bin/python benchmarks/parity/lightly_views.py --data PACK.npz --seed 0 \\
        --first 1 --epochs 30 --batch-size 256 --out DIR

For each epoch ``e`` it shuffles the training images (a torch generator seeded by
``(seed, e)``, so a restarted producer draws the same epochs), drops the last partial
batch as lightly's benchmark does, applies ``SimCLRTransform(input_size=32,
cj_strength=0.5, gaussian_blur=0.0)`` to each Pillow image (torch's global RNG seeded by
``(seed, e)`` too) and writes ``DIR/epochEEE.npz`` (``view1``, ``view2``: uint8 ``[steps *
B, 32, 32, 3]``, the transform's normalisation undone and rounded back to the pixels
Pillow produced). It stays at most ``--ahead`` epochs ahead of the consumer, which deletes
each file when its epoch ends.
"""

import argparse
import os
import time

import numpy as np

#: Which of the transform's ops run (``--ops``): every op, the geometry alone, the colour
#: alone (the per-op swap of issue 32; ``ours_views.py`` takes the same choices).
OPS = ("all", "crop", "colour")
IMAGENET_MEAN = np.array((0.485, 0.456, 0.406), np.float32)
IMAGENET_STD = np.array((0.229, 0.224, 0.225), np.float32)


def epoch_path(folder: str, epoch: int) -> str:
    return os.path.join(folder, f"epoch{epoch:03d}.npz")


def to_pixels(view) -> np.ndarray:
    """A normalised ``[3, H, W]`` tensor back to the uint8 ``[H, W, 3]`` image it came from."""
    x = view.permute(1, 2, 0).numpy() * IMAGENET_STD + IMAGENET_MEAN
    return np.clip(np.rint(x * 255.0), 0, 255).astype(np.uint8)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, help="npz from benchmarks/parity/data.py")
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--first", type=int, default=1, help="first epoch to write (1-based)")
    p.add_argument("--epochs", type=int, default=30, help="last epoch to write")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--ahead", type=int, default=2, help="epoch files waiting at most")
    p.add_argument("--ops", choices=OPS, default="all",
                   help="all; crop (crop and flip only); colour (jitter and grey only)")
    args = p.parse_args()

    import torch
    from lightly.transforms import SimCLRTransform
    from PIL import Image

    torch.set_num_threads(1)
    kwargs = dict(input_size=32, cj_strength=0.5, gaussian_blur=0.0)
    if args.ops == "crop":
        kwargs.update(cj_prob=0.0, random_gray_scale=0.0)
    elif args.ops == "colour":  # the whole image (every crop draw fails), no flip
        kwargs.update(min_scale=1.0, hf_prob=0.0)
    transform = SimCLRTransform(**kwargs)
    with np.load(args.data) as f:
        x_train = f["x_train"]

    def draw(epoch: int, n: int) -> dict:
        torch.manual_seed(args.seed * 100003 + epoch)
        order = torch.randperm(len(x_train), generator=torch.Generator().manual_seed(
            args.seed * 100003 + epoch)).numpy()[:n]
        v1 = np.empty((n, 32, 32, 3), np.uint8)
        v2 = np.empty_like(v1)
        for row, i in enumerate(order):
            a, b = transform(Image.fromarray(x_train[i]))
            v1[row], v2[row] = to_pixels(a), to_pixels(b)
        return {"view1": v1, "view2": v2, "order": order}

    write_epochs(args, len(x_train), draw)


def write_epochs(args, num_images: int, draw) -> None:
    """Writes ``draw(epoch, n)`` (a dict of arrays over ``n`` = whole batches of the
    images) to ``epoch_path(args.out, epoch)`` for ``args.first..args.epochs``, at most
    ``args.ahead`` files ahead of the consumer (which deletes each when its epoch ends);
    files left by an earlier consumer before ``args.first`` are removed, existing ones kept.
    Shared by this producer and ``ours_views.py``."""
    os.makedirs(args.out, exist_ok=True)
    n = num_images // args.batch_size * args.batch_size
    for epoch in range(1, args.first):  # left by a consumer killed before it removed them
        if os.path.exists(epoch_path(args.out, epoch)):
            os.remove(epoch_path(args.out, epoch))
    for epoch in range(args.first, args.epochs + 1):
        if os.path.exists(epoch_path(args.out, epoch)):
            continue
        while sum(os.path.exists(epoch_path(args.out, e))
                  for e in range(args.first, epoch)) >= args.ahead:
            time.sleep(1.0)
        arrays = draw(epoch, n)
        tmp = epoch_path(args.out, epoch) + ".part.npz"
        np.savez(tmp, **arrays)
        os.replace(tmp, epoch_path(args.out, epoch))
        print(f"views of epoch {epoch} written", flush=True)


if __name__ == "__main__":
    main()
