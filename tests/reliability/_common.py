"""Helpers shared by the reliability tests and their child processes."""

import hashlib
import json

import numpy as np

from keras_hardneg._io import atomic_write_json


def digest_arrays(arrays):
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(np.asarray(a))
        h.update(str(a.dtype).encode() + str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def digest_state(state):
    """Digest of a sampler-style state dict (keys sorted; None and strings included)."""
    h = hashlib.sha256()
    for key in sorted(state):
        v = state[key]
        h.update(key.encode())
        if v is None or isinstance(v, str):
            h.update(json.dumps(v).encode())
        else:
            a = np.ascontiguousarray(np.asarray(v))
            if a.ndim == 0:
                h.update(repr(a.item()).encode())
            else:
                h.update(str(a.dtype).encode() + a.tobytes())
    return h.hexdigest()


def model_digests(model):
    out = {"weights": digest_arrays([v.numpy() for v in model.weights]),
           "optimizer": digest_arrays([v.numpy() for v in model.optimizer.variables]),
           "iterations": int(model.optimizer.iterations.numpy())}
    queue = getattr(model, "queue", None)
    if queue is not None:
        out["queue"] = digest_arrays([queue.numpy(), model.queue_pointer.numpy()])
        out["key_encoder"] = digest_arrays([v.numpy() for v in model.key_encoder.weights])
    return out


def write_json(path, obj):
    atomic_write_json(path, obj, indent=1, default=str)


def read_json(path):
    with open(path) as f:
        return json.load(f)
