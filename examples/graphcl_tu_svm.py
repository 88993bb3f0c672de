"""
Title: Graph classification: GraphCL pre-training on a TU dataset, then an SVM
Shows: GraphCL (You et al., NeurIPS 2020) with the hard-negative loss pre-trains a GIN
    encoder on the graphs of a TU set (MUTAG by default, fetched once from the TU host) or a
    TU-format folder, without their labels;
    the papers' evaluation follows: an RBF SVM on the frozen graph embeddings, 10-fold
    cross-validated, beside the same SVM on the untrained encoder's embeddings; the
    loss and the embeddings (PCA) are plotted.
Run time: 41 s (CPU 21 s) with the defaults (MUTAG, 188 graphs, GIN 3 x 32, 20 epochs) on 2
    CPU cores shared with another job's benchmarks; `--smoke` (tiny data) is what the test
    suite runs.

    python examples/graphcl_tu_svm.py
    python examples/graphcl_tu_svm.py --data PROTEINS --epochs 20
    python examples/graphcl_tu_svm.py --data path/to/MY_SET      # a TU-format folder
    python examples/graphcl_tu_svm.py --smoke
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # no C++ start-up log lines
import keras
import numpy as np

import keras_hardneg as khn
from keras_hardneg.augment.graph_views import GraphViews
from keras_hardneg.data.graph_feed import GraphFeed
from keras_hardneg.data.graphs import load_tu
from keras_hardneg.data.public import tu_folder

parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
parser.add_argument("--data", default="MUTAG",
                    help="a TU set by name (MUTAG, PROTEINS, ...: fetched once into "
                         "~/.keras/datasets/tudataset) or a TU-format folder (D_A.txt, ...)")
parser.add_argument("--output", default="runs/examples/graphcl")
parser.add_argument("--epochs", type=int, default=20)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--smoke", action="store_true", help="tiny settings: checks the example runs")
args = parser.parse_args()
if args.smoke:
    args.epochs = 1
if args.batch_size < 2:
    parser.error("--batch-size must be >= 2")
if args.epochs < 1:
    parser.error("--epochs must be >= 1")
keras.utils.set_random_seed(0)
os.makedirs(args.output, exist_ok=True)
start_all = time.perf_counter()

"""
## The graphs

`tu_folder` fetches a TU set by name once from its public host (as PyTorch Geometric and
DGL do; the counts checked against the published statistics) into the cache; `load_tu`
reads the folder into a `GraphSet`: node features are one-hot node labels when the folder
has them (else one-hot degrees), edges in both directions.
"""

with khn.data.fetch.exit_on_fetch_error(parser.prog):  # one line, not a traceback
    graphs = load_tu(args.data if os.path.isdir(args.data) else tu_folder(args.data))
if args.smoke:
    graphs = graphs.subset(np.arange(40))
print(f"{graphs.name}: {len(graphs)} graphs, {graphs.num_classes} classes, node features "
      f"{graphs.feature_dim} ({graphs.feature_scheme})")

"""
## The training feed

`GraphFeed` is a `keras.utils.PyDataset`: for each sampler batch it makes two views of
every graph on the host (GraphCL's node dropping or subgraph, 20 % of the nodes), and pads
both to fixed node and edge budgets so the compiled step is traced once.
"""

batch_size = min(args.batch_size, len(graphs))
sampler = khn.sampling.UniformSampler(len(graphs), batch_size=batch_size, seed=0,
                                      drop_remainder=True)
feed = GraphFeed(graphs, sampler, GraphViews(("node_drop", "subgraph"), ratio=0.2), seed=0)

"""
## The model

A GIN encoder (3 layers of 32, sum readout: `[B, 96]` graph embeddings), GraphCL's
projection head, and the hard-negative loss (GraphCL's temperature 0.2).
"""

encoder = khn.encoders.gin(input_shape=(graphs.feature_dim,), width=32, num_layers=3)
before = khn.evaluation.embed_graphs(encoder, graphs)
model = khn.models.GraphCL(encoder, projection_dims=(96, 96))
model.compile(optimizer=keras.optimizers.Adam(1e-3),
              loss=khn.losses.HardNegativeContrastiveLoss(temperature=0.2, tau_plus=0.1,
                                                          beta=1.0))
logs = model.fit(feed, steps_per_epoch=sampler.steps_per_epoch, epochs=args.epochs, shuffle=False,
                 verbose=0).history
print(f"loss per epoch: {[round(v, 3) for v in logs['loss']]}")

"""
## Evaluation: SVM on frozen embeddings

10-fold stratified cross-validation of an RBF SVM, `C` chosen by an inner 5-fold search
(InfoGraph's and GraphCL's protocol), on the trained and on the untrained encoder.
"""

after = khn.evaluation.embed_graphs(encoder, graphs)
folds = 10 if not args.smoke else 2
svm_before = khn.evaluation.svm_cross_validation(before, graphs.labels, folds=folds,
                                                 inner_folds=min(5, folds + 1))
svm_after = khn.evaluation.svm_cross_validation(after, graphs.labels, folds=folds,
                                                inner_folds=min(5, folds + 1))
for name, r in (("untrained", svm_before), ("GraphCL", svm_after)):
    print(f"{name:>9} encoder: SVM accuracy {r['svm_accuracy']:.3f} "
          f"+- {r['svm_accuracy_std']:.3f} ({folds}-fold)")

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

fig, ax = plt.subplots(1, 2, figsize=(9, 3.4))
ax[0].plot(np.arange(1, args.epochs + 1), logs["loss"], "o-")
ax[0].set(xlabel="epoch", ylabel="hard-negative loss", title="GraphCL pre-training")
centred = after - after.mean(0)
pcs = centred @ np.linalg.svd(centred, full_matrices=False)[2][:2].T
for c in range(graphs.num_classes):
    ax[1].scatter(*pcs[graphs.labels == c].T, s=10, label=f"class {c}")
ax[1].set(title=f"embeddings (PCA); SVM {svm_after['svm_accuracy']:.3f}", xticks=[],
          yticks=[])
ax[1].legend(fontsize=8)
fig.tight_layout()
fig_path = os.path.join(args.output, "examples_graphcl.png")
fig.savefig(fig_path, dpi=100)
print(f"plot: {fig_path}")
print(f"RESULT {graphs.name} SVM accuracy {svm_after['svm_accuracy']:.3f} +- "
      f"{svm_after['svm_accuracy_std']:.3f} after GraphCL vs {svm_before['svm_accuracy']:.3f} "
      f"untrained ({time.perf_counter() - start_all:.0f} s)")
