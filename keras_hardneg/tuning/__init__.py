"""Hyper-parameter search for contrastive losses with Keras Tuner.

* :class:`ContrastiveHyperModel` -- a ``keras_tuner.HyperModel``: ``build(hp)`` makes
  a SimCLR/MoCo model whose loss knobs (``beta``, ``tau_plus``, ...) come from
  ``hp``; ``fit`` returns the validation kNN (or linear-probe) accuracy.
* :func:`run_search` -- the whole search (what ``keras-hardneg tune`` runs):
  resumable, writes ``results.json`` after every trial and a plot.
* :mod:`~keras_hardneg.tuning.space` -- knobs, default ranges, validation.
* :func:`plot_objective` -- the objective over the ``beta`` - ``tau_plus`` plane.

Example:
>>> from keras_hardneg import tuning
>>> trials = tuning.run_search("digits", trials=2, epochs=1, output="/tmp/khn-tune",
...                            recipe={"encoder": {"name": "small_convnet", "width": 8},
...                                    "batch_size": 64})  # doctest: +SKIP
"""

from keras_hardneg.tuning.hypermodel import OBJECTIVES, ContrastiveHyperModel, trial_seed
from keras_hardneg.tuning.plot import plot_objective
from keras_hardneg.tuning.records import format_table, rank
from keras_hardneg.tuning.search import TUNERS, collect_records, run_search
from keras_hardneg.tuning.space import (KNOBS, default_search_space, define_hyperparameters,
                                        normalize_search_space)

__all__ = ["ContrastiveHyperModel", "run_search", "plot_objective", "KNOBS", "OBJECTIVES",
           "TUNERS", "default_search_space", "normalize_search_space", "define_hyperparameters",
           "trial_seed", "collect_records", "format_table", "rank"]
