"""Recipe parity (issue 32): statistics of the two sides' SimCLR views of the same images.

Each side makes two views of the first N training images of the parity pack, one process
per side (``--side lightly`` in the peers' virtualenv: ``SimCLRTransform(input_size=32,
cj_strength=0.5, gaussian_blur=0.0)`` on Pillow images, un-normalised back to [0, 1];
``--side keras``: :class:`keras_hardneg.augment.simclr.SimCLRAugmentation` as the parity
recipe builds it, version v2, strength 1). Printed as one JSON line: per view the mean,
the per-image standard deviation, the saturation (max - min over channels), the share of
grey images, of pixels at 0 and at 1, the mean horizontal gradient; for the pair the mean
Pearson correlation of the two views of an image and their mean squared difference (how
far apart the positives are). ``--mode geometry`` keeps the crop and flip only,
``--mode colour`` the colour ops only (whole image, no flip).

``--crop-boxes integer`` (Keras side) samples the crop as torchvision does
(``SimCLRAugmentation(crop_boxes="integer")``: a box of whole pixels, resized with
half-pixel centres inside it); the default samples a box of real size and offset, pixel
centre to pixel centre.

    python benchmarks/parity/view_stats.py --side keras --mode geometry --seed 1
    ../peer-venv/bin/python benchmarks/parity/view_stats.py --side lightly --mode geometry --seed 1

``--save FILE`` also writes the views (``view1``, ``view2``, float32 in [0, 1]) for
``view_loss.py``, which scores how hard they are for a trained encoder.
"""

import argparse
import json
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(ROOT, "benchmarks", "results", "tmp", "parity", "cifar10_10k_2k.npz")
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406])
IMAGENET_STD = np.array([0.229, 0.224, 0.225])


def lightly_views(x, mode, seed):
    import random

    import torch
    from lightly.transforms import SimCLRTransform
    from PIL import Image

    torch.manual_seed(seed)
    random.seed(seed)
    torch.set_num_threads(1)
    kwargs = dict(input_size=32, cj_strength=0.5, gaussian_blur=0.0)
    if mode == "geometry":
        kwargs.update(cj_prob=0.0, random_gray_scale=0.0)
    elif mode == "colour":
        kwargs.update(min_scale=1.0, hf_prob=0.0)
    transform = SimCLRTransform(**kwargs)
    views = ([], [])
    for image in x:
        for out, view in zip(views, transform(Image.fromarray(image))):
            out.append(view.numpy().transpose(1, 2, 0) * IMAGENET_STD + IMAGENET_MEAN)
    return np.stack(views[0]), np.stack(views[1])


def keras_views(x, mode, seed, contrast_mean, exact, crop_boxes):
    from keras_hardneg.augment.simclr import SimCLRAugmentation

    kwargs = dict(image_size=32, version="v2", strength=1.0, contrast_mean=contrast_mean,
                  exact_color_jitter=exact, crop_boxes=crop_boxes, seed=seed)
    if mode == "geometry":
        kwargs.update(jitter_prob=0.0, grayscale_prob=0.0)
    elif mode == "colour":
        kwargs.update(crop_scale=(1.0, 1.0), flip=False)
    aug = SimCLRAugmentation(**kwargs)
    xf = x.astype("float32") / 255.0
    return tuple(np.concatenate([np.asarray(aug(xf[i:i + 250], view=v))
                                 for i in range(0, len(xf), 250)]) for v in (1, 2))


def stats(v):
    sat = v.max(-1) - v.min(-1)
    return {"mean": float(v.mean()), "image_std": float(v.reshape(len(v), -1).std(1).mean()),
            "saturation": float(sat.mean()),
            "grey_share": float((sat.reshape(len(v), -1).max(1) < 1e-3).mean()),
            "at_0": float((v <= 1e-4).mean()), "at_1": float((v >= 1 - 1e-4).mean()),
            "gradient": float(np.abs(np.diff(v, axis=2)).mean())}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--side", choices=("keras", "lightly"), required=True)
    p.add_argument("--mode", choices=("all", "geometry", "colour"), default="all")
    p.add_argument("--images", type=int, default=4000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--contrast-mean", choices=("gray", "channel"), default="gray")
    p.add_argument("--exact-color-jitter", action="store_true")
    p.add_argument("--crop-boxes", choices=("continuous", "integer"), default="continuous")
    p.add_argument("--data", default=DATA)
    p.add_argument("--save", help="also write the views to this .npz (for view_loss.py)")
    args = p.parse_args()
    with np.load(args.data) as f:
        x = f["x_train"][:args.images]
    if args.side == "lightly":
        v1, v2 = lightly_views(x, args.mode, args.seed)
    else:
        v1, v2 = keras_views(x, args.mode, args.seed, args.contrast_mean,
                             args.exact_color_jitter, args.crop_boxes)
    if args.save:
        np.savez(args.save, view1=v1.astype(np.float32), view2=v2.astype(np.float32))
    a = v1.reshape(len(v1), -1) - v1.reshape(len(v1), -1).mean(1, keepdims=True)
    b = v2.reshape(len(v2), -1) - v2.reshape(len(v2), -1).mean(1, keepdims=True)
    corr = (a * b).sum(1) / np.sqrt((a * a).sum(1) * (b * b).sum(1) + 1e-12)
    print(json.dumps({"side": args.side, "mode": args.mode, "seed": args.seed,
                      "images": len(x), "options": {k: v for k, v in vars(args).items()
                                                    if k not in ("side", "mode", "seed",
                                                                 "images", "data")},
                      "views_corr": round(float(corr.mean()), 4),
                      "views_mse": round(float(((v1 - v2) ** 2).mean()), 4),
                      "view1": {k: round(v, 4) for k, v in stats(v1).items()},
                      "view2": {k: round(v, 4) for k, v in stats(v2).items()}}))


if __name__ == "__main__":
    main()
