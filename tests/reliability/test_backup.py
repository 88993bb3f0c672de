"""AtomicBackupAndRestore vs Keras's BackupAndRestore, in process (fast, tiny Dense model)."""

import json
import os

import keras
import numpy as np
import pytest

from keras_hardneg.callbacks import AtomicBackupAndRestore, BackupError
from keras_hardneg.callbacks.backup import latest_weights

X = np.random.default_rng(0).normal(size=(32, 4)).astype("float32")
Y = X.sum(1, keepdims=True)


def _model():
    keras.utils.set_random_seed(0)
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    m.compile(optimizer="adam", loss="mse")
    return m


def test_keras_backup_is_not_atomic_a_cut_write_blocks_resume(tmp_path):
    """Documents the gap: Keras writes latest.weights.h5 in place; half a file (a kill
    during the write) makes the next fit fail instead of resuming."""
    cb = keras.callbacks.BackupAndRestore(str(tmp_path), delete_checkpoint=False)
    _model().fit(X, Y, epochs=2, verbose=0, callbacks=[cb])
    path = tmp_path / "latest.weights.h5"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(Exception):
        _model().fit(X, Y, epochs=3, verbose=0,
                     callbacks=[keras.callbacks.BackupAndRestore(str(tmp_path))])


def test_uncommitted_files_are_ignored_and_removed(tmp_path):
    cb = AtomicBackupAndRestore(str(tmp_path), delete_checkpoint=False)
    m = _model()
    m.fit(X, Y, epochs=2, verbose=0, callbacks=[cb])
    saved = [w.copy() for w in m.get_weights()]
    # What a kill in the middle of the next save leaves: a half file, a temp record.
    (tmp_path / "ckpt-00003-000000-deadbeef.weights.h5").write_bytes(b"\x89HDF half")
    (tmp_path / ".tmp-deadbeef-training_metadata.json").write_text("{\"epoch\": 3")
    m2 = _model()
    cb2 = AtomicBackupAndRestore(str(tmp_path), delete_checkpoint=False)
    h = m2.fit(X, Y, epochs=2, verbose=0, callbacks=[cb2])
    assert cb2.restored["epoch"] == 2 and h.history == {}  # nothing left to run
    for a, b in zip(m2.get_weights(), saved):
        np.testing.assert_array_equal(a, b)
    meta = json.load(open(tmp_path / "training_metadata.json"))
    # The committed backup and the one before it (the fall-back of a damaged one).
    assert sorted(os.listdir(tmp_path)) == sorted(
        [meta["weights"], meta["previous"]["weights"], "training_metadata.json"])
    assert meta["previous"]["epoch"] == 1
    assert len(cb2.history) == 2  # the completed run still reports its epochs
    assert latest_weights(str(tmp_path)).endswith(
        json.load(open(tmp_path / "training_metadata.json"))["weights"])
    assert latest_weights(str(tmp_path / "none")) is None


def test_damaged_committed_backup_is_reported_not_ignored(tmp_path):
    cb = AtomicBackupAndRestore(str(tmp_path), delete_checkpoint=False)
    _model().fit(X, Y, epochs=1, verbose=0, callbacks=[cb])
    meta = json.load(open(tmp_path / "training_metadata.json"))
    (tmp_path / meta["weights"]).write_bytes(b"garbage")
    with pytest.raises(BackupError, match=r"cannot be loaded.*resume=False"):
        _model().fit(X, Y, epochs=2, verbose=0,
                     callbacks=[AtomicBackupAndRestore(str(tmp_path))])


def test_damaged_latest_backup_falls_back_to_the_previous_one(tmp_path, capsys):
    m = _model()
    m.fit(X, Y, epochs=1, verbose=0,
          callbacks=[AtomicBackupAndRestore(str(tmp_path), delete_checkpoint=False)])
    after_first = [w.copy() for w in m.get_weights()]
    m.fit(X, Y, epochs=2, verbose=0,
          callbacks=[AtomicBackupAndRestore(str(tmp_path), delete_checkpoint=False)])
    meta = json.load(open(tmp_path / "training_metadata.json"))
    assert meta["epoch"] == 2 and meta["previous"]["epoch"] == 1
    (tmp_path / meta["weights"]).write_bytes(b"garbage")  # the latest one is damaged
    m2 = _model()
    cb = AtomicBackupAndRestore(str(tmp_path), delete_checkpoint=False)
    cb.set_model(m2)
    with pytest.warns(UserWarning, match="epoch 1"):
        cb.on_train_begin()
    assert cb.restored["epoch"] == 1 and m2._initial_epoch == 1 and len(cb.history) == 1
    for a, b in zip(m2.get_weights(), after_first):
        np.testing.assert_array_equal(a, b)
    assert "resuming from the one before it (epoch 1)" in capsys.readouterr().out


def test_damaged_commit_record_is_one_backup_error(tmp_path):
    _model().fit(X, Y, epochs=1, verbose=0,
                 callbacks=[AtomicBackupAndRestore(str(tmp_path), delete_checkpoint=False)])
    (tmp_path / "training_metadata.json").write_text("{\"epoch\": 1, \"wei")
    with pytest.raises(BackupError, match="commit record .* is damaged.*resume=False"):
        _model().fit(X, Y, epochs=2, verbose=0,
                     callbacks=[AtomicBackupAndRestore(str(tmp_path))])


def test_optimizer_state_is_in_the_backup(tmp_path):
    m = _model()
    m.fit(X, Y, epochs=2, batch_size=8, verbose=0,
          callbacks=[AtomicBackupAndRestore(str(tmp_path), delete_checkpoint=False)])
    m2 = _model()
    cb = AtomicBackupAndRestore(str(tmp_path), delete_checkpoint=False)
    cb.set_model(m2)
    cb.on_train_begin()
    assert int(m2.optimizer.iterations.numpy()) == 8
    for a, b in zip(m2.optimizer.variables, m.optimizer.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
