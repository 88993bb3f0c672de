"""File helpers shared by checkpoints, exports and sampler state: durable writes
(fsync) and a pickle-free ``.npz`` encoding of plain state dicts."""

import json
import os

import numpy as np

__all__ = ["fsync_dir", "fsync_file", "fsync_tree", "state_to_arrays", "state_from_npz"]

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
