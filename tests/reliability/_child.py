"""Child process of the interrupted-training tests (tests/reliability/test_resume.py).

    python -m tests.reliability._child RECIPE.json OUTPUT_DIR PROBE.json [--pause-at E B]
        [--pause-in-save N]

Runs ``keras_hardneg.run.train(RECIPE, OUTPUT_DIR)`` with a probe callback that writes what
the run looked like (state at train begin, digests after every committed backup, loss
hyper-parameters per epoch) to PROBE.json. ``--pause-at E B``: after batch B of epoch E write
``OUTPUT_DIR/marker`` and sleep (the parent SIGKILLs). ``--pause-in-save N``: in the N-th
weights save (1-based), write half a file, then the marker, then sleep.
"""

import argparse
import os
import sys
import time

import keras

from keras_hardneg import run as runlib
from keras_hardneg.run import training as training_module
from tests.reliability._common import digest_state, model_digests, read_json, write_json

_captured = {}
_make = training_module.make_train_feed


def _capture(*args, **kwargs):
    out = _make(*args, **kwargs)
    _captured["sampler"], _captured["callbacks"] = out[3], out[2]
    return out


training_module.make_train_feed = _capture  # what run.train calls


class Probe(keras.callbacks.Callback):
    def __init__(self, path, output_dir, pause_at):
        super().__init__()
        self.path, self.output_dir, self.pause_at = path, output_dir, pause_at
        self.info = {"pid": os.getpid(), "saved": {}, "loss_params": {}}
        self.epoch = 0

    def _flush(self):
        write_json(self.path, self.info)

    def on_train_begin(self, logs=None):
        begin = {"initial_epoch": self.model._initial_epoch or 0, **model_digests(self.model)}
        sampler = _captured.get("sampler")
        if sampler is not None:
            begin["sampler"] = digest_state(sampler.get_state())
            begin["restart_prob"] = float(sampler.restart_prob)
            begin["coverage"] = float(sampler.coverage)
            begin["refresh_step"] = int(_captured["callbacks"][0]._step)
        self.info["begin"] = begin
        self._flush()

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch
        loss = self.model.loss
        self.info["loss_params"][str(epoch)] = {
            k: float(getattr(loss, k)) for k in ("beta", "upper_percentile") if hasattr(loss, k)}

    def on_train_batch_end(self, batch, logs=None):
        if self.pause_at and (self.epoch, batch) == tuple(self.pause_at):
            self._flush()
            open(os.path.join(self.output_dir, "marker"), "w").close()
            time.sleep(600)

    def on_epoch_end(self, epoch, logs=None):
        # Runs after the backup callback: the committed state of this epoch.
        meta = read_json(os.path.join(self.output_dir, "backup", "training_metadata.json"))
        self.info["saved"][str(epoch)] = {"committed_epoch": meta["epoch"],
                                          **model_digests(self.model)}
        sampler = _captured.get("sampler")
        if sampler is not None:
            self.info["saved"][str(epoch)]["refresh_step"] = int(_captured["callbacks"][0]._step)
        self._flush()


def _pause_in_save(n, output_dir):
    real = keras.Model.save_weights
    count = {"n": 0}

    def save_weights(self, filepath, *args, **kwargs):
        count["n"] += 1
        if count["n"] != n:
            return real(self, filepath, *args, **kwargs)
        real(self, filepath, *args, **kwargs)
        with open(filepath, "r+b") as f:  # a write cut in the middle
            size = os.path.getsize(filepath)
            f.truncate(size // 2)
            f.flush()
            os.fsync(f.fileno())
        open(os.path.join(output_dir, "marker"), "w").close()
        time.sleep(600)

    keras.Model.save_weights = save_weights


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("recipe")
    p.add_argument("output_dir")
    p.add_argument("probe")
    p.add_argument("--pause-at", nargs=2, type=int)
    p.add_argument("--pause-in-save", type=int)
    a = p.parse_args(argv)
    if a.pause_in_save:
        _pause_in_save(a.pause_in_save, a.output_dir)
    probe = Probe(a.probe, a.output_dir, a.pause_at)
    result = runlib.train(a.recipe, a.output_dir, verbose=0, export=False,
                          extra_callbacks=[probe])
    probe.info["history"] = result["history"]
    probe.info["epochs_run"] = result["epochs_run"]
    probe.info["epochs_trained_now"] = result["epochs_trained_now"]
    probe._flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
