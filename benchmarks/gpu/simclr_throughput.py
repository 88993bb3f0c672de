"""SimCLR ResNet-18 (CIFAR stem, head 512-512-128) training throughput: keras-hardneg under
JAX against the same network in PyTorch with lightly, back to back on one machine.

Runs without TensorFlow (the GPU machines have JAX and PyTorch, no TF). Every configuration
runs in its own subprocess (dtype policies and frameworks are process-global), all in one
invocation, and the script prints pairs/s and the ratios:

* ``khn``: ``khn.models.SimCLR`` trained by ``fit`` under ``KERAS_BACKEND=jax``, NT-Xent,
  SGD; ``--aug on``: the library's SimCLR augmentation inside the compiled step (uint8
  batches in); ``--aug off``: views given (the batch and its flip).
* ``lightly``: torchvision ResNet-18 with the CIFAR stem + lightly's ``SimCLRProjectionHead``
  and ``NTXentLoss``; ``--aug off``: step only, views already on the GPU; ``--aug on``:
  lightly's own input path (``SimCLRTransform`` in a ``DataLoader`` with ``--workers``).

Data: a CIFAR-10 pack made by ``pack_cifar.py`` (``--pack``), decoded once for the Keras
side and per item by the DataLoader (as lightly's users train); without ``--pack``, random
images (the loader path then needs none).

Usage (GPU machine, from the repository root, after installing the carried wheels)::

    python benchmarks/gpu/simclr_throughput.py --pack .gpu_data/cifar10_train.npz \\
        --batches 256,512 --precisions float32,mixed_bfloat16 --aug on,off \\
        --steps 50 --warmup 10 --output $OUT/simclr_throughput.json

Smoke run on a CPU: ``--batches 8 --steps 2 --warmup 1 --width 8 --frameworks khn``.
"""

import argparse
import itertools
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _images(args, n):
    """``uint8 [n, 32, 32, 3]`` from the pack (decoded with Pillow) or random."""
    import numpy as np

    if not args.pack:
        return np.random.default_rng(0).integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)
    import io

    from PIL import Image

    sys.path.insert(0, HERE)
    from pack_cifar import load_pack

    jpegs, _ = load_pack(args.pack)
    return np.stack([np.asarray(Image.open(io.BytesIO(b)).convert("RGB"))
                     for b in jpegs[:n]])


def run_khn(args):
    os.environ.setdefault("KERAS_BACKEND", "jax")
    import keras
    import numpy as np

    sys.path.insert(0, ROOT)
    import keras_hardneg as khn

    keras.config.set_dtype_policy(args.precision)
    keras.utils.set_random_seed(0)
    b = args.batch
    encoder = khn.encoders.resnet18_cifar(width=args.width)
    aug = khn.augment.simclr_augmentation(image_size=32, seed=0) if args.aug == "on" else None
    model = khn.models.SimCLR(encoder, projection_dims=(512, 128), augmentation=aug)
    model.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.9),
                  loss=khn.losses.NTXentLoss(temperature=0.5), jit_compile=True)
    steps = args.warmup + args.steps
    x = _images(args, b * min(steps, 20))
    if args.aug == "on":
        data = x  # uint8 images; the model draws the two views inside the compiled step
    else:
        v = x.astype("float32") / 255.0
        data = {"view1": v, "view2": v[:, :, ::-1]}

    def batches():
        i = 0
        n = len(x) // b
        while True:
            sl = slice((i % n) * b, (i % n + 1) * b)
            yield ({k: v[sl] for k, v in data.items()} if isinstance(data, dict) else data[sl],)
            i += 1

    class Feed(keras.utils.PyDataset):
        def __len__(self):
            return steps

        def __getitem__(self, i):
            return next(it)

    it = batches()
    t0 = time.perf_counter()
    model.fit(Feed(), epochs=1, steps_per_epoch=args.warmup, verbose=0)
    warm = time.perf_counter() - t0
    t0 = time.perf_counter()
    hist = model.fit(Feed(), epochs=1, steps_per_epoch=args.steps, verbose=0)
    seconds = time.perf_counter() - t0  # fit returns after the last step's values are read
    return {"seconds": seconds, "warmup_seconds": warm,
            "final_loss": float(hist.history["loss"][-1]),
            "device": str(__import__("jax").devices()[0])}


def _torch_model(width):
    import torch
    import torchvision
    from lightly.models.modules import SimCLRProjectionHead

    net = torchvision.models.resnet18()
    if width != 64:
        raise SystemExit("the torchvision ResNet-18 has width 64 only; use --width 64")
    net.conv1 = torch.nn.Conv2d(3, 64, 3, 1, 1, bias=False)  # CIFAR stem
    net.maxpool = torch.nn.Identity()
    net.fc = torch.nn.Identity()
    return torch.nn.Sequential(net, SimCLRProjectionHead(512, 512, 128))


def run_lightly(args):
    import numpy as np
    import torch
    from lightly.loss import NTXentLoss

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = _torch_model(args.width).to(device).to(memory_format=torch.channels_last)
    criterion = NTXentLoss(temperature=0.5)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    dtype = torch.bfloat16 if args.precision == "mixed_bfloat16" else None
    b = args.batch

    def step(v1, v2):
        with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
            z = model(torch.cat([v1, v2]))
            loss = criterion(*z.float().chunk(2))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    if args.aug == "off":  # step only: views already on the device
        x = torch.from_numpy(_images(args, b)).permute(0, 3, 1, 2).float().div(255).to(device)
        x = x.contiguous(memory_format=torch.channels_last)
        views = [(x, x.flip(3))] * (args.warmup + args.steps)
    else:  # lightly's own input path: SimCLRTransform in a DataLoader
        from lightly.transforms import SimCLRTransform
        from PIL import Image

        images = _images(args, max(b * (args.warmup + args.steps), b))
        transform = SimCLRTransform(input_size=32, gaussian_blur=0.0)

        class DS(torch.utils.data.Dataset):
            def __len__(self):
                return len(images)

            def __getitem__(self, i):
                return transform(Image.fromarray(images[i]))

        loader = torch.utils.data.DataLoader(DS(), batch_size=b, shuffle=True, drop_last=True,
                                             num_workers=args.workers, pin_memory=True,
                                             persistent_workers=args.workers > 0)
        views = ((v1.to(device, non_blocking=True), v2.to(device, non_blocking=True))
                 for v1, v2 in itertools.cycle(loader))
    it = iter(views)
    for _ in range(args.warmup):
        step(*next(it))
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        loss = step(*next(it))
    final = float(loss)  # synchronises
    return {"seconds": time.perf_counter() - t0, "final_loss": final, "device": device,
            "workers": args.workers if args.aug == "on" else None}


def child(args):
    out = run_khn(args) if args.framework == "khn" else run_lightly(args)
    out.update(framework=args.framework, batch=args.batch, precision=args.precision,
               aug=args.aug, steps=args.steps, width=args.width,
               pairs_per_second=args.batch * args.steps / out["seconds"])
    print("RESULT " + json.dumps(out), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--frameworks", default="khn,lightly")
    p.add_argument("--batches", default="256,512")
    p.add_argument("--precisions", default="float32,mixed_bfloat16")
    p.add_argument("--aug", default="on,off")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    p.add_argument("--pack", help="CIFAR-10 pack from pack_cifar.py (default: random images)")
    p.add_argument("--output")
    p.add_argument("--framework", help=argparse.SUPPRESS)
    p.add_argument("--batch", type=int, help=argparse.SUPPRESS)
    p.add_argument("--precision", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.framework:
        return child(args)
    results = []
    for batch, precision, aug, fw in itertools.product(
            map(int, args.batches.split(",")), args.precisions.split(","), args.aug.split(","),
            args.frameworks.split(",")):
        cmd = [sys.executable, __file__, "--framework", fw, "--batch", str(batch), "--precision",
               precision, "--aug", aug, "--steps", str(args.steps), "--warmup", str(args.warmup),
               "--width", str(args.width), "--workers", str(args.workers)]
        cmd += ["--pack", args.pack] if args.pack else []
        proc = subprocess.run(cmd, capture_output=True, text=True,
                              env={**os.environ, "KERAS_BACKEND": "jax"})
        line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        if proc.returncode or not line:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            res = {"framework": fw, "batch": batch, "precision": precision, "aug": aug,
                   "error": " | ".join(tail)}
        else:
            res = json.loads(line[-1][len("RESULT "):])
        results.append(res)
        print(json.dumps(res), flush=True)
    print("\nbatch precision aug  khn pairs/s  lightly pairs/s  ratio")
    for batch, precision, aug in itertools.product(
            map(int, args.batches.split(",")), args.precisions.split(","), args.aug.split(",")):
        row = {r["framework"]: r.get("pairs_per_second") for r in results
               if (r["batch"], r["precision"], r["aug"]) == (batch, precision, aug)}
        k, t = row.get("khn"), row.get("lightly")
        ratio = f"{k / t:.2f}" if k and t else "-"
        print(f"{batch:5d} {precision:15s} {aug:3s} {k or float('nan'):11.0f} "
              f"{t or float('nan'):15.0f}  {ratio}")
    if args.output:
        with open(args.output, "w") as f:
            json.dump({"machine": platform.platform(), "command": " ".join(sys.argv),
                       "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
