"""How hard two pipelines' positives are for a trained encoder (issue 32): NT-Xent of
the encoder's features of saved views (``view_stats.py --save``), batch by batch.

A 30-epoch cell takes ~95 CPU-minutes here; this takes seconds, so a change to the views
can be measured before it is trained on. The encoder is a zoo entry trained on CIFAR-10
(default ``simclr-ntxent-cifar10-r18w8-cpu``), in inference mode; its features are
L2-normalised and scored with ``NTXentLoss(temperature)`` in batches of ``--batch``
(the same images in the same batches for every file: the files must hold the same images
in the same order). Lower loss, higher positive cosine: easier positives. ::

    python benchmarks/parity/view_loss.py ours.npz lightly.npz
"""

import argparse
import json

import numpy as np


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("views", nargs="+", help=".npz files from view_stats.py --save")
    p.add_argument("--entry", default="simclr-ntxent-cifar10-r18w8-cpu")
    p.add_argument("--temperature", type=float, default=0.5)
    p.add_argument("--batch", type=int, default=256)
    args = p.parse_args()

    import keras_hardneg as khn
    from keras_hardneg.evaluation import extract_features

    encoder = khn.zoo.load(args.entry, trainable=False)
    loss = khn.losses.NTXentLoss(temperature=args.temperature)
    for path in args.views:
        with np.load(path) as z:
            v1, v2 = z["view1"], z["view2"]
        f1, f2 = (extract_features(encoder, v) for v in (v1, v2))
        f1 /= np.linalg.norm(f1, axis=1, keepdims=True)
        f2 /= np.linalg.norm(f2, axis=1, keepdims=True)
        n = len(f1) // args.batch * args.batch
        losses = [float(loss(f1[i:i + args.batch], f2[i:i + args.batch]))
                  for i in range(0, n, args.batch)]
        print(json.dumps({"views": path, "entry": args.entry, "images": int(n),
                          "ntxent": round(float(np.mean(losses)), 4),
                          "positive_cosine": round(float((f1 * f2).sum(1).mean()), 4)}),
              flush=True)


if __name__ == "__main__":
    main()
