"""Modalities: everything that differs between images, graphs and sentences.

One module per modality (:mod:`~keras_hardneg.modalities.image`,
:mod:`~keras_hardneg.modalities.graph`, :mod:`~keras_hardneg.modalities.text`,
:mod:`~keras_hardneg.modalities.retrieval`), each a
:class:`Modality` registered in :data:`keras_hardneg.registry.MODALITIES` under the
``modality`` tag of its datasets, with its default recipe and the names of its figures
beside it. A :class:`Modality` is made of three small interfaces, one module each:

* :class:`~keras_hardneg.modalities.feed.DataFeed` (``feed.py``): the data and the feed;
* :class:`~keras_hardneg.modalities.evaluation.Evaluation` (``evaluation.py``): the
  evaluation, the report's hooks and the figures' names (:class:`Figure`);
* :class:`~keras_hardneg.modalities.artifact.Artifact` (``artifact.py``): the exported
  signature, the model card and the preset (the signatures themselves:
  :mod:`~keras_hardneg.modalities.signatures`).

This package sits below ``export`` and ``run`` (which ask it, never a modality's name) and
above ``models`` and ``callbacks``. Importing it registers the four built-in modalities; a
fourth is one module: a :class:`Modality` subclass registered in ``MODALITIES``, with its
dataset, encoder and view maker registered under its tag (``tests/run/test_toy_modality.py``
does it from a test file, for a dict of two tensors).

Example:
>>> from keras_hardneg import modalities
>>> modalities.modality_of({"data": {"name": "tu"}}).name
'graph'
>>> [modalities.get_modality(n).throughput_key for n in ("image", "graph", "text")]
['images_per_second', 'graphs_per_second', 'sentences_per_second']
"""

from keras_hardneg.modalities.base import Modality, modality_of, modality_of_results
from keras_hardneg.modalities.evaluation import Evaluation, Figure
from keras_hardneg.modalities.feed import INITIAL_EMBEDDING_DIM, DataFeed, TrainFeed
from keras_hardneg.modalities.artifact import Artifact
from keras_hardneg.modalities.image import ImageModality
from keras_hardneg.modalities.graph import GraphModality
from keras_hardneg.modalities.text import TextModality
from keras_hardneg.modalities.retrieval import RetrievalModality
from keras_hardneg.registry import DEFAULT_MODALITY, MODALITIES, get_modality

__all__ = ["Modality", "DataFeed", "Evaluation", "Artifact", "Figure", "TrainFeed",
           "ImageModality", "GraphModality", "TextModality", "RetrievalModality", "modality_of",
           "modality_of_results", "get_modality", "MODALITIES", "DEFAULT_MODALITY",
           "INITIAL_EMBEDDING_DIM"]
