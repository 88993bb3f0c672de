"""
Title: Few labels: linear probe and fine-tuning of a zoo encoder against training from scratch
Shows: the zoo's `simclr-hard-cifar10` ResNet-18 (SimCLR + hard negatives, no labels seen)
    used with 1, 10 and 100 labelled CIFAR-10 images per class: a linear probe on its frozen
    features, full fine-tuning of every layer, and the same network trained from scratch on
    the same labels for the same number of steps; test accuracy plotted against labels.
Run time: 7 min 21 s (CPU 6 min 05 s) with the defaults (300 test images, 25 training steps
    of 16 images per model) on 2 CPU cores shared with another job's benchmarks; `--smoke`
    (tiny data) is what the test suite runs.

    python examples/few_labels_finetune.py
    python examples/few_labels_finetune.py --steps 300 --test-per-class 1000   # longer, closer
    python examples/few_labels_finetune.py --smoke

Images are float32 in [0, 1] (`khn.data.load_dataset` gives them so), the input the zoo's
image encoders take; CIFAR-10 is fetched once into ~/.keras/datasets (the archive
`keras.datasets.cifar10` fetches), or `--data` names a folder with train/ and test/.
"""

import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # no C++ start-up log lines
import keras
import numpy as np

import keras_hardneg as khn

HERE = os.path.dirname(os.path.abspath(__file__))
# In a clone the zoo is models/ beside examples/ (else $KERAS_HARDNEG_ZOO, or the cache).
CLONE_ZOO = os.path.join(HERE, "..", "models")

parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
parser.add_argument("--data", default="cifar10",
                    help="CIFAR-10 (default: fetched once into ~/.keras/datasets, as keras.datasets does) or an image folder with train/ and test/")
parser.add_argument("--entry", default="simclr-hard-cifar10", help="zoo entry")
parser.add_argument("--output", default="runs/examples/few_labels")
parser.add_argument("--labels-per-class", default="1,10,100")
parser.add_argument("--test-per-class", type=int, default=30)
parser.add_argument("--steps", type=int, default=25, help="optimizer steps per trained model")
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--smoke", action="store_true", help="tiny settings: checks the example runs")
args = parser.parse_args()
if args.smoke:
    args.labels_per_class, args.test_per_class, args.steps, args.batch_size = "1", 2, 2, 8
    args.entry = "simclr-hard-cifar10-r18w8-cpu"  # the same ResNet-18, 8 channels wide
budgets = sorted({int(v) for v in args.labels_per_class.split(",")})
if budgets[0] < 1 or args.test_per_class < 1 or args.steps < 1 or args.batch_size < 1:
    parser.error("--labels-per-class, --test-per-class, --steps and --batch-size must be >= 1")
keras.utils.set_random_seed(0)
os.makedirs(args.output, exist_ok=True)
start_all = time.perf_counter()

"""
## The data

The first `max(labels-per-class)` training images of each class (in file-name order) and a
balanced test subset; the smaller label budgets are the first images of each class of that
pool, so every budget's labelled set contains the smaller ones.
"""

with khn.data.fetch.exit_on_fetch_error(parser.prog):  # one line, not a traceback
    (x_pool, y_pool), (x_test, y_test), _ = khn.data.load_dataset(
        args.data, image_size=32, limit_per_class=budgets[-1],
        test_limit_per_class=args.test_per_class)
num_classes = int(y_pool.max()) + 1
rank_in_class = np.zeros(len(y_pool), int)
for c in range(num_classes):
    rank_in_class[y_pool == c] = np.arange((y_pool == c).sum())
print(f"labelled pool {x_pool.shape}, test {x_test.shape}, {x_pool.dtype} in "
      f"[{x_pool.min():.0f}, {x_pool.max():.0f}]")

"""
## The pretrained encoder

`khn.zoo.load` returns a trainable `keras.Model`: images `[B, 32, 32, 3]` -> features
`[B, 512]`. The "scratch" network is the same architecture with fresh weights
(`keras.models.clone_model` re-initialises every layer).
"""

zoo = (CLONE_ZOO if khn.zoo.is_zoo_folder(CLONE_ZOO) and not os.environ.get(khn.zoo.ZOO_ENV)
       else None)
pretrained = khn.zoo.load(args.entry, zoo=zoo)
print(f"{args.entry}: {pretrained.count_params():,} parameters, output {pretrained.output_shape}")


"""
One classifier serves every run: the encoder plus a linear head. Its weights (zoo or fresh
initialisation, and a fresh head) and the optimizer's state are put back before each run,
so the training step is traced once (a ResNet-18 trace costs seconds on a CPU).
"""

inputs = keras.Input((32, 32, 3))
model = keras.Model(inputs, keras.layers.Dense(num_classes, name="head")(pretrained(inputs)))
model.compile(optimizer=keras.optimizers.Adam(1e-3), jit_compile=False,
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
model.optimizer.build(model.trainable_variables)
start_weights = {"zoo": model.get_weights(),
                 "scratch": keras.models.clone_model(model).get_weights()}  # fresh init
start_optimizer = [v.numpy() for v in model.optimizer.variables]


def train_and_score(start, x, y, learning_rate):
    """`args.steps` Adam steps on (x, y) -- random flips as the only augmentation -- from
    the `start` weights, then the test accuracy. The same steps for every budget and start."""
    model.set_weights(start_weights[start])
    for variable, value in zip(model.optimizer.variables, start_optimizer):
        variable.assign(value)
    model.optimizer.learning_rate.assign(learning_rate)
    rng = np.random.default_rng(0)
    for _ in range(args.steps):  # batches of a fixed size: drawn with replacement if small
        idx = rng.choice(len(x), args.batch_size, replace=len(x) < args.batch_size)
        xb = x[idx]
        flip = rng.random(args.batch_size) < 0.5
        xb[flip] = xb[flip, :, ::-1]
        model.train_on_batch(xb, y[idx])
    return float(model.evaluate(x_test, y_test, batch_size=200, verbose=0)[1])


"""
## Linear probe: frozen features

The encoder runs once over the pool and the test set; a logistic regression on the
standardised features is fitted per budget (`khn.evaluation.linear_probe_accuracy`).

## Full fine-tuning against training from scratch

Every layer trains, for the same number of steps from either start. The pretrained start
takes the linear probe as its head (LP-FT, Kumar et al., ICLR 2022: a random head's first
gradients would scramble the features) and a small learning rate (1e-4); from scratch the
head is random and the learning rate a usual 1e-3. Each budget starts again from the zoo.
"""


def head_from_probe(pipeline):
    """The probe (standardise, then logistic regression) as one Dense layer's weights."""
    scaler, logistic = pipeline[0], pipeline[-1]
    kernel = (logistic.coef_ / scaler.scale_).T
    bias = logistic.intercept_ - (logistic.coef_ * scaler.mean_ / scaler.scale_).sum(axis=1)
    return [kernel.astype("float32"), bias.astype("float32")]


feats_pool = khn.evaluation.extract_features(pretrained, x_pool)
feats_test = khn.evaluation.extract_features(pretrained, x_test)
results = {"labels_per_class": budgets, "linear_probe": [], "fine_tune": [], "scratch": []}
for n in budgets:
    keep = rank_in_class < n
    t0 = time.perf_counter()
    accuracy, probe = khn.evaluation.linear_probe_accuracy(
        feats_pool[keep], y_pool[keep], feats_test, y_test, return_model=True)
    results["linear_probe"].append(accuracy)
    start_weights["zoo"][-2:] = head_from_probe(probe)  # the Dense head's kernel and bias
    results["fine_tune"].append(train_and_score("zoo", x_pool[keep], y_pool[keep], 1e-4))
    results["scratch"].append(train_and_score("scratch", x_pool[keep], y_pool[keep], 1e-3))
    print(f"{n:4d} labels/class: linear probe {results['linear_probe'][-1]:.3f}, "
          f"fine-tuned {results['fine_tune'][-1]:.3f}, from scratch {results['scratch'][-1]:.3f}"
          f"  ({time.perf_counter() - t0:.0f} s)", flush=True)

"""
## The plot

Test accuracy against labels per class (log scale); chance is 1 / 10.
"""

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

fig, ax = plt.subplots(figsize=(5.5, 3.8))
for key, label, style in (("linear_probe", "linear probe (frozen zoo encoder)", "o-"),
                          ("fine_tune", "fine-tuned zoo encoder", "s-"),
                          ("scratch", "same network from scratch", "^--")):
    ax.plot(budgets, results[key], style, label=label)
ax.axhline(1 / num_classes, color="grey", lw=0.8, ls=":", label="chance")
ax.set(xscale="log", xlabel="labelled images per class", ylabel="test accuracy",
       title=f"CIFAR-10, {len(x_test)} test images; {args.steps} steps of "
             f"{args.batch_size} per trained model")
ax.set_xticks(budgets, [str(b) for b in budgets])
ax.legend(fontsize=8)
fig.tight_layout()
fig_path = os.path.join(args.output, "examples_few_labels.png")
fig.savefig(fig_path, dpi=110)
results.update(entry=args.entry, test_images=len(x_test), steps=args.steps,
               batch_size=args.batch_size, seconds=round(time.perf_counter() - start_all, 1))
with open(os.path.join(args.output, "examples_few_labels.json"), "w") as f:
    json.dump(results, f, indent=1)
print(f"plot: {fig_path}")
i = budgets.index(10) if 10 in budgets else 0
print(f"RESULT at {budgets[i]} labels/class: linear probe {results['linear_probe'][i]:.3f}, "
      f"fine-tuned {results['fine_tune'][i]:.3f}, from scratch {results['scratch'][i]:.3f} "
      f"({results['seconds']:.0f} s)")
