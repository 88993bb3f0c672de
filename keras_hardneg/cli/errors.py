"""The command line's one kind of user-facing error and its exit status."""

from __future__ import annotations

EXIT_USAGE = 2


class CliError(Exception):
    """A user-facing error: printed as one line, exit status 2."""
