"""Model, loss and optimizer at parity, step by step: lightly's side and ours from the same
weights on the same two views, a few SGD steps, every weight compared.

The 30-epoch grid (``run.py``) measures where the two recipes end; this isolates the part
that has no randomness. The torch side (the peers' virtualenv) builds the lightly side's
model (``lightly_side.py``: ResNet-18 CIFAR stem, ``SimCLRProjectionHead(8w, 512, 128)``),
draws its initial weights, and trains ``--steps`` steps of ``NTXentLoss(0.5)`` with
``torch.optim.SGD(lr, momentum 0.9, weight_decay 5e-4)``, each view its own forward pass;
it saves the views, the initial weights, the per-step losses and every weight and
batch-norm statistic after each step. The Keras side builds our model from a parity
variant's recipe (default ``all_lightly``: per-view batch norm, symmetric stride-2
padding; the views are given, so the augmentation keys do not matter), copies the torch
weights in (OIHW -> HWIO, Linear's ``[out, in]`` -> Dense's ``[in, out]``), checks the
initial eval-mode features, trains the same steps with ``train_on_batch`` and compares::

    PEER/bin/python benchmarks/parity/step_check.py torch --data PACK.npz --out DIR
    PEER/bin/python benchmarks/parity/step_check.py torch --float64 --data PACK.npz --out DIR
    python benchmarks/parity/step_check.py keras --out DIR    # writes DIR/compare.json
    KERAS_BACKEND=jax python benchmarks/parity/step_check.py keras --float64 --out DIR

The float64 torch run is the yardstick: float32 round-off alone moves a step's weights by
some fraction of the step's update (and a few steps amplify it), so each float32 run is
compared with the float64 one. If ours is as close to it as torch's float32 run is, the
model, the loss, its gradients and the optimizer are at parity, and a kNN gap can only come
from the data the steps see (the views, their order) or from the evaluation. With both
sides in float64 (ours under JAX with x64, ``compare64.json``) round-off no longer hides
a formula difference in the later steps, where momentum and the coupled weight decay
accumulate (run the torch side with ``--steps 8`` or so for that).
"""

import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
IMAGENET_MEAN = np.array((0.485, 0.456, 0.406), np.float32)
IMAGENET_STD = np.array((0.229, 0.224, 0.225), np.float32)


def views(data: str | None, batch: int) -> tuple[np.ndarray, np.ndarray]:
    """Two deterministic views in ``[0, 1]``, ``[B, 32, 32, 3]``: the first ``batch``
    training images of the pack (random images without one) and a flipped, darkened and
    shifted copy (a stand-in for augmentation: what matters is that both sides get them)."""
    if data:
        with np.load(data) as z:
            x = z["x_train"][:batch].astype(np.float32) / 255.0
    else:
        x = np.random.default_rng(0).random((batch, 32, 32, 3), dtype=np.float32)
    v2 = np.clip(np.roll(x[:, :, ::-1], 3, axis=1) * 0.8 + 0.05, 0.0, 1.0)
    return x, v2.astype(np.float32)


# ----------------------------------------------------------------------- torch side
def torch_side(args) -> None:
    import torch
    from lightly.loss import NTXentLoss
    from lightly.models.modules import SimCLRProjectionHead

    sys.path.insert(0, HERE)
    from lightly_side import ResNet18Cifar

    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(ResNet18Cifar(args.width),
                                SimCLRProjectionHead(8 * args.width, 512, 128))
    v1, v2 = views(args.data, args.batch)

    dtype = np.float64 if args.float64 else np.float32

    def tensor(v):  # normalised in the run's precision (as ours does inside the model)
        v = v.astype(dtype)
        return torch.from_numpy((v - IMAGENET_MEAN.astype(dtype)) / IMAGENET_STD.astype(dtype)
                                ).permute(0, 3, 1, 2)

    x1, x2 = tensor(v1), tensor(v2)
    if args.float64:  # the round-off yardstick: the same steps in double precision
        model = model.double()
    out = {"view1": v1, "view2": v2}
    out.update({f"init/{k}": v.numpy().copy() for k, v in model.state_dict().items()})
    model.eval()
    with torch.no_grad():
        out["init_features"] = model[0](x1).numpy()
    model.train()
    criterion = NTXentLoss(temperature=0.5)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    losses = []
    for step in range(args.steps):
        loss = criterion(model(x1), model(x2))  # lightly's training_step: one pass per view
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        out.update({f"step{step + 1}/{k}": v.numpy().copy()
                    for k, v in model.state_dict().items()})
    out["losses"] = np.array(losses)
    os.makedirs(args.out, exist_ok=True)
    np.savez(os.path.join(args.out, "torch64.npz" if args.float64 else "torch.npz"), **out)
    print(f"torch: losses {losses}", flush=True)


# ----------------------------------------------------------------------- keras side
def torch_to_keras_names(width: int) -> dict[str, tuple[str, str, str]]:
    """torch state_dict key -> (Keras model part, layer name, weight kind)."""
    names = {}

    def conv(t, layer):
        names[f"{t}.weight"] = ("encoder", layer, "kernel")

    def bn(t, part, layer):
        for tk, kk in (("weight", "gamma"), ("bias", "beta"), ("running_mean", "moving_mean"),
                       ("running_var", "moving_variance")):
            names[f"{t}.{tk}"] = (part, layer, kk)

    conv("0.net.0", "stem_conv")
    bn("0.net.1", "encoder", "stem_bn")
    for i in range(8):
        prefix, t = f"stage{i // 2 + 1}_block{i % 2 + 1}", f"0.net.{3 + i}"
        conv(f"{t}.conv1", f"{prefix}_conv1")
        bn(f"{t}.bn1", "encoder", f"{prefix}_bn1")
        conv(f"{t}.conv2", f"{prefix}_conv2")
        bn(f"{t}.bn2", "encoder", f"{prefix}_bn2")
        if i in (2, 4, 6):  # the first block of stages 2-4 projects its shortcut
            conv(f"{t}.shortcut.0", f"{prefix}_proj")
            bn(f"{t}.shortcut.1", "encoder", f"{prefix}_proj_bn")
    names["1.layers.0.weight"] = ("projector", "dense_0", "kernel")
    bn("1.layers.1", "projector", "bn_0")
    names["1.layers.3.weight"] = ("projector", "dense_1", "kernel")
    bn("1.layers.4", "projector", "bn_out")
    return names


def _variable(model, part, layer, kind):
    layer = getattr(model, part).get_layer(layer)
    for v in layer.weights:
        if v.path.rsplit("/", 1)[-1] == kind:
            return v
    raise KeyError(f"{part}/{layer.name} has no {kind}: {[v.path for v in layer.weights]}")


def _to_keras(value: np.ndarray) -> np.ndarray:
    if value.ndim == 4:  # conv OIHW -> HWIO
        return value.transpose(2, 3, 1, 0)
    if value.ndim == 2:  # Linear [out, in] -> Dense [in, out]
        return value.T
    return value


def keras_side(args) -> None:
    sys.path.insert(0, HERE)
    import keras_side as ks
    from keras_hardneg import run

    path64 = os.path.join(args.out, "torch64.npz")
    ref64 = dict(np.load(path64)) if os.path.isfile(path64) else None
    if args.float64:  # both sides in double precision: a formula difference shows at once
        import keras

        if keras.backend.backend() != "jax":
            raise SystemExit("--float64 on the Keras side needs KERAS_BACKEND=jax")
        if ref64 is None:
            raise SystemExit(f"--float64: no {path64}; run the torch side with --float64 first")
        import jax

        jax.config.update("jax_enable_x64", True)
        keras.config.set_floatx("float64")
        keras.config.set_dtype_policy("float64")
        ref = ref64
    else:
        ref = dict(np.load(os.path.join(args.out, "torch.npz")))
    recipe = ks.recipe_for(args.variant, args.seed, 30)
    recipe["optimizer"] = {**recipe["optimizer"], "learning_rate": args.lr}
    model = run.build_model(recipe, input_shape=(32, 32, 3), num_examples=10000)
    names = torch_to_keras_names(recipe["encoder"]["width"])
    torch_keys = [k for k in ref if k.startswith("init/") and not k.endswith("num_batches_tracked")]
    assert sorted(k[5:] for k in torch_keys) == sorted(names), "unmapped torch weights"
    variables = {key: _variable(model, *where) for key, where in names.items()}
    mapped = {id(v) for v in variables.values()}
    unmapped = [v.path for v in model.encoder.weights + model.projector.weights
                if id(v) not in mapped]
    for key, var in variables.items():
        var.assign(_to_keras(ref[f"init/{key}"]))
    v1, v2 = (ref[k].astype("float64" if args.float64 else "float32") for k in ("view1", "view2"))
    features = np.asarray(model.encoder(v1, training=False))
    result = {"variant": args.variant, "batch": int(len(v1)), "lr": args.lr,
              "precision": "float64 (JAX x64) against torch float64" if args.float64
              else "float32 against torch float32",
              "unmapped_keras_weights": unmapped,
              "init_features_max_abs_diff": float(np.max(np.abs(features - ref["init_features"]))),
              "init_features_scale": float(np.max(np.abs(ref["init_features"]))),
              "torch_losses": ref["losses"].tolist(), "keras_losses": [], "steps": [],
              "torch_float64_losses": None if ref64 is None else ref64["losses"].tolist()}
    for step in range(len(ref["losses"])):
        model.reset_metrics()
        logs = model.train_on_batch({"view1": v1, "view2": v2}, return_dict=True)
        result["keras_losses"].append(float(logs["loss"]))
        rows = []
        for key, var in variables.items():
            want = _to_keras(ref[f"step{step + 1}/{key}"])
            start = _to_keras(ref[f"init/{key}"])
            got = np.asarray(var)
            moved = float(np.linalg.norm(want - start))
            rows.append({"weight": key, "keras": var.path,
                         "relative_diff": float(np.linalg.norm(got - want)
                                                / max(np.linalg.norm(want), 1e-12)),
                         # the difference against how far the weight moved in total
                         "diff_over_update": float(np.linalg.norm(got - want) / moved)
                         if moved > 0 else None})
        rows.sort(key=lambda r: -(r["diff_over_update"] or 0.0))
        entry = {"step": step + 1, "worst": rows[:6], "median_diff_over_update": float(
            np.median([r["diff_over_update"] for r in rows if r["diff_over_update"]]))}
        if ref64 is not None and not args.float64:  # both float32 runs against float64
            ours, theirs = [], []
            for key, var in variables.items():
                exact = _to_keras(ref64[f"step{step + 1}/{key}"])
                moved = np.linalg.norm(exact - _to_keras(ref64[f"init/{key}"]))
                if moved > 0 and not key.endswith("running_var"):
                    ours.append(np.linalg.norm(np.asarray(var) - exact) / moved)
                    theirs.append(np.linalg.norm(
                        _to_keras(ref[f"step{step + 1}/{key}"]) - exact) / moved)
            entry["median_vs_float64"] = {"keras": float(np.median(ours)),
                                          "torch_float32": float(np.median(theirs))}
        result["steps"].append(entry)
    name = "compare64.json" if args.float64 else "compare.json"
    with open(os.path.join(args.out, name), "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps({k: result[k] for k in ("init_features_max_abs_diff", "torch_losses",
                                              "keras_losses", "unmapped_keras_weights")}))
    for s in result["steps"]:
        print(f"step {s['step']}: median |ours - torch| / |update| "
              f"{s['median_diff_over_update']:.2e}; worst "
              + ", ".join(f"{r['weight']} {r['diff_over_update']:.2e}" for r in s["worst"][:3])
              + ("" if "median_vs_float64" not in s else
                 "; against torch float64: ours {keras:.2e}, torch float32 {torch_float32:.2e}"
                 .format(**s["median_vs_float64"])))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("side", choices=("torch", "keras"))
    p.add_argument("--out", required=True, help="folder for torch.npz and compare.json")
    p.add_argument("--data", help="npz from benchmarks/parity/data.py (its first images)")
    p.add_argument("--variant", default="all_lightly", help="the Keras side's parity variant")
    p.add_argument("--width", type=int, default=16)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--lr", type=float, default=0.12)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--float64", action="store_true",
                   help="torch side: in double precision (how far float32 round-off goes); "
                        "Keras side (KERAS_BACKEND=jax): ours in double precision against "
                        "it, written to compare64.json")
    args = p.parse_args()
    (torch_side if args.side == "torch" else keras_side)(args)


if __name__ == "__main__":
    main()
