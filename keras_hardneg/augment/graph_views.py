"""GraphCL's graph augmentations (You et al. 2020, "Graph Contrastive Learning with
Augmentations", Sec. 3.1 / Table 1), host-side NumPy, one graph at a time.

A graph is ``(features float32 [n, F], edges int [e, 2])``, edges numbering the graph's own
nodes, both directions of an undirected edge listed (:mod:`keras_hardneg.data.graphs`).
Every augmentation is ``aug(features, edges, ratio, rng) -> (features, edges)``, returns new
arrays (the input is not modified), and never empties a graph: it removes at most ``n - 1``
nodes, so a 1-node graph comes back unchanged by node dropping and subgraph (and by masking
and edge perturbation too, since ``floor(1 * ratio) = 0`` for ``ratio < 1``). Counts are
``k = floor(n * ratio)`` (or ``floor(m * ratio)`` undirected edges), as GraphCL's code takes
``int(num * aug_ratio)``; GraphCL's default ratio is 20 %.

* :func:`node_drop` -- "randomly discard a certain portion of vertices along with their
  connections": ``min(k, n - 1)`` uniformly chosen nodes and their edges are removed (the
  nodes are really gone; the rest keep their order).
* :func:`edge_perturb` -- "perturb the connectivities by randomly adding or dropping a
  certain ratio of edges": ``k`` of the ``m`` undirected edges are dropped and ``k`` new
  undirected edges between distinct, previously unconnected nodes are added (fewer only
  when the graph has fewer than ``k`` non-edges), so the edge count is kept.
* :func:`attribute_mask` -- "recover masked vertex attributes": ``k`` uniformly chosen
  nodes get their whole feature row replaced by the graph's mean feature row (the token of
  GraphCL's unsupervised TU code as we recall it; its semi-supervised code draws Gaussian
  noise instead).
* :func:`subgraph` -- "samples a subgraph using random walk": from a uniform start node,
  repeatedly add a uniformly chosen node of the frontier (the unvisited neighbours of the
  nodes taken so far) until ``n - min(k, n - 1)`` nodes are taken; the view is the induced
  subgraph. When the frontier runs dry (the start's component is smaller than that) the
  walk jumps to a uniformly chosen unvisited node -- GraphCL's code stops there instead and
  returns a smaller subgraph; we jump so that every view keeps the same share of nodes.
  Note: we read ``ratio`` as the share REMOVED for every augmentation; GraphCL's code may
  keep ``int(n * ratio)`` nodes for its subgraph (we could not check it here).

:class:`GraphViews` makes the two views of each graph of a batch. GraphCL's unsupervised TU
experiments (the setting BatchSampler runs, Yang et al. 2023, App. E.2) pick, per graph and
view, one augmentation at random from a pool: node dropping and subgraph (its ``random2``,
the pair it found generally beneficial) by default, ``random3`` adds edge perturbation,
``random4`` attribute masking too (``mode="choice"``). ``mode="sequence"`` applies the
listed augmentations one after another instead. Registered in
:data:`keras_hardneg.registry.VIEW_MAKERS` as ``"graphcl"`` (modality ``"graph"``).

Example:
>>> import numpy as np
>>> ring = np.array([[i, (i + 1) % 10] for i in range(10)])
>>> ring = np.concatenate([ring, ring[:, ::-1]])
>>> f, e = node_drop(np.eye(10, dtype="float32"), ring, 0.2, np.random.default_rng(0))
>>> f.shape, e.shape[1]
((8, 10), 2)
>>> views = GraphViews(("node_drop", "subgraph"), ratio=0.2, seed=0)
>>> v1, v2 = views.make_views([(np.eye(10, dtype="float32"), ring)], np.random.default_rng(1))
>>> len(v1[0][0]), len(v2[0][0])
(8, 8)
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from keras_hardneg.registry import VIEW_MAKERS, Param

__all__ = ["AUGMENTATIONS", "GraphViews", "attribute_mask", "edge_perturb", "graphcl_views",
           "identity", "node_drop", "subgraph"]

Graph = tuple[np.ndarray, np.ndarray]


def _check_ratio(ratio: Any) -> float:
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float, np.floating)) or \
            not 0.0 <= float(ratio) < 1.0:
        raise ValueError(f"`ratio` must be a number in [0, 1); got {ratio!r}.")
    return float(ratio)


def _prepare(features: Any, edges: Any) -> Graph:
    features = np.asarray(features, np.float32)
    edges = np.asarray(edges, np.int64).reshape(-1, 2)
    if features.ndim != 2 or len(features) < 1:
        raise ValueError(f"graph features must be [n, F] with n >= 1; got shape "
                         f"{features.shape}.")
    return features, edges


def _removed(n: int, ratio: float) -> int:
    return min(int(n * ratio), n - 1)


def _induced(features: np.ndarray, edges: np.ndarray, keep: np.ndarray) -> Graph:
    """The subgraph on the sorted node ids ``keep``, renumbered ``0..len(keep)-1``."""
    new_id = np.full(len(features), -1, np.int64)
    new_id[keep] = np.arange(len(keep))
    mapped = new_id[edges]
    mapped = mapped[(mapped >= 0).all(1)]
    return features[keep], mapped.astype(np.int32)


def identity(features: Any, edges: Any, ratio: float, rng: np.random.Generator) -> Graph:
    """The graph unchanged (copies), GraphCL's ``none`` (``ratio`` is checked, unused)."""
    features, edges = _prepare(features, edges)
    _check_ratio(ratio)
    return features.copy(), edges.astype(np.int32)


def node_drop(features: Any, edges: Any, ratio: float, rng: np.random.Generator) -> Graph:
    """Removes ``min(floor(n * ratio), n - 1)`` uniformly chosen nodes and their edges
    (GraphCL "node dropping"). Returns ``(features [n', F], edges [e', 2] int32)``."""
    features, edges = _prepare(features, edges)
    ratio, n = _check_ratio(ratio), len(features)
    k = _removed(n, ratio)
    if not k:
        return features.copy(), edges.astype(np.int32)
    keep = np.sort(rng.permutation(n)[k:])
    return _induced(features, edges, keep)


def subgraph(features: Any, edges: Any, ratio: float, rng: np.random.Generator) -> Graph:
    """The induced subgraph on ``n - min(floor(n * ratio), n - 1)`` nodes gathered by a
    random frontier walk (GraphCL "subgraph"; see the module docstring for the jump when
    the frontier runs dry). Returns ``(features [n', F], edges [e', 2] int32)``."""
    features, edges = _prepare(features, edges)
    ratio, n = _check_ratio(ratio), len(features)
    target = n - _removed(n, ratio)
    if target == n:
        return features.copy(), edges.astype(np.int32)
    neighbours: list[list[int]] = [[] for _ in range(n)]
    for s, t in edges.tolist():
        neighbours[s].append(t)
    draws = rng.random(target + 1).tolist()
    taken = [False] * n
    queued = [False] * n
    start = min(int(draws[0] * n), n - 1)
    taken[start] = True
    chosen = [start]
    frontier = []
    for t in neighbours[start]:
        if not queued[t] and t != start:
            queued[t] = True
            frontier.append(t)
    for step in range(1, target):
        u = draws[step]
        if frontier:
            j = min(int(u * len(frontier)), len(frontier) - 1)
            node = frontier[j]
            frontier[j] = frontier[-1]
            frontier.pop()
        else:  # the component is exhausted: jump to an unvisited node
            rest = [v for v in range(n) if not taken[v]]
            node = rest[min(int(u * len(rest)), len(rest) - 1)]
        taken[node] = True
        chosen.append(node)
        for t in neighbours[node]:
            if not queued[t] and not taken[t]:
                queued[t] = True
                frontier.append(t)
    return _induced(features, edges, np.sort(np.asarray(chosen, np.int64)))


def edge_perturb(features: Any, edges: Any, ratio: float, rng: np.random.Generator) -> Graph:
    """Drops ``k = floor(m * ratio)`` of the ``m`` undirected edges and adds ``k`` new ones
    between distinct nodes that were not connected (fewer if the graph has fewer non-edges);
    both directions of each are listed (GraphCL "edge perturbation"). Returns
    ``(features [n, F] (a copy), edges [e, 2] int32)``."""
    features, edges = _prepare(features, edges)
    ratio, n = _check_ratio(ratio), len(features)
    lo, hi = np.minimum(edges[:, 0], edges[:, 1]), np.maximum(edges[:, 0], edges[:, 1])
    present = np.unique((lo * n + hi)[lo != hi])
    m = len(present)
    k = int(m * ratio)
    if not k:
        return features.copy(), edges.astype(np.int32)
    kept = np.sort(rng.permutation(m)[k:])
    kept_keys = present[kept]
    free = n * (n - 1) // 2 - m
    add = min(k, free)
    if add <= 0:
        new_keys = np.zeros(0, np.int64)
    elif free <= 4 * add or n <= 256:  # enumerate the non-edges (keys a * n + b, a < b)
        blocked = np.tri(n, dtype=bool)  # a >= b
        blocked.ravel()[present] = True
        candidates = np.flatnonzero(~blocked)
        new_keys = candidates[rng.choice(len(candidates), add, replace=False)]
    else:  # sparse and large: rejection sampling, in batches
        new_keys = np.zeros(0, np.int64)
        while len(new_keys) < add:
            pairs = rng.integers(0, n, size=(2 * add + 8, 2))
            a, b = pairs.min(1), pairs.max(1)
            keys = (a * n + b)[a != b]
            keys = keys[~np.isin(keys, present)]
            _, first = np.unique(keys, return_index=True)
            keys = keys[np.sort(first)]  # draw order, duplicates dropped
            keys = keys[~np.isin(keys, new_keys)]
            new_keys = np.concatenate([new_keys, keys[:add - len(new_keys)]])
    keys = np.concatenate([kept_keys, new_keys])
    a, b = keys // n, keys % n
    out = np.concatenate([np.stack([a, b], 1), np.stack([b, a], 1)])
    return features.copy(), out.astype(np.int32)


def attribute_mask(features: Any, edges: Any, ratio: float, rng: np.random.Generator
                   ) -> Graph:
    """Replaces the feature rows of ``floor(n * ratio)`` uniformly chosen nodes by the
    graph's mean feature row (GraphCL "attribute masking"). Returns ``(features [n, F],
    edges (a copy))``."""
    features, edges = _prepare(features, edges)
    ratio, n = _check_ratio(ratio), len(features)
    k = int(n * ratio)
    out = features.copy()
    if k:
        out[rng.permutation(n)[:k]] = features.mean(0)
    return out, edges.astype(np.int32)


#: name -> augmentation; GraphCL's code names are aliases.
AUGMENTATIONS: dict[str, Callable[..., Graph]] = {
    "node_drop": node_drop, "subgraph": subgraph, "edge_perturb": edge_perturb,
    "attribute_mask": attribute_mask, "identity": identity}
_ALIASES = {"dnodes": "node_drop", "drop_nodes": "node_drop", "pedges": "edge_perturb",
            "permute_edges": "edge_perturb", "mask_nodes": "attribute_mask",
            "none": "identity"}
MODES = ("choice", "sequence")


def _augmentation_names(augmentations: Any) -> tuple[str, ...]:
    if isinstance(augmentations, str):
        augmentations = (augmentations,)
    if not isinstance(augmentations, (list, tuple)) or not augmentations:
        raise ValueError(f"`augmentations` must be a non-empty list of names from "
                         f"{', '.join(AUGMENTATIONS)}; got {augmentations!r}.")
    names = []
    for a in augmentations:
        key = _ALIASES.get(a, a) if isinstance(a, str) else a
        if key not in AUGMENTATIONS:
            raise ValueError(f"`augmentations`: unknown augmentation {a!r}; allowed: "
                             f"{', '.join(AUGMENTATIONS)} (or GraphCL's "
                             f"{', '.join(_ALIASES)}).")
        names.append(key)
    return tuple(names)


class GraphViews:
    """Two augmented views of each graph of a batch, on the host (NumPy): the view maker of
    the graph modality, used by :class:`~keras_hardneg.data.graph_feed.GraphFeed` before
    padding (a dropped node is really gone). Not a Keras layer.

    Args:
        augmentations: names from :data:`AUGMENTATIONS` (``node_drop``, ``subgraph``,
            ``edge_perturb``, ``attribute_mask``, ``identity``; GraphCL's ``dnodes``,
            ``pedges``, ``mask_nodes``, ``none`` are accepted).
        ratio: the share of nodes (edges) each augmentation changes, in ``[0, 1)``.
        mode: ``"choice"``: per graph and view one augmentation drawn uniformly from the
            list (GraphCL's ``random2/3/4``); ``"sequence"``: all applied in order.
        augment_first: when False view 1 is the original graph and only view 2 is
            augmented (GraphCL's unsupervised TU code as we recall it); default True, two
            augmented views as the GraphCL paper describes.
        seed: seeds the generator used when :meth:`make_views` gets no ``rng``.

    Attributes:
        modality: ``"graph"``. host_side: True (views are made in the feed, not the step).
    """

    modality = "graph"
    host_side = True
    jit_compatible = False

    def __init__(self, augmentations: Sequence[str] = ("node_drop", "subgraph"),
                 ratio: float = 0.2, mode: str = "choice", augment_first: bool = True,
                 seed: int | None = None):
        self.augmentations = _augmentation_names(augmentations)
        self.ratio = _check_ratio(ratio)
        if mode not in MODES:
            raise ValueError(f"`mode` must be one of {', '.join(MODES)}; got {mode!r}.")
        if not isinstance(augment_first, bool):
            raise ValueError(f"`augment_first` must be True or False; got {augment_first!r}.")
        self.mode = mode
        self.augment_first = augment_first
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        self._functions = [AUGMENTATIONS[a] for a in self.augmentations]

    def augment(self, graph: Graph, rng: np.random.Generator) -> Graph:
        """One random view of ``graph = (features, edges)``."""
        features, edges = graph
        if self.mode == "choice":
            if len(self._functions) == 1:
                fn = self._functions[0]
            else:
                fn = self._functions[int(rng.integers(len(self._functions)))]
            return fn(features, edges, self.ratio, rng)
        for fn in self._functions:
            features, edges = fn(features, edges, self.ratio, rng)
        return features, edges

    def make_views(self, graphs: Sequence[Graph], rng: np.random.Generator | None = None
                   ) -> tuple[list[Graph], list[Graph]]:
        """``(views1, views2)``: two lists with a view of each graph. Deterministic for a
        given ``rng`` (graph by graph, view 1 then view 2); without one the view maker's
        own generator (``seed``) is used."""
        rng = self._rng if rng is None else rng
        views1, views2 = [], []
        for graph in graphs:
            views1.append(self.augment(graph, rng) if self.augment_first
                          else identity(graph[0], graph[1], 0.0, rng))
            views2.append(self.augment(graph, rng))
        return views1, views2

    __call__ = make_views

    def get_config(self) -> dict[str, Any]:
        return {"augmentations": list(self.augmentations), "ratio": self.ratio,
                "mode": self.mode, "augment_first": self.augment_first, "seed": self.seed}

    def __repr__(self) -> str:
        return (f"GraphViews(augmentations={list(self.augmentations)}, ratio={self.ratio}, "
                f"mode={self.mode!r}, augment_first={self.augment_first})")


def _check_graphcl(config: dict[str, Any]) -> str | None:
    try:
        _augmentation_names(config["augmentations"])
    except ValueError as err:
        return str(err).replace("`augmentations`", "'augmentations'").rstrip(".")
    return None


# seed is not a config key: the run layer passes the recipe's seed.
@VIEW_MAKERS.register("graphcl", modality="graph", check=_check_graphcl, params={
    "augmentations": Param("any", help="GraphCL augmentations: node_drop, subgraph, "
                                       "edge_perturb, attribute_mask, identity"),
    "ratio": Param(float, low=0.0, high=1.0, high_inclusive=False, tunable=True,
                   help="share of nodes / edges each augmentation changes, in [0, 1)"),
    "mode": Param(str, choices=MODES, help="choice: one augmentation drawn per graph and "
                                           "view (GraphCL random2/3/4); sequence: all"),
    "augment_first": Param(bool, help="augment view 1 too (false: view 1 is the original)"),
})
def graphcl_views(augmentations: Sequence[str] = ("node_drop", "subgraph"), ratio: float = 0.2,
                  mode: str = "choice", augment_first: bool = True,
                  seed: int | None = None) -> GraphViews:
    """GraphCL's graph views (You et al. 2020): per graph and view, node dropping or
    subgraph (20 %) by default, made on the host by the graph feed."""
    return GraphViews(augmentations, ratio=ratio, mode=mode, augment_first=augment_first,
                      seed=seed)
