"""Graph-classification data: the TU text format, a set of graphs, padded graph batches.

The TU benchmarks (Morris et al. 2020, *TUDataset*) are what the graph experiments of the
seed papers use: InfoGraph (Sun et al. 2020) as run by HCL (Robinson et al. 2021) on MUTAG,
PTC, PROTEINS, ENZYMES, IMDB-B/M; GraphCL (You et al. 2020) as run by BatchSampler (Yang et
al. 2023) on IMDB-B/M, PROTEINS, MUTAG, NCI1.

* :func:`load_tu` reads a folder in TU format (``D_A.txt``, ``D_graph_indicator.txt``,
  ``D_graph_labels.txt``, optional ``D_node_labels.txt``, ``D_node_attributes.txt``,
  ``D_edge_labels.txt``) into a :class:`GraphSet`; :func:`is_tu_folder` recognises one.
* :class:`GraphSet`: ``len()``, ``labels`` int64 ``[G]`` in ``0..C-1``, ``feature_dim``,
  ``num_classes``, ``graph(i) -> (features float32 [n_i, F], edges int32 [e_i, 2])``,
  ``subset``, ``budgets(B)``, ``batch(indices)``, ``batches(B)``.
* :func:`pad_graphs`: a list of ``(features, edges)`` graphs -> one padded batch.

Loader decisions (also in ``docs/notes/graphs_data.md``):

* node features: one-hot node labels (one column per distinct label value, in sorted
  order), followed by the node attributes when the folder has them (raw values, as
  PyTorch Geometric's ``TUDataset(use_node_attr=True)``); graphs without node labels (IMDB-*)
  get one-hot node degree, ``OneHotDegree(max_degree)`` as InfoGraph and GraphCL use for them
  (``max_degree`` defaults to the largest degree in the folder; larger degrees, possible only
  with a smaller ``max_degree`` given, fall into the last column). The scheme used is in
  :attr:`GraphSet.feature_scheme`.
* edges: TU graphs are undirected; each is kept in both directions (a direction missing from
  ``D_A.txt`` is added), listed once (IMDB-* list every direction twice: duplicates are
  removed), self-loops are removed (none of the seven benchmarks has one; GIN adds a node's
  own state itself), all counted in :attr:`GraphSet.stats`. Edge labels are checked (one per
  line of ``D_A.txt``) and not used: the GIN encoders of GraphCL/InfoGraph read none.
* graph labels: the sorted distinct values map to ``0..C-1`` (``label_values`` keeps them).

Graph batch (the library's one format; static shapes so a compiled step compiles once)::

    "nodes":      float32 [N_max, F]  padding rows 0
    "edges":      int32   [E_max, 2]  (source, target); padding edges (N_max-1, N_max-1)
    "node_graph": int32   [N_max]     graph of each node in [0, B); padding nodes have B
    "node_mask":  float32 [N_max]     1 real node, 0 padding
    "edge_mask":  float32 [E_max]     1 real edge, 0 padding
    "graph_mask": float32 [B]         1 real graph, 0 an empty padding graph

Real nodes come first, grouped by graph in order; real edges come first.

Example:
>>> import numpy as np
>>> g = GraphSet.from_graphs(
...     [(np.eye(3, dtype="float32"), np.array([[0, 1], [1, 0]])),
...      (np.eye(3, dtype="float32")[:1], np.zeros((0, 2), int))], labels=[3, 5])
>>> len(g), g.feature_dim, g.num_classes, g.labels.tolist(), g.label_values.tolist()
(2, 3, 2, [0, 1], [3, 5])
>>> g.budgets(2)
(8, 8)
>>> b = g.batch([0, 1])
>>> b["nodes"].shape, b["edges"][:3].tolist(), b["node_graph"].tolist()
((8, 3), [[0, 1], [1, 0], [7, 7]], [0, 0, 0, 1, 2, 2, 2, 2])
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from keras_hardneg.registry import DATASETS, Param

__all__ = ["GraphSet", "load_tu", "is_tu_folder", "pad_graphs", "tu", "BATCH_KEYS"]

#: The keys of a graph batch, in a fixed order.
BATCH_KEYS = ("nodes", "edges", "node_graph", "node_mask", "edge_mask", "graph_mask")

_REQUIRED_FILES = ("A", "graph_indicator", "graph_labels")
_ALIGN = 8


def _round_up(n: int, multiple: int = _ALIGN) -> int:
    return max(multiple, -(-int(n) // multiple) * multiple)


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


# ----------------------------------------------------------------------------- batches
def pad_graphs(graphs: Sequence[tuple[np.ndarray, np.ndarray]], budgets: tuple[int, int],
               num_graphs: int | None = None, feature_dim: int | None = None
               ) -> dict[str, np.ndarray]:
    """A list of graphs as one padded graph batch (the format in the module docstring).

    Args:
        graphs: ``(features float [n_i, F], edges int [e_i, 2])`` per graph, edges indexing
            the graph's own nodes ``0..n_i-1``.
        budgets: ``(N_max, E_max)``, the static node and edge counts of the batch.
        num_graphs: ``B`` (default ``len(graphs)``); graphs ``len(graphs)..B-1`` are empty
            padding graphs (``graph_mask`` 0).
        feature_dim: ``F``, needed only when ``graphs`` is empty.

    Raises:
        ValueError: the graphs need more nodes or edges than the budgets, disagree on ``F``,
            or an edge indexes a node outside its graph.

    Example:
    >>> import numpy as np
    >>> b = pad_graphs([(np.ones((2, 1), "float32"), np.array([[0, 1], [1, 0]]))], (8, 8),
    ...                num_graphs=2)
    >>> b["node_mask"].tolist()[:3], b["graph_mask"].tolist(), b["edge_mask"].sum()
    ([1.0, 1.0, 0.0], [1.0, 0.0], np.float32(2.0))
    """
    n_max, e_max = int(budgets[0]), int(budgets[1])
    count = len(graphs)
    b = count if num_graphs is None else int(num_graphs)
    if count > b:
        raise ValueError(f"`num_graphs` ({b}) is smaller than the number of graphs ({count}).")
    if b < 1:
        raise ValueError(f"a graph batch needs at least one graph; got num_graphs={b}.")
    if n_max < 1 or e_max < 1:
        raise ValueError(f"`budgets` must be two positive integers (N_max, E_max); got "
                         f"{tuple(budgets)}.")
    if count:
        feats = [np.asarray(g[0]) for g in graphs]
        edge_list = [np.asarray(g[1]) for g in graphs]
        dims = {f.shape[1] if f.ndim == 2 else None for f in feats}
        if len(dims) != 1 or None in dims:
            raise ValueError(f"graph features must all be [n_i, F] with one F; got shapes "
                             f"{sorted({f.shape for f in feats}, key=str)[:4]}.")
        f_dim = dims.pop()
    else:
        if feature_dim is None:
            raise ValueError("`feature_dim` is required when `graphs` is empty.")
        feats, edge_list, f_dim = [], [], int(feature_dim)
    n_counts = np.fromiter((len(f) for f in feats), np.int64, count)
    e_counts = np.fromiter((len(e) for e in edge_list), np.int64, count)
    n_total, e_total = int(n_counts.sum()), int(e_counts.sum())
    if n_total > n_max or e_total > e_max:
        raise ValueError(f"a batch of {count} graphs with {n_total} nodes and {e_total} edges "
                         f"exceeds the budgets (N_max={n_max}, E_max={e_max}); use "
                         f"GraphSet.budgets(batch_size) of the set the graphs come from.")
    nodes = np.zeros((n_max, f_dim), np.float32)
    edges = np.full((e_max, 2), n_max - 1, np.int32)
    node_graph = np.full(n_max, b, np.int32)
    if count:
        if n_total:
            nodes[:n_total] = np.concatenate(feats)
        node_graph[:n_total] = np.repeat(np.arange(count, dtype=np.int32), n_counts)
        if e_total:
            local = np.concatenate([e.reshape(-1, 2) for e in edge_list]).astype(np.int64)
            owner_n = np.repeat(n_counts, e_counts)
            if local.min() < 0 or (local >= owner_n[:, None]).any():
                bad = int(np.flatnonzero(((local < 0) | (local >= owner_n[:, None])).any(1))[0])
                graph = int(np.searchsorted(np.cumsum(e_counts), bad, side="right"))
                raise ValueError(f"graph {graph} of the batch has an edge {local[bad].tolist()} "
                                 f"outside its {int(owner_n[bad])} nodes.")
            offsets = np.concatenate([[0], np.cumsum(n_counts)[:-1]])
            edges[:e_total] = local + np.repeat(offsets, e_counts)[:, None]
    node_mask = np.zeros(n_max, np.float32)
    node_mask[:n_total] = 1.0
    edge_mask = np.zeros(e_max, np.float32)
    edge_mask[:e_total] = 1.0
    graph_mask = np.zeros(b, np.float32)
    graph_mask[:count] = 1.0
    return {"nodes": nodes, "edges": edges, "node_graph": node_graph, "node_mask": node_mask,
            "edge_mask": edge_mask, "graph_mask": graph_mask}


# ---------------------------------------------------------------------------- GraphSet
class GraphSet:
    """A set of graphs with one node-feature width and one label each.

    Stored as concatenated arrays (read-only): ``node_features`` float32 ``[sum n_i, F]``,
    ``edges`` int32 ``[sum e_i, 2]`` numbered within each graph (both directions of an
    undirected edge are rows), and the offsets ``node_ptr`` / ``edge_ptr`` ``[G + 1]``.

    Args:
        node_features, node_ptr, edges, edge_ptr: as above (edges sorted by graph).
        labels: ``[G]`` integer class ids in ``0..num_classes-1``.
        num_classes: ``C`` (default ``max(labels) + 1``).
        label_values: the original label of each class id (default ``0..C-1``).
        feature_scheme: how the features were made (e.g. ``"node_labels(7)"``).
        name: the dataset's name.
        stats: counts from loading (duplicates removed, ...).

    Attributes:
        num_nodes, num_edges: int64 ``[G]`` per graph (``num_edges`` counts rows of
            ``edges``, i.e. both directions).
    """

    def __init__(self, node_features: np.ndarray, node_ptr: np.ndarray, edges: np.ndarray,
                 edge_ptr: np.ndarray, labels: Any, *, num_classes: int | None = None,
                 label_values: Any = None, feature_scheme: str = "", name: str = "",
                 stats: dict[str, Any] | None = None):
        x = np.asarray(node_features, np.float32)
        node_ptr = np.asarray(node_ptr, np.int64)
        edges = np.asarray(edges, np.int32).reshape(-1, 2)
        edge_ptr = np.asarray(edge_ptr, np.int64)
        labels = np.asarray(labels, np.int64).reshape(-1)
        if x.ndim != 2:
            raise ValueError(f"`node_features` must be [num_nodes, F]; got shape {x.shape}.")
        g = len(labels)
        if node_ptr.shape != (g + 1,) or edge_ptr.shape != (g + 1,):
            raise ValueError(f"`node_ptr` and `edge_ptr` must have G + 1 = {g + 1} entries; got "
                             f"{node_ptr.shape} and {edge_ptr.shape}.")
        if node_ptr[0] != 0 or node_ptr[-1] != len(x) or (np.diff(node_ptr) < 1).any():
            raise ValueError("`node_ptr` must rise from 0 to len(node_features), every graph "
                             "having at least one node.")
        if edge_ptr[0] != 0 or edge_ptr[-1] != len(edges) or (np.diff(edge_ptr) < 0).any():
            raise ValueError("`edge_ptr` must rise from 0 to len(edges).")
        self.num_nodes = _readonly(np.diff(node_ptr))
        self.num_edges = _readonly(np.diff(edge_ptr))
        if len(edges):
            owner_n = np.repeat(self.num_nodes, self.num_edges)
            if edges.min() < 0 or (edges >= owner_n[:, None]).any():
                raise ValueError("`edges` must index nodes of their own graph (0..n_i-1).")
        c = int(labels.max()) + 1 if num_classes is None and g else int(num_classes or 0)
        if g and (labels.min() < 0 or labels.max() >= c):
            raise ValueError(f"`labels` must lie in 0..num_classes-1 = 0..{c - 1}.")
        self.node_features = _readonly(x)
        self.node_ptr = _readonly(node_ptr)
        self.edges = _readonly(edges)
        self.edge_ptr = _readonly(edge_ptr)
        self.labels = _readonly(labels)
        self.num_classes = c
        self.label_values = _readonly(np.arange(c) if label_values is None
                                      else np.asarray(label_values))
        if len(self.label_values) != c:
            raise ValueError(f"`label_values` must have num_classes = {c} entries.")
        self.feature_scheme = feature_scheme
        self.name = name
        self.stats = dict(stats or {})
        self._sorted_nodes = np.sort(self.num_nodes)[::-1].cumsum()
        self._sorted_edges = np.sort(self.num_edges)[::-1].cumsum()

    @classmethod
    def from_graphs(cls, graphs: Iterable[tuple[Any, Any]], labels: Any, *,
                    num_classes: int | None = None, **kwargs: Any) -> "GraphSet":
        """A set from ``(features [n_i, F], edges [e_i, 2])`` pairs and their labels: with
        ``num_classes`` the labels are class ids already; without, their sorted distinct
        values map to ``0..C-1`` (``label_values``)."""
        graphs = [(np.asarray(f, np.float32), np.asarray(e, np.int64).reshape(-1, 2))
                  for f, e in graphs]
        if not graphs:
            raise ValueError("`graphs` is empty.")
        labels = np.asarray(labels).reshape(-1)
        if len(labels) != len(graphs):
            raise ValueError(f"`labels` has {len(labels)} entries for {len(graphs)} graphs.")
        if num_classes is None:
            values, ids = np.unique(labels, return_inverse=True)
        else:  # labels are class ids already
            values, ids = None, labels
        node_ptr = np.concatenate([[0], np.cumsum([len(f) for f, _ in graphs])])
        edge_ptr = np.concatenate([[0], np.cumsum([len(e) for _, e in graphs])])
        return cls(np.concatenate([f for f, _ in graphs]), node_ptr,
                   np.concatenate([e for _, e in graphs]), edge_ptr, ids.reshape(-1),
                   num_classes=len(values) if values is not None else num_classes,
                   label_values=values, **kwargs)

    # ---------------------------------------------------------------- sequence
    def __len__(self) -> int:
        return len(self.labels)

    @property
    def feature_dim(self) -> int:
        """``F``, the width of the node features."""
        return int(self.node_features.shape[1])

    def graph(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """``(features float32 [n_i, F], edges int32 [e_i, 2])`` of graph ``i`` (read-only
        views; edges number the graph's own nodes ``0..n_i-1``)."""
        n = len(self)
        if not -n <= int(i) < n:
            raise IndexError(f"graph index {i} is out of range for {n} graphs.")
        i = int(i) % n
        return (self.node_features[self.node_ptr[i]:self.node_ptr[i + 1]],
                self.edges[self.edge_ptr[i]:self.edge_ptr[i + 1]])

    __getitem__ = graph

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for i in range(len(self)):
            yield self.graph(i)

    def __repr__(self) -> str:
        return (f"GraphSet({self.name or 'graphs'}: {len(self)} graphs, {self.num_classes} "
                f"classes, F={self.feature_dim}, {self.feature_scheme or 'features'})")

    def _indices(self, indices: Any) -> np.ndarray:
        idx = np.asarray(indices).reshape(-1)
        if idx.size and idx.dtype.kind not in "iu":
            raise ValueError(f"`indices` must be integers; got dtype {idx.dtype}.")
        idx = idx.astype(np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= len(self)):
            raise ValueError(f"`indices` must lie in 0..{len(self) - 1}; got "
                             f"{int(idx.min())}..{int(idx.max())}.")
        return idx

    def subset(self, indices: Any) -> "GraphSet":
        """The graphs ``indices`` (in that order) as a new set; ``num_classes``,
        ``label_values`` and the features' scheme are kept."""
        idx = self._indices(indices)
        if not idx.size:
            raise ValueError("`indices` is empty; a GraphSet needs at least one graph.")
        n_counts, e_counts = self.num_nodes[idx], self.num_edges[idx]
        node_rows = _ranges(self.node_ptr[idx], n_counts)
        edge_rows = _ranges(self.edge_ptr[idx], e_counts)
        return GraphSet(self.node_features[node_rows],
                        np.concatenate([[0], np.cumsum(n_counts)]),
                        self.edges[edge_rows], np.concatenate([[0], np.cumsum(e_counts)]),
                        self.labels[idx], num_classes=self.num_classes,
                        label_values=self.label_values, feature_scheme=self.feature_scheme,
                        name=self.name, stats=self.stats)

    # ----------------------------------------------------------------- batches
    def budgets(self, batch_size: int) -> tuple[int, int]:
        """``(N_max, E_max)`` that fit ANY batch of ``batch_size`` graphs of this set (and
        any views of them that do not grow them): the sums of the ``batch_size`` largest
        node and edge counts, rounded up to a multiple of 8 (at least 8)."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
                or batch_size < 1:
            raise ValueError(f"`batch_size` must be a positive integer; got {batch_size!r}.")
        k = min(int(batch_size), len(self)) - 1
        return _round_up(self._sorted_nodes[k]), _round_up(self._sorted_edges[k])

    def batch(self, indices: Any, budgets: tuple[int, int] | None = None,
              num_graphs: int | None = None) -> dict[str, np.ndarray]:
        """One padded graph batch.

        Args:
            indices: graph indices ``[B]`` of this set, or a list of ``(features, edges)``
                graphs (views), passed to :func:`pad_graphs`.
            budgets: ``(N_max, E_max)``; default ``self.budgets(B)``, so batches of the same
                ``B`` share their shapes.
            num_graphs: static ``B`` (default: the number of graphs); more pads with empty
                graphs (``graph_mask`` 0).

        Raises:
            ValueError: the batch exceeds ``budgets`` (naming the counts), bad indices.
        """
        if _is_graph_list(indices):
            graphs = list(indices)
        else:
            graphs = [self.graph(i) for i in self._indices(indices)]
        b = len(graphs) if num_graphs is None else int(num_graphs)
        if budgets is None:
            budgets = self.budgets(max(b, 1))
        return pad_graphs(graphs, budgets, b, feature_dim=self.feature_dim)

    def batches(self, batch_size: int, budgets: tuple[int, int] | None = None
                ) -> Iterator[dict[str, np.ndarray]]:
        """Evaluation batches over all graphs in order, each of ``batch_size`` graphs (the
        last one padded with empty graphs, ``graph_mask`` 0) and ``budgets`` (default
        ``self.budgets(batch_size)``): ``ceil(len / batch_size)`` batches of one shape."""
        budgets = budgets or self.budgets(batch_size)
        for start in range(0, len(self), int(batch_size)):
            idx = np.arange(start, min(start + int(batch_size), len(self)))
            yield self.batch(idx, budgets, num_graphs=batch_size)


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenated ``arange(s, s + c)`` for each pair, vectorised."""
    total = int(counts.sum())
    if not total:
        return np.zeros(0, np.int64)
    ends = np.cumsum(counts)
    shift = np.repeat(starts - (ends - counts), counts)
    return np.arange(total, dtype=np.int64) + shift


def _is_graph_list(x: Any) -> bool:
    if isinstance(x, np.ndarray) or not isinstance(x, (list, tuple)) or not x:
        return False
    first = x[0]
    return isinstance(first, (tuple, list)) and len(first) == 2 and np.ndim(first[0]) == 2


# ------------------------------------------------------------------------- TU loader
def _tu_files(folder: str, name: str | None) -> tuple[str, dict[str, str]]:
    if not os.path.isdir(folder):
        raise ValueError(f"TU folder {folder!r} does not exist or is not a folder.")
    if name is None:
        names = sorted(f[:-len("_graph_indicator.txt")] for f in os.listdir(folder)
                       if f.endswith("_graph_indicator.txt"))
        if len(names) != 1:
            raise ValueError(
                f"cannot tell the dataset name in {folder!r}: expected exactly one "
                f"'<name>_graph_indicator.txt', found {len(names)} ({', '.join(names) or 'none'})"
                "; pass `name`.")
        name = names[0]
    files = {}
    for part in ("A", "graph_indicator", "graph_labels", "node_labels", "node_attributes",
                 "edge_labels"):
        path = os.path.join(folder, f"{name}_{part}.txt")
        if os.path.isfile(path):
            files[part] = path
        elif part in _REQUIRED_FILES:
            raise ValueError(f"TU folder {folder!r} has no {name}_{part}.txt (required: "
                             f"{', '.join(f'{name}_{p}.txt' for p in _REQUIRED_FILES)}).")
    return name, files


def is_tu_folder(path: Any) -> bool:
    """Whether ``path`` is a folder holding one TU dataset: ``D_A.txt``,
    ``D_graph_indicator.txt`` and ``D_graph_labels.txt`` for one name ``D``."""
    try:
        _tu_files(os.fspath(path), None)
    except (ValueError, TypeError, OSError):
        return False
    return True


def _lines(path: str) -> list[bytes]:
    with open(path, "rb") as f:
        lines = f.read().splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def _read_table(path: str, columns: int | None, dtype: type, what: str) -> np.ndarray:
    """The numbers of a TU text file, ``[lines, columns]`` (``columns=None``: as many as the
    first line has). Fast path: NumPy's C parser (``np.loadtxt``); on any failure the file
    is scanned line by line for the first bad line, named in the ``ValueError``."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "empty input file": reported below
            table = np.loadtxt(path, delimiter=",", dtype=dtype, ndmin=2, comments=None)
        if table.size and (columns is None or table.shape[1] == columns):
            return table
    except ValueError:
        pass
    lines = _lines(path)
    if not lines:
        raise ValueError(f"{path}: the file is empty (expected {what}).")
    columns = columns or len(lines[0].split(b","))
    for number, line in enumerate(lines, 1):
        parts = line.split(b",")
        try:
            if len(parts) != columns:
                raise ValueError
            [dtype(p) for p in parts]
        except ValueError:
            kind = "integers" if dtype is np.int64 else "numbers"
            raise ValueError(f"{path}, line {number}: expected {columns} {kind} separated by "
                             f"',' ({what}); got {line.decode(errors='replace')!r}.") from None
    raise ValueError(f"{path}: could not parse the file as {what}.")  # pragma: no cover


def _unique(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values (sort-based: NumPy 2's hash-based ``np.unique`` was 20x slower
    on the 500k edge keys of NCI1)."""
    values = np.sort(values, kind="stable")
    keep = np.ones(len(values), bool)
    keep[1:] = values[1:] != values[:-1]
    return values[keep]


def load_tu(folder: Any, name: str | None = None, *, node_features: str = "auto",
            node_attributes: bool = True, max_degree: int | None = None) -> GraphSet:
    """Reads a TU-format folder (Morris et al. 2020) into a :class:`GraphSet`.

    Args:
        folder: the folder holding ``{name}_A.txt``, ``{name}_graph_indicator.txt``,
            ``{name}_graph_labels.txt`` and optionally ``{name}_node_labels.txt``,
            ``{name}_node_attributes.txt``, ``{name}_edge_labels.txt``.
        name: the dataset's file prefix; default: read from the single
            ``*_graph_indicator.txt`` in the folder.
        node_features: ``"auto"`` (one-hot node labels when the folder has them, else
            one-hot degree), ``"labels"`` or ``"degree"``.
        node_attributes: append ``{name}_node_attributes.txt`` (raw values) when present.
        max_degree: the one-hot degree has ``max_degree + 1`` columns (degrees above go to
            the last); default the largest degree of the folder.

    Returns:
        a :class:`GraphSet` whose ``stats`` count what loading changed: ``duplicate_edges``
        removed, ``self_loops`` removed, ``reverse_edges_added``, ``isolated_nodes``.

    Raises:
        ValueError: a missing required file, a malformed line (file and line named), a
            node or graph id out of range, an edge between two graphs, a graph without
            nodes, or a file with the wrong number of lines.

    Example (a two-graph folder in the TU format, made here; a real one, e.g. MUTAG, loads
    the same way):
    >>> import os
    >>> os.makedirs("TOY", exist_ok=True)
    >>> files = {"A": "1, 2\\n2, 1\\n3, 4\\n4, 3\\n",           # edges, 1-based node ids
    ...          "graph_indicator": "1\\n1\\n2\\n2\\n",          # the graph of each node
    ...          "graph_labels": "0\\n1\\n"}                    # the class of each graph
    >>> for key, text in files.items():
    ...     with open(os.path.join("TOY", f"TOY_{key}.txt"), "w") as f:
    ...         _ = f.write(text)
    >>> g = load_tu("TOY")
    >>> len(g), g.num_classes, g.feature_dim, g.feature_scheme
    (2, 2, 2, 'degree_onehot(max_degree=1)')
    """
    if node_features not in ("auto", "labels", "degree"):
        raise ValueError(f"`node_features` must be 'auto', 'labels' or 'degree'; got "
                         f"{node_features!r}.")
    if max_degree is not None and (isinstance(max_degree, bool) or int(max_degree) < 0):
        raise ValueError(f"`max_degree` must be a non-negative integer; got {max_degree!r}.")
    folder = os.fspath(folder)
    name, files = _tu_files(folder, name)

    indicator, graph_labels, counts = _read_graph_ids(files)
    n, g = len(indicator), len(graph_labels)
    # nodes grouped by graph (stable: TU files list them so already; others are reordered)
    order = np.argsort(indicator, kind="stable")
    new_id = np.empty(n, np.int64)
    new_id[order] = np.arange(n)
    node_ptr = np.concatenate([[0], np.cumsum(counts)])

    edges_global, stats = _read_edges(files, indicator, new_id)
    graph_of_node = np.repeat(np.arange(g), counts)
    edge_counts = np.bincount(graph_of_node[edges_global[:, 0]], minlength=g)
    edge_ptr = np.concatenate([[0], np.cumsum(edge_counts)])
    local = edges_global - node_ptr[graph_of_node[edges_global[:, 0]]][:, None]
    degree = np.bincount(edges_global[:, 0], minlength=n)
    stats["isolated_nodes"] = int((degree == 0).sum())

    x, scheme = _node_features(files, folder, name, order, degree, node_features=node_features,
                               node_attributes=node_attributes, max_degree=max_degree)
    label_values, labels = np.unique(graph_labels, return_inverse=True)
    return GraphSet(x, node_ptr, local.astype(np.int32), edge_ptr, labels.reshape(-1),
                    num_classes=len(label_values), label_values=label_values,
                    feature_scheme=scheme, name=name, stats=stats)


def _read_graph_ids(files: dict[str, str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(graph id of each node [n] 1-based, graph labels [g], nodes per graph [g])``, checked:
    every id in ``1..g``, every graph with a node."""
    indicator = _read_table(files["graph_indicator"], 1, np.int64, "one graph id per node")[:, 0]
    graph_labels = _read_table(files["graph_labels"], 1, np.int64, "one class per graph")[:, 0]
    g = len(graph_labels)
    if indicator.min() < 1 or indicator.max() > g:
        line = int(np.flatnonzero((indicator < 1) | (indicator > g))[0]) + 1
        raise ValueError(f"{files['graph_indicator']}, line {line}: graph id "
                         f"{indicator[line - 1]} is outside 1..{g} (the number of lines of "
                         f"{os.path.basename(files['graph_labels'])}).")
    counts = np.bincount(indicator - 1, minlength=g)
    if (counts == 0).any():
        raise ValueError(f"{files['graph_indicator']}: graph {int(np.argmin(counts)) + 1} "
                         f"has no nodes (every graph id 1..{g} needs at least one).")
    return indicator, graph_labels, counts


def _read_edges(files: dict[str, str], indicator: np.ndarray,
                new_id: np.ndarray) -> tuple[np.ndarray, dict[str, int]]:
    """The folder's edges in both directions, once each, without self-loops, as
    ``[E, 2]`` int64 of the regrouped node ids ``new_id`` sorted by source; and the counts
    of what changed (``stats``)."""
    n = len(indicator)
    pairs = _read_table(files["A"], 2, np.int64, "an edge 'row, col' of 1-based node ids")
    bad = (pairs < 1) | (pairs > n)
    if bad.any():
        line = int(np.flatnonzero(bad.any(1))[0]) + 1
        raise ValueError(f"{files['A']}, line {line}: node id out of 1..{n} (the number of "
                         f"lines of {os.path.basename(files['graph_indicator'])}).")
    pairs -= 1
    cross = indicator[pairs[:, 0]] != indicator[pairs[:, 1]]
    if cross.any():
        line = int(np.flatnonzero(cross)[0]) + 1
        raise ValueError(f"{files['A']}, line {line}: edge between nodes of different graphs "
                         f"({indicator[pairs[line - 1, 0]]} and "
                         f"{indicator[pairs[line - 1, 1]]}).")
    if "edge_labels" in files:
        edge_label_lines = len(_lines(files["edge_labels"]))
        if edge_label_lines != len(pairs):
            raise ValueError(f"{files['edge_labels']} has {edge_label_lines} lines; expected "
                             f"one per edge of {os.path.basename(files['A'])} ({len(pairs)}).")
    loops = pairs[:, 0] == pairs[:, 1]
    pairs = new_id[pairs[~loops]]
    both = np.concatenate([pairs, pairs[:, ::-1]])
    key = _unique(both[:, 0] * n + both[:, 1])  # sorted by source: grouped by graph
    edges_global = np.stack([key // n, key % n], axis=1)
    given = _unique(pairs[:, 0] * n + pairs[:, 1])
    stats = {"lines_A": len(loops), "self_loops": int(loops.sum()),
             "duplicate_edges": int(len(pairs) - len(given)),
             "reverse_edges_added": int(len(key) - len(given)),
             "edges": int(len(key))}
    return edges_global, stats


def _node_features(files: dict[str, str], folder: str, name: str, order: np.ndarray,
                   degree: np.ndarray, *, node_features: str, node_attributes: bool,
                   max_degree: int | None) -> tuple[np.ndarray, str]:
    """``(features float32 [n, F] in the regrouped node order, the scheme's name)``: one-hot
    node labels or one-hot degree, then the node attributes when asked and present."""
    n = len(order)
    parts, scheme = [], []
    use_labels = node_features == "labels" or (node_features == "auto" and
                                               "node_labels" in files)
    if use_labels:
        if "node_labels" not in files:
            raise ValueError(f"node_features='labels' but {folder!r} has no "
                             f"{name}_node_labels.txt.")
        node_labels = _read_table(files["node_labels"], None, np.int64, "node labels")
        if len(node_labels) != n:
            raise ValueError(f"{files['node_labels']} has {len(node_labels)} lines; expected "
                             f"one per node ({n}).")
        values, ids = np.unique(node_labels[:, 0], return_inverse=True)
        onehot = np.zeros((n, len(values)), np.float32)
        onehot[np.arange(n), ids.reshape(-1)] = 1.0
        parts.append(onehot[order])
        scheme.append(f"node_labels({len(values)})")
    else:
        top = int(degree.max()) if max_degree is None else int(max_degree)
        onehot = np.zeros((n, top + 1), np.float32)
        onehot[np.arange(n), np.minimum(degree, top)] = 1.0
        parts.append(onehot)
        scheme.append(f"degree_onehot(max_degree={top})")
    if node_attributes and "node_attributes" in files:
        attributes = _read_table(files["node_attributes"], None, np.float64, "node attributes")
        if len(attributes) != n:
            raise ValueError(f"{files['node_attributes']} has {len(attributes)} lines; "
                             f"expected one per node ({n}).")
        parts.append(attributes[order].astype(np.float32))
        scheme.append(f"node_attributes({attributes.shape[1]})")
    x = np.concatenate(parts, axis=1) if len(parts) > 1 else parts[0]
    return x, "+".join(scheme)


# ------------------------------------------------------------------------ registration
def _check_tu(config: dict[str, Any]) -> str | None:
    if not config.get("folder") and not config.get("dataset"):
        return ("'dataset' (a TU set by name, e.g. 'MUTAG', fetched once) or 'folder' (a "
                "TU-format folder) is required")
    return None


@DATASETS.register(
    "tu", modality="graph", check=_check_tu,
    params={"dataset": Param(str, help="a TU set by name ('MUTAG', 'PROTEINS', ...), "
                                       "fetched once from the TU host into the cache"),
            "folder": Param("path", help="a TU-format folder, e.g. .../MUTAG (wins over "
                                         "'dataset')"),
            "data_dir": Param("path", help="cache folder of fetched sets (default "
                                           "~/.keras/datasets)"),
            "prefix": Param(str, help="file prefix D of D_A.txt (default: read from the "
                                      "folder)"),
            "node_features": Param(str, choices=("auto", "labels", "degree"),
                                   help="one-hot node labels, or one-hot degree (auto: labels "
                                        "when the folder has them)"),
            "node_attributes": Param(bool, help="append the node attributes when present"),
            "max_degree": Param(int, low=0, help="one-hot degree width - 1 (default: the "
                                                 "largest degree)")})
def tu(seed: int, folder: str | None = None, prefix: str | None = None,
       node_features: str = "auto", node_attributes: bool = True,
       max_degree: int | None = None, dataset: str | None = None,
       data_dir: str | None = None) -> tuple[tuple[GraphSet, np.ndarray], tuple[None, None],
                                             str]:
    """A TU graph-classification set: ``folder``, else the set named ``dataset`` fetched
    once into the cache (:func:`keras_hardneg.data.public.tu_folder`). All graphs, no test
    split (the papers' protocol is 10-fold cross-validation of an SVM over all graphs;
    ``seed`` is unused). ``prefix`` is :func:`load_tu`'s ``name`` (a recipe section's
    ``name`` names the component)."""
    if not folder and not dataset:
        raise ValueError("`dataset` (a TU set by name) or `folder` (a TU-format folder) is "
                         "required.")
    if not folder:
        from keras_hardneg.data.public import tu_folder

        folder = tu_folder(dataset, data_dir)
    graphs = load_tu(folder, prefix, node_features=node_features,
                     node_attributes=node_attributes, max_degree=max_degree)
    desc = (f"TU {graphs.name} ({len(graphs)} graphs, {graphs.num_classes} classes, "
            f"{int(graphs.num_nodes.sum())} nodes, F={graphs.feature_dim}: "
            f"{graphs.feature_scheme})")
    return (graphs, graphs.labels), (None, None), desc
