"""Our SimCLR views, epoch by epoch, written exactly as ``lightly_views.py`` writes
lightly's (issue 32's delivery control): ``lightly_views_fed`` trains our model on
lightly's views fed from files; ``ours_views_fed`` trains the same model on views *our*
layer draws, fed the same way. If the second tracks ``all_lightly`` (our layer inside the
step), what lifted the first is the views' content; if it tracks ``lightly_views_fed``,
it is the way the views reach the step.

Started by ``keras_side.py`` for an ``ours_views_fed`` cell (any Python with the package)::

    python benchmarks/parity/ours_views.py --data PACK.npz --variant all_lightly --seed 0 \\
        --first 1 --epochs 30 --batch-size 256 --out DIR

For each epoch ``e``: a permutation of the training images (NumPy, seeded by ``(seed,
e)``), the last partial batch dropped, and two views of each image by
:class:`keras_hardneg.augment.simclr.SimCLRAugmentation` with the variant's augmentation
keys, seeded by ``(seed, e)`` (so a restarted producer draws the same epochs), drawn
eagerly 256 images at a time and rounded to uint8 as lightly's views are; written to
``DIR/epochEEE.npz`` (``view1``, ``view2``, ``order``), at most ``--ahead`` epochs ahead of
the consumer, which deletes each file when its epoch ends.
"""

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, help="npz from benchmarks/parity/data.py")
    p.add_argument("--out", required=True)
    p.add_argument("--variant", default="all_lightly",
                   help="keras_side.py variant whose augmentation keys draw the views")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--first", type=int, default=1, help="first epoch to write (1-based)")
    p.add_argument("--epochs", type=int, default=30, help="last epoch to write")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--ahead", type=int, default=2, help="epoch files waiting at most")
    p.add_argument("--ops", choices=("all", "crop", "colour"), default="all",
                   help="all; crop (crop and flip only); colour (jitter and grey only)")
    args = p.parse_args()

    sys.path.insert(0, HERE)
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    from keras_hardneg.augment.simclr import SimCLRAugmentation
    from keras_side import recipe_for
    from lightly_views import write_epochs

    keys = {k: v for k, v in recipe_for(args.variant, args.seed, args.epochs)[
        "augmentation"].items() if k != "name"}
    if "crop_scale" in keys:
        keys["crop_scale"] = tuple(keys["crop_scale"])
    if args.ops == "crop":
        keys.update(jitter_prob=0.0, grayscale_prob=0.0)
    elif args.ops == "colour":  # the whole image, no flip
        keys.update(crop_scale=(1.0, 1.0), flip=False)
    with np.load(args.data) as f:
        x_train = f["x_train"]

    def draw(epoch: int, n: int) -> dict:
        seed = args.seed * 100003 + epoch
        order = np.random.default_rng(seed).permutation(len(x_train))[:n]
        aug = SimCLRAugmentation(image_size=x_train.shape[1], seed=seed, **keys)
        views = {"view1": np.empty((n,) + x_train.shape[1:], np.uint8)}
        views["view2"] = np.empty_like(views["view1"])
        for start in range(0, n, args.batch_size):
            rows = order[start:start + args.batch_size]
            x = x_train[rows].astype("float32") / 255.0
            for v in (1, 2):
                drawn = np.asarray(aug(x, view=v))
                views[f"view{v}"][start:start + len(rows)] = np.clip(
                    np.rint(drawn * 255.0), 0, 255).astype(np.uint8)
        return {**views, "order": order}

    write_epochs(args, len(x_train), draw)


if __name__ == "__main__":
    main()
