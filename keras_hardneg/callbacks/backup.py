"""Crash-safe backup and restore of a training run (weights, optimizer, Python-side state).

Keras's ``BackupAndRestore`` rewrites ``latest.weights.h5`` in place and then
``training_metadata.json`` in a second step: a process killed during the first
write leaves a truncated HDF5 file (the next run fails to start), one killed
between the two leaves weights of epoch ``e + 1`` labelled as epoch ``e``. It
also saves only Keras variables: a sampler's random generator, coverage and
graph, or a callback's step counter, are lost.

:class:`AtomicBackupAndRestore` keeps the Keras contract (same constructor,
``model._initial_epoch`` set on ``on_train_begin``) but commits each backup
atomically:

1. the weights (model variables incl. non-trainable ones such as the MoCo queue,
   the key encoder, batch-norm statistics and the memory bank, plus the
   optimizer's variables and iteration count) go to a *new* file
   ``ckpt-<epoch>-<batch>-<id>.weights.h5``, fsynced;
2. the registered Python-side state (``state={"name": obj}``, each ``obj`` with
   ``get_state()`` / ``set_state(dict)``, e.g. a BatchSampler) goes to a new
   ``ckpt-...state.npz``, fsynced;
3. ``training_metadata.json`` (the commit record: epoch, file names, the
   per-epoch logs so far) is written to a temporary file, fsynced and moved over
   the old one with ``os.replace`` -- the only step that makes the new backup
   current; then the files of the previous backup are removed.

A kill at any point leaves either the previous backup or the new one, never a
mix. Files of an uncommitted backup are removed on the next start.

Several workers (``tf.distribute.MultiWorkerMirroredStrategy``): every worker must take
part in a save (reading a synchronised variable may be a collective), but only the chief's
backup counts. The other workers write theirs to a private directory and restore the
chief's with ``restore_dir`` (read only: they never clean it up), so after a worker is
killed, rerunning all of them resumes everybody from the chief's last committed backup.
"""

from __future__ import annotations

import io
import json
import os
import uuid
import warnings
from typing import Any

import keras
import numpy as np

from keras_hardneg._io import fsync_dir, fsync_file, state_from_npz, state_to_arrays

__all__ = ["AtomicBackupAndRestore", "BackupError", "RandomState", "committed_weights",
           "latest_weights"]

_META = "training_metadata.json"
_FORMAT = 1


class BackupError(RuntimeError):
    """A committed backup cannot be read (its files are missing or damaged)."""


def committed_weights(backup_dir):
    """The committed ``.weights.h5`` files of ``backup_dir``, newest first: the latest
    commit's (:func:`latest_weights`) and the one before it, which a backup keeps so that a
    damaged latest one falls back. Empty when nothing is committed."""
    out = []
    latest = latest_weights(backup_dir)
    if latest is not None:
        out.append(latest)
    try:
        with open(os.path.join(backup_dir, _META)) as f:
            previous = (json.load(f).get("previous") or {}).get("weights")
    except (OSError, ValueError, AttributeError):
        previous = None
    if previous and os.path.isfile(os.path.join(backup_dir, previous)):
        out.append(os.path.join(backup_dir, previous))
    return out


def latest_weights(backup_dir):
    """Path of the committed ``.weights.h5`` in ``backup_dir`` (an atomic backup's, or a
    plain Keras ``latest.weights.h5``), or None when there is none."""
    meta_path = os.path.join(backup_dir, _META)
    if os.path.isfile(meta_path):
        try:
            with open(meta_path) as f:
                name = json.load(f).get("weights")
        except (OSError, ValueError):
            name = None
        if name and os.path.isfile(os.path.join(backup_dir, name)):
            return os.path.join(backup_dir, name)
    legacy = os.path.join(backup_dir, "latest.weights.h5")
    return legacy if os.path.isfile(legacy) else None


class RandomState:
    """The state of every :class:`keras.random.SeedGenerator` a model's layers hold (e.g. the
    augmentation's), as ``get_state()`` / ``set_state(dict)`` for
    :class:`AtomicBackupAndRestore`'s ``state``. ``model.save_weights`` does not save these
    variables: without them a resumed run draws the augmentations of epoch 0 again and
    parts from an uninterrupted one. A backup written before this state existed restores
    without it (``optional_in_backup``).

    Args:
        model: a built Keras model; its layers' seed generators are taken in
            ``model._flatten_layers()`` order (fixed for a given architecture).
    """

    optional_in_backup = True

    def __init__(self, model: keras.Model):
        self.generators = [sg for layer in model._flatten_layers()
                           for sg in getattr(layer, "_seed_generators", ())]

    def get_state(self) -> dict:
        return {f"g{i}": np.asarray(keras.ops.convert_to_numpy(sg.state.value))
                for i, sg in enumerate(self.generators)}

    def set_state(self, state: dict) -> None:
        if len(state) != len(self.generators):
            raise BackupError(f"the backup holds {len(state)} random generators, the model "
                              f"{len(self.generators)}; it was written by a differently "
                              "configured run.")
        for i, sg in enumerate(self.generators):
            sg.state.assign(np.asarray(state[f"g{i}"]).astype(sg.state.dtype))


def _files(entry):
    """The file names a commit record (or its ``previous``) names."""
    return {entry.get("weights"), entry.get("state")} - {None} if entry else set()


def _plain(value):
    """A JSON-safe copy of a log value."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


def _encode_state(states):
    """``{"name": state_dict}`` -> bytes of an ``.npz`` (no pickle)."""
    arrays = {}
    for name, state in states.items():
        if "/" in name:
            raise ValueError(f"state name {name!r} must not contain '/'.")
        arrays.update(state_to_arrays(state, prefix=f"{name}/"))
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _decode_state(path):
    out = {}
    with np.load(path, allow_pickle=False) as z:
        for full in z.files:
            name, key = full.split("/", 1)
            out.setdefault(name, {})[key] = state_from_npz(z, full)
    return out


@keras.saving.register_keras_serializable(package="keras_hardneg")
class AtomicBackupAndRestore(keras.callbacks.BackupAndRestore):
    """:class:`keras.callbacks.BackupAndRestore` with atomic commits and extra state.

    Args:
        backup_dir: directory of the backup (used by nothing else).
        save_freq: ``"epoch"`` or a number of batches (as in Keras).
        delete_checkpoint: remove the backup when ``fit`` ends normally.
        state: optional ``{"name": obj}``; each ``obj`` has ``get_state()``
            returning a dict of NumPy arrays / plain values and
            ``set_state(dict)``. Saved with every backup, restored (in the given
            order) at ``on_train_begin`` -- put this callback *after* callbacks
            whose ``on_train_begin`` resets such state.
        restore_dir: where ``on_train_begin`` restores from (default ``backup_dir``).
            Another directory is only read (a multi-worker run's non-chief workers
            restore the chief's backup and write their own elsewhere).

    Attributes:
        history: per-epoch logs of the whole run (restored epochs first), so a
            resumed run can report all its epochs.
        restored: ``None``, or ``{"epoch", "batch", "weights"}`` of the backup
            restored at the start of the last ``fit``.
    """

    def __init__(self, backup_dir: str, save_freq: str | int = "epoch",
                 delete_checkpoint: bool = True, state: dict[str, Any] | None = None,
                 restore_dir: str | None = None):
        super().__init__(backup_dir, save_freq=save_freq, double_checkpoint=False,
                         delete_checkpoint=delete_checkpoint)
        self.restore_dir = backup_dir if restore_dir is None else restore_dir
        state = dict(state or {})
        for name, obj in state.items():
            if not (callable(getattr(obj, "get_state", None))
                    and callable(getattr(obj, "set_state", None))):
                raise ValueError(f"`state[{name!r}]` must have get_state() and set_state(); "
                                 f"got {type(obj).__name__}.")
        self.state = state
        self.history = []
        self.restored = None
        self._meta_path = os.path.join(backup_dir, _META)

    # ------------------------------------------------------------------ reading
    def _read_meta(self, directory=None):
        path = self._meta_path if directory is None else os.path.join(directory, _META)
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return json.load(f)

    def _cleanup(self, keep):
        """Removes backup files not named in ``keep`` (uncommitted or superseded)."""
        if not os.path.isdir(self.backup_dir):
            return
        for name in os.listdir(self.backup_dir):
            if (name.startswith("ckpt-") or name.startswith(".tmp-")) and name not in keep:
                try:
                    os.remove(os.path.join(self.backup_dir, name))
                except OSError:
                    pass

    def committed_epoch(self):
        """The epoch ``on_train_begin`` would resume from: that of the committed backup in
        ``restore_dir`` (0 when there is none)."""
        try:
            meta = self._read_meta(self.restore_dir)
        except (OSError, ValueError):
            return 0
        return int(meta.get("epoch", 0)) if meta else 0

    def on_train_begin(self, logs=None):
        self.history = []
        self.restored = None
        self._load_model()

    def _load_model(self):
        if not self.model.built:
            raise ValueError("AtomicBackupAndRestore needs a built model before fit().")
        source = self.restore_dir
        own = os.path.abspath(source) == os.path.abspath(self.backup_dir)
        try:
            meta = self._read_meta(source)
        except (OSError, ValueError) as e:
            raise BackupError(f"the commit record {os.path.join(source, _META)} is damaged "
                              f"({e}). Delete the directory (or run with resume=False) to "
                              "start over.") from None
        if meta is None or "weights" not in meta:
            if not own:
                return None  # nothing committed there yet (plain Keras backups: own dir only)
            self._cleanup(keep=())
            if meta is not None or os.path.exists(self._weights_path):
                return super()._load_model()  # a plain Keras backup
            return None
        previous = meta.get("previous") or None
        if own:
            self._cleanup(keep=_files(meta) | _files(previous))
        if self.model.optimizer is not None and not self.model.optimizer.built:
            self.model.optimizer.build(self.model.trainable_variables)
        try:
            entry = self._restore(source, meta)
        except BackupError as e:
            if previous is None:
                raise
            try:
                entry = self._restore(source, previous)
            except BackupError:
                raise e from None
            warnings.warn(f"{e} Resuming from the backup before it (epoch "
                          f"{previous['epoch']}).", stacklevel=2)
            print(f"the backup of epoch {meta['epoch']} is damaged; resuming from the one "
                  f"before it (epoch {previous['epoch']}).", flush=True)
        epoch = int(entry["epoch"])
        self.history = list(meta.get("history", []))[:epoch]
        self.model._initial_epoch = epoch
        self._current_epoch = epoch
        self.restored = {"epoch": epoch, "batch": int(entry.get("batch", 0)),
                         "weights": entry["weights"]}
        return meta

    def _restore(self, source, entry):
        """Loads the weights and state a commit record (or its ``previous``) names."""
        weights = os.path.join(source, entry["weights"])
        hint = ("Delete the directory (or run with resume=False) to start over.")
        try:
            self.model.load_weights(weights)
        except Exception as e:  # noqa: BLE001 -- reported with the path
            raise BackupError(
                f"the backup in {source} (epoch {entry['epoch']}) cannot be loaded from "
                f"{weights}: {str(e).splitlines()[0] if str(e) else type(e).__name__}. {hint}"
            ) from e
        if entry.get("state"):
            try:
                saved = _decode_state(os.path.join(source, entry["state"]))
            except Exception as e:  # noqa: BLE001 -- a damaged state file
                raise BackupError(f"the backup in {source} (epoch {entry['epoch']}) has a "
                                  f"damaged state file {entry['state']}: {e}. {hint}") from e
            missing = [n for n, obj in self.state.items() if n not in saved
                       and not getattr(obj, "optional_in_backup", False)]
            if missing:
                raise BackupError(f"the backup in {source} has no state for {missing}; "
                                  f"it was written by a differently configured run. {hint}")
            for name, obj in self.state.items():
                if name in saved:
                    obj.set_state(saved[name])
        elif any(not getattr(obj, "optional_in_backup", False) for obj in self.state.values()):
            raise BackupError(f"the backup in {source} has no state for "
                              f"{sorted(self.state)}; it was written by a differently "
                              f"configured run. {hint}")
        return entry

    # ------------------------------------------------------------------ writing
    def on_epoch_end(self, epoch, logs=None):
        self.history = self.history[:epoch] + [{k: _plain(v) for k, v in (logs or {}).items()}]
        super().on_epoch_end(epoch, logs)

    def _save_model(self):
        os.makedirs(self.backup_dir, exist_ok=True)
        old = self._read_meta()
        stem = f"ckpt-{self._current_epoch:05d}-{self._last_batch_seen:06d}-{uuid.uuid4().hex[:8]}"
        weights = f"{stem}.weights.h5"
        path = os.path.join(self.backup_dir, weights)
        self.model.save_weights(path, overwrite=True)
        fsync_file(path)
        state_name = None
        if self.state:
            state_name = f"{stem}.state.npz"
            data = _encode_state({n: obj.get_state() for n, obj in self.state.items()})
            with open(os.path.join(self.backup_dir, state_name), "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        # The previous commit's files stay (one back): a damaged latest backup falls back.
        previous = None
        if old is not None and old.get("weights") and old["weights"] != weights:
            previous = {k: old.get(k) for k in ("epoch", "batch", "weights", "state")}
        meta = {"format": _FORMAT, "epoch": self._current_epoch, "batch": self._last_batch_seen,
                "weights": weights, "state": state_name, "history": self.history,
                "previous": previous}
        tmp = os.path.join(self.backup_dir, f".tmp-{uuid.uuid4().hex[:8]}-{_META}")
        with open(tmp, "w") as f:
            json.dump(meta, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._meta_path)  # the commit
        fsync_dir(self.backup_dir)
        self._cleanup(_files(meta) | _files(previous))
        if old is None and os.path.exists(self._weights_path):
            os.remove(self._weights_path)  # a superseded plain Keras backup

    def get_config(self):
        config = {"backup_dir": self.backup_dir, "save_freq": self.save_freq,
                  "delete_checkpoint": self.delete_checkpoint}
        if self.restore_dir != self.backup_dir:
            config["restore_dir"] = self.restore_dir
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**config)
