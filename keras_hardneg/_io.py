"""File helpers shared by checkpoints, exports and sampler state: durable writes
(fsync) and a pickle-free ``.npz`` encoding of plain state dicts."""

import json
import os

import numpy as np

__all__ = ["atomic_write_json", "fsync_dir", "fsync_file", "fsync_tree", "state_to_arrays",
           "state_from_npz"]

_NONE = json.dumps(None)  # how None is stored in an .npz (no pickle)


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
    with open(tmp, "w") as f:
        json.dump(obj, f, **dump_kwargs)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))


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
