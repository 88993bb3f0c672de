"""The :class:`Modality`: everything that differs between kinds of data, in one object.

The frameworks, losses and samplers do not care what an example is; the run layer and the
artifacts do, and a :class:`Modality` holds exactly what differs, so that no other module
tests a modality's name. It is made of three small interfaces:

* :class:`~keras_hardneg.modalities.feed.DataFeed` -- the data and the feed: the encoder's
  input shape and build context, the training feed, the first embeddings a graph sampler
  sees, the report's probe batch, the files a run keeps besides its weights;
* :class:`~keras_hardneg.modalities.evaluation.Evaluation` -- the evaluation and the
  report's hooks: monitors, final evaluation, the untrained encoder's figures, the report's
  sections, and the names of the figures (:class:`~keras_hardneg.modalities.evaluation.Figure`,
  the throughput figure) that the command line, the run report and the zoo print;
* :class:`~keras_hardneg.modalities.artifact.Artifact` -- the artifacts: the exported
  signature, the model card's input lines and checks, the preset's input record;

plus its name and :attr:`Modality.default_recipe` (``load_recipe``'s base for its data).

Example:
>>> from keras_hardneg.modalities import modality_of
>>> modality_of({"data": {"name": "digits"}}).name
'image'
"""

from __future__ import annotations

from typing import Any

from keras_hardneg.modalities.artifact import Artifact
from keras_hardneg.modalities.evaluation import Evaluation
from keras_hardneg.modalities.feed import DataFeed
from keras_hardneg.registry import DATASETS, DEFAULT_MODALITY, MODALITIES, get_modality

__all__ = ["Modality", "modality_of", "modality_of_results"]


class Modality(DataFeed, Evaluation, Artifact):
    """What the run layer and the artifacts need to know about one kind of data.

    A new modality subclasses this (overriding what differs from one array ``[N, ...]``, or
    from a dict of arrays named by :attr:`input_names`) and registers the class in
    :data:`keras_hardneg.registry.MODALITIES` under the ``modality`` tag of its datasets.

    Attributes:
        name: the modality (``"image"``, ``"graph"``, ``"text"``).
        default_recipe: the recipe a run of this modality's data starts from
            (``load_recipe``'s base; the data's own keys and the caller's override it): its
            framework, encoder, view maker, loss and optimizer. ``None``: the default
            modality's.
        shares_components_with: other modalities whose frameworks, encoders and view
            makers take this modality's data too (retrieval reads token ids: the text
            encoders fit it); a recipe may name them (``load_recipe``'s check).
    """

    name = "any"
    default_recipe: dict[str, Any] | None = None
    shares_components_with: tuple[str, ...] = ()


def modality_of(recipe: dict[str, Any]) -> Modality:
    """The :class:`Modality` of a recipe's ``data`` section (its dataset's ``modality``
    tag)."""
    return get_modality(DATASETS.get(recipe["data"]["name"]).tags.get("modality",
                                                                    DEFAULT_MODALITY))


def modality_of_results(results: dict[str, Any] | None,
                        default: str | None = None) -> Modality:
    """The :class:`Modality` whose figures ``results`` (a ``results.json``) holds: the one it
    names (``results["modality"]``, else ``default``), else the first registered modality
    with one of its figures there, else the default modality."""
    results = results or {}
    for name in (results.get("modality"), default):
        if isinstance(name, str) and name in MODALITIES.names():
            return get_modality(name)
    for name in MODALITIES.names():
        modality = get_modality(name)
        if any(key in results for key in modality.result_keys):
            return modality
    return get_modality(DEFAULT_MODALITY)
