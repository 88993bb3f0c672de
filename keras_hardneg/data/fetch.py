"""Files fetched once from a public host into a cache: where the cache is, which host,
one lock per cached item, atomic placement, and plain output in logs.

Used by the datasets a recipe names (:mod:`keras_hardneg.data.public`: CIFAR-10/100, the
TU graph sets, the BEIR retrieval sets, SimCSE's Wikipedia sentences) and by the zoo
(:mod:`keras_hardneg.zoo_store`).

* **Cache**: ``data_dir`` when given, else ``$KERAS_HOME/datasets`` (``~/.keras/datasets``),
  the folder ``keras.datasets`` uses, so a CIFAR-10 that Keras fetched before is used as it
  is.
* **Host**: each file has one public URL; ``$KERAS_HARDNEG_DATA_MIRROR`` (a base URL,
  ``https://``, ``http://`` or ``file://``) replaces every host: file ``NAME`` (the last
  part of its public URL, e.g. ``MUTAG.zip``) is then fetched from ``MIRROR/NAME``. A
  machine without network can point it at a folder holding the files (``file:///data``).
* **Downloads** go through ``keras.utils.get_file`` into a temporary folder beside their
  place and are renamed into it only when complete and checked (SHA-256 where the file's
  hash is published; content checks elsewhere, in the caller). A killed fetch leaves no
  partial file where a reader looks; what it left in the temporary folder is removed by the
  next fetch of the same item.
* **Concurrency**: every fetch of one item holds an exclusive lock (``ITEM.lock``, POSIX
  ``flock``), so N processes asking for the same item at once fetch it once and all get
  the one complete copy.
* **Output**: on a terminal Keras's progress bar; written to a file or a pipe, one plain
  line per file (no ``\\r``, no colour codes).

Example:

>>> import os
>>> from keras_hardneg.data import fetch
>>> fetch.data_home("/tmp/my_cache")
'/tmp/my_cache'
>>> os.environ[fetch.MIRROR_ENV] = "file:///mirror"
>>> fetch.source_url("https://www.chrsmrrs.com/graphkerneldatasets/MUTAG.zip")
'file:///mirror/MUTAG.zip'
>>> del os.environ[fetch.MIRROR_ENV]
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import sys
import tempfile
import time
import urllib.parse
from typing import Any, Callable, Iterator

__all__ = ["MIRROR_ENV", "STAMP_FILE", "URL_SCHEMES", "FetchError", "data_home", "source_url",
           "is_url", "locked", "download", "fetch_folder", "read_stamp", "remove_orphans",
           "exit_on_fetch_error"]

MIRROR_ENV = "KERAS_HARDNEG_DATA_MIRROR"
#: Written last into a folder this module placed: where it came from, what was checked.
STAMP_FILE = "keras_hardneg_source.json"
URL_SCHEMES = ("http", "https", "file")
_TMP_PREFIX = ".fetch-"


class FetchError(ValueError):
    """A file that cannot be fetched, or that fails its check (nothing is cached then)."""


@contextlib.contextmanager
def exit_on_fetch_error(prog: str) -> Iterator[None]:
    """Ends a script in one line when a fetch inside the block fails: ``PROG: error:
    MESSAGE`` on standard error and exit status 2 (as ``argparse`` ends on a bad flag),
    instead of a traceback. The message already says what to give instead.

    Args:
        prog: the script's name as its usage line shows it (``parser.prog``).

    Example:

    >>> from keras_hardneg.data.fetch import FetchError, exit_on_fetch_error
    >>> try:
    ...     with exit_on_fetch_error("my_script.py"):
    ...         raise FetchError("MUTAG.zip: no network.")
    ... except SystemExit as e:
    ...     print(e.code)
    2
    """
    try:
        yield
    except FetchError as e:
        print(f"{prog}: error: {' '.join(str(e).split())}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None


def data_home(data_dir: str | None = None) -> str:
    """``data_dir``, else ``$KERAS_HOME/datasets`` (``~/.keras/datasets``), read at each call."""
    if data_dir:
        return os.path.abspath(os.path.expanduser(os.fspath(data_dir)))
    base = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    return os.path.join(base, "datasets")


def is_url(text: Any) -> bool:
    """Whether ``text`` is a URL this module fetches from (``http``, ``https``, ``file``)."""
    return isinstance(text, str) and urllib.parse.urlsplit(text).scheme in URL_SCHEMES


def source_url(url: str) -> str:
    """``url``, or ``$KERAS_HARDNEG_DATA_MIRROR/NAME`` (``NAME`` its last part) when set."""
    mirror = os.environ.get(MIRROR_ENV)
    if not mirror:
        return url
    if not is_url(mirror):
        raise FetchError(f"${MIRROR_ENV} {mirror!r} is not a URL (http://, https:// or "
                         "file://).")
    return mirror.rstrip("/") + "/" + posix_basename(url)


def posix_basename(url: str) -> str:
    return urllib.parse.urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1]


@contextlib.contextmanager
def locked(path: str) -> Iterator[None]:
    """Holds an exclusive lock on ``path + ".lock"`` (POSIX ``flock``; where there is none,
    no lock: the atomic rename alone keeps readers safe). The lock file is removed on the
    way out, fetched or failed, so the cache keeps no ``.lock`` files: it is unlinked while
    still held, and a process that waited on it finds on waking that its file is no longer
    the one at the path (another inode, or none) and takes the lock again on the new one."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover -- Windows
        yield
        return
    lock = path + ".lock"
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    while True:
        handle = open(lock, "a")
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            if os.path.samestat(os.stat(lock), os.fstat(handle.fileno())):
                break
        except FileNotFoundError:
            pass
        handle.close()  # the holder before removed it: lock the file now at the path
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.remove(lock)
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        handle.close()


def remove_orphans(parent: str, name: str) -> None:
    """Removes what killed fetches of ``name`` left in ``parent`` (call with the lock held)."""
    for path in glob.glob(os.path.join(parent, f"{_TMP_PREFIX}{glob.escape(name)}-*")):
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.remove(path)


def temp_dir(parent: str, name: str) -> str:
    """A new temporary folder for a fetch of ``name`` in ``parent`` (see :func:`remove_orphans`)."""
    os.makedirs(parent, exist_ok=True)
    return tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{name}-", dir=parent)


def _first_line(error: BaseException) -> str:
    text = str(error)
    return text.splitlines()[0] if text else type(error).__name__


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"


def fetch_file(url: str, folder: str, fname: str, *, sha256: str | None = None,
               what: str = "", announce: bool = True) -> str:
    """Fetches ``url`` as ``folder/fname`` with ``keras.utils.get_file`` (the file's
    SHA-256 checked when given) and returns that path. ``folder`` should be a temporary
    folder of the caller: a failed fetch raises :class:`FetchError` and may leave a partial
    file there. ``announce``: one plain line when the output is not a terminal."""
    from keras import config as keras_config
    from keras.utils import get_file

    terminal = hasattr(sys.stdout, "isatty") and sys.stdout.isatty()
    if announce and not terminal:
        print(f"fetching {what or fname} from {url}", flush=True)
    interactive = keras_config.is_interactive_logging_enabled()
    if not terminal and interactive:  # Keras's bar writes \r and colour codes: not in logs
        keras_config.disable_interactive_logging()
    try:
        path = get_file(fname=fname, origin=url, cache_dir=folder, cache_subdir=".",
                        file_hash=sha256, hash_algorithm="sha256" if sha256 else "auto")
    except ValueError:
        raise FetchError(f"{what or fname}: {url} does not match its published SHA-256 "
                         f"({sha256}); nothing was cached.") from None
    except Exception as e:  # noqa: BLE001 -- get_file raises a bare Exception
        raise FetchError(f"{what or fname}: cannot fetch {url} ({_first_line(e)}); nothing "
                         "was cached.") from None
    finally:
        if not terminal and interactive:
            keras_config.enable_interactive_logging()
    return path


def download(url: str, dest: str, *, sha256: str | None = None, what: str = "") -> str:
    """``dest``, fetched from ``url`` (mirror applied) when absent: one fetch at a time
    (locked), into a temporary folder, checked, renamed into place. Returns ``dest``.

    Raises:
        FetchError: the file cannot be fetched or fails its SHA-256 (nothing is cached).
    """
    dest = os.path.abspath(dest)
    if os.path.isfile(dest):
        return dest
    parent, name = os.path.split(dest)
    with locked(dest):
        if os.path.isfile(dest):  # another process fetched it while this one waited
            return dest
        remove_orphans(parent, name)
        tmp = temp_dir(parent, name)
        try:
            path = fetch_file(source_url(url), tmp, name, sha256=sha256, what=what)
            os.replace(path, dest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return dest


def read_stamp(folder: str) -> dict[str, Any] | None:
    """The stamp of a folder :func:`fetch_folder` placed, or ``None``."""
    path = os.path.join(folder, STAMP_FILE)
    if not os.path.isfile(path):
        return None
    try:
        with open(path) as f:
            stamp = json.load(f)
    except (OSError, ValueError):
        return None
    return stamp if isinstance(stamp, dict) else None


def fetch_folder(folder: str, build: Callable[[str], dict[str, Any]], *,
                 complete: Callable[[str], bool] | None = None) -> str:
    """``folder``, made by ``build(tmp)`` when it is not there: ``build`` fills the empty
    temporary folder ``tmp`` (fetching, extracting and checking; raising
    :class:`FetchError` when something is wrong) and returns what to record in its stamp;
    the folder is renamed into place only then. ``complete(folder)`` says whether a folder
    without a stamp (one a user or another tool put there) is usable as it is.

    Raises:
        FetchError: from ``build``, or ``folder`` exists but is incomplete (not ours to
        replace).
    """
    folder = os.path.abspath(folder)

    def ready() -> bool:
        return read_stamp(folder) is not None or (
            os.path.isdir(folder) and complete is not None and complete(folder))

    if ready():
        return folder
    parent, name = os.path.split(folder)
    with locked(folder):
        if ready():
            return folder
        if os.path.exists(folder):
            raise FetchError(f"{folder} exists but is incomplete and was not written by "
                             "keras-hardneg; remove it (or complete it) and run again.")
        remove_orphans(parent, name)
        tmp = temp_dir(parent, name)
        try:
            stamp = dict(build(tmp))
            stamp.setdefault("fetched", time.strftime("%Y-%m-%dT%H:%M:%S%z"))
            with open(os.path.join(tmp, STAMP_FILE), "w") as f:
                json.dump(stamp, f, indent=1, sort_keys=True)
            os.replace(tmp, folder)
        finally:
            if os.path.isdir(tmp):
                shutil.rmtree(tmp, ignore_errors=True)
    return folder


def size_text(n: int) -> str:
    """``n`` bytes as ``"12.3 MB"`` / ``"4.5 kB"``."""
    return _size(n)
