"""The training feed of the graph modality: a sampler's index batches -> two augmented views
of each graph, padded to static budgets (GraphCL, You et al. 2020; the mini-batches may come
from BatchSampler, Yang et al. 2023, Alg. 1: "Load the mini-batch", then "Obtain positive
pairs by augmentations").

Element ``i``::

    ({"view1": graph batch, "view2": graph batch, "index": int64 [B]}, labels int32 [B])

with the graph batch format of :mod:`keras_hardneg.data.graphs` and the same shapes for every
element (budgets ``graphs.budgets(sampler.batch_size)`` unless given; views never grow a
graph, so they fit). Views are made on the host, before padding, so a dropped node is gone.

* :class:`GraphFeed` -- a ``keras.utils.PyDataset`` (any backend, no TensorFlow), endless
  (pass ``steps_per_epoch=feed.steps_per_epoch`` to ``fit``), following
  :class:`keras_hardneg.sampling.dataset.SamplerPyDataset`: the sampler's batches are drawn in
  order however Keras reads the dataset.
* :func:`graph_tf_dataset` -- the same elements as a ``tf.data.Dataset`` (TensorFlow).

Determinism and resume: the views of the sampler's ``d``-th draw (counted over the feed's
life) use ``np.random.default_rng([seed, d])``, so they depend only on the seed and the draw
number, not on threads or timing. ``get_state()`` / ``set_state()`` hold that counter; saved
together with the sampler's state (e.g. ``AtomicBackupAndRestore(state={"sampler": sampler,
"views": feed})``) a resumed run draws the same batches and the same views.

The data layer does not import the samplers (a higher layer): ``sampler`` is duck-typed
(``num_nodes``, ``batch_size``, ``steps_per_epoch``, ``next_batch()`` or endless
``__iter__``).

Example:
>>> import numpy as np
>>> from keras_hardneg.data.graphs import GraphSet
>>> from keras_hardneg.augment.graph_views import GraphViews
>>> from keras_hardneg.sampling import UniformSampler
>>> ring = np.array([[0, 1], [1, 2], [2, 0], [1, 0], [2, 1], [0, 2]])
>>> graphs = GraphSet.from_graphs([(np.eye(3, dtype="float32"), ring)] * 10, labels=[0, 1] * 5)
>>> feed = GraphFeed(graphs, UniformSampler(10, batch_size=4, seed=0), GraphViews(), seed=0)
>>> x, y = feed[0]
>>> x["view1"]["nodes"].shape, x["view2"]["edges"].shape, x["index"].shape, y.dtype.name
((16, 3), (24, 2), (4,), 'int32')
"""

from __future__ import annotations

import threading
from typing import Any

import keras
import numpy as np

from keras_hardneg.data._tf import require_tensorflow
from keras_hardneg.data.graphs import GraphSet, pad_graphs

__all__ = ["GraphFeed", "graph_tf_dataset"]


def _check_seed(seed: Any) -> int:
    if seed is None:
        return int(np.random.SeedSequence().entropy % (2 ** 63))
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"`seed` must be a non-negative integer or None; got {seed!r}.")
    return int(seed)


class GraphFeed(keras.utils.PyDataset):
    """A sampler's index batches as two padded batches of augmented graph views, an endless
    ``keras.utils.PyDataset``.

    Reading element ``i`` draws the sampler's batches up to the ``i``-th of the current pass
    (worker threads may ask out of order; draws stay sequential). Reading element 0 a second
    time starts a new pass that continues the sampler's stream (Keras restarts its iterator
    when ``fit`` starts); a batch drawn but not read is skipped, as with
    :class:`~keras_hardneg.sampling.dataset.SamplerPyDataset`.

    Args:
        graphs: a :class:`~keras_hardneg.data.graphs.GraphSet` of ``sampler.num_nodes``
            graphs.
        sampler: ``UniformSampler`` / ``BatchSampler`` / ... (duck-typed: ``num_nodes``,
            ``batch_size``, ``steps_per_epoch``, ``next_batch()`` or ``__iter__``).
        views: a host-side view maker with ``make_views(graphs, rng) -> (views1, views2)``
            (:class:`~keras_hardneg.augment.graph_views.GraphViews`).
        seed: seeds the views (``None``: drawn once, kept in the state).
        budgets: ``(N_max, E_max)``; default ``graphs.budgets(sampler.batch_size)``.
        **kwargs: ``workers``, ``max_queue_size`` of ``keras.utils.PyDataset`` (threads;
            multiprocessing is refused: the sampler lives in this process).

    Attributes:
        steps_per_epoch: ``sampler.steps_per_epoch``; pass it to ``fit``.
        batch_size, budgets: the static ``B`` and ``(N_max, E_max)`` of every element.
    """

    def __init__(self, graphs: GraphSet, sampler: Any, views: Any, seed: int | None = 0,
                 budgets: tuple[int, int] | None = None, **kwargs: Any):
        if kwargs.get("use_multiprocessing"):
            raise ValueError("`use_multiprocessing` must be False: the sampler draws the "
                             "batches in this process (use `workers` threads instead).")
        super().__init__(**kwargs)
        if not isinstance(graphs, GraphSet):
            raise ValueError(f"`graphs` must be a GraphSet; got {type(graphs).__name__}.")
        for attr in ("num_nodes", "batch_size", "steps_per_epoch"):
            if not hasattr(sampler, attr):
                raise ValueError(f"`sampler` must have `{attr}` (a sampler of "
                                 f"keras_hardneg.sampling); got {type(sampler).__name__}.")
        if int(sampler.num_nodes) != len(graphs):
            raise ValueError(f"`sampler` draws from {int(sampler.num_nodes)} examples but "
                             f"`graphs` has {len(graphs)}.")
        if not callable(getattr(views, "make_views", None)):
            raise ValueError("`views` must have make_views(graphs, rng) -> (views1, views2), "
                             "e.g. keras_hardneg.augment.GraphViews.")
        self.graphs, self.sampler, self.views = graphs, sampler, views
        self.batch_size = int(sampler.batch_size)
        self.steps_per_epoch = int(sampler.steps_per_epoch)
        if budgets is None:
            budgets = graphs.budgets(self.batch_size)
        self.budgets = (int(budgets[0]), int(budgets[1]))
        self.seed = _check_seed(seed)
        self._labels = graphs.labels.astype(np.int32)
        self._next = getattr(sampler, "next_batch", None)
        self._stream = None if callable(self._next) else iter(sampler)
        self._lock = threading.Lock()
        self._draws = 0           # sampler batches drawn over the feed's life (the state)
        self._reset_pass()

    def _reset_pass(self) -> None:
        self._pending: dict[int, tuple[np.ndarray, int]] = {}
        self._drawn = 0           # batches drawn in this pass
        self._read_first = False  # element 0 of this pass was read

    @property
    def num_batches(self) -> None:
        return None

    # --------------------------------------------------------------- state
    def get_state(self) -> dict[str, Any]:
        """``{"class", "seed", "draws"}``: restore it (with the sampler's state) to draw the
        same views again."""
        with self._lock:
            return {"class": type(self).__name__, "seed": self.seed, "draws": self._draws}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restores :meth:`get_state`; the next read starts a new pass."""
        if str(state.get("class")) != type(self).__name__:
            raise ValueError(f"`state` is from a {state.get('class')!r}, not a "
                             f"{type(self).__name__}.")
        with self._lock:
            self.seed = _check_seed(int(state["seed"]))
            self._draws = int(state["draws"])
            self._reset_pass()

    # -------------------------------------------------------------- reading
    def _draw(self) -> np.ndarray:
        batch = self._next() if self._stream is None else next(self._stream)
        batch = np.asarray(batch, np.int64).reshape(-1)
        if len(batch) != self.batch_size:
            raise ValueError(f"the sampler drew a batch of {len(batch)} indices; expected "
                             f"batch_size={self.batch_size}.")
        return batch

    def _indices(self, i: int) -> tuple[np.ndarray, int]:
        with self._lock:
            if i == 0:
                if self._read_first:  # a new pass: continue the sampler's stream
                    self._reset_pass()
                self._read_first = True
            if i < self._drawn and i not in self._pending:
                raise IndexError(f"element {i} of this pass was already read; a pass reads "
                                 "each element once (start a new pass at element 0).")
            while self._drawn <= i:
                self._pending[self._drawn] = (self._draw(), self._draws)
                self._drawn += 1
                self._draws += 1
            return self._pending.pop(i)

    def make_element(self, indices: np.ndarray, draw: int
                     ) -> tuple[dict[str, Any], np.ndarray]:
        """The element for the index batch ``indices`` and draw number ``draw`` (what
        ``feed[i]`` returns for the batch it draws)."""
        rng = np.random.default_rng([self.seed, int(draw)])
        graphs = [self.graphs.graph(j) for j in indices]
        views1, views2 = self.views.make_views(graphs, rng)
        f = self.graphs.feature_dim
        features = {"view1": pad_graphs(views1, self.budgets, self.batch_size, f),
                    "view2": pad_graphs(views2, self.budgets, self.batch_size, f),
                    "index": np.asarray(indices, np.int64)}
        return features, self._labels[indices]

    def __getitem__(self, i: int) -> tuple[dict[str, Any], np.ndarray]:
        indices, draw = self._indices(int(i))
        return self.make_element(indices, draw)

    def element_shapes(self) -> tuple[dict[str, Any], tuple[tuple[int, ...], str]]:
        """``(shape, dtype)`` of every array of an element, nested as the element."""
        n_max, e_max = self.budgets
        b, f = self.batch_size, self.graphs.feature_dim
        graph = {"nodes": ((n_max, f), "float32"), "edges": ((e_max, 2), "int32"),
                 "node_graph": ((n_max,), "int32"), "node_mask": ((n_max,), "float32"),
                 "edge_mask": ((e_max,), "float32"), "graph_mask": ((b,), "float32")}
        return ({"view1": dict(graph), "view2": dict(graph), "index": ((b,), "int64")},
                ((b,), "int32"))


def graph_tf_dataset(feed: GraphFeed, prefetch: int = 2) -> Any:
    """The elements of ``feed`` (in order, endless) as a ``tf.data.Dataset`` with a static
    ``output_signature`` (TensorFlow, imported on call). Each new iteration of the dataset
    starts a new pass of the feed, continuing its sampler's stream.

    Args:
        feed: a :class:`GraphFeed`.
        prefetch: elements made ahead of training (the sampler runs that far ahead).

    Raises:
        TensorFlowRequiredError: TensorFlow cannot be imported (an ``ImportError``).
    """
    tf = require_tensorflow("graph_tf_dataset (a tf.data pipeline; without TensorFlow pass "
                            "the GraphFeed itself to fit)")
    if not isinstance(feed, GraphFeed):
        raise ValueError(f"`feed` must be a GraphFeed; got {type(feed).__name__}.")
    signature = _signature(tf, feed.element_shapes())

    def generate():
        i = 0
        while True:
            yield feed[i]
            i += 1

    ds = tf.data.Dataset.from_generator(generate, output_signature=signature)
    return ds.prefetch(prefetch) if prefetch else ds


def _signature(tf: Any, shapes: Any) -> Any:
    if isinstance(shapes, dict):
        return {k: _signature(tf, v) for k, v in shapes.items()}
    if isinstance(shapes, tuple) and len(shapes) == 2 and isinstance(shapes[1], str):
        return tf.TensorSpec(shapes[0], getattr(tf, shapes[1]))
    return tuple(_signature(tf, s) for s in shapes)
