"""The ``keras-hardneg`` command line: ``train``, ``evaluate``, ``export``, ``tune``.

Every subcommand has ``--help``. Errors in the user's input (a missing file, a
bad recipe key, an out-of-range flag) print one line naming what is wrong and
exit with status 2; no traceback (set ``KERAS_HARDNEG_DEBUG=1`` to see one).
"""

import argparse
import json
import os
import sys
import time

__all__ = ["main", "build_parser"]

EXIT_USAGE = 2


class CliError(Exception):
    """A user-facing error: printed as one line, exit status 2."""


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {value}")
    return value


def _non_negative_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text}")
    return value


def _override_data(data, args):
    """A copy of a recipe's ``data`` section with ``--image-size`` / ``--limit-per-class``."""
    data = dict(data)
    if args.image_size is not None:
        data["image_size"] = args.image_size
    if args.limit_per_class is not None:
        if data.get("name") != "image_folder":
            raise CliError("--limit-per-class applies to image folders only.")
        data["limit_per_class"] = args.limit_per_class
    return data


def _dataset_spec(text, image_size=None, limit_per_class=None):
    """``digits`` | ``tfds:NAME`` | a folder with class subfolders (or with train/ and test/)."""
    if text == "digits":
        spec = {"name": "digits"}
    elif text.startswith("tfds:"):
        spec = {"name": "tfds", "dataset": text[len("tfds:"):]}
    else:
        path = os.path.abspath(text)
        if not os.path.isdir(path):
            raise CliError(f"--dataset {text!r}: not 'digits', 'tfds:NAME' or an existing folder.")
        if os.path.isdir(os.path.join(path, "train")):
            spec = {"name": "image_folder", "train": os.path.join(path, "train")}
            if os.path.isdir(os.path.join(path, "test")):
                spec["test"] = os.path.join(path, "test")
        else:
            spec = {"name": "image_folder", "train": path}
    if image_size is not None:
        spec["image_size"] = image_size
    if limit_per_class is not None:
        if spec["name"] != "image_folder":
            raise CliError("--limit-per-class applies to image folders only.")
        spec["limit_per_class"] = limit_per_class
    return spec


def _recipe_from_args(args):
    from keras_hardneg.recipes import load_recipe

    given = {}
    if args.recipe:
        if not os.path.isfile(args.recipe):
            raise CliError(f"--recipe {args.recipe!r}: file not found.")
        with open(args.recipe) as f:
            try:
                given = json.load(f)
            except json.JSONDecodeError as e:
                raise CliError(f"--recipe {args.recipe!r}: not valid JSON ({e}).") from None
        base = os.path.dirname(os.path.abspath(args.recipe))
        data = given.get("data", {})
        for key in ("train", "test", "data_dir"):
            if isinstance(data, dict) and data.get(key) and not os.path.isabs(data[key]):
                data[key] = os.path.normpath(os.path.join(base, data[key]))
    if args.dataset:
        given["data"] = _dataset_spec(args.dataset, args.image_size, args.limit_per_class)
    else:  # the recipe's (or the default) data, resized or limited
        data = _override_data(given.get("data", {"name": "digits"}), args)
        if data != given.get("data", {"name": "digits"}):
            given["data"] = data
    for flag, key in (("framework", "framework"), ("epochs", "epochs"),
                      ("batch_size", "batch_size"), ("seed", "seed"), ("precision", "precision"),
                      ("name", "name")):
        value = getattr(args, flag)
        if value is not None:
            given[key] = value
    loss = dict(given.get("loss", {}))
    if args.loss is not None and args.loss != loss.get("name"):
        loss = {"name": args.loss}
    for flag in ("temperature", "tau_plus", "beta"):
        value = getattr(args, flag)
        if value is not None:
            loss[flag] = value
    if loss:
        given["loss"] = loss
    if args.encoder is not None or args.width is not None:
        enc = dict(given.get("encoder", {}))
        if args.encoder is not None and args.encoder != enc.get("name"):
            enc = {"name": args.encoder}
        if args.width is not None:
            enc["width"] = args.width
        given["encoder"] = enc
    if args.sampler is not None:
        given["sampler"] = {"name": args.sampler}
    if args.learning_rate is not None:
        given.setdefault("optimizer", {})["learning_rate"] = args.learning_rate
    return load_recipe(given)


def _print_summary(title, rows):
    width = max(len(k) for k, _ in rows)
    print(f"\n== {title} ==")
    for key, value in rows:
        print(f"  {key.ljust(width)}  {value}")


def cmd_train(args):
    from keras_hardneg import training

    recipe = _recipe_from_args(args)
    output = os.path.abspath(args.output or os.path.join("runs", recipe["name"]))
    print(f"keras-hardneg train: {recipe['framework']} + {recipe['loss']['name']} on "
          f"{recipe['data']['name']}, {recipe['epochs']} epochs -> {output}", flush=True)
    result = training.run(recipe, output, resume=not args.no_resume, verbose=args.verbose,
                          export=not args.no_export)
    rows = [
        ("data", result["data"]),
        ("epochs run", result["epochs_run"]),
        ("wall time", f"{result['seconds']:.1f} s"),
        ("training images/s", f"{result['images_per_second']:.1f}" if result["images_per_second"]
         else "n/a (nothing left to train: the run was complete)"),
        ("kNN accuracy", f"{result['knn_accuracy']:.4f} (weighted, k={recipe['evaluation']['knn_k']})"),
    ]
    if "linear_probe_accuracy" in result:
        rows.append(("linear probe", f"{result['linear_probe_accuracy']:.4f}"))
    rows += [
        ("run directory", output),
        ("recipe", os.path.join(output, "recipe.json")),
        ("history", os.path.join(output, "history.json")),
        ("results", os.path.join(output, "results.json")),
        ("resume state", os.path.join(output, "backup")),
    ]
    if result.get("export_dir"):
        rows += [("exported encoder", result["export_dir"]),
                 ("model card", os.path.join(result["export_dir"], "model_card.md"))]
    _print_summary("done", rows)
    return 0


def cmd_evaluate(args):
    from keras_hardneg import export as export_lib
    from keras_hardneg import training
    from keras_hardneg.recipes import load_recipe

    if not os.path.exists(args.encoder):
        raise CliError(f"encoder {args.encoder!r}: no such SavedModel directory.")
    encoder = export_lib.load_encoder(args.encoder)
    card = export_lib.load_model_card(args.encoder)
    if args.recipe:
        recipe = load_recipe(args.recipe)
    else:
        run_recipe = os.path.join(os.path.dirname(os.path.abspath(args.encoder)), "recipe.json")
        if args.dataset:
            recipe = load_recipe({"data": _dataset_spec(args.dataset, args.image_size,
                                                        args.limit_per_class)})
        elif os.path.isfile(run_recipe):
            recipe = load_recipe(run_recipe)
        else:
            raise CliError("evaluate needs --dataset or --recipe (no recipe.json next to the encoder).")
    if not args.dataset and (args.image_size is not None or args.limit_per_class is not None):
        recipe = load_recipe(dict(recipe, data=_override_data(recipe["data"], args)))
    if args.seed is not None:
        recipe["seed"] = args.seed
    start = time.perf_counter()
    train, test, description = training.load_data(recipe)
    result = training.evaluate_encoder(encoder, train, test, k=args.k, temperature=args.temperature,
                                       linear_probe=not args.no_linear_probe)
    rows = [("encoder", args.encoder), ("data", description),
            ("kNN accuracy", f"{result['knn_accuracy']:.4f} (weighted, k={args.k}, t={args.temperature})")]
    if card.knn_accuracy is not None:
        rows.append(("model card kNN", f"{card.knn_accuracy:.4f}"))
    if "linear_probe_accuracy" in result:
        rows.append(("linear probe", f"{result['linear_probe_accuracy']:.4f}"))
        if card.linear_probe_accuracy is not None:
            rows.append(("model card probe", f"{card.linear_probe_accuracy:.4f}"))
    rows.append(("time", f"{time.perf_counter() - start:.1f} s"))
    _print_summary("evaluation", rows)
    if args.json:
        print(json.dumps(result))
    return 0


def cmd_export(args):
    import keras

    from keras_hardneg import training
    from keras_hardneg.recipes import load_recipe

    from keras_hardneg.callbacks.backup import latest_weights

    run_dir = os.path.abspath(args.run_dir)
    recipe_path = os.path.join(run_dir, "recipe.json")
    weights = latest_weights(os.path.join(run_dir, "backup"))
    if not os.path.isfile(recipe_path) or weights is None:
        raise CliError(f"{args.run_dir!r} is not a keras-hardneg run directory (needs recipe.json "
                       "and a checkpoint in backup/, written by `keras-hardneg train`).")
    recipe = load_recipe(recipe_path)
    results_path = os.path.join(run_dir, "results.json")
    results = json.load(open(results_path)) if os.path.isfile(results_path) else {}
    train, _, description = training.load_data(recipe)
    model = training.build_model(recipe, train[0].shape[1:], num_examples=len(train[0]))
    try:
        model.load_weights(weights)
    except Exception as e:  # a corrupt or foreign checkpoint
        raise CliError(f"cannot load weights {weights}: {e}") from None
    results.setdefault("epochs_run", None)
    output = os.path.abspath(args.output)
    if os.path.exists(output) and not args.overwrite:
        raise CliError(f"--output {args.output!r} exists; pass --overwrite to replace it.")
    training._export(model, recipe, results, description, output)
    keras.backend.clear_session()
    _print_summary("exported", [("encoder", output),
                                ("model card", os.path.join(output, "model_card.md"))])
    return 0


def cmd_tune(args):
    from keras_hardneg import tuning

    kwargs = dict(dataset=args.dataset, trials=args.trials, epochs=args.epochs, tuner=args.tuner,
                  output=args.output, loss=args.loss, framework=args.framework,
                  objective=args.objective, seed=args.seed, resume=not args.no_resume)
    if args.batch_size is not None:
        kwargs["batch_size"] = args.batch_size
    if args.limit_per_class is not None:
        kwargs["limit_per_class"] = args.limit_per_class
    trials = tuning.run_search(**kwargs)
    _print_summary("tuning done", [("trials", len(trials)),
                                   ("results", os.path.join(args.output, "results.json"))])
    return 0


def _add_model_flags(p):
    g = p.add_argument_group("what to train (override the recipe)")
    g.add_argument("--recipe", help="JSON recipe file (e.g. one from models/); flags below override it")
    g.add_argument("--dataset", help="'digits' (embedded, default), 'tfds:NAME', or an image folder "
                                     "(class subfolders, or train/ and test/ inside)")
    g.add_argument("--image-size", type=_positive_int, help="resize images to this side (>= 8)")
    g.add_argument("--limit-per-class", type=_positive_int,
                   help="image folders: use at most this many images per class")
    g.add_argument("--framework", choices=["simclr", "moco_v2", "moco_v3"], help="default simclr")
    g.add_argument("--loss", choices=["nt_xent", "debiased", "hard", "ring", "unremix"],
                   help="contrastive loss (default hard)")
    g.add_argument("--temperature", type=_non_negative_float, help="loss temperature t > 0")
    g.add_argument("--tau-plus", dest="tau_plus", type=_non_negative_float,
                   help="class prior tau_plus in [0, 1) (debiased, hard, unremix)")
    g.add_argument("--beta", type=_non_negative_float, help="hardness beta >= 0 (hard, unremix)")
    g.add_argument("--encoder", choices=["small_convnet", "resnet18_cifar", "resnet50"])
    g.add_argument("--width", type=_positive_int, help="encoder width multiplier")
    g.add_argument("--sampler", choices=["uniform", "batchsampler", "knn"],
                   help="how batches are formed (default uniform)")
    g.add_argument("--epochs", type=_positive_int, help="training epochs")
    g.add_argument("--batch-size", type=_positive_int, help="batch size (>= 2)")
    g.add_argument("--learning-rate", type=_non_negative_float)
    g.add_argument("--precision", choices=["float32", "mixed_bfloat16", "mixed_float16"])
    g.add_argument("--seed", type=int, help="random seed (default 0)")
    g.add_argument("--name", help="run name (default 'run')")


def build_parser():
    parser = argparse.ArgumentParser(
        prog="keras-hardneg",
        description="Self-supervised contrastive pre-training with principled negatives "
                    "(Keras 3 / TensorFlow).")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("train", help="pre-train an encoder, evaluate it and export it",
                       description="Pre-train with a recipe and/or flags. With no arguments: SimCLR "
                                   "with hard negatives on the embedded digits dataset (no download).")
    _add_model_flags(p)
    p.add_argument("--output", help="run directory (default runs/NAME); rerunning resumes it")
    p.add_argument("--no-resume", action="store_true", help="start over even if OUTPUT has a backup")
    p.add_argument("--no-export", action="store_true", help="do not write the SavedModel")
    p.add_argument("--verbose", type=int, choices=[0, 1, 2], default=1,
                   help="1: progress bars (default), 2: one line per epoch, 0: silent")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("evaluate", help="kNN and linear-probe accuracy of an exported encoder",
                       description="Weighted kNN (k=200, t=0.1) and a logistic-regression probe "
                                   "on frozen features: fit on the train split, score the test split.")
    p.add_argument("encoder", help="SavedModel directory written by export/train")
    p.add_argument("--recipe", help="take the data from this recipe (default: recipe.json of the run)")
    p.add_argument("--dataset", help="'digits', 'tfds:NAME' or an image folder")
    p.add_argument("--image-size", type=_positive_int)
    p.add_argument("--limit-per-class", type=_positive_int)
    p.add_argument("--k", type=_positive_int, default=200, help="neighbours (default 200)")
    p.add_argument("--temperature", type=_non_negative_float, default=0.1,
                   help="kNN weight temperature (default 0.1)")
    p.add_argument("--no-linear-probe", action="store_true")
    p.add_argument("--seed", type=int)
    p.add_argument("--json", action="store_true", help="also print the result as JSON")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("export", help="export the encoder of a training run as a SavedModel",
                       description="Rebuild a run from RUN_DIR/recipe.json and its last checkpoint "
                                   "and write a reusable TF2 SavedModel (TF Hub format) + model card.")
    p.add_argument("run_dir", help="directory written by `keras-hardneg train`")
    p.add_argument("--output", required=True, help="SavedModel directory to write (atomically)")
    p.add_argument("--overwrite", action="store_true", help="replace OUTPUT if it exists")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("tune", help="Keras Tuner search over beta and tau_plus",
                       description="Search the loss's beta and tau_plus for the best kNN accuracy "
                                   "on a validation split; writes OUTPUT/results.json and a plot.")
    p.add_argument("--dataset", default="digits", help="'digits' (default), 'tfds:NAME' or an image folder")
    p.add_argument("--limit-per-class", type=_positive_int)
    p.add_argument("--trials", type=_positive_int, default=8, help="number of trials (default 8)")
    p.add_argument("--epochs", type=_positive_int, default=3, help="epochs per trial (default 3)")
    p.add_argument("--tuner", choices=["random", "bayesian", "hyperband"], default="random")
    p.add_argument("--objective", choices=["knn", "linear_probe"], default="knn")
    p.add_argument("--loss", choices=["hard", "debiased", "unremix", "ring", "nt_xent"],
                   help="loss whose hyper-parameters are searched (default hard)")
    p.add_argument("--framework", choices=["simclr", "moco_v2", "moco_v3"],
                   help="default simclr")
    p.add_argument("--batch-size", type=_positive_int)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", required=True, help="directory for results.json, the plot and the tuner state")
    p.add_argument("--no-resume", action="store_true", help="start a new search even if OUTPUT has one")
    p.set_defaults(func=cmd_tune)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from keras_hardneg.recipes import RecipeError

    try:
        return args.func(args)
    except (CliError, RecipeError, FileNotFoundError, ValueError) as e:
        if os.environ.get("KERAS_HARDNEG_DEBUG"):
            raise
        print(f"keras-hardneg {args.command}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"keras-hardneg {args.command}: interrupted; rerun the same command to resume.",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
