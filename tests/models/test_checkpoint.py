"""A fit interrupted after some epochs resumes with keras.callbacks.BackupAndRestore,
MoCo's queue, momentum encoder and step counter included."""

import keras
import numpy as np
import pytest

import keras_hardneg as khn
from tests.models.helpers import sgd, tiny_encoder, views


class Interrupt(keras.callbacks.Callback):
    def __init__(self, at_epoch):
        super().__init__()
        self.at_epoch = at_epoch

    def on_epoch_begin(self, epoch, logs=None):
        if epoch == self.at_epoch:
            raise RuntimeError("interrupted")


class Snapshot(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.begin = None

    def on_train_begin(self, logs=None):
        m = self.model
        self.begin = {
            "queue": m.queue.numpy().copy(),
            "pointer": int(m.queue_pointer.numpy()),
            "key": [w.numpy().copy() for w in m.key_encoder.weights],
            "iterations": int(m.optimizer.iterations.numpy()),
        }


def make():
    model = khn.models.MoCo(tiny_encoder(), projection_dims=(16, 8), queue_size=20, momentum=0.9)
    model.compile(optimizer=sgd(), loss=khn.losses.NTXentLoss(temperature=0.2))
    return model


def test_moco_resumes_queue_key_encoder_and_step(tmp_path):
    x = views(n=16)
    backup = str(tmp_path / "backup")
    first = make()
    with pytest.raises(RuntimeError, match="interrupted"):
        first.fit(x, batch_size=8, epochs=4, verbose=0, shuffle=False,
                  callbacks=[keras.callbacks.BackupAndRestore(backup), Interrupt(at_epoch=2)])
    # State at the end of epoch 2 (the last completed one): 2 epochs x 2 steps.
    saved = {
        "queue": first.queue.numpy().copy(),
        "pointer": int(first.queue_pointer.numpy()),
        "key": [w.numpy().copy() for w in first.key_encoder.weights],
        "iterations": int(first.optimizer.iterations.numpy()),
    }
    assert saved["iterations"] == 4 and saved["pointer"] == (4 * 8) % 20

    second = make()  # a new process would start from fresh weights like this
    snap = Snapshot()
    history = second.fit(x, batch_size=8, epochs=4, verbose=0, shuffle=False,
                         callbacks=[keras.callbacks.BackupAndRestore(backup), snap])
    np.testing.assert_array_equal(snap.begin["queue"], saved["queue"])
    assert snap.begin["pointer"] == saved["pointer"]
    for a, b in zip(snap.begin["key"], saved["key"]):
        np.testing.assert_array_equal(a, b)
    assert snap.begin["iterations"] == saved["iterations"]
    assert len(history.history["loss"]) == 2  # only epochs 3 and 4 ran
    assert int(second.optimizer.iterations.numpy()) == 8
