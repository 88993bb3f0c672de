"""Line readers for the retrieval files: JSON Lines and tab-separated rows with their line
numbers, and the one-line error that names the file, the line and what is allowed."""

from __future__ import annotations

import json
import os
from typing import Iterator

__all__ = ["RetrievalFileError", "location", "jsonl_rows", "tsv_rows", "check_file"]


class RetrievalFileError(ValueError):
    """A retrieval data file breaks a rule; the message names the file, the line and the rule."""


def location(path: str, line: int | None = None) -> str:
    """``"PATH line N"`` (or ``"PATH"``): the prefix of every error about a file."""
    return f"{path} line {line}" if line is not None else str(path)


def check_file(path: str | os.PathLike, what: str) -> str:
    """``path`` as a string if it is an existing file, else a one-line error naming ``what``."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise RetrievalFileError(f"{what} {path!r} does not exist (or is not a file).")
    return path


def _lines(path: str) -> Iterator[tuple[int, str]]:
    try:
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, start=1):
                yield number, line.rstrip("\r\n")
    except UnicodeDecodeError as err:
        raise RetrievalFileError(f"{path} is not UTF-8 text ({err}); only UTF-8 files are "
                                 "read.") from None


def jsonl_rows(path: str) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` for each non-blank line of a JSON Lines file.

    Raises:
        RetrievalFileError: a line is not JSON, or is JSON but not an object.
    """
    for number, line in _lines(path):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise RetrievalFileError(f"{location(path, number)}: not valid JSON ({err.msg} at "
                                     f"column {err.colno}); each line must be one JSON "
                                     "object.") from None
        if not isinstance(row, dict):
            raise RetrievalFileError(f"{location(path, number)}: a JSON "
                                     f"{type(row).__name__}, not an object; each line must be "
                                     "one JSON object.")
        yield number, row


def tsv_rows(path: str) -> Iterator[tuple[int, list[str]]]:
    """``(line number, fields)`` for each non-blank line of a tab-separated file (no quoting:
    a field is everything between two tabs)."""
    for number, line in _lines(path):
        if line.strip():
            yield number, line.split("\t")
