"""keras-hardneg: self-supervised contrastive learning with principled negatives for Keras 3.

Subpackages: :mod:`losses`, :mod:`encoders`, :mod:`augment`, :mod:`models`,
:mod:`optimizers`, :mod:`callbacks`, :mod:`data`, :mod:`evaluation`,
:mod:`sampling`, :mod:`export`, :mod:`run` (recipes and ``train``), :mod:`tuning`,
and :mod:`registry` (one registry per kind of component); imported on first use.
See ``docs/architecture.md`` for the layers.

Backends: TensorFlow (the default) and JAX (``KERAS_BACKEND=jax``). Importing the package and
training under JAX load no TensorFlow; the TensorFlow-only parts (SavedModel export,
``tf.data`` pipelines, TFDS, ScaNN) load it when used and say so when it is missing.
"""

import importlib

__version__ = "0.1.0"

_SUBMODULES = (
    "augment", "callbacks", "data", "distribute", "encoders", "evaluation", "export", "losses",
    "models", "optimizers", "registry", "run", "sampling", "tuning",
)

__all__ = list(_SUBMODULES) + ["__version__"]


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
