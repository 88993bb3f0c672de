"""The run layer: recipes, builders and :func:`train`, the one path every entry point takes.

``keras-hardneg train``, the tuner, the zoo and the benchmarks all call :func:`train`,
which only composes the public builders below. Imports flow one way: this package uses
the component packages (data, encoders, augment, losses, sampling, models, callbacks,
evaluation, modalities, export); only ``tuning`` and ``cli`` use it.

Three concerns, three places: running a recipe (``recipe``, ``build``, ``training``,
``resume``, ``artifacts``: this folder), spreading it over processes
(:mod:`keras_hardneg.run.distribution`) and what a run shows
(:mod:`keras_hardneg.run.report`: progress lines, ``history.png``, ``report.html``).
"""

from keras_hardneg.run.artifacts import (RunDirectoryError, evaluate_directory,
                                         export_trained_encoder, is_run_directory, restore_run)
from keras_hardneg.modalities import TrainFeed, modality_of
from keras_hardneg.modalities.image import evaluate_encoder
from keras_hardneg.run.build import (build_encoder, build_loss, build_model,
                                     build_optimizer, build_view_maker, load_data,
                                     make_train_feed)
from keras_hardneg.run import distribution as _distribution  # noqa: F401  (registers its entries)
from keras_hardneg.run.recipe import (DEFAULT_RECIPE, RUN_PARAMS, SECTIONS, RecipeError,
                                      load_recipe, save_recipe, section_choices)
from keras_hardneg.run.training import train

__all__ = [
    "DEFAULT_RECIPE", "RUN_PARAMS", "SECTIONS", "RecipeError", "RunDirectoryError", "TrainFeed",
    "build_encoder", "build_loss", "build_model", "build_optimizer", "build_view_maker",
    "evaluate_directory", "evaluate_encoder", "export_trained_encoder", "is_run_directory", "load_data", "load_recipe",
    "make_train_feed", "modality_of", "restore_run", "save_recipe", "section_choices", "train",
]
