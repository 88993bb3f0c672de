"""A modality's data and feed: what the run layer builds from the data and how it is fed.

:class:`DataFeed` is one of the three interfaces a :class:`~keras_hardneg.modalities.Modality`
is made of (with :class:`~keras_hardneg.modalities.evaluation.Evaluation` and
:class:`~keras_hardneg.modalities.artifact.Artifact`): the encoder's input shape and build
context, the view maker's context, the training feed (:meth:`DataFeed.feed`), the first
embeddings a graph sampler sees, the report's probe batch, and the files a run keeps besides
its weights. The defaults fit one array ``[N, ...]`` of examples.

Example:
>>> import numpy as np
>>> feed = DataFeed()
>>> feed.input_shape(np.zeros((10, 4, 4, 3))), feed.num_examples(np.zeros((10, 2)))
((4, 4, 3), 10)
>>> feed.initial_embeddings(np.ones((10, 2)), seed=0).shape
(10, 64)
"""

from __future__ import annotations

import os
from typing import Any

import keras
import numpy as np

from keras_hardneg.data.random_access import is_random_access
from keras_hardneg.registry import ConfigError as RecipeError

__all__ = ["DataFeed", "TrainFeed", "INITIAL_EMBEDDING_DIM", "random_projection"]

#: Width of the fixed random projection that seeds a graph sampler's first graph.
INITIAL_EMBEDDING_DIM = 64


class TrainFeed(tuple):
    """``(dataset, steps_per_epoch, callbacks, sampler)``: what
    :func:`~keras_hardneg.run.make_train_feed` returns. The attribute ``state`` (not a
    tuple item) holds the feed's own resumable objects (``get_state``/``set_state``)
    besides the sampler, e.g. the graph feed's view draws."""

    def __new__(cls, dataset, steps_per_epoch, callbacks, sampler, state=None):
        feed = super().__new__(cls, (dataset, steps_per_epoch, callbacks, sampler))
        feed.state = dict(state or {})
        return feed

    dataset = property(lambda self: self[0])
    steps_per_epoch = property(lambda self: self[1])
    callbacks = property(lambda self: self[2])
    sampler = property(lambda self: self[3])


def random_projection(flat: np.ndarray, seed: int) -> np.ndarray:
    """``float32 [N, 64]``: rows of ``flat`` (``[N, D]``) through a fixed seeded Gaussian
    matrix (:data:`INITIAL_EMBEDDING_DIM` columns)."""
    rng = np.random.default_rng(seed)
    proj = rng.normal(size=(flat.shape[1], INITIAL_EMBEDDING_DIM)).astype("float32")
    return flat.astype("float32") @ proj


class DataFeed:
    """How a modality's data is built into an encoder and fed to the training step.

    Attributes:
        views_in_feed: whether the training feed draws the two views (the framework then
            gets ``augmentation=None`` and the feed gets the recipe's view maker).
        uniform_drops_remainder: whether the single-process uniform feed drops the last
            partial batch (``N // B`` steps, epoch order
            :func:`~keras_hardneg.data.batches.epoch_permutation` off TensorFlow) or completes
            it (``ceil(N / B)`` steps); a sharded uniform feed across workers does the same.
    """

    views_in_feed = False
    uniform_drops_remainder = True

    # ----------------------------------------------------------------- building
    def input_shape(self, x: Any) -> tuple:
        """The encoder's input shape (without the batch axis) for training data ``x``."""
        return tuple(int(d) for d in np.shape(x)[1:])

    def encoder_context(self, x: Any) -> dict[str, Any]:
        """Arguments the encoder factory takes from the data (not recipe keys)."""
        return {}

    def preset_keys(self, preset: str) -> dict[str, Any]:
        """The recipe keys that ``--preset PRESET`` sets (a pretrained text checkpoint: the
        encoder, the data's tokenizer and, by default, unsupervised SimCSE's fine-tuning
        keys: :func:`keras_hardneg.encoders.pretrained_text.finetune_recipe`)."""
        from keras_hardneg.encoders.pretrained_text import finetune_recipe

        return finetune_recipe(preset)

    def framework_context(self, recipe: dict[str, Any]) -> dict[str, Any]:
        """Arguments the framework factory takes from the recipe's other sections (the
        retrieval framework's ``num_negatives``, from its sampler); only those the
        framework accepts are passed."""
        return {}

    def view_context(self, x: Any) -> dict[str, Any]:
        """Arguments the view maker factory takes from the data (not recipe keys)."""
        return {}

    def shape_view_context(self, input_shape: tuple) -> dict[str, Any]:
        """Arguments the view maker factory takes from the encoder's input shape alone
        (when no data is at hand: ``build_model(input_shape=...)``)."""
        return {}

    def num_examples(self, x: Any) -> int:
        """The number of training examples in ``x``."""
        return len(x)

    # --------------------------------------------------------------------- feed
    def initial_embeddings(self, x: Any, seed: int) -> Any:
        """``[N, 64]`` float32: the fixed random projection a graph sampler starts from (or,
        where that would read all the data, a first graph the sampler takes as is: a
        :class:`~keras_hardneg.sampling.ProximityGraph`)."""
        n = self.num_examples(x)
        return random_projection(np.asarray(x).reshape(n, -1), seed)

    def check_encoder_features(self, x: Any) -> None:
        """Raises ``RecipeError`` when :meth:`encoder_features` cannot encode ``x``."""
        if is_random_access(x):
            raise RecipeError("recipe key 'sampler.initial_graph' = 'encoder' needs the "
                              "training data in memory; this data is read from files as "
                              "needed: use 'inputs'.")

    def encoder_features(self, encoder: Any, x: Any) -> np.ndarray:
        """``float32 [N, F]``: ``encoder``'s features of every training example (inference
        mode): the first graph of a sampler with ``initial_graph = "encoder"``."""
        from keras_hardneg.evaluation import extract_features

        return np.asarray(extract_features(encoder, np.asarray(x)), "float32")

    def feed(self, recipe: dict[str, Any], x: Any, y: Any, sampler: Any,
             views: Any) -> tuple[Any, dict[str, Any]]:
        """``(dataset, state)``: the training feed, ``sampler`` (None for uniform shuffled
        batches) drawn into batches of ``x`` (and ``y``; ``views`` is the view maker when
        :attr:`views_in_feed`), and the feed's own objects to back up with the run
        (``{"name": obj}`` with ``get_state``/``set_state``)."""
        raise NotImplementedError

    # -------------------------------------------------------------- probe batch
    def probe_batch(self, x: Any, indices: np.ndarray) -> Any:
        """The raw examples ``indices`` of ``x``, as the view maker takes them."""
        return np.asarray(x)[indices]

    def labels_of(self, x: Any, y: Any, indices: np.ndarray) -> np.ndarray | None:
        """The labels of examples ``indices`` (None without labels)."""
        return None if y is None else np.asarray(y).reshape(-1)[indices]

    def probe_views(self, x: Any, y: Any, indices: np.ndarray, views: Any,
                    seed: int) -> tuple[Any, Any, np.ndarray | None]:
        """``(view1, view2, labels)`` of the run report's fixed probe batch (the examples
        ``indices``), drawn once by ``views`` (a view maker of the recipe's own, seeded
        apart from the model's) as the model's step takes them (a view may be a dict of
        arrays)."""
        view1, view2 = views(self.probe_batch(x, indices), training=True)
        to_numpy = keras.ops.convert_to_numpy
        return (keras.tree.map_structure(to_numpy, view1),
                keras.tree.map_structure(to_numpy, view2), self.labels_of(x, y, indices))

    def probe_examples(self, x: Any, y: Any, indices: np.ndarray) -> tuple[Any, list] | None:
        """The run report's hardest-negatives gallery: ``(draw, items)`` of the training
        examples ``indices``: ``draw(ax, item, seed)`` draws one item on matplotlib axes
        (:func:`keras_hardneg.modalities.report.draw_image` for ``[H, W, C]`` in [0, 1],
        ``draw_graph`` for ``(num_nodes, edges [e, 2])``), or ``draw`` is None and the items
        are strings shown as text; None: the gallery lists indices. See
        :func:`keras_hardneg.run.report.page.hardest_negatives_section`."""
        return None

    # ---------------------------------------------------------------- run files
    #: Files an artifact of this modality ships besides its weights (export ``assets/``,
    #: preset ``assets/``, run directory): a text encoder's ``tokenizer.json``.
    asset_names: tuple[str, ...] = ()

    def save_run_files(self, x: Any, run_dir: str) -> None:
        """Writes what a run directory needs besides weights to embed new data (a text
        run's tokenizer: the files of :attr:`asset_names`)."""

    def restore_run_files(self, recipe: dict[str, Any], run_dir: str) -> bool:
        """Points ``recipe`` at the files :meth:`save_run_files` wrote in ``run_dir`` (a
        text run is rebuilt with its own tokenizer; a preset's ``assets/`` holds the same
        files); returns whether ``run_dir`` had them."""
        return False

    def run_assets(self, folder: str | None) -> dict[str, str] | None:
        """``{name: path}`` of the :attr:`asset_names` files present in ``folder`` (a run
        directory, a preset's ``assets/``), or ``None`` when there are none."""
        if folder is None:
            return None
        found = {name: os.path.join(folder, name) for name in self.asset_names
                 if os.path.isfile(os.path.join(folder, name))}
        return found or None
