"""``keras-hardneg export``: a run's encoder as a TF Hub SavedModel."""

from __future__ import annotations

import argparse
import os
from typing import Any

from keras_hardneg.cli.errors import CliError
from keras_hardneg.cli.output import output_folder, print_summary


def add_parser(sub: Any) -> None:
    """Adds ``export`` to the subcommands ``sub``."""
    p = sub.add_parser("export", help="export the encoder of a training run as a SavedModel",
                       description="Rebuild a run from RUN_DIR/recipe.json and its last "
                                   "checkpoint and write a reusable TF2 SavedModel (TF Hub "
                                   "format) + model card.")
    p.add_argument("run_dir", help="directory written by `keras-hardneg train`")
    p.add_argument("--output", help="SavedModel directory to write (atomically; default "
                                    "RUN_DIR/encoder)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace OUTPUT if it is an encoder exported by keras-hardneg (any "
                        "other folder is refused)")
    p.set_defaults(func=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    from keras_hardneg import run

    from keras_hardneg.export.write import check_replaceable

    output = os.path.abspath(args.output or os.path.join(args.run_dir, "encoder"))
    if os.path.lexists(output) and not args.overwrite:
        raise CliError(f"--output {output!r} exists; pass --overwrite to replace it.")
    if os.path.lexists(output):
        try:
            check_replaceable(output)
        except FileExistsError as e:
            raise CliError(f"--output: {e}") from None
    output_folder(os.path.dirname(output), "--output's folder")
    model, recipe, results, description, train = run.restore_run(args.run_dir, with_data=True)
    results.setdefault("epochs_run", None)
    run.export_trained_encoder(model, recipe, results, description, output, x_train=train[0],
                               run_dir=os.path.abspath(args.run_dir))
    print_summary("exported", [("encoder", output),
                                ("model card", os.path.join(output, "model_card.md"))])
    return 0
