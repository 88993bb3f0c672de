"""Small random graphs and a graph feed for the graph framework tests (no TensorFlow import)."""

import keras
import numpy as np

from keras_hardneg.data.graphs import pad_graphs

F = 4


def random_graph(rng, n=None):
    """``(features [n, F], edges [e, 2])``: a random undirected graph, both directions."""
    n = int(rng.integers(2, 7)) if n is None else n
    feats = rng.normal(size=(n, F)).astype("float32")
    pairs = {(int(a), int(b)) for a, b in rng.integers(0, n, size=(n + 1, 2)) if a != b}
    edges = sorted(pairs | {(b, a) for a, b in pairs})
    return feats, np.array(edges, "int32").reshape(-1, 2)


def drop_a_node(graph, rng):
    """A view: one node (and its edges) removed when the graph has more than two."""
    feats, edges = graph
    if len(feats) <= 2:
        return graph
    gone = int(rng.integers(len(feats)))
    keep = np.ones(len(feats), bool)
    keep[gone] = False
    new_id = np.cumsum(keep) - 1
    kept = keep[edges].all(1) if len(edges) else np.zeros(0, bool)
    return feats[keep], new_id[edges[kept]].astype("int32").reshape(-1, 2)


class GraphBatches(keras.utils.PyDataset):
    """``({"view1", "view2", "index"}, labels)`` batches of ``batch_size`` random graphs,
    every batch padded to the same budgets (so a compiled step compiles once); with
    ``plain=True`` ``(graph_batch, labels)``, with ``plain="graphs"``
    ``({"graphs": graph_batch, "index"}, labels)``."""

    def __init__(self, num_batches=4, batch_size=4, budgets=(32, 64), seed=0, views=True,
                 plain=False):
        super().__init__()
        rng = np.random.default_rng(seed)
        self.items = []
        for b in range(num_batches):
            graphs = [random_graph(rng) for _ in range(batch_size)]
            labels = rng.integers(0, 2, batch_size).astype("int32")
            index = np.arange(b * batch_size, (b + 1) * batch_size, dtype="int64")
            if plain == "graphs":  # InfoGraph's {"graphs": batch, "index": ...}
                self.items.append(({"graphs": pad_graphs(graphs, budgets), "index": index},
                                   labels))
                continue
            if plain:
                self.items.append((pad_graphs(graphs, budgets), labels))
                continue
            v1 = [drop_a_node(g, rng) for g in graphs] if views else graphs
            v2 = [drop_a_node(g, rng) for g in graphs] if views else graphs
            x = {"view1": pad_graphs(v1, budgets), "view2": pad_graphs(v2, budgets),
                 "index": index}
            self.items.append((x, labels))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def count_jax_traces(model):
    """Wraps ``model.train_step`` to count how often JAX traces it; returns the list."""
    traces = []
    step = model.train_step

    def counted(*args):
        traces.append(1)  # runs only when jax traces the step
        return step(*args)

    model.train_step = counted
    return traces


def compiled(model, fn):
    """``fn(batch)`` (a forward computation of ``model``); under JAX one ``jax.jit`` of it
    with the model's variables as inputs (eager JAX compiles op by op, much slower for a
    whole forward pass). Writes to variables inside ``fn`` are dropped under JAX."""
    if keras.backend.backend() != "jax":
        return fn
    import jax

    refs = list(model.variables)

    def pure(values, batch):
        with keras.StatelessScope(state_mapping=list(zip(refs, values))):
            return fn(batch)

    jitted = jax.jit(pure)
    return lambda batch: jitted([v.value for v in refs], batch)
