"""keras-hardneg: self-supervised contrastive learning with principled negatives for Keras 3.

Subpackages: :mod:`losses`, :mod:`encoders`, :mod:`augment`, :mod:`models`,
:mod:`optimizers`, :mod:`callbacks`, :mod:`data`, :mod:`evaluation`,
:mod:`sampling`, :mod:`export`, :mod:`run` (recipes and ``train``), :mod:`zoo` (pretrained
encoders), :mod:`tuning`, and :mod:`registry` (one registry per kind of component). The
subpackages that define Keras-serializable classes (:data:`SERIALIZABLE`: layers, models,
encoders, losses, optimizers, schedules, callbacks; under the TensorFlow backend also the
SavedModel wrapper, by name) are imported with the package, so ``import keras_hardneg`` is
all ``keras.models.load_model`` needs; the others (``run``, ``export``, ``modalities``,
``zoo``, ...) load on first use. See ``docs/architecture.md`` for the layers.

Backends: TensorFlow (the default) and JAX (``KERAS_BACKEND=jax``). Importing the package and
training under JAX load no TensorFlow; the TensorFlow-only parts (SavedModel export,
``tf.data`` pipelines, TFDS, ScaNN) load it when used and say so when it is missing.
"""

import importlib

__version__ = "0.1.0"

_SUBMODULES = (
    "augment", "callbacks", "data", "distribute", "encoders", "evaluation", "export", "losses",
    "modalities", "models", "optimizers", "registry", "run", "sampling", "tuning", "zoo",
)
#: Subpackages whose import registers Keras-serializable classes (``package="keras_hardneg"``).
SERIALIZABLE = ("augment", "callbacks", "encoders", "losses", "models", "optimizers")

__all__ = list(_SUBMODULES) + ["__version__", "SERIALIZABLE"]


def __getattr__(name):
    # Subpackages load lazily: `import keras_hardneg` stays cheap, and
    # `khn.tuning` only imports keras_tuner when used.
    if name in _SUBMODULES:
        module = importlib.import_module(f"keras_hardneg.{name}")
        globals()[name] = module
        return module
    raise AttributeError(f"module 'keras_hardneg' has no attribute {name!r}")


def __dir__():
    return sorted(__all__)


def _register_serializable() -> None:
    """Imports every module that registers a Keras-serializable class, so that a ``.keras``
    file or a preset written by this package loads in a process that imported only it.
    Under JAX this loads no TensorFlow. Under the TensorFlow backend the SavedModel wrapper
    (:class:`keras_hardneg.export.SavedModelEncoder`) is registered by name only
    (:class:`_SavedModelEncoderOnFirstUse`): ``export`` loads when such a file is read.
    ``run``, ``export`` and ``modalities`` load on first use (``export`` and ``run`` import
    ``modalities``, which registers the built-in modalities)."""
    for name in SERIALIZABLE:
        globals()[name] = importlib.import_module(f"keras_hardneg.{name}")
    import keras

    if keras.backend.backend() == "tensorflow":
        registered = "keras_hardneg>SavedModelEncoder"
        objects = keras.saving.get_custom_objects()
        if registered not in objects:  # export.load registers the class itself
            objects[registered] = _SavedModelEncoderOnFirstUse


class _SavedModelEncoderOnFirstUse:
    """Stands for ``keras_hardneg>SavedModelEncoder`` in Keras's registry until
    ``keras_hardneg.export.load`` is imported (it then registers the class over it): a
    ``.keras`` file holding the layer imports the export layer when it is read."""

    @staticmethod
    def get_config():  # pragma: no cover - never serialized itself
        return {}

    @classmethod
    def from_config(cls, config):
        from keras_hardneg.export.load import SavedModelEncoder

        return SavedModelEncoder.from_config(config)


def _quiet_tensorflow_for_the_command_line() -> None:
    """When this process is the ``keras-hardneg`` command (the console script or ``python -m
    keras_hardneg.cli``) on a machine without an NVIDIA device, TensorFlow's C++ runtime logs
    an error-level ``failed call to cuInit`` line at start-up that reads like a failure: hide
    its C++ log lines there (Python errors are unaffected; a user's own
    ``TF_CPP_MIN_LOG_LEVEL`` wins). Done here, before the registration above imports Keras
    (and with it TensorFlow); a library user's process is left as it is."""
    import glob
    import os
    import sys

    argv = list(getattr(sys, "orig_argv", sys.argv))
    command = os.path.basename(sys.argv[0] if sys.argv else "") == "keras-hardneg" or any(
        a == "keras_hardneg.cli" for a in argv[:4])
    if command and "tensorflow" not in sys.modules:
        no_gpu = not glob.glob("/dev/nvidia[0-9]*")
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3" if no_gpu else "2")


_quiet_tensorflow_for_the_command_line()
_register_serializable()
