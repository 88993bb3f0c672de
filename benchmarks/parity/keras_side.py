"""The keras-hardneg side of the parity benchmark: the zoo's SimCLR CIFAR-10 recipe at the
benchmark's scale, trained by the run layer's builders on the shared arrays.

    python benchmarks/parity/keras_side.py --data DATA.npz --seed 0 --out DIR.json \\
        [--variant NAME] [--backend tensorflow|jax]

The recipe is ``models/simclr-ntxent-cifar10/recipe.json`` (lightly's recipe at B 512) with
only the benchmark's scale changed: ``encoder.width`` 16, ``batch_size`` 256,
``learning_rate`` 0.12 (lightly's 0.06 x B / 128), 30 epochs, float32 -- then the variant's
keys (:data:`VARIANTS`). ``build_model`` and ``make_train_feed`` are what ``keras-hardneg
train`` calls; only the data loading is replaced by the shared arrays (uint8 -> float32 in
[0, 1]), so the JPEG decoder is not part of the comparison. At every ``--eval-every``
epoch the encoder's features of the clean train (bank) and test images are scored by
:func:`keras_hardneg.evaluation.weighted_knn_accuracy` (k 200, t 0.1), the function the
driver also applies to the lightly side's features. One thread: TensorFlow's intra/inter-op
pools are set to 1 (pin the process to a core with ``taskset``; JAX: the driver sets
``XLA_FLAGS``).

Resumable (a 30-epoch cell is ~75 CPU-minutes on the 2-core machine, longer than what a
session can give it beside other work): with ``--backup DIR`` every epoch is committed by
the library's :class:`keras_hardneg.callbacks.AtomicBackupAndRestore` (weights, optimizer,
the augmentation's generators, the feed's position) together with the log so far, and the
same command resumes from the last committed epoch.
"""

import argparse
import copy
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ZOO_RECIPE = os.path.join(ROOT, "models", "simclr-ntxent-cifar10", "recipe.json")

#: The benchmark's scale: what the zoo recipe changes for every variant.
SCALE = {"encoder": {"width": 16}, "batch_size": 256, "optimizer": {"learning_rate": 0.12},
         "epochs": 30, "precision": "float32"}

#: Lightly's choices where they differ from the zoo recipe (the ablations, one key each).
TORCH_INIT = {"encoder": {"conv_init": "he_normal_fan_out"},
              "framework": {"head_init": "torch_linear"}}
PER_VIEW_BN = {"framework": {"batch_norm_views": "per_view"}}
SYMMETRIC_PADDING = {"encoder": {"padding": "symmetric"}}
EXACT_JITTER = {"augmentation": {"exact_color_jitter": True}}
GRAY_CONTRAST = {"augmentation": {"contrast_mean": "gray"}}
#: torch's CosineAnnealingLR is stepped once per epoch in lightly's benchmark; ours, per step.
PER_EPOCH_LR = {"schedule": {"per_epoch": True}}
#: torchvision's crop: a box of whole pixels, half-pixel bilinear resize (view_stats.py).
INTEGER_CROPS = {"augmentation": {"crop_boxes": "integer"}}

#: Variants that train on views fed from epoch files instead of drawing them in the step:
#: lightly's (``lightly_views.py``, in the peers' virtualenv) or ours (``ours_views.py``,
#: drawn by our layer outside the step and delivered the same way: the delivery control).
#: variant -> the producer's ``--ops`` (all ops, or one group: the per-op swap).
VIEWS_FROM_LIGHTLY = {"lightly_views_fed": "all", "lightly_views_fed_crop": "crop",
                      "lightly_views_fed_colour": "colour"}
VIEWS_FROM_OURS = {"ours_views_fed": "all", "ours_views_fed_crop": "crop",
                   "ours_views_fed_colour": "colour"}  # with all_lightly's augmentation keys
PEER_PYTHON = os.path.join(ROOT, "..", "peer-venv", "bin", "python")


def merge(base: dict, *overrides: dict) -> dict:
    """``base`` with each override merged in, section by section (a copy)."""
    out = copy.deepcopy(base)
    for override in overrides:
        for key, value in override.items():
            if isinstance(value, dict) and isinstance(out.get(key), dict):
                out[key] = merge(out[key], value)
            else:
                out[key] = copy.deepcopy(value)
    return out


#: variant -> recipe keys over the zoo recipe at the benchmark's scale.
VARIANTS = {
    "recipe": {},
    "torch_init": TORCH_INIT,
    "per_view_bn": PER_VIEW_BN,
    "symmetric_padding": SYMMETRIC_PADDING,
    "exact_jitter": EXACT_JITTER,
    "gray_contrast": GRAY_CONTRAST,
    "torchvision_jitter": merge(EXACT_JITTER, GRAY_CONTRAST),
    "all": merge(TORCH_INIT, PER_VIEW_BN, SYMMETRIC_PADDING, EXACT_JITTER, GRAY_CONTRAST),
    "init_bn": merge(TORCH_INIT, PER_VIEW_BN),
    "per_epoch_lr": PER_EPOCH_LR,
    "gray_contrast_per_epoch_lr": merge(GRAY_CONTRAST, PER_EPOCH_LR),
    "integer_crops": INTEGER_CROPS,
    # lightly's crop, contrast and schedule together (the cheap differences found so far).
    "lightly_views_schedule": merge(INTEGER_CROPS, GRAY_CONTRAST, PER_EPOCH_LR),
    # Every difference from lightly found so far at once: views, schedule, initialisation,
    # per-view batch norm, symmetric stride-2 padding, torchvision's jitter. If this does
    # not reach lightly, the cause is none of them.
    "all_lightly": merge(TORCH_INIT, PER_VIEW_BN, SYMMETRIC_PADDING, EXACT_JITTER,
                         GRAY_CONTRAST, INTEGER_CROPS, PER_EPOCH_LR),
    # Our model with lightly's own views (lightly_views.py, in the peers' virtualenv) fed
    # in: the model side as lightly's (step_check.py: at parity), so the views are all
    # that differs from a lightly cell (see VIEWS_FROM_LIGHTLY).
    "lightly_views_fed": merge(TORCH_INIT, PER_VIEW_BN, SYMMETRIC_PADDING, PER_EPOCH_LR),
    # The same model on our own views (all_lightly's augmentation keys) drawn outside the
    # step by ours_views.py and fed from files exactly as lightly_views_fed's are.
    "ours_views_fed": merge(TORCH_INIT, PER_VIEW_BN, SYMMETRIC_PADDING, PER_EPOCH_LR,
                            EXACT_JITTER, GRAY_CONTRAST, INTEGER_CROPS),
    # The GPU zoo's path: under JAX (--backend jax) in mixed_bfloat16.
    "recipe_bf16": {"precision": "mixed_bfloat16"},
    "gray_contrast_bf16": merge(GRAY_CONTRAST, {"precision": "mixed_bfloat16"}),
    "init_bn_bf16": merge(TORCH_INIT, PER_VIEW_BN, {"precision": "mixed_bfloat16"}),
}
# The zoo's recipe since session 17 (all_lightly's keys) on the GPU zoo's path.
VARIANTS["all_lightly_bf16"] = merge(VARIANTS["all_lightly"], {"precision": "mixed_bfloat16"})
# The per-op swap: the same model on one group of ops from either side's producer.
VARIANTS.update({f"{side}_views_fed_{ops}": VARIANTS[f"{side}_views_fed"]
                 for side in ("lightly", "ours") for ops in ("crop", "colour")})


def views_feed(args, first_epoch: int, steps: int, batch: int):
    """Starts the variant's view producer (``lightly_views.py`` in the peers' virtualenv,
    or ``ours_views.py``) for epochs ``first_epoch..args.epochs`` and returns a generator
    of ``({"view1", "view2"},)`` batches (float32 in [0, 1]) in its order, ``steps`` a
    epoch; each epoch's file is deleted when the epoch's batches are given."""
    import subprocess

    import numpy as np

    folder = args.backup.rstrip("/") + ".views" if args.backup else args.out + ".views"
    os.makedirs(folder, exist_ok=True)
    common = ["--data", args.data, "--seed", str(args.seed), "--first", str(first_epoch),
              "--epochs", str(args.epochs), "--batch-size", str(batch), "--out", folder]
    if args.variant in VIEWS_FROM_OURS:
        cmd = [sys.executable, os.path.join(HERE, "ours_views.py"), *common,
               "--variant", "all_lightly", "--ops", VIEWS_FROM_OURS[args.variant]]
    else:
        cmd = [args.peer_python, os.path.join(HERE, "lightly_views.py"), *common,
               "--ops", VIEWS_FROM_LIGHTLY[args.variant]]
    producer = subprocess.Popen(cmd)

    def batches():
        for epoch in range(first_epoch, args.epochs + 1):
            path = os.path.join(folder, f"epoch{epoch:03d}.npz")
            while not os.path.exists(path):
                if producer.poll() not in (None, 0):
                    raise SystemExit(f"{os.path.basename(cmd[1])} failed "
                                     f"(rc {producer.returncode})")
                time.sleep(1.0)
            with np.load(path) as z:
                v1, v2 = z["view1"], z["view2"]
            for i in range(steps):
                rows = slice(i * batch, (i + 1) * batch)
                yield ({"view1": v1[rows].astype("float32") / 255.0,
                        "view2": v2[rows].astype("float32") / 255.0},)
            os.remove(path)

    return batches(), producer


def recipe_for(variant: str, seed: int, epochs: int) -> dict:
    with open(ZOO_RECIPE) as f:
        zoo = json.load(f)
    zoo["data"] = {"name": "digits"}  # the arrays replace the data section (never loaded)
    return merge(zoo, SCALE, VARIANTS[variant], {"seed": seed, "epochs": epochs,
                                                 "evaluation": {"monitor_every": 0}})


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, help="npz from benchmarks/parity/data.py")
    p.add_argument("--out", required=True, help="JSON of the run")
    p.add_argument("--variant", choices=tuple(VARIANTS), default="recipe")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--eval-every", type=int, default=5)
    p.add_argument("--batch-size", type=int, help="override (smoke runs)")
    p.add_argument("--backup", help="folder of the per-epoch checkpoint: resume from it")
    p.add_argument("--peer-python", default=PEER_PYTHON,
                   help="the peers' Python (lightly_views.py, for VIEWS_FROM_LIGHTLY variants)")
    args = p.parse_args()

    import keras
    import numpy as np

    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    sys.path.insert(0, ROOT)
    from keras_hardneg.evaluation import weighted_knn_accuracy
    from keras_hardneg import callbacks
    from keras_hardneg.run import build_model, load_recipe, make_train_feed
    from keras_hardneg.run.resume import recipe_differences
    from keras_hardneg.run.training import _skip_batches

    recipe = recipe_for(args.variant, args.seed, args.epochs)
    if args.batch_size:
        recipe["batch_size"] = args.batch_size
    recipe = load_recipe(recipe)
    keras.config.set_dtype_policy(recipe["precision"])
    with np.load(args.data) as f:
        x_train = f["x_train"].astype("float32") / 255.0
        x_test = f["x_test"].astype("float32") / 255.0
        y_train, y_test = f["y_train"], f["y_test"]
    model = build_model(recipe, input_shape=x_train.shape[1:], num_examples=len(x_train))
    feed = make_train_feed(recipe, x_train, y_train)
    log = {"side": "keras-hardneg", "variant": args.variant, "backend": backend,
           "keras": keras.__version__, "seed": args.seed, "recipe": recipe, "loss": [],
           "epoch_seconds": [], "epoch_cpu_seconds": [], "knn": {}}

    backup_cb, log_path, start_epoch = None, None, 0
    if args.backup:
        log_path = args.backup.rstrip("/") + ".log.json"  # beside the backup, not inside it
        os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
        backup_cb = callbacks.AtomicBackupAndRestore(
            args.backup, delete_checkpoint=False,
            state={**feed.state, "random": callbacks.RandomState(model)})
        start_epoch = backup_cb.committed_epoch()
        if start_epoch:
            with open(log_path) as f:
                saved = json.load(f)
            # The saved recipe as this version reads it (keys added since take their
            # defaults), compared as the library's resume check does.
            differs = recipe_differences(
                json.loads(json.dumps(load_recipe(saved["recipe"]), default=str)),
                json.loads(json.dumps(log["recipe"], default=str)))
            if differs:
                raise SystemExit(f"--backup {args.backup}: its run had another recipe "
                                 f"({', '.join(differs)})")
            for key in ("loss", "epoch_seconds", "epoch_cpu_seconds"):
                log[key] = saved[key][:start_epoch]
            log["knn"] = {e: v for e, v in saved["knn"].items() if int(e) <= start_epoch}
            log["resumed_at_epochs"] = saved.get("resumed_at_epochs", []) + [start_epoch]
            feed = _skip_batches(feed, start_epoch * feed.steps_per_epoch)
            print(f"resuming after epoch {start_epoch}", flush=True)

    class Record(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.t0 = time.perf_counter()
            self.c0 = time.process_time()

        def on_epoch_end(self, epoch, logs=None):
            log["epoch_seconds"].append(time.perf_counter() - self.t0)
            log["epoch_cpu_seconds"].append(time.process_time() - self.c0)
            log["loss"].append(float(logs["loss"]))
            e = epoch + 1
            line = f"epoch {e}: loss {logs['loss']:.4f}, {log['epoch_seconds'][-1]:.1f} s"
            line += f" (cpu {log['epoch_cpu_seconds'][-1]:.1f} s)"
            if e % args.eval_every == 0 or e == args.epochs:
                bank = model.encoder.predict(x_train, batch_size=500, verbose=0)
                query = model.encoder.predict(x_test, batch_size=500, verbose=0)
                acc = weighted_knn_accuracy(bank, y_train, query, y_test, k=200,
                                            temperature=0.1)
                log["knn"][str(e)] = float(acc)
                line += f", kNN {acc:.4f}"
            print(line, flush=True)
            if log_path:  # before the backup callback commits this epoch (it runs after)
                with open(log_path + ".part", "w") as f:
                    json.dump(log, f, indent=1, default=str)
                os.replace(log_path + ".part", log_path)

    dataset, producer = feed.dataset, None
    if start_epoch >= recipe["epochs"]:  # every epoch committed: write the result only
        dataset = None
    elif args.variant in VIEWS_FROM_LIGHTLY or args.variant in VIEWS_FROM_OURS:
        first = (start_epoch or 0) + 1
        dataset, producer = views_feed(args, first, feed.steps_per_epoch,
                                       recipe["batch_size"])
    try:
        if dataset is not None:
            model.fit(dataset, epochs=recipe["epochs"], steps_per_epoch=feed.steps_per_epoch,
                      callbacks=[Record(), *feed.callbacks,
                                 *([backup_cb] if backup_cb else [])], verbose=0)
    finally:
        if producer is not None and producer.poll() is None:
            producer.kill()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out + ".part", "w") as f:
        json.dump(log, f, indent=1)
    os.replace(args.out + ".part", args.out)


if __name__ == "__main__":
    main()
