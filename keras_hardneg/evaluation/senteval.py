"""SentEval transfer tasks: logistic regression on frozen sentence embeddings.

The classification benchmark of SentEval (Conneau & Kiela, "SentEval: An Evaluation Toolkit for
Universal Sentence Representations", LREC 2018), used for quick-thought vectors (Logeswaran & Lee,
ICLR 2018) by HCL (Robinson et al., ICLR 2021, Appendix D.3) and UnReMix (Tabassum et al., 2022,
Table 4: "10-fold cross-validation for binary classification tasks (CR, SUBJ, MPQA) and over
multiple trials for the remaining tasks (TREC, MSRP)"), and by SimCSE's transfer tasks:

* **MR, CR, SUBJ, MPQA** (binary): accuracy of a 10-fold stratified cross-validation (SentEval's
  ``InnerKFoldClassifier``). In each outer fold the inverse L2 strength ``C`` of a logistic
  regression is chosen on the outer-training part over SentEval's grid ``C = 2^-2 .. 2^3``, then
  the classifier is refit on the whole outer-training part and scored on the held-out fold.
* **TREC** (6 coarse classes) and **MRPC** (paraphrase): train on the train split, score on the
  test split (SentEval's ``KFoldClassifier``); ``C`` chosen on the train split over SentEval's grid
  ``C = 2^-1 .. 2^5``. MRPC reports accuracy and F1 of the paraphrase class; its pair features are
  SentEval's ``[|u - v|, u * v]`` (``mrpc_features="senteval"``) or InferSent's
  ``[u, v, |u - v|, u * v]`` (``"infersent"``).
* ``"avg"``: the mean of the task accuracies (MRPC's accuracy, not its F1), x 100.

Where this differs from SentEval (both are arguments):

* ``inner_folds=1`` (default): ``C`` is chosen on ONE stratified held-out tenth of the
  (outer-)training data, the first fold of SentEval's inner 10-fold split. SentEval averages all
  10 inner folds (``inner_folds=10``), i.e. 610 fits per binary task instead of 70; a benchmark
  grid on 2 CPU cores cannot afford that (timings in ``docs/notes/text_evaluation.md``).
* ``standardize=True`` (default): each feature is scaled to zero mean and unit variance with the
  statistics of the data the classifier is fit on (as this package's linear probe). SentEval feeds
  the raw embeddings; then the fixed ``C`` grid interacts with the embedding's scale (an encoder
  with small outputs is regularised much more), which would confound comparisons of training
  methods. ``standardize=False`` reproduces SentEval.

The classifier minimises scikit-learn's ``LogisticRegression(C)`` objective (L2, unpenalised
intercept; one-vs-rest for TREC, as scikit-learn's ``liblinear`` default that SentEval ran with)
by Newton's method in NumPy/SciPy, warm-started along the ``C`` grid: the same optimum, at a cost
that does not grow with the conditioning of the embeddings (on correlated 256-d features of MR,
scikit-learn's L-BFGS needed 364 iterations, 1.8 s, to reach it, Newton 0.08 s; at its default
tolerance L-BFGS stopped where 4 % of the predictions still differed). Folds come from ``StratifiedKFold(shuffle=True, random_state=seed)``, so a
result is a deterministic function of the embeddings and ``seed``. A fixed ``C`` (argument ``C``)
skips the inner fits. BLAS runs single-threaded during the fits (``threadpoolctl``): with two
OpenBLAS threads on a loaded 2-core machine the whole benchmark took 11x longer.

Data: the SentEval layout under ``benchmark_dir``: ``MR/rt-polarity.{pos,neg}``,
``CR/custrev.{pos,neg}``, ``SUBJ/subj.{objective,subjective}``, ``MPQA/mpqa.{pos,neg}`` (one
sentence a line), ``TREC/train_5500.label`` and ``TREC/TREC_10.label`` (``COARSE:fine question``),
``MRPC/msr_paraphrase_{train,test}.txt`` (tab-separated with a header: ``Quality, #1 ID, #2 ID,
#1 String, #2 String``). Files are read as UTF-8, falling back to latin-1 (SentEval's encoding)
when a file is not valid UTF-8; sentences are whitespace-normalised as in SentEval.
"""

from __future__ import annotations

import contextlib
import numbers
import os
import time
import warnings
from typing import Callable, Sequence

import numpy as np

from keras_hardneg.evaluation.sts import (SentencePairs, _check_tasks, _normalise, _read_lines,
                                          embed_sentences)
from keras_hardneg.registry import EVALUATIONS, Param

__all__ = [
    "SENTEVAL_TASKS", "BINARY_TASKS", "TREC_CLASSES", "read_binary_task", "read_trec",
    "read_mrpc", "cross_validated_accuracy", "train_test_accuracy", "senteval_scores",
]

#: Task names in SentEval's order (the keys of :func:`senteval_scores`' result).
SENTEVAL_TASKS = ("MR", "CR", "SUBJ", "MPQA", "TREC", "MRPC")

#: Binary tasks: (folder, file of label 1, file of label 0), as SentEval.
BINARY_TASKS = {
    "MR": ("MR", "rt-polarity.pos", "rt-polarity.neg"),
    "CR": ("CR", "custrev.pos", "custrev.neg"),
    "SUBJ": ("SUBJ", "subj.objective", "subj.subjective"),
    "MPQA": ("MPQA", "mpqa.pos", "mpqa.neg"),
}

#: TREC's coarse classes; the label of a question is its index here.
TREC_CLASSES = ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")

#: SentEval's ``C`` grids (scikit-learn path): cross-validation tasks, train/test tasks.
CV_GRID = tuple(2.0 ** t for t in range(-2, 4))
TRAIN_TEST_GRID = tuple(2.0 ** t for t in range(-1, 6))

_MAX_NEWTON = 100


def _need(task: str, path: str, benchmark_dir: str, layout: str) -> str:
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{task}: {path!r} not found. `benchmark_dir` "
                                f"({benchmark_dir!r}) must hold the SentEval layout: {layout}.")
    return path


def read_binary_task(benchmark_dir: str, task: str) -> tuple[list[str], np.ndarray]:
    """Sentences and int64 labels of MR, CR, SUBJ or MPQA (label 1: the first file of
    :data:`BINARY_TASKS`, e.g. ``rt-polarity.pos``; 0: the second). Every line is a sample.

    Raises:
        ValueError: ``task`` is not binary. FileNotFoundError: naming the missing file.
    """
    if task not in BINARY_TASKS:
        raise ValueError(f"`task` must be one of {', '.join(BINARY_TASKS)}; got {task!r}.")
    folder, positive, negative = BINARY_TASKS[task]
    layout = f"{folder}/{positive} and {folder}/{negative}, one sentence a line"
    sentences, labels = [], []
    for name, label in ((positive, 1), (negative, 0)):
        path = _need(task, os.path.join(benchmark_dir, folder, name), benchmark_dir, layout)
        lines = [_normalise(line) for line in _read_lines(path)]
        sentences += lines
        labels += [label] * len(lines)
    return sentences, np.asarray(labels, dtype=np.int64)


def read_trec(benchmark_dir: str) -> dict[str, tuple[list[str], np.ndarray]]:
    """TREC question classification: ``{"train": (questions, labels), "test": (...)}`` from
    ``TREC/train_5500.label`` and ``TREC/TREC_10.label``; labels index :data:`TREC_CLASSES`
    (the coarse class before ``:``; the fine class is dropped, as SentEval).

    Raises:
        FileNotFoundError: naming the missing file. ValueError: a malformed line.
    """
    layout = ("TREC/train_5500.label and TREC/TREC_10.label, lines 'COARSE:fine question' with "
              f"COARSE in {', '.join(TREC_CLASSES)}")
    out = {}
    for split, name in (("train", "train_5500.label"), ("test", "TREC_10.label")):
        path = _need("TREC", os.path.join(benchmark_dir, "TREC", name), benchmark_dir, layout)
        questions, labels = [], []
        for i, line in enumerate(_read_lines(path)):
            if not line.strip():
                continue
            head, _, question = line.strip().partition(" ")
            coarse = head.split(":", 1)[0]
            if ":" not in head or coarse not in TREC_CLASSES:
                raise ValueError(f"TREC: {path!r} line {i + 1}: expected 'COARSE:fine question' "
                                 f"with COARSE in {', '.join(TREC_CLASSES)}; got {line[:40]!r}.")
            questions.append(_normalise(question))
            labels.append(TREC_CLASSES.index(coarse))
        out[split] = (questions, np.asarray(labels, dtype=np.int64))
    return out


def read_mrpc(benchmark_dir: str) -> dict[str, SentencePairs]:
    """MRPC: ``{"train": pairs, "test": pairs}`` from ``MRPC/msr_paraphrase_{train,test}.txt``
    (header skipped; ``targets``: int64, 1 = paraphrase).

    Raises:
        FileNotFoundError: naming the missing file. ValueError: a malformed line.
    """
    layout = ("MRPC/msr_paraphrase_train.txt and MRPC/msr_paraphrase_test.txt, tab-separated "
              "with a header: Quality, #1 ID, #2 ID, #1 String, #2 String")
    out = {}
    for split in ("train", "test"):
        path = _need("MRPC", os.path.join(benchmark_dir, "MRPC", f"msr_paraphrase_{split}.txt"),
                     benchmark_dir, layout)
        first, second, labels = [], [], []
        for i, line in enumerate(_read_lines(path)[1:]):
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) < 5 or fields[0].strip() not in ("0", "1"):
                raise ValueError(f"MRPC: {path!r} line {i + 2}: expected 5 tab-separated columns "
                                 f"starting with a 0/1 label; got {line[:40]!r}.")
            first.append(_normalise(fields[3]))
            second.append(_normalise(fields[4]))
            labels.append(int(fields[0]))
        out[split] = SentencePairs(first, second, np.asarray(labels, dtype=np.int64))
    return out


# ------------------------------------------------------------------------------- classifier
class _Design:
    """Features ready for the solver: standardised (``standardize``, statistics of ``x``) with a
    column of ones for the intercept, in float64 (gradients, objective) and float32 (Hessian)."""

    def __init__(self, x: np.ndarray, standardize: bool):
        if standardize:
            self.mean = x.mean(axis=0)
            self.std = x.std(axis=0)
            self.std[self.std == 0] = 1.0
        else:
            self.mean, self.std = 0.0, 1.0
        self.x1 = self.transform(x)
        self.x1_32 = self.x1.astype(np.float32)

    def transform(self, x: np.ndarray) -> np.ndarray:
        x1 = np.empty((x.shape[0], x.shape[1] + 1))
        np.subtract(x, self.mean, out=x1[:, :-1])
        x1[:, :-1] /= self.std
        x1[:, -1] = 1.0
        return x1

    def rows(self, index: np.ndarray) -> "_Design":
        out = object.__new__(_Design)
        out.mean, out.std = self.mean, self.std
        out.x1, out.x1_32 = self.x1[index], self.x1_32[index]
        return out


def _objective(C, y, z, w):
    return C * float(np.sum(np.logaddexp(0.0, z) - y * z)) + 0.5 * float(w[:-1] @ w[:-1])


def _fit_binary(design: _Design, y: np.ndarray, C: float, init: np.ndarray | None,
                curvature: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Minimises ``C * sum_i logloss(y_i, x_i . w + b) + ||w||^2 / 2`` (scikit-learn's
    ``LogisticRegression(C)`` objective; the intercept, last column, unpenalised) by Newton's
    method with a backtracking line search; returns ``(w, curvature)``.

    The curvature ``X^T diag(p(1-p)) X`` is one float32 BLAS ``syrk``, the Newton system is
    solved in float64 and the gradient and objective are float64, so the optimum is exact (it
    matches scikit-learn's to its tolerance). ``curvature`` from the previous point of a warm-
    started path serves the first step (``C * curvature + I``); the line search keeps a step with
    that slightly stale Hessian safe. Newton's iteration count does not grow with the
    conditioning of the features (L-BFGS needed hundreds of iterations on correlated features).
    """
    from scipy.linalg import blas, cho_factor, cho_solve
    from scipy.special import expit

    x1, x1_32 = design.x1, design.x1_32
    d1 = x1.shape[1]
    w = np.zeros(d1) if init is None else init.copy()
    z = x1 @ w
    f = _objective(C, y, z, w)
    reg = np.ones(d1)
    reg[-1] = 0.0
    jitter = 1e-10 * (1.0 + C * x1.shape[0])         # keeps the intercept row positive definite
    for _ in range(_MAX_NEWTON):
        p = expit(z)
        g = C * (x1.T @ (p - y)) + reg * w
        if curvature is None:
            root = np.sqrt(p * (1.0 - p)).astype(np.float32)
            weighted = (x1_32 * root[:, None]).T     # [d1, n], F-contiguous: no copy for syrk
            curvature = np.asarray(blas.ssyrk(1.0, weighted, lower=0), dtype=np.float64)
        h = C * curvature
        h[np.diag_indices(d1)] += reg + jitter
        step = cho_solve(cho_factor(h, lower=False, check_finite=False), g, check_finite=False)
        decrement = float(g @ step)                  # ~ 2 (f - f*) near the optimum
        if decrement <= 2e-9 * (1.0 + abs(f)):
            break
        t = 1.0
        while True:
            w_new = w - t * step
            z_new = x1 @ w_new
            f_new = _objective(C, y, z_new, w_new)
            if f_new <= f - 1e-4 * t * decrement or t < 1e-8:
                break
            t *= 0.5
        if f_new > f:                                # no decrease: at float64 precision
            break
        w, z, f = w_new, z_new, f_new
        if t == 1.0 and decrement <= 2e-6 * (1.0 + abs(f)):
            break     # a full step this close: Newton's convergence leaves ~decrement^2
        curvature = None
    return w, curvature


class _Classifier:
    """L2 logistic regression at one ``C``: binary, or one-vs-rest for more classes
    (scikit-learn's ``liblinear`` default when SentEval was written). ``fit`` warm-starts from
    the previous fit (and the ``init`` weights when given)."""

    def __init__(self, design: _Design, y: np.ndarray, classes: np.ndarray):
        self.design = design
        self.classes = classes
        targets = [y == classes[1]] if len(classes) == 2 else [y == c for c in classes]
        self.targets = [t.astype(np.float64) for t in targets]
        self.weights = [None] * len(self.targets)
        self.curvatures = [None] * len(self.targets)

    def fit(self, C: float, init: list | None = None) -> "_Classifier":
        starts = init if init is not None else self.weights
        fits = [_fit_binary(self.design, t, C, w0, k if init is None else None)
                for t, w0, k in zip(self.targets, starts, self.curvatures)]
        self.weights = [w for w, _ in fits]
        self.curvatures = [k for _, k in fits]
        return self

    def predict_design(self, x1: np.ndarray) -> np.ndarray:
        scores = np.stack([x1 @ w for w in self.weights], axis=1)
        if len(self.classes) == 2:
            return self.classes[(scores[:, 0] > 0).astype(np.int64)]
        return self.classes[np.argmax(scores, axis=1)]


def _choose_C(design, y, classes, grid, kfold, inner_folds, seed):
    """The ``C`` of ``grid`` with the best mean accuracy over the first ``inner_folds`` folds
    of a stratified ``kfold`` split of ``design``'s rows (lowest ``C`` on ties), that accuracy,
    and the weights fit at that ``C`` on the first fold (a warm start for the refit). A grid
    of one value is that value (no inner fits; the accuracy is NaN)."""
    from sklearn.model_selection import StratifiedKFold

    grid = sorted(grid)
    if len(grid) == 1:                               # a fixed C: nothing to choose
        return grid[0], float("nan"), None
    splits = StratifiedKFold(n_splits=kfold, shuffle=True, random_state=seed).split(
        np.zeros(len(y)), y)
    scores = np.zeros(len(grid))
    solutions = []
    for fold, (fit_rows, val_rows) in zip(range(inner_folds), splits):
        model = _Classifier(design.rows(fit_rows), y[fit_rows], classes)
        x_val = design.x1[val_rows]
        for j, C in enumerate(grid):                 # ascending C, each warm-started
            model.fit(C)
            scores[j] += np.mean(model.predict_design(x_val) == y[val_rows])
            if fold == 0:
                solutions.append(model.weights)
    best = int(np.argmax(scores))
    return grid[best], float(scores[best] / inner_folds), solutions[best]


def _one_blas_thread():
    """BLAS single-threaded during the fits: the systems are small (d ~ 256) and OpenBLAS's
    threads spin against other processes on a shared machine (2 threads made the whole SentEval
    11x slower on a loaded 2-core machine; docs/notes/text_evaluation.md)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - scikit-learn depends on threadpoolctl
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def _check_xy(features, labels, name):
    x = np.asarray(features, dtype=np.float64)
    y = np.asarray(labels).reshape(-1)
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"`{name}` must be a non-empty [n, d] array; got shape {x.shape}.")
    if y.shape[0] != x.shape[0]:
        raise ValueError(f"{y.shape[0]} labels for {x.shape[0]} rows of `{name}`.")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"`{name}` contains NaN or infinite values.")
    return x, y


def _check_protocol(kfold, inner_folds, grid, seed):
    if isinstance(kfold, bool) or not isinstance(kfold, (int, np.integer)) or kfold < 2:
        raise ValueError(f"`kfold` must be an integer >= 2; got {kfold!r}.")
    if isinstance(inner_folds, bool) or not isinstance(inner_folds, (int, np.integer)) or \
            not 1 <= inner_folds <= kfold:
        raise ValueError(f"`inner_folds` must be an integer in [1, kfold={kfold}]; got "
                         f"{inner_folds!r}.")
    grid = tuple(grid)
    if not grid or not all(isinstance(c, numbers.Real) and not isinstance(c, bool) and c > 0
                           for c in grid):
        raise ValueError(f"`grid` must be a non-empty list of numbers > 0; got {grid!r}.")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"`seed` must be an integer >= 0; got {seed!r}.")
    return grid


def cross_validated_accuracy(features, labels, *, kfold: int = 10, inner_folds: int = 1,
                             grid: Sequence[float] = CV_GRID, seed: int = 0,
                             standardize: bool = True) -> dict:
    """SentEval's nested cross-validation accuracy (MR, CR, SUBJ, MPQA); see the module docstring.

    Args:
        features: float ``[n, d]``; labels: int ``[n]`` (each class at least ``kfold`` times).
        kfold: outer stratified folds (SentEval: 10).
        inner_folds: folds of the inner ``kfold``-fold split of each outer-training part used
            to choose ``C`` (1 = one held-out tenth; SentEval: ``kfold``).
        grid: candidate ``C`` values (inverse L2 strength); one value fixes ``C``.
        seed: shuffles the folds. standardize: z-score the features with the statistics of
            each outer-training part (its inner split reuses them).

    Returns:
        ``{"acc": mean outer-fold test accuracy, "devacc": mean inner accuracy of the chosen
        C (NaN for a fixed C), "C": [chosen C per outer fold]}`` (fractions).

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> y = np.repeat([0, 1], 50); x = rng.normal(size=(100, 4)) + 4 * y[:, None]
        >>> cross_validated_accuracy(x, y, kfold=5)["acc"]
        1.0
    """
    from sklearn.model_selection import StratifiedKFold

    x, y = _check_xy(features, labels, "features")
    grid = _check_protocol(kfold, inner_folds, grid, seed)
    _check_classes(y, kfold, "labels")
    accuracies, dev, chosen = [], [], []
    outer = StratifiedKFold(n_splits=kfold, shuffle=True, random_state=seed)
    classes = np.unique(y)
    with _one_blas_thread():
        for train_rows, test_rows in outer.split(x, y):
            design = _Design(x[train_rows], standardize)
            C, devacc, warm = _choose_C(design, y[train_rows], classes, grid, kfold,
                                        inner_folds, seed)
            model = _Classifier(design, y[train_rows], classes).fit(C, warm)
            predictions = model.predict_design(design.transform(x[test_rows]))
            accuracies.append(np.mean(predictions == y[test_rows]))
            dev.append(devacc)
            chosen.append(C)
    return {"acc": float(np.mean(accuracies)), "devacc": float(np.mean(dev)), "C": chosen}


def _check_classes(y, kfold, name):
    _, counts = np.unique(y, return_counts=True)
    if len(counts) < 2:
        raise ValueError(f"`{name}` must contain at least two classes.")
    if counts.min() < kfold:
        raise ValueError(f"`{name}`: every class needs at least kfold={kfold} samples for the "
                         f"stratified split; the rarest has {counts.min()}.")


def train_test_accuracy(train_features, train_labels, test_features, test_labels, *,
                        kfold: int = 10, inner_folds: int = 1,
                        grid: Sequence[float] = TRAIN_TEST_GRID, seed: int = 0,
                        standardize: bool = True) -> dict:
    """SentEval's train/test protocol (TREC, MRPC): ``C`` chosen on the train split, refit on
    all of it, scored on the test split.

    Args:
        train_features, train_labels: ``[n, d]``, ``[n]``. test_features, test_labels: ``[m, d]``,
            ``[m]``.
        kfold, inner_folds: ``C`` is chosen on the first ``inner_folds`` folds of a stratified
            ``kfold``-fold split of the train split (SentEval: all ``kfold``).
        grid, seed, standardize: as :func:`cross_validated_accuracy`.

    Returns:
        ``{"acc": test accuracy, "devacc": validation accuracy of the chosen C (NaN for a
        fixed C), "C": C, "predictions": int64 [m]}``.

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> y = np.repeat([0, 1, 2], 40); x = rng.normal(size=(120, 3)) + 5 * np.eye(3)[y]
        >>> train_test_accuracy(x[::2], y[::2], x[1::2], y[1::2], kfold=4)["acc"]
        1.0
    """
    x, y = _check_xy(train_features, train_labels, "train_features")
    x_test, y_test = _check_xy(test_features, test_labels, "test_features")
    if x_test.shape[1] != x.shape[1]:
        raise ValueError(f"`test_features` has {x_test.shape[1]} dimensions but "
                         f"`train_features` has {x.shape[1]}.")
    grid = _check_protocol(kfold, inner_folds, grid, seed)
    _check_classes(y, kfold, "train_labels")
    classes = np.unique(y)
    with _one_blas_thread():
        design = _Design(x, standardize)
        C, devacc, warm = _choose_C(design, y, classes, grid, kfold, inner_folds, seed)
        model = _Classifier(design, y, classes).fit(C, warm)
        predictions = model.predict_design(design.transform(x_test))
    return {"acc": float(np.mean(predictions == y_test)), "devacc": devacc, "C": C,
            "predictions": np.asarray(predictions, dtype=np.int64)}


def _f1(labels, predictions):
    tp = int(np.sum((predictions == 1) & (labels == 1)))
    fp = int(np.sum((predictions == 1) & (labels == 0)))
    fn = int(np.sum((predictions == 0) & (labels == 1)))
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


# ------------------------------------------------------------------------------- the benchmark
@EVALUATIONS.register(
    "senteval", result="senteval", modality="text",
    params={"tasks": Param("any", help="SentEval tasks: any of " + ", ".join(SENTEVAL_TASKS)),
            "kfold": Param(int, low=2, help="folds of the cross-validation (SentEval: 10)"),
            "inner_folds": Param(int, low=1,
                                 help="inner folds used to choose C (SentEval: kfold)"),
            "standardize": Param(bool, help="z-score the features (SentEval: no)"),
            "C": Param(float, low=0.0, low_inclusive=False,
                       help="a fixed inverse L2 strength (default: chosen on a held-out split)"),
            "mrpc_features": Param(str, choices=("senteval", "infersent"),
                                   help="MRPC pair features: [|u-v|, u*v] or [u, v, |u-v|, u*v]"),
            "batch_size": Param(int, low=1, help="sentences per embed_fn call"),
            "missing": Param(str, choices=("error", "skip"),
                             help="a missing task folder: raise, or skip it and list it")},
    check=lambda c: (f"'inner_folds' = {c['inner_folds']} must be <= 'kfold' = {c['kfold']}"
                     if c["inner_folds"] > c["kfold"] else None))
def senteval_scores(embed_fn: Callable[[list], np.ndarray], benchmark_dir: str,
                    tasks: Sequence[str] = SENTEVAL_TASKS, seed: int = 0, kfold: int = 10,
                    inner_folds: int = 1, standardize: bool = True, C: float | None = None,
                    mrpc_features: str = "senteval", batch_size: int = 128,
                    missing: str = "error") -> dict:
    """SentEval classification accuracy x 100 of ``embed_fn``'s frozen embeddings.

    Args:
        embed_fn: ``list[str] -> [n, d]`` sentence embeddings (e.g. tokenize + encode).
        benchmark_dir: the folder holding ``MR/``, ``CR/``, ``SUBJ/``, ``MPQA/``, ``TREC/``,
            ``MRPC/`` in the SentEval layout.
        tasks: names from :data:`SENTEVAL_TASKS` (default all six).
        seed: fold shuffling; the result is deterministic for a seed.
        kfold, inner_folds, standardize: the protocol (module docstring; SentEval:
            ``inner_folds=kfold=10``, ``standardize=False``).
        C: ``None`` (default): chosen per fold over SentEval's grids. A number: that inverse L2
            strength for every task, no inner fits (about 2x faster).
        mrpc_features: ``"senteval"`` ``[|u-v|, u*v]`` or ``"infersent"`` ``[u, v, |u-v|, u*v]``.
        batch_size: sentences per ``embed_fn`` call (each distinct sentence embedded once).
        missing: ``"error"``: a missing file raises ``FileNotFoundError`` naming it and the
            layout; ``"skip"``: the task is left out, listed in ``"skipped"`` and warned about.

    Returns:
        ``{task: accuracy x 100, "MRPC_f1": F1 x 100 (if MRPC ran), "avg": mean accuracy,
        "details": {task: {"devacc", "C", "n", "seconds"}}, "skipped": [...]}``; ``seconds`` is
        the classifier time (embedding excluded).

    Example:
        >>> import numpy as np, os, tempfile
        >>> root = tempfile.mkdtemp(); os.makedirs(os.path.join(root, "CR"))
        >>> for name, word in (("custrev.pos", "good"), ("custrev.neg", "bad")):
        ...     _ = open(os.path.join(root, "CR", name), "w").write(
        ...         "".join(f"{word} thing {i}\\n" for i in range(20)))
        >>> embed = lambda batch: np.array([[s.startswith("good"), len(s)] for s in batch], float)
        >>> senteval_scores(embed, root, tasks=["CR"], kfold=5)["CR"]
        100.0
    """
    tasks = _check_tasks(tasks, SENTEVAL_TASKS, "tasks")
    benchmark_dir = _check_senteval_arguments(benchmark_dir, missing, mrpc_features,
                                              standardize, kfold, inner_folds, C, seed)
    grids = (CV_GRID, TRAIN_TEST_GRID) if C is None else ((C,), (C,))
    protocol = {"kfold": kfold, "inner_folds": inner_folds, "seed": seed,
                "standardize": standardize}
    out: dict = {}
    details: dict = {}
    skipped: list = []
    for task in tasks:
        try:
            data = _read_task(benchmark_dir, task)
        except FileNotFoundError as e:
            if missing == "error":
                raise
            skipped.append(task)
            warnings.warn(f"senteval_scores: skipping {e}", UserWarning, stacklevel=2)
            continue
        result, n, start = _score_task(task, data, embed_fn, batch_size, mrpc_features, grids,
                                       protocol)
        if task == "MRPC":
            out["MRPC_f1"] = 100.0 * _f1(data["test"].targets, result["predictions"])
        out[task] = 100.0 * result["acc"]
        details[task] = {"devacc": 100.0 * result["devacc"], "C": result["C"], "n": n,
                         "seconds": round(time.perf_counter() - start, 3)}
    scored = [out[t] for t in tasks if t in out]
    out["avg"] = float(np.mean(scored)) if scored else float("nan")
    out["details"] = details
    out["skipped"] = skipped
    return out


def _check_senteval_arguments(benchmark_dir, missing, mrpc_features, standardize, kfold,
                              inner_folds, C, seed) -> str:
    """Refuses a bad argument of :func:`senteval_scores`; returns ``benchmark_dir`` as a str."""
    if missing not in ("error", "skip"):
        raise ValueError(f"`missing` must be 'error' or 'skip'; got {missing!r}.")
    if mrpc_features not in ("senteval", "infersent"):
        raise ValueError(f"`mrpc_features` must be 'senteval' or 'infersent'; got "
                         f"{mrpc_features!r}.")
    if not isinstance(standardize, bool):
        raise ValueError(f"`standardize` must be true or false; got {standardize!r}.")
    _check_protocol(kfold, inner_folds, CV_GRID if C is None else (C,), seed)
    if not isinstance(benchmark_dir, (str, os.PathLike)) or not os.path.isdir(benchmark_dir):
        raise FileNotFoundError(f"`benchmark_dir` {benchmark_dir!r} is not a folder; it must hold "
                                f"{', '.join(SENTEVAL_TASKS)} in the SentEval layout.")
    return os.fspath(benchmark_dir)


def _read_task(benchmark_dir: str, task: str):
    """The task's data as its reader gives it (``FileNotFoundError`` for a missing file)."""
    if task in BINARY_TASKS:
        return read_binary_task(benchmark_dir, task)
    if task == "TREC":
        return read_trec(benchmark_dir)
    return read_mrpc(benchmark_dir)


def _score_task(task, data, embed_fn, batch_size, mrpc_features, grids, protocol):
    """``(result, examples, start)``: the task's sentences embedded, then its classifier's
    result (:func:`cross_validated_accuracy` for the binary tasks, :func:`train_test_accuracy`
    for TREC and MRPC); ``start`` is when the classifier began (embedding excluded)."""
    cv_grid, train_test_grid = grids
    if task in BINARY_TASKS:
        sentences, labels = data
        features = embed_sentences(embed_fn, sentences, batch_size)
        start = time.perf_counter()
        result = cross_validated_accuracy(features, labels, grid=cv_grid, **protocol)
        return result, len(labels), start
    if task == "TREC":
        (train_q, train_y), (test_q, test_y) = data["train"], data["test"]
        features = embed_sentences(embed_fn, train_q + test_q, batch_size)
        start = time.perf_counter()
        result = train_test_accuracy(features[:len(train_q)], train_y,
                                     features[len(train_q):], test_y,
                                     grid=train_test_grid, **protocol)
        return result, len(train_y) + len(test_y), start
    train, test = data["train"], data["test"]
    features = embed_sentences(embed_fn, train.first + train.second + test.first +
                               test.second, batch_size)
    start = time.perf_counter()
    n_train, n_test = len(train), len(test)
    blocks = np.split(features, np.cumsum([n_train, n_train, n_test]))
    pair = _pair_features(blocks[0], blocks[1], mrpc_features)
    pair_test = _pair_features(blocks[2], blocks[3], mrpc_features)
    result = train_test_accuracy(pair, train.targets, pair_test, test.targets,
                                 grid=train_test_grid, **protocol)
    return result, n_train + n_test, start


def _pair_features(u: np.ndarray, v: np.ndarray, kind: str) -> np.ndarray:
    u = u.astype(np.float64)
    v = v.astype(np.float64)
    parts = [np.abs(u - v), u * v]
    if kind == "infersent":
        parts = [u, v] + parts
    return np.concatenate(parts, axis=1)
