"""The command line as a user runs it, in this test's process: ``keras_hardneg.cli.main``
with its exit status and what it printed to stdout and stderr (pytest's ``capsys``).

A fresh interpreter costs ~10 CPU-s of TensorFlow imports here (docs/notes/suite_time.md),
so the user-view tests run the CLI in-process: the same parser, the same error path and the
same printing (stdout is not a terminal under ``capsys``, as it is not for ``cmd > log``).
What only a real process shows (C++ log lines, import-time warnings) is checked once, in
``tests/test_cli.py::test_a_cli_run_prints_no_error_level_lines``."""

from __future__ import annotations

import dataclasses

from keras_hardneg import cli


@dataclasses.dataclass
class Completed:
    """What ``subprocess.run`` would return: exit status and the text of both streams."""

    returncode: int
    stdout: str
    stderr: str


def run(capsys, *argv: str) -> Completed:
    """Runs ``keras-hardneg ARGV`` in this process; an exception other than the CLI's own
    one-line errors propagates (a user would have seen a traceback)."""
    capsys.readouterr()
    try:
        code = cli.main(list(argv))
    except SystemExit as e:  # argparse: usage errors (2) and --help (0)
        code = e.code if isinstance(e.code, int) else int(e.code is not None)
    out = capsys.readouterr()
    return Completed(code, out.out, out.err)
