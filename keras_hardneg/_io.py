"""File helpers shared by checkpoints, exports, tuning records, sampler state and the zoo:
durable writes (fsync), atomic replacement of a file or a directory, a file's SHA-256, and a
pickle-free ``.npz`` encoding of plain state dicts."""

import contextlib
import ctypes
import ctypes.util
import hashlib
import json
import os
import shutil
import uuid

import numpy as np

__all__ = ["atomic_replace_dir", "atomic_write_json", "fsync_dir", "fsync_file", "fsync_tree",
           "sha256_file", "state_to_arrays", "state_from_npz"]

_NONE = json.dumps(None)  # how None is stored in an .npz (no pickle)


def sha256_file(path: str) -> str:
    """Hex SHA-256 of the file at ``path``, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fsync_dir(path):
    """Flushes a directory entry to disk (best effort; no-op where unsupported)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def fsync_file(path):
    """Flushes a file's contents to disk."""
    with open(path, "rb+") as f:
        os.fsync(f.fileno())


def atomic_write_json(path, obj, **dump_kwargs):
    """Writes ``obj`` as JSON to ``path`` so that a reader (or a killed writer) only ever sees
    the old or the new file whole: temporary file, fsync, rename, fsync of the directory."""
    path = os.fspath(path)
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            json.dump(obj, f, **dump_kwargs)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:  # a failed write (disk full, a bad value) leaves no temporary
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    fsync_dir(os.path.dirname(os.path.abspath(path)))


def _rename_exchange(a, b) -> bool:
    """Atomically swaps two paths with Linux renameat2(RENAME_EXCHANGE); False if unsupported."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                          ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    rc = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange)
    return rc == 0


def atomic_replace_dir(src, dst, *, overwrite=False, old_prefix=".khn-old-"):
    """Moves the finished directory ``src`` to ``dst`` so that ``dst`` is only ever absent,
    the previous directory whole, or the new one whole; then fsyncs ``dst``'s parent.

    ``src`` and ``dst`` must be on one file system (build ``src`` next to ``dst``). An existing
    ``dst`` is replaced only with ``overwrite=True`` (``FileExistsError`` otherwise, or if it is
    not a directory): swapped in one step with Linux ``renameat2(RENAME_EXCHANGE)``, else two
    renames; if killed between those, the previous directory is intact under
    ``<old_prefix><name>-*`` next to ``dst``.
    """
    src, dst = os.fspath(src), os.fspath(dst)
    parent, base = os.path.split(os.path.abspath(dst))
    if not os.path.lexists(dst):
        try:
            os.rename(src, dst)  # atomic; fails if a non-empty dir appeared meanwhile
            fsync_dir(parent)
            return
        except OSError:
            if not os.path.lexists(dst):
                raise
    if not overwrite:
        raise FileExistsError(f"{dst} already exists; pass overwrite=True to replace it.")
    if not os.path.isdir(dst) or os.path.islink(dst):
        raise FileExistsError(f"{dst} exists and is not a directory; refusing to replace it.")
    if _rename_exchange(src, dst):
        shutil.rmtree(src)  # now holds the previous directory
        fsync_dir(parent)
        return
    old = os.path.join(parent, f"{old_prefix}{base}-{uuid.uuid4().hex[:8]}")
    os.rename(dst, old)
    try:
        os.rename(src, dst)
    except BaseException:
        os.rename(old, dst)
        raise
    shutil.rmtree(old, ignore_errors=True)
    fsync_dir(parent)


def fsync_tree(path):
    """Flushes every file and directory under ``path`` (best effort)."""
    for root, _dirs, files in os.walk(path):
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                os.fsync(f.fileno())
        fsync_dir(root)


def state_to_arrays(state, prefix=""):
    """``{key: value}`` -> ``{prefix + key: ndarray}`` for ``np.savez`` (None kept)."""
    return {f"{prefix}{k}": (np.array(_NONE) if v is None else np.asarray(v))
            for k, v in state.items()}


def state_from_npz(npz, key):
    """Reads one entry written by :func:`state_to_arrays` back to a Python value:
    0-d arrays become scalars/strings, the None marker becomes None."""
    v = npz[key]
    if v.dtype.kind == "U" and v.ndim == 0:
        v = str(v)
        return None if v == _NONE else v
    if v.ndim == 0:
        return v.item()
    return v
