"""``keras-hardneg report``: the HTML page of a run or a zoo entry."""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from keras_hardneg.cli.errors import CliError
from keras_hardneg.cli.flags import number
from keras_hardneg.cli.output import output_folder, print_summary
from keras_hardneg.cli.overrides import data_overrides


def add_parser(sub: Any) -> None:
    """Adds ``report`` to the subcommands ``sub``."""
    p = sub.add_parser("report", help="write report.html: what a run's negatives did, as a "
                                      "page to open in a browser",
                       description="Write the run report of a run directory (RUN/report.html; "
                                   "`train` writes it too) or of a zoo entry (a folder or an "
                                   "entry name, with the data given: --dataset; written to "
                                   "ENTRY-report.html here unless --output). One "
                                   "self-contained HTML file: the recipe, the figures beside "
                                   "the starting encoder's, the curves per epoch, what the "
                                   "negatives did (similarity histograms, the loss's weight "
                                   "of each negative, effective number of negatives, "
                                   "same-class negatives) and the modality's own views "
                                   "(nearest neighbours, 2-D map, nearest sentences).")
    p.add_argument("target", help="a run directory, a zoo entry folder or a zoo entry name")
    p.add_argument("--dataset", help="the data: 'digits', 'tfds:NAME', an image folder, a TU "
                                     "graph folder or a text file (default: the run's; a zoo "
                                     "entry's recipe names data of its own machine)")
    p.add_argument("--recipe", help="take the data section from this recipe")
    p.add_argument("--image-size", type=number(int, "--image-size"),
                   help="resize the images to this side (default: the recipe's)")
    p.add_argument("--limit-per-class", type=number(int, "--limit-per-class"),
                   help="image folders: at most this many images per class")
    p.add_argument("--output", help="the page to write (default: RUN/report.html, or "
                                    "./ENTRY-report.html for a zoo entry)")
    p.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    from keras_hardneg import run
    from keras_hardneg.run.report.run_report import report_target

    if args.recipe and not os.path.isfile(args.recipe):
        raise CliError(f"--recipe {args.recipe!r}: file not found.")
    overrides = data_overrides(args)
    if args.recipe:
        with open(args.recipe) as f:
            given = json.load(f)
        overrides = {**({"data": given["data"]} if "data" in given else {}), **overrides}
    output = os.path.abspath(args.output) if args.output else None
    if output is not None:
        output_folder(os.path.dirname(output), "--output's folder")
    start = time.perf_counter()
    try:
        out = report_target(args.target, overrides=overrides or None, output=output)
    except (run.RunDirectoryError, FileExistsError) as e:
        raise CliError(str(e)) from None
    print_summary("report", [
        (out["kind"], args.target), ("report", out["path"]),
        ("size", f"{out['bytes'] / 1024:.0f} KB (one self-contained file: open it in a "
                 "browser)"),
        ("time", f"{time.perf_counter() - start:.1f} s")])
    return 0
