"""Recipe parity (issue 32): our augmentation, op by op and as the training step draws it,
against torchvision's (what lightly's ``SimCLRTransform`` calls).

Two steps, one process per side (the peers' virtualenv for torchvision)::

    python benchmarks/parity/op_check.py keras --variant all_lightly --out /tmp/ops.npz
    ../peer-venv/bin/python benchmarks/parity/op_check.py torch --out /tmp/ops.npz

``keras`` writes, for the first 300 training images of the parity pack: each colour op
alone at fixed factors (brightness 1.3, contrast 1.3 around the grey mean, saturation 0.7,
hue +0.05 / -0.08, grey) as our layer computes them; the crop geometry of 8,192 draws of
the variant's random resized crop (no colour, no flip) on a coordinate image (channel 0 =
8 x column, channel 1 = 8 x row): each view's centre and extent; and, for the first 4,096
images, the two views the variant's *model* makes inside a ``tf.function`` (the training
step's path, not the layer called eagerly as ``view_stats.py`` does): the mean
correlation of an image's two views and their per-view statistics. ``torch`` computes the
same ops with ``torchvision.transforms.functional`` on Pillow images, the crop geometry
with ``RandomResizedCrop(32, scale=(0.08, 1))``, and prints one JSON line: per op the mean
absolute difference (in 1/255) and the signed mean (Pillow truncates after each op), the
crop statistics' quantiles side by side, and the in-step views' correlation.
"""

import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(ROOT, "benchmarks", "results", "tmp", "parity", "cifar10_10k_2k.npz")
FACTORS = {"brightness": 1.3, "contrast": 1.3, "saturation": 0.7}
HUES = (0.05, -0.08)
CROP_DRAWS = 8192


def coordinate_image() -> np.ndarray:
    rows, cols = np.meshgrid(np.arange(32), np.arange(32), indexing="ij")
    return np.stack([cols * 8, rows * 8, np.full_like(cols, 128)], -1).astype(np.uint8)


def geometry(views: np.ndarray) -> dict:
    """Centre and extent (in pixels) of each view of the coordinate image."""
    c = views.astype(np.float64) / 8.0
    return {"centre_x": c[..., 0].mean((1, 2)), "centre_y": c[..., 1].mean((1, 2)),
            "width": c[..., 0].max((1, 2)) - c[..., 0].min((1, 2)),
            "height": c[..., 1].max((1, 2)) - c[..., 1].min((1, 2))}


def keras_side(args) -> None:
    sys.path.insert(0, HERE)
    sys.path.insert(0, ROOT)
    import tensorflow as tf
    from keras import ops

    from keras_hardneg.augment.simclr import SimCLRAugmentation, _clip01, _to_gray
    from keras_hardneg.run import build_model, load_recipe
    from keras_side import recipe_for
    from view_stats import stats

    with np.load(args.data) as f:
        pack = f["x_train"][:4096]
    x = pack[:300].astype("float32") / 255.0
    out = {}
    out["brightness"] = _clip01(x * FACTORS["brightness"])
    mean = ops.mean(_to_gray(x), axis=(1, 2), keepdims=True)
    out["contrast"] = _clip01((x - mean) * FACTORS["contrast"] + mean)
    grey = _to_gray(x)
    out["saturation"] = _clip01(grey + (x - grey) * FACTORS["saturation"])
    out["grey"] = ops.repeat(grey, 3, axis=-1)
    hsv = ops.image.rgb_to_hsv(x, data_format="channels_last")
    for h in HUES:
        rgb = ops.image.hsv_to_rgb(ops.stack([ops.mod(hsv[..., 0] + h, 1.0), hsv[..., 1],
                                              hsv[..., 2]], axis=-1),
                                   data_format="channels_last")
        out[f"hue{h:+.2f}"] = _clip01(rgb)
    out = {k: np.asarray(v, np.float32) for k, v in out.items()}

    recipe = load_recipe(recipe_for(args.variant, 0, 30))
    aug_cfg = recipe["augmentation"]
    crop = SimCLRAugmentation(image_size=32, version=aug_cfg["version"],
                              crop_boxes=aug_cfg.get("crop_boxes", "continuous"),
                              jitter_prob=0.0, grayscale_prob=0.0, flip=False, seed=1)
    coords = np.repeat(coordinate_image()[None], 256, 0).astype("float32") / 255.0
    views = np.concatenate([np.asarray(crop(coords, view=1))
                            for _ in range(CROP_DRAWS // 256)]) * 255.0
    for k, v in geometry(views).items():
        out[f"crop_{k}"] = v

    model = build_model(recipe, input_shape=(32, 32, 3), num_examples=len(pack))
    step_views = tf.function(lambda b: model.make_views(b, training=True)[:2])
    v1, v2 = (np.concatenate(parts) for parts in zip(*[
        tuple(np.asarray(v) for v in step_views(pack[i:i + 256].astype("float32") / 255.0))
        for i in range(0, len(pack), 256)]))
    a = v1.reshape(len(v1), -1) - v1.reshape(len(v1), -1).mean(1, keepdims=True)
    b = v2.reshape(len(v2), -1) - v2.reshape(len(v2), -1).mean(1, keepdims=True)
    corr = (a * b).sum(1) / np.sqrt((a * a).sum(1) * (b * b).sum(1) + 1e-12)
    meta = {"variant": args.variant, "augmentation": aug_cfg,
            "step_views_corr": round(float(corr.mean()), 4),
            "step_view1": {k: round(v, 4) for k, v in stats(v1).items()}}
    np.savez(args.out, meta=json.dumps(meta, default=str), **out)
    print(json.dumps(meta, default=str))


def torch_side(args) -> None:
    import torch
    import torchvision.transforms as T
    import torchvision.transforms.functional as F
    from PIL import Image

    ours = np.load(args.out)
    meta = json.loads(str(ours["meta"]))
    with np.load(args.data) as f:
        images = [Image.fromarray(im) for im in f["x_train"][:300]]
    ops = {"brightness": lambda im: F.adjust_brightness(im, FACTORS["brightness"]),
           "contrast": lambda im: F.adjust_contrast(im, FACTORS["contrast"]),
           "saturation": lambda im: F.adjust_saturation(im, FACTORS["saturation"]),
           "grey": lambda im: F.rgb_to_grayscale(im, 3)}
    ops.update({f"hue{h:+.2f}": (lambda im, h=h: F.adjust_hue(im, h)) for h in HUES})
    result = {"variant": meta["variant"], "ops": {}}
    for name, op in ops.items():
        theirs = np.stack([np.asarray(op(im)) for im in images]).astype(np.float32) / 255.0
        diff = (theirs - ours[name]) * 255.0
        result["ops"][name] = {"mean_abs": round(float(np.abs(diff).mean()), 3),
                               "signed_mean": round(float(diff.mean()), 3),
                               "p99_abs": round(float(np.percentile(np.abs(diff), 99)), 2)}
    torch.manual_seed(1)
    crop = T.RandomResizedCrop(32, scale=(0.08, 1.0))
    coords = Image.fromarray(coordinate_image())
    theirs = geometry(np.stack([np.asarray(crop(coords)) for _ in range(CROP_DRAWS)]))
    q = (5, 25, 50, 75, 95)
    result["crop"] = {k: {"ours": [round(float(v), 2) for v in np.percentile(ours[f"crop_{k}"], q)]
                          + [round(float(ours[f"crop_{k}"].mean()), 3)],
                          "torchvision": [round(float(v), 2) for v in np.percentile(theirs[k], q)]
                          + [round(float(theirs[k].mean()), 3)]}
                      for k in theirs}
    result["crop_columns"] = [f"p{p}" for p in q] + ["mean"]
    result["step_views_corr"] = meta["step_views_corr"]
    result["step_view1"] = meta["step_view1"]
    print(json.dumps(result))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("side", choices=("keras", "torch"))
    p.add_argument("--variant", default="all_lightly", help="keras_side.py's variant")
    p.add_argument("--out", required=True, help=".npz the keras step writes, torch reads")
    p.add_argument("--data", default=DATA)
    args = p.parse_args()
    keras_side(args) if args.side == "keras" else torch_side(args)


if __name__ == "__main__":
    main()
