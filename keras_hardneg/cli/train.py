"""``keras-hardneg train``: pre-train an encoder, evaluate it and export it."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from keras_hardneg.cli.errors import CliError
from keras_hardneg.cli.flags import add_model_flags, distribution
from keras_hardneg.cli.output import figure_rows, output_folder, print_summary
from keras_hardneg.cli.overrides import recipe_from_args


def add_parser(sub: Any) -> None:
    """Adds ``train`` to the subcommands ``sub``."""
    p = sub.add_parser("train", help="pre-train an encoder, evaluate it and export it",
                       description="Pre-train with a recipe and/or flags. With no arguments: "
                                   "SimCLR with hard negatives on the embedded digits dataset "
                                   "(no download).")
    add_model_flags(p)
    p.add_argument("--output", help="run directory (default runs/NAME); rerunning resumes it")
    p.add_argument("--no-resume", action="store_true",
                   help="start over even if OUTPUT has a backup")
    p.add_argument("--no-export", action="store_true", help="do not write the SavedModel")
    p.add_argument("--no-report", action="store_true",
                   help="do not score the negatives probe each epoch nor write report.html "
                        "(`keras-hardneg report OUTPUT` writes a page later, without the "
                        "per-epoch probe)")
    p.add_argument("--verbose", type=int, choices=[0, 1, 2], default=None,
                   help="1: a progress bar per epoch, 2: one line per epoch, 0: silent "
                        "(default: 1 on a terminal, 2 when the output goes to a file or "
                        "pipe); lines show the loss and the kNN monitor, every metric is "
                        "in history.json")
    p.add_argument("--distribution", type=distribution, default=None,
                   metavar="NAME_OR_JSON",
                   help="spread the run over processes: a registered distribution "
                        "(tf_multi_worker reads TF_CONFIG) or a JSON object, e.g. "
                        "'{\"name\": \"tf_multi_worker\", \"workers\": \"h1:port,h2:port\", "
                        "\"task_index\": 0}'; run the same command in every worker, "
                        "same --output (a shared directory)")
    p.add_argument("--tensorboard", action="store_true",
                   help="also write TensorBoard logs to OUTPUT/tensorboard/ (`tensorboard "
                        "--logdir OUTPUT/tensorboard`); every epoch's figures are in "
                        "OUTPUT/history.csv and history.json either way")
    p.set_defaults(func=cmd_train)


def cmd_train(args: argparse.Namespace) -> int:
    from keras_hardneg import run

    recipe = recipe_from_args(args)
    output = output_folder(args.output or os.path.join("runs", recipe["name"]), create=False)
    print(f"keras-hardneg train: {recipe['framework']['name']} + {recipe['loss']['name']} on "
          f"{recipe['data']['name']}{_image_size_note(recipe)}, {recipe['epochs']} epochs -> "
          f"{output}", flush=True)
    from keras_hardneg.callbacks import BackupError

    try:
        verbose = args.verbose if args.verbose is not None else (  # no \r in log files
            1 if sys.stdout.isatty() else 2)
        result = run.train(recipe, output, resume=not args.no_resume, verbose=verbose,
                           export=not args.no_export, distribution=args.distribution,
                           report=not args.no_report,
                           **({"tensorboard": True} if args.tensorboard else {}))
    except (BackupError, run.RecipeError) as e:  # the API's words -> the flags
        raise CliError(str(e).replace("resume=False", "--no-resume")
                       .replace("choose another output folder", "another --output")
                       .replace("give another output folder", "give another --output")) from None
    if "worker" in result:  # a multi-worker run's other workers: the chief reports
        print(f"keras-hardneg train: worker {result['worker']} done ({result['epochs_run']} "
              f"epochs); the chief wrote {output}")
        return 0
    print_summary("done", _summary_rows(result, recipe, output))
    return 0


def _summary_rows(result: dict[str, Any], recipe: dict[str, Any], output: str) -> list:
    """``train``'s closing block: the run's figures, a warning, and the files it wrote."""
    from keras_hardneg.modalities import modality_of

    modality = modality_of(recipe)
    speed = result.get(modality.throughput_key)
    rows = [
        ("data", result["data"]),
        ("epochs run", result["epochs_run"]),
        ("wall time", f"{result['seconds']:.1f} s"),
        (modality.throughput_label, f"{speed:.1f}"
         if speed else "n/a (nothing left to train: the run was complete)"),
    ] + figure_rows(result, recipe, modality)
    missing = modality.missing_evaluation(recipe)
    if isinstance(result.get("evaluation"), str):  # unlabeled images: evaluation off
        rows.append(("evaluation", result["evaluation"]))
    elif missing:
        rows.append(("evaluation", missing))
    from keras_hardneg.run.report.progress import clamp_warning

    warning = clamp_warning(result.get("history") or {})
    if warning:
        rows.append(("warning", warning))
    rows += [(label, os.path.join(output, name)) for label, name in (
        ("run directory", ""), ("recipe", "recipe.json"), ("history", "history.json"),
        ("history (CSV)", "history.csv"), ("history plot", "history.png"),
        ("TensorBoard logs", "tensorboard"), ("results", "results.json"),
        ("run report", "report.html"), ("resume state", "backup"))
        if name not in _WHEN_WRITTEN or os.path.exists(os.path.join(output, name))]
    if result.get("export_dir"):
        rows += [("exported encoder", result["export_dir"]),
                 ("model card", os.path.join(result["export_dir"], "model_card.md"))]
    return rows


#: The files of a run listed only when the run wrote them.
_WHEN_WRITTEN = ("history.csv", "history.png", "tensorboard", "report.html")


def _image_size_note(recipe: dict[str, Any]) -> str:
    """``" (images resized to 32x32)"`` for data that takes ``image_size`` (images); ""
    for graphs and text."""
    from keras_hardneg.registry import DATASETS

    data = recipe["data"]
    if "image_size" not in DATASETS.get(data["name"]).params:
        return ""
    size = data.get("image_size")
    if size:
        return f" (images resized to {size}x{size})"
    return " (images at their own size)"
