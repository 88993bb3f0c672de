"""Graphs (:class:`keras_hardneg.data.graphs.GraphSet`): the graph modality and its default
recipe.

Batches are padded disjoint unions whose two views are drawn on the host (GraphCL's views
remove nodes and edges, which a static-shape step cannot do); the figure is the 10-fold SVM
accuracy on frozen graph embeddings (the protocol of InfoGraph and GraphCL); the report
shows a 2-D map of the graph embeddings; exports take the six tensors of a padded graph
batch (:data:`~keras_hardneg.modalities.signatures.GRAPH_INPUTS`).

Example:
>>> from keras_hardneg.modalities import get_modality
>>> graph = get_modality("graph")
>>> graph.result_keys, graph.throughput_key, graph.default_recipe["framework"]["name"]
(('svm_accuracy', 'svm_accuracy_std'), 'graphs_per_second', 'graphcl')
"""

from __future__ import annotations

from typing import Any

import numpy as np

from keras_hardneg.modalities import report
from keras_hardneg.modalities.artifact import preset_usage
from keras_hardneg.modalities.base import Modality
from keras_hardneg.modalities.evaluation import Figure
from keras_hardneg.modalities.feed import random_projection
from keras_hardneg.registry import MODALITIES, ConfigError as RecipeError

__all__ = ["GraphModality", "GRAPH_RECIPE"]

#: The default graph run: GraphCL (You et al. 2020) as in its unsupervised TU setting
#: (GIN encoder, 3 layers of 32; node dropping / subgraph views; Adam 0.01, batch 128,
#: 20 epochs, temperature 0.2; the authors' unsupervised TU code pairs each graph with one
#: augmented view of it, so view 1 is the original graph), NT-Xent loss; evaluated by
#: 10-fold SVM accuracy.
GRAPH_RECIPE: dict[str, Any] = {
    "framework": {"name": "graphcl"},
    "encoder": {"name": "gin"},
    "loss": {"name": "nt_xent", "temperature": 0.2},
    "sampler": {"name": "uniform"},
    "optimizer": {"name": "adam", "learning_rate": 0.01},
    "schedule": {"name": "constant"},
    "augmentation": {"name": "graphcl", "augment_first": False},
    "data": {"name": "tu"},
    "annealing": {},
    "evaluation": {"monitor_every": 0, "linear_probe": False},
    "batch_size": 128,
    "epochs": 20,
    "projection_dims": [96, 96],
}


@MODALITIES.register("graph")
class GraphModality(Modality):
    """Graphs (:class:`keras_hardneg.data.graphs.GraphSet`): padded disjoint unions, views
    drawn on the host (GraphCL), 10-fold SVM accuracy on frozen graph embeddings."""

    name = "graph"
    default_recipe = GRAPH_RECIPE
    views_in_feed = True
    examples = "graphs"
    figures = (Figure("svm_accuracy", "SVM accuracy", short="SVM", scale=100.0,
                      std_key="svm_accuracy_std", detail="(10-fold CV)", note="(10-fold)",
                      index_label="SVM accuracy, 10-fold (%)"),)
    uniform_drops_remainder = False

    def input_shape(self, x):
        return (int(x.feature_dim),)

    def check_encoder_features(self, x):
        raise RecipeError("recipe key 'sampler.initial_graph' = 'encoder' is not available "
                          "for graphs; use 'inputs'.")

    def initial_embeddings(self, x, seed):
        # Per graph: summed node features, node and edge counts (log), projected.
        feats = np.stack([
            np.concatenate([x.graph(i)[0].sum(axis=0),
                            [np.log1p(x.num_nodes[i]), np.log1p(x.num_edges[i])]])
            for i in range(len(x))]).astype("float32")
        return random_projection(feats, seed)

    def probe_views(self, x, y, indices, views, seed):
        from keras_hardneg.data.graphs import pad_graphs

        graphs = [x.graph(int(i)) for i in indices]
        view1, view2 = views.make_views(graphs, np.random.default_rng(seed))
        budgets, b = x.budgets(len(indices)), len(indices)
        return (pad_graphs(view1, budgets, b, x.feature_dim),
                pad_graphs(view2, budgets, b, x.feature_dim), self.labels_of(x, y, indices))

    def probe_examples(self, x, y, indices):
        return report.draw_graph, [(len(f), e) for f, e in (x.graph(int(i)) for i in indices)]

    def report_sections(self, encoder, recipe, train, test):
        from keras_hardneg.evaluation.svm import embed_graphs

        graphs, labels = train
        features = embed_graphs(encoder, graphs)
        return [report.embedding_map_section(features, labels, recipe["seed"],
                                                  what="graphs")]

    def feed(self, recipe, x, y, sampler, views):
        from keras_hardneg.data._tf import tensorflow_backend
        from keras_hardneg.data.graph_feed import GraphFeed, graph_tf_dataset
        from keras_hardneg.sampling import UniformSampler

        if sampler is None:
            sampler = UniformSampler(len(x), recipe["batch_size"], seed=recipe["seed"])
        feed = GraphFeed(x, sampler, views, seed=recipe["seed"])
        return (graph_tf_dataset(feed) if tensorflow_backend() else feed), {"views": feed}

    def evaluate(self, encoder, recipe, train, test, extras=None):
        from keras_hardneg.evaluation.svm import embed_graphs, svm_cross_validation

        graphs, labels = train
        features = embed_graphs(encoder, graphs)
        out = svm_cross_validation(features, np.asarray(labels), seed=recipe["seed"])
        return {"svm_accuracy": float(out["svm_accuracy"]),
                "svm_accuracy_std": float(out["svm_accuracy_std"])}

    def baseline(self, encoder, recipe, train, test):
        """The random encoder's 10-fold SVM accuracy (the papers' protocol)."""
        return {"svm_accuracy": self.evaluate(encoder, recipe, train, test)["svm_accuracy"]}

    def describe_evaluation(self, recipe):
        return ("SVM (RBF, C by inner cross-validation) on frozen graph embeddings, "
                "10-fold cross-validation accuracy over all graphs (InfoGraph/GraphCL protocol)")

    def preset_spec(self, encoder, x, run_dir=None):
        return {"feature_dim": int(x.feature_dim) if x is not None
                else int(encoder.feature_dim)}, None

    # ------------------------------------------------------------- artifacts
    input_description = "a graph batch"
    signature_form = "a graph dict (graph_input_signature(F))"
    batch_axis = "B"
    axis_names = {"nodes": "NF", "edges": "E2", "node_graph": "N", "node_mask": "N",
                  "edge_mask": "E", "graph_mask": "B"}

    def card_defaults(self):
        return {**super().card_defaults(), "preprocessing": (
            "None: pass a padded batch of graphs (the tensors of the input signature; "
            "padding nodes and edges have mask 0, padding nodes belong to graph B).")}

    def input_signature(self, value):
        from keras_hardneg.modalities.signatures import GRAPH_INPUTS, shape_and_dtype

        if not isinstance(value, dict) or not set(value) & set(GRAPH_INPUTS):
            return None  # not a graph batch (another modality may take the dict)
        keys = set(value)
        if keys != set(GRAPH_INPUTS):
            missing = sorted(set(GRAPH_INPUTS) - keys)
            extra = sorted(keys - set(GRAPH_INPUTS))
            raise ValueError(
                "input_signature: a dict describes a graph batch and must have exactly the "
                f"keys {list(GRAPH_INPUTS)} (missing {missing}, unexpected {extra}); see "
                "graph_input_signature(feature_dim)")
        sig = {}
        for name, (rank, dtype) in GRAPH_INPUTS.items():
            shape, got = shape_and_dtype(value[name], repr(name))
            if len(shape) != rank or got != dtype:
                raise ValueError(f"input_signature: {name!r} must be {dtype} of rank {rank}, "
                                 f"got {got} of shape {shape}")
            sig[name] = (shape, dtype)
        if sig["edges"][0][1] != 2:
            raise ValueError(f"input_signature: 'edges' must have shape (E, 2), "
                             f"got {sig['edges'][0]}")
        return sig

    def build_input(self, signature):
        features = signature["nodes"][0][1]
        if features is None:
            raise ValueError("export_encoder: the encoder is not built and input_signature "
                             "leaves the node feature dimension F unknown; build the encoder "
                             "or give nodes=((None, F), 'float32')")
        return {"nodes": np.zeros((1, features), "float32"),
                "edges": np.zeros((1, 2), "int32"),
                "node_graph": np.zeros((1,), "int32"),
                "node_mask": np.ones((1,), "float32"),
                "edge_mask": np.zeros((1,), "float32"),
                "graph_mask": np.ones((1,), "float32")}

    def card_usage(self, card):
        return preset_usage("graph") + [
            "Reusable TF2 SavedModel (TF Hub format). `serving_default` signature: inputs "
            "`nodes`, `edges`, `node_graph`, `node_mask`, `edge_mask`, `graph_mask` (a padded "
            "batch of B graphs, any budget), output `features` `[B, F]`.",
            "",
            "```python",
            "# graph = {'nodes': ..., 'edges': ..., 'node_graph': ..., 'node_mask': ...,",
            "#          'edge_mask': ..., 'graph_mask': ...}   (keras_hardneg GraphSet.batch)",
            "import keras_hardneg as khn                         # Keras 3",
            "encoder = khn.export.load_encoder(export_dir)       # keras Layer (TensorFlow backend)",
            "features = encoder(graph)",
            "",
            "import tensorflow_hub as hub                        # any TF2 program",
            "obj = hub.load(export_dir); features = obj(graph, training=False)",
            "features = obj.signatures['serving_default'](**graph)['features']",
            "",
            "# inference only: keras.layers.TFSMLayer(export_dir)(graph)",
            "```",
        ]

    def prepare_export_input(self, inputs, card, where):
        import tensorflow as tf

        from keras_hardneg.modalities.signatures import GRAPH_INPUTS

        if not isinstance(inputs, dict) or not set(GRAPH_INPUTS) <= set(inputs):
            got = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
            raise ValueError(f"{where}: this graph encoder takes a dict with the "
                             f"keys {list(GRAPH_INPUTS)} (a padded graph batch); got {got}")
        return {name: tf.cast(inputs[name], dtype)
                for name, (_, dtype) in GRAPH_INPUTS.items()}

    def output_batch(self, input_shape):
        if isinstance(input_shape, dict) and "graph_mask" in input_shape:
            return tuple(input_shape["graph_mask"])[0]
        return None

    def example_input(self, input_spec, seed=0):
        rng = np.random.default_rng(seed)
        f = int(input_spec.get("feature_dim") or 1)
        return {"nodes": rng.random((5, f), dtype=np.float32),
                "edges": np.array([[0, 1], [1, 2], [3, 4]], "int32"),
                "node_graph": np.array([0, 0, 0, 1, 1], "int32"),
                "node_mask": np.ones(5, "float32"), "edge_mask": np.ones(3, "float32"),
                "graph_mask": np.ones(2, "float32")}

    def export_arguments(self, input_spec, assets=None):
        from keras_hardneg.modalities.signatures import graph_input_signature

        return {"input_signature": graph_input_signature(int(input_spec["feature_dim"]))}

    def rebuild_spec(self, card, export_dir):
        f = int(card.input_signature["nodes"]["shape"][-1])
        return {"input_spec": {"feature_dim": f}, "input_shape": (f,), "assets": None,
                "context": {}}
