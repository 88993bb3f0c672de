"""The ``keras-hardneg`` command line: ``train``, ``evaluate``, ``report``, ``export``,
``tune``, ``zoo``.

Every subcommand has ``--help``; the choices and help of the component flags come from
the registries. Errors in the user's input (a missing file, a bad recipe key, an
out-of-range flag) print one line naming the flag the user gave (or the recipe key and
file) and exit with status 2; no traceback (set ``KERAS_HARDNEG_DEBUG=1`` to see one). The
CLI uses only public functions of the package.

One module per command (:mod:`~keras_hardneg.cli.train`, ``evaluate``, ``report``,
``export``, ``tune``, ``zoo``: each an ``add_parser(sub)`` and its command), the shared
recipe flags (:mod:`~keras_hardneg.cli.flags`), the recipe they describe
(:mod:`~keras_hardneg.cli.overrides`) and what the commands print
(:mod:`~keras_hardneg.cli.output`).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from keras_hardneg.cli import evaluate, export, report, train, tune, zoo
from keras_hardneg.cli.errors import EXIT_USAGE, CliError
from keras_hardneg.cli.flags import with_flag
# Former private names of the one-module CLI, kept for the tests that call them.
from keras_hardneg.cli.output import figure_rows as _figure_rows  # noqa: F401
from keras_hardneg.cli.overrides import recipe_from_args as _recipe_from_args  # noqa: F401
from keras_hardneg.cli.overrides import recipe_overrides as _overrides  # noqa: F401

__all__ = ["main", "build_parser", "CliError"]

#: The commands in the order ``--help`` lists them.
COMMANDS = (train, evaluate, report, export, zoo, tune)


def build_parser() -> argparse.ArgumentParser:
    """The ``keras-hardneg`` argument parser (component choices from the registries)."""
    from keras_hardneg import __version__

    parser = argparse.ArgumentParser(
        prog="keras-hardneg",
        description="Self-supervised contrastive pre-training with principled negatives "
                    "(Keras 3).")
    parser.add_argument("--version", action="version", version=f"keras-hardneg {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit status (2 for bad input)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    from keras_hardneg.data import TensorFlowBackendRequiredError, TensorFlowRequiredError

    try:
        return args.func(args)
    except (CliError, FileNotFoundError, ValueError, TensorFlowRequiredError,
            TensorFlowBackendRequiredError) as e:
        if os.environ.get("KERAS_HARDNEG_DEBUG"):
            raise
        print(f"keras-hardneg {args.command}: error: {with_flag(str(e), args)}",
              file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        if sys.stdout.isatty():  # end the progress bar's line: the message gets its own
            print(flush=True)
        print(f"keras-hardneg {args.command}: interrupted; rerun the same command to resume.",
              file=sys.stderr)
        return 130
