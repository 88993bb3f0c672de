"""The lightly side of the parity benchmark: SimCLR on CIFAR-10 as lightly's CIFAR-10
benchmark trains it, in PyTorch, written here from lightly's documentation and API.

Run with the peers' virtualenv (torch, torchvision, lightly; never the package's), one
thread::

    PEER/bin/python benchmarks/parity/lightly_side.py --data DATA.npz --seed 0 --out DIR

What it trains (lightly 1.6's SimCLR CIFAR-10 benchmark recipe, at the benchmark's scale):

* ResNet-18 with the CIFAR stem (3x3 stride-1 convolution, no max-pool), stages of
  ``width * (1, 2, 4, 8)`` channels, written out here because torchvision's ``resnet18``
  has width 64 only; initialised as torchvision's ResNet (``kaiming_normal_`` with
  ``mode="fan_out"``; batch norm weight 1, bias 0; no zero-init of the last BN);
* ``lightly.models.modules.SimCLRProjectionHead(8 * width, 512, 128)``;
* ``lightly.loss.NTXentLoss(temperature=0.5)``;
* ``lightly.transforms.SimCLRTransform(input_size=32, cj_strength=0.5, gaussian_blur=0.0)``
  on Pillow images in the training process (``num_workers=0``): crop 0.08-1, flip,
  torchvision colour jitter 0.4/0.4/0.4/0.1 with p 0.8, grayscale 0.2, ImageNet
  normalisation;
* SGD lr ``0.06 * B / 128``, momentum 0.9, weight decay 5e-4 (torch's: added to the
  gradient), ``CosineAnnealingLR`` over the epochs, stepped per epoch, no warm-up;
* batches of ``B`` shuffled, the last partial one dropped;
* ``--views separate`` (default, lightly's ``training_step``: ``z0 = model(x0)``,
  ``z1 = model(x1)``, so each view is its own batch-norm batch) or ``joint`` (one forward
  pass of both views).

At each ``--eval-every`` epoch it writes the backbone's features (eval mode, clean images,
ImageNet-normalised) of the train and test arrays to ``DIR/features_eEPOCH.npz``; the
driver (``benchmarks/parity/run.py``) scores them with the same kNN as the Keras side.
With ``--score`` (where keras-hardneg imports, e.g. the GPU machine with the carried Keras
wheels and ``KERAS_BACKEND=jax``) they are scored in the process by the same function and
not written. Per-epoch mean loss, kNN and training seconds go to ``DIR/log.json``.

``--method moco`` trains lightly's CIFAR-10 **MoCo** benchmark recipe instead (its
``MocoModel``, read from lightly's documentation, ``cifar10_benchmark.py``): lightly's own
``ResNetGenerator("resnet-18", num_splits=8)`` as that script cuts it (children but the last,
then average pooling; batch norm split in 8 groups, torch's default initialisation),
``MoCoProjectionHead(512 w/64, 512, 128)``, momentum copies updated with
``update_momentum(m=0.99)`` before each step, ``NTXentLoss(temperature=0.1,
memory_bank_size=(BANK, 128))`` (``--bank``, 4096; lightly's table used 8192 at batch 512),
the symmetric loss of two orders with ``batch_shuffle`` / ``batch_unshuffle`` around the key
pass, SGD on the query branch only (same lr rule, momentum 0.9, weight decay 5e-4), cosine per
epoch; the same views (``SimCLRTransform``). (In lightly's loss the second order's memory bank
already holds the first order's keys: kept, as it is what lightly trains.)

On a GPU machine (issue 31's full-scale parity run), from the JPEG packs of
``benchmarks/gpu/zoo_train.py pack``::

    KERAS_BACKEND=jax python3 benchmarks/parity/lightly_side.py \
        --train-pack .gpu_data/cifar10_train.npz --test-pack .gpu_data/cifar10_test2000.npz \
        --device cuda --workers 12 --precision bf16 --width 64 --batch-size 512 \
        --epochs 100 --eval-every 10 --score --out $OUT/lightly
"""

import argparse
import json
import os
import random
import time

import numpy as np
import torch
from torch import nn

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + self.shortcut(x))


class ResNet18Cifar(nn.Module):
    """``[B, 3, H, W]`` -> ``[B, 8 * width]``."""

    def __init__(self, width: int):
        super().__init__()
        layers = [nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width),
                  nn.ReLU(inplace=True)]
        cin = width
        for mult, stride in zip((1, 2, 4, 8), (1, 2, 2, 2)):
            for block in range(2):
                layers.append(BasicBlock(cin, width * mult, stride if block == 0 else 1))
                cin = width * mult
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        self.net = nn.Sequential(*layers)
        for m in self.modules():  # torchvision's ResNet initialisation
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        return self.net(x)


def _clean(images: np.ndarray) -> torch.Tensor:
    x = torch.from_numpy(images).permute(0, 3, 1, 2).float().div(255.0)
    mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    return (x - mean) / std


@torch.no_grad()
def features(backbone: nn.Module, images: np.ndarray, batch: int = 500,
             device: str = "cpu") -> np.ndarray:
    backbone.eval()
    out = [backbone(_clean(images[i:i + batch]).to(device)).float().cpu().numpy()
           for i in range(0, len(images), batch)]
    backbone.train()
    return np.concatenate(out).astype(np.float32)


def read_pack(path: str) -> tuple[np.ndarray, np.ndarray]:
    """``(uint8 [n, 32, 32, 3], labels)`` of a JPEG pack (``benchmarks/gpu/pack_cifar.py``),
    decoded with Pillow."""
    import io

    from PIL import Image

    with np.load(path) as z:
        data, offsets, labels = z["jpeg"], z["offsets"], z["labels"]
        position = z["position"] if "position" in z.files else None
    labels = np.asarray(labels, np.int64)
    # The image folder's order (label, then file), as zoo_train.load_packs puts it, so that
    # a seeded subset names the same images on both sides.
    order = (np.arange(len(labels)) if position is None else
             np.argsort(labels * (int(position.max()) + 1) + position, kind="stable"))
    images = [np.asarray(Image.open(io.BytesIO(data[offsets[i]:offsets[i + 1]].tobytes()))
                         .convert("RGB"), dtype=np.uint8) for i in order]
    return np.stack(images), labels[order]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", help="npz from benchmarks/parity/data.py")
    p.add_argument("--train-pack", help="JPEG pack (instead of --data; with --test-pack)")
    p.add_argument("--test-pack")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    p.add_argument("--precision", choices=("float32", "bf16"), default="float32",
                   help="bf16: torch.autocast(bfloat16) around the forward passes")
    p.add_argument("--minutes", type=float,
                   help="wall budget: after the epoch that passes it, evaluate and stop")
    p.add_argument("--score", action="store_true",
                   help="score the kNN here with keras_hardneg's function (needs Keras)")
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--monitor-seed", type=int, default=0,
                   help="with --score: the Keras recipe's seed, which picks KNNMonitor's subset")
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--width", type=int, default=16)
    p.add_argument("--lr-per-128", type=float, default=0.06)
    p.add_argument("--eval-every", type=int, default=5)
    p.add_argument("--views", choices=("separate", "joint"), default="separate")
    p.add_argument("--method", choices=("simclr", "moco"), default="simclr")
    p.add_argument("--bank", type=int, default=4096, help="moco: memory bank size")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--resume", action="store_true",
                   help="continue from OUT/checkpoint.pt (written after every epoch)")
    args = p.parse_args()

    import lightly
    from lightly.loss import NTXentLoss
    from lightly.models.modules import SimCLRProjectionHead
    from lightly.transforms import SimCLRTransform
    from PIL import Image

    torch.set_num_threads(args.threads)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    if args.train_pack:
        (x_train, y_train), (x_test, y_test) = read_pack(args.train_pack), read_pack(
            args.test_pack)
    elif args.data:
        with np.load(args.data) as f:
            x_train, x_test, y_train, y_test = (f[k] for k in ("x_train", "x_test", "y_train",
                                                                "y_test"))
    else:
        raise SystemExit("give --data or --train-pack and --test-pack")
    knn = None
    if args.score:
        import sys

        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__)))))
        from keras_hardneg.evaluation.knn import weighted_knn_accuracy as knn
        from keras_hardneg.modalities.image import MONITOR_TEST_LIMIT, MONITOR_TRAIN_LIMIT

        # The Keras side's KNNMonitor scores a seeded subset (10k bank / 2k queries, the
        # recipe's seed); the same images here make the two curves comparable epoch by epoch.
        monitor_rng = np.random.default_rng(args.monitor_seed)
        monitor_train = monitor_rng.permutation(len(x_train))[:MONITOR_TRAIN_LIMIT]
        monitor_test = np.random.default_rng(args.monitor_seed).permutation(
            len(x_test))[:MONITOR_TEST_LIMIT]

    device = args.device
    if args.method == "moco":
        import copy

        from lightly.models import ResNetGenerator, utils
        from lightly.models.modules import MoCoProjectionHead

        resnet = ResNetGenerator("resnet-18", width=args.width / 64, num_splits=8)
        backbone = nn.Sequential(*list(resnet.children())[:-1], nn.AdaptiveAvgPool2d(1),
                                 nn.Flatten())
        head = MoCoProjectionHead(8 * args.width, 512, 128)
        model = nn.Sequential(backbone, head).to(device)
        key_model = copy.deepcopy(model)
        utils.deactivate_requires_grad(key_model)
        criterion = NTXentLoss(temperature=0.1, memory_bank_size=(args.bank, 128))
    else:
        backbone = ResNet18Cifar(args.width)
        head = SimCLRProjectionHead(8 * args.width, 512, 128)
        model = nn.Sequential(backbone, head).to(device)
        key_model = None
        criterion = NTXentLoss(temperature=0.5)
    criterion = criterion.to(device)
    autocast = torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16,
                              enabled=args.precision == "bf16")
    lr = args.lr_per_128 * args.batch_size / 128
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, args.epochs)
    transform = SimCLRTransform(input_size=32, cj_strength=0.5, gaussian_blur=0.0)

    class Views(torch.utils.data.Dataset):
        def __len__(self):
            return len(x_train)

        def __getitem__(self, i):
            return transform(Image.fromarray(x_train[i]))

    loader = torch.utils.data.DataLoader(
        Views(), batch_size=args.batch_size, shuffle=True, drop_last=True,
        num_workers=args.workers, persistent_workers=args.workers > 0,
        pin_memory=device != "cpu", generator=(order := torch.Generator().manual_seed(args.seed)))
    log = {"side": "lightly", "lightly": lightly.__version__, "torch": torch.__version__,
           "method": args.method, "bank": args.bank if args.method == "moco" else None,
           "views": args.views, "seed": args.seed, "epochs": args.epochs, "lr": lr,
           "batch_size": args.batch_size, "width": args.width, "threads": args.threads,
           "device": device, "workers": args.workers, "precision": args.precision,
           "n_train": len(x_train), "n_test": len(x_test),
           "loss": [], "epoch_seconds": [], "epoch_cpu_seconds": [], "eval_epochs": [], "knn": {}}
    checkpoint = os.path.join(args.out, "checkpoint.pt")
    first = 1
    if args.resume and os.path.isfile(checkpoint):
        # Everything an epoch's randomness depends on (workers 0: the views are drawn here).
        state = torch.load(checkpoint, weights_only=False)
        model.load_state_dict(state["model"])
        if key_model is not None:
            key_model.load_state_dict(state["key_model"])
            criterion.load_state_dict(state["criterion"])  # the memory bank
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        torch.set_rng_state(state["torch_rng"])
        order.set_state(state["order_rng"])
        np.random.set_state(state["numpy_rng"])
        random.setstate(state["python_rng"])
        log = {**state["log"], "resumed_at_epochs": state["log"].get("resumed_at_epochs", [])
               + [state["epoch"]]}
        first = state["epoch"] + 1
        print(f"resuming after epoch {state['epoch']}", flush=True)
    model.train()
    start = time.perf_counter()
    for epoch in range(first, args.epochs + 1):
        t0 = time.perf_counter()
        c0 = time.process_time()              # this process's CPU time: honest under contention
        total, steps = 0.0, 0
        for x0, x1 in loader:
            x0 = x0.to(device, non_blocking=True)
            x1 = x1.to(device, non_blocking=True)
            if key_model is not None:  # lightly's MocoModel.training_step
                utils.update_momentum(model, key_model, 0.99)

                def one_order(a, b):
                    b, shuffle = utils.batch_shuffle(b)
                    with autocast:
                        q, k = model(a), key_model(b)
                    return q.float(), utils.batch_unshuffle(k.float(), shuffle)

                loss = 0.5 * (criterion(*one_order(x0, x1)) + criterion(*one_order(x1, x0)))
            else:
                with autocast:
                    if args.views == "separate":
                        z0, z1 = model(x0), model(x1)
                    else:
                        z0, z1 = model(torch.cat([x0, x1])).chunk(2)
                loss = criterion(z0.float(), z1.float())
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
            steps += 1
        sched.step()
        log["epoch_seconds"].append(time.perf_counter() - t0)
        log["epoch_cpu_seconds"].append(time.process_time() - c0)
        log["loss"].append(total / steps)
        print(f"epoch {epoch}: loss {total / steps:.4f}, {log['epoch_seconds'][-1]:.1f} s"
              f" (cpu {log['epoch_cpu_seconds'][-1]:.1f} s)", flush=True)
        out_of_time = (args.minutes is not None and epoch < args.epochs
                       and time.perf_counter() - start > 60 * args.minutes)
        if out_of_time:
            log["stopped_at_epoch"] = epoch
        if epoch % args.eval_every == 0 or epoch == args.epochs or out_of_time:
            with autocast:
                bank = features(backbone, x_train, device=device)
                query = features(backbone, x_test, device=device)
            if knn is not None:
                log["knn"][str(epoch)] = float(knn(bank, y_train, query, y_test, k=200,
                                                   temperature=0.1))
                log.setdefault("knn_monitor", {})[str(epoch)] = float(knn(
                    bank[monitor_train], y_train[monitor_train], query[monitor_test],
                    y_test[monitor_test], k=200, temperature=0.1))
                print(f"epoch {epoch}: kNN {log['knn'][str(epoch)]:.4f} (monitor subset "
                      f"{log['knn_monitor'][str(epoch)]:.4f})", flush=True)
            else:
                np.savez(os.path.join(args.out, f"features_e{epoch}.npz"),
                         train=bank, test=query)
            log["eval_epochs"].append(epoch)
        with open(os.path.join(args.out, "log.json"), "w") as f:
            json.dump(log, f)
        if args.workers == 0:  # with workers the views' generators live in them: no resume
            extra = {} if key_model is None else {"key_model": key_model.state_dict(),
                                                  "criterion": criterion.state_dict()}
            torch.save({**extra, "epoch": epoch, "model": model.state_dict(),
                        "opt": opt.state_dict(),
                        "sched": sched.state_dict(), "torch_rng": torch.get_rng_state(),
                        "order_rng": order.get_state(), "numpy_rng": np.random.get_state(),
                        "python_rng": random.getstate(), "log": log}, checkpoint + ".part")
            os.replace(checkpoint + ".part", checkpoint)
        if out_of_time:
            print(f"stopped by --minutes after epoch {epoch}", flush=True)
            break


if __name__ == "__main__":
    main()
