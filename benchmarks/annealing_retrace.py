"""What an annealing callback costs per epoch: the frameworks guide's MoCo v2 + Ring block.

The losses read their hyper-parameters when the training step is traced, so
``RingAnnealing`` (and ``BetaAnnealing`` at its steps) rebuilds the step after each change:
one more trace per epoch that changes the value. This times each epoch of the guide's block
(8x8 digits, MoCo v2 with a 1024-key queue, or SimCLR) with and without the annealing, in
CPU seconds of this process (``time.process_time``: what the epoch asked of the machine,
whatever else runs on it).

Usage::

    python benchmarks/annealing_retrace.py                 # MoCo v2 and SimCLR, 4 epochs each
    python benchmarks/annealing_retrace.py --epochs 6 --frameworks moco_v2

Prints one JSON line per (framework, annealing) with the epochs' CPU seconds.
"""

import argparse
import json
import time

import keras

import keras_hardneg as khn


class _EpochCPU(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.seconds = []

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.process_time()

    def on_epoch_end(self, epoch, logs=None):
        self.seconds.append(round(time.process_time() - self._start, 2))


def epoch_cpu_seconds(framework: str, anneal: bool, epochs: int) -> list[float]:
    """CPU seconds of each epoch of the guide's block (Ring loss, percentile 100 -> 10)."""
    (x, y), _ = khn.data.load_digits()
    keras.utils.set_random_seed(0)
    encoder = khn.encoders.small_convnet(input_shape=(8, 8, 3), width=32)
    augmentation = khn.augment.simclr_augmentation(image_size=8, strength=0.5)
    if framework == "moco_v2":
        model = khn.models.MoCoV2(encoder, projection_dims=(128, 64), queue_size=1024,
                                  momentum=0.99, augmentation=augmentation)
    else:
        model = khn.models.SimCLR(encoder, projection_dims=(128, 64), augmentation=augmentation)
    model.compile(optimizer=keras.optimizers.SGD(0.06, momentum=0.9),
                  loss=khn.losses.RingContrastiveLoss(temperature=0.2, lower_percentile=1,
                                                      upper_percentile=100))
    timer = _EpochCPU()
    callbacks = [timer]
    if anneal:
        callbacks.insert(0, khn.callbacks.RingAnnealing(epochs=20, start=100, end=10))
    model.fit(x, y, batch_size=128, epochs=epochs, callbacks=callbacks, verbose=0)
    return timer.seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--frameworks", nargs="+", default=["moco_v2", "simclr"],
                        choices=["moco_v2", "simclr"])
    args = parser.parse_args(argv)
    for framework in args.frameworks:
        for anneal in (True, False):
            seconds = epoch_cpu_seconds(framework, anneal, args.epochs)
            print(json.dumps({"framework": framework, "ring_annealing": anneal,
                              "epoch_cpu_seconds": seconds, "backend": keras.backend.backend()}),
                  flush=True)


if __name__ == "__main__":
    main()
