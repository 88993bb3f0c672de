"""Writes ``models/<entry>/preset/`` (the Keras preset: ``config.json`` + ``model.weights.h5``)
for every entry whose ``encoder/`` is a SavedModel, with
:func:`keras_hardneg.run.artifacts.preset_from_export` (the encoder rebuilt from the entry's
recipe, every variable copied by path, features checked against the SavedModel's to 1e-5).

Run from the repository root under TensorFlow: ``python models/make_presets.py [ENTRY ...]``
(``--float16`` stores the weights as float16). An entry that already has a preset is left
as it is unless named.
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("entries", nargs="*")
    p.add_argument("--float16", action="store_true")
    a = p.parse_args(argv)
    from keras_hardneg.run.artifacts import preset_from_export

    names = a.entries or sorted(
        e for e in os.listdir(HERE)
        if os.path.isfile(os.path.join(HERE, e, "encoder", "saved_model.pb"))
        and not os.path.isdir(os.path.join(HERE, e, "preset")))
    for name in names:
        out = preset_from_export(os.path.join(HERE, name, "encoder"),
                                 os.path.join(HERE, name, "preset"),
                                 weights_dtype="float16" if a.float16 else "float32")
        print(f"{name}: {out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
