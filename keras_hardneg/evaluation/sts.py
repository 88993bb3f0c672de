"""Semantic textual similarity (STS): Spearman correlation of cosine similarity with gold scores.

The unsupervised STS evaluation of SimCSE (Gao et al., "SimCSE: Simple Contrastive Learning of
Sentence Embeddings", EMNLP 2021, Sec. 6.1 and Appendix B), reported by BatchSampler (Yang et al.,
KDD 2023, Table 2) for STS12-STS16, STS-B and SICK-R:

* each sentence pair ``(s1, s2)`` is scored by the cosine similarity of its embeddings; no
  regressor is trained;
* the score of a task is Spearman's rank correlation between the cosine similarities and the gold
  scores (0-5), times 100;
* **the "all" setting** (SimCSE, Appendix B: the predictions of all the subsets of a year are
  concatenated and ONE Spearman correlation is computed over the concatenation) for STS12-STS16.
  It is neither SentEval's ``mean`` (the average of the per-subset correlations) nor its ``wmean``
  (weighted by subset size); those are what SentEval's own ``all`` entry reports and what older
  papers (InferSent, USE, SBERT...) used. For STS-B and SICK-R the score is the Spearman
  correlation on the test split alone (cosine, no regressor; SimCSE's modified SentEval);
* ``"avg"`` is the plain mean of the task scores (SimCSE's "Avg.").

Data: the SentEval layout under ``benchmark_dir``::

    STS/STS12-en-test/STS.input.<subset>.txt   sentence 1 <TAB> sentence 2, one pair a line
    STS/STS12-en-test/STS.gs.<subset>.txt      gold score of the same line; empty = unscored
    ...                                        (STS13-en-test ... STS16-en-test alike)
    STS/STSBenchmark/sts-test.csv              genre, file, year, id, score, s1, s2 (tab-separated)
    SICK/SICK_test_annotated.txt               pair_ID, sentence_A, sentence_B,
                                               relatedness_score, entailment_judgment (+ a header)

The subsets of each year are SentEval's fixed lists (:data:`STS_SUBSETS`; STS13 without the
licensed SMT subset, 1,500 pairs). Unscored pairs (an empty gold line) are skipped, as in SentEval.
Sentences are whitespace-normalised as SentEval does (split on whitespace, joined by one space:
its ``line.split()`` tokens re-joined by SimCSE's ``batcher``).

Spearman's correlation is computed here in NumPy (average ranks for ties, then Pearson's
correlation of the ranks; equal to ``scipy.stats.spearmanr``). Sorting the pairs (SentEval sorts
them by length) does not change it. A zero embedding has cosine 0 with anything (SentEval's
``nan_to_num``). Any backend, no TensorFlow: ``embed_fn`` is the only model code called.
"""

from __future__ import annotations

import math
import os
import warnings
from typing import Callable, NamedTuple, Sequence

import numpy as np

from keras_hardneg.registry import EVALUATIONS, Param

__all__ = [
    "SentencePairs", "STS_TASKS", "STS_SUBSETS", "STS_YEAR_FOLDERS", "embed_sentences",
    "read_sts_subset", "read_sts_task", "spearman", "sts_scores",
]

#: Task names in SimCSE's order (the keys of :func:`sts_scores`' result).
STS_TASKS = ("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness")

#: SentEval's subsets of each STS year (file ``STS.input.<subset>.txt``).
STS_SUBSETS = {
    "STS12": ("MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"),
    "STS13": ("FNWN", "headlines", "OnWN"),
    "STS14": ("deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news"),
    "STS15": ("answers-forums", "answers-students", "belief", "headlines", "images"),
    "STS16": ("answer-answer", "headlines", "plagiarism", "postediting", "question-question"),
}

#: Folder of each STS year under ``benchmark_dir``.
STS_YEAR_FOLDERS = {task: os.path.join("STS", f"{task}-en-test") for task in STS_SUBSETS}

_LAYOUT = {
    **{task: (f"{folder}{os.sep}STS.input.<subset>.txt (sentence 1 <TAB> sentence 2) and "
              f"STS.gs.<subset>.txt (one gold score a line, empty = unscored) for the subsets "
              f"{', '.join(STS_SUBSETS[task])}") for task, folder in STS_YEAR_FOLDERS.items()},
    "STSBenchmark": os.path.join("STS", "STSBenchmark", "sts-test.csv") +
                    " (tab-separated: genre, file, year, id, score, sentence 1, sentence 2)",
    "SICKRelatedness": os.path.join("SICK", "SICK_test_annotated.txt") +
                       " (tab-separated with a header: pair_ID, sentence_A, sentence_B, "
                       "relatedness_score, entailment_judgment)",
}


class SentencePairs(NamedTuple):
    """Aligned sentence pairs and their targets (gold similarity, or a class label).

    ``first`` and ``second``: lists of ``n`` strings; ``targets``: ``[n]`` array.
    """

    first: list
    second: list
    targets: np.ndarray

    def __len__(self) -> int:  # the number of pairs, not of fields
        return len(self.targets)


def _normalise(sentence: str) -> str:
    return " ".join(sentence.split())


def _read_lines(path: str, encoding: str = "utf-8") -> list[str]:
    """Lines of a text file, split on ``\\n`` only (a trailing ``\\r`` is dropped); a final
    newline does not add an empty line. ``encoding="utf-8"`` falls back to latin-1 when the file
    is not valid UTF-8 (SentEval reads its classification files as latin-1)."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _missing(task: str, path: str, benchmark_dir: str) -> FileNotFoundError:
    return FileNotFoundError(
        f"{task}: {path!r} not found. `benchmark_dir` ({benchmark_dir!r}) must hold the SentEval "
        f"layout: {_LAYOUT[task]}.")


def read_sts_subset(folder: str, subset: str) -> SentencePairs:
    """The scored pairs of one STS subset (``STS.input.<subset>.txt`` + ``STS.gs.<subset>.txt``).

    Pairs whose gold line is empty are skipped (not scored by the organisers).

    Returns:
        :class:`SentencePairs` with float64 gold ``targets`` in ``[0, 5]``.

    Raises:
        FileNotFoundError: a file is missing. ValueError: the two files have different numbers
        of lines, a line is not two tab-separated sentences, or a gold score is not a number.
    """
    inputs = os.path.join(folder, f"STS.input.{subset}.txt")
    golds = os.path.join(folder, f"STS.gs.{subset}.txt")
    for path in (inputs, golds):
        if not os.path.isfile(path):
            raise FileNotFoundError(f"STS subset {subset!r}: {path!r} not found.")
    pairs, scores = _read_lines(inputs), _read_lines(golds)
    if len(pairs) != len(scores):
        raise ValueError(f"STS subset {subset!r}: {inputs!r} has {len(pairs)} lines but {golds!r} "
                         f"has {len(scores)}; they must be aligned line by line.")
    first, second, targets = [], [], []
    for i, (pair, score) in enumerate(zip(pairs, scores)):
        score = score.strip()
        if not score:
            continue
        fields = pair.split("\t")
        if len(fields) != 2:
            raise ValueError(f"{inputs!r} line {i + 1}: expected 2 tab-separated sentences, got "
                             f"{len(fields)} fields.")
        try:
            value = float(score)
        except ValueError:
            raise ValueError(f"{golds!r} line {i + 1}: gold score {score!r} is not a number.") \
                from None
        first.append(_normalise(fields[0]))
        second.append(_normalise(fields[1]))
        targets.append(value)
    return SentencePairs(first, second, np.asarray(targets, dtype=np.float64))


def _read_table(task: str, path: str, columns: tuple[int, int, int], header: bool
                ) -> SentencePairs:
    lines = _read_lines(path)[1 if header else 0:]
    first, second, targets = [], [], []
    need = max(columns) + 1
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) < need:
            raise ValueError(f"{task}: {path!r} line {i + 1 + header}: expected at least {need} "
                             f"tab-separated columns, got {len(fields)}.")
        try:
            value = float(fields[columns[2]])
        except ValueError:
            raise ValueError(f"{task}: {path!r} line {i + 1 + header}: score "
                             f"{fields[columns[2]]!r} is not a number.") from None
        first.append(_normalise(fields[columns[0]]))
        second.append(_normalise(fields[columns[1]]))
        targets.append(value)
    return SentencePairs(first, second, np.asarray(targets, dtype=np.float64))


def read_sts_task(benchmark_dir: str, task: str) -> dict[str, SentencePairs]:
    """The scored pairs of one task of :data:`STS_TASKS`, by subset.

    STS12-STS16: ``{subset: pairs}`` for SentEval's subsets (:data:`STS_SUBSETS`);
    ``"STSBenchmark"``: ``{"test": pairs}`` (columns 5, 6: sentences, 4: score);
    ``"SICKRelatedness"``: ``{"test": pairs}`` (columns 1, 2: sentences, 3: relatedness).

    Raises:
        FileNotFoundError: naming the missing folder or file and the expected layout.
        ValueError: ``task`` is unknown, or a file is malformed.
    """
    if task not in STS_TASKS:
        raise ValueError(f"`task` must be one of {', '.join(STS_TASKS)}; got {task!r}.")
    if task in STS_SUBSETS:
        folder = os.path.join(benchmark_dir, STS_YEAR_FOLDERS[task])
        if not os.path.isdir(folder):
            raise _missing(task, folder, benchmark_dir)
        for subset in STS_SUBSETS[task]:
            for kind in ("input", "gs"):
                path = os.path.join(folder, f"STS.{kind}.{subset}.txt")
                if not os.path.isfile(path):
                    raise _missing(task, path, benchmark_dir)
        return {subset: read_sts_subset(folder, subset) for subset in STS_SUBSETS[task]}
    if task == "STSBenchmark":
        path = os.path.join(benchmark_dir, "STS", "STSBenchmark", "sts-test.csv")
        columns, header = (5, 6, 4), False
    else:
        path = os.path.join(benchmark_dir, "SICK", "SICK_test_annotated.txt")
        columns, header = (1, 2, 3), True
    if not os.path.isfile(path):
        raise _missing(task, path, benchmark_dir)
    return {"test": _read_table(task, path, columns, header)}


def _average_ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="mergesort")
    ordered = x[order]
    starts_group = np.concatenate([[True], ordered[1:] != ordered[:-1]])
    group = np.cumsum(starts_group) - 1
    starts = np.flatnonzero(starts_group)
    ends = np.concatenate([starts[1:], [len(x)]])
    ranks = np.empty(len(x), dtype=np.float64)
    ranks[order] = ((starts + ends + 1) / 2.0)[group]   # mean of the 1-based ranks start+1..end
    return ranks


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rank correlation of ``a`` and ``b`` (ties get their average rank).

    Pearson's correlation of the average ranks, as ``scipy.stats.spearmanr``. A constant input
    has no defined correlation: the result is NaN, with a ``RuntimeWarning``.

    Args:
        a, b: 1-D sequences of the same length ``n >= 2``, finite.

    Example:
        >>> spearman([1, 2, 3, 4], [10, 20, 40, 30])
        0.8
        >>> spearman([1, 2, 2, 3], [1, 2, 3, 4])  # ranks of a: 1, 2.5, 2.5, 4
        0.9486832980505138
    """
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if x.ndim != 1 or y.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"`a` and `b` must be 1-D and of the same length; got shapes {x.shape} "
                         f"and {y.shape}.")
    if x.shape[0] < 2:
        raise ValueError(f"`a` and `b` need at least 2 values; got {x.shape[0]}.")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("`a` and `b` must be finite (no NaN or infinity).")
    rx = _average_ranks(x) - (x.shape[0] + 1) / 2.0
    ry = _average_ranks(y) - (x.shape[0] + 1) / 2.0
    denominator = math.sqrt(float(rx @ rx) * float(ry @ ry))
    if denominator == 0.0:
        warnings.warn("spearman: an input is constant; the correlation is undefined (NaN).",
                      RuntimeWarning, stacklevel=2)
        return float("nan")
    return float(np.clip((rx @ ry) / denominator, -1.0, 1.0))


def embed_sentences(embed_fn: Callable[[list], np.ndarray], sentences: Sequence[str],
                    batch_size: int = 128) -> np.ndarray:
    """``embed_fn`` applied to ``sentences`` in batches, each distinct sentence once.

    Args:
        embed_fn: ``list[str] -> [len(list), d]`` array (any array-like).
        sentences: ``n`` strings (repeats allowed).
        batch_size: at most this many sentences per ``embed_fn`` call, ``>= 1``.

    Returns:
        float32 ``[n, d]``, row ``i`` the embedding of ``sentences[i]``.

    Raises:
        ValueError: a bad ``batch_size``, or ``embed_fn`` returned the wrong shape, differing
        widths, or NaN/infinite values.

    Example:
        >>> import numpy as np
        >>> calls = []
        >>> def embed(batch):
        ...     calls.append(list(batch))
        ...     return np.array([[len(s), 1.0] for s in batch])
        >>> embed_sentences(embed, ["ab", "c", "ab"], batch_size=1).tolist(), calls
        ([[2.0, 1.0], [1.0, 1.0], [2.0, 1.0]], [['ab'], ['c']])
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"`batch_size` must be an integer >= 1; got {batch_size!r}.")
    if not callable(embed_fn):
        raise ValueError(f"`embed_fn` must be a callable list[str] -> [n, d] array; got "
                         f"{type(embed_fn).__name__}.")
    index: dict[str, int] = {}
    rows = np.empty(len(sentences), dtype=np.int64)
    for i, sentence in enumerate(sentences):
        if not isinstance(sentence, str):
            raise ValueError(f"`sentences` must be strings; item {i} is "
                             f"{type(sentence).__name__}.")
        rows[i] = index.setdefault(sentence, len(index))
    unique = list(index)
    blocks = []
    for start in range(0, len(unique), batch_size):
        batch = unique[start:start + batch_size]
        out = np.asarray(embed_fn(batch), dtype=np.float32)
        if out.ndim != 2 or out.shape[0] != len(batch) or out.shape[1] == 0:
            raise ValueError(f"`embed_fn` must return a [{len(batch)}, d] array for {len(batch)} "
                             f"sentences; got shape {out.shape}.")
        if blocks and out.shape[1] != blocks[0].shape[1]:
            raise ValueError(f"`embed_fn` returned {out.shape[1]} dimensions for one batch and "
                             f"{blocks[0].shape[1]} for another.")
        if not np.all(np.isfinite(out)):
            bad = int(np.sum(~np.all(np.isfinite(out), axis=1)))
            raise ValueError(f"`embed_fn` returned NaN or infinite values for {bad} of "
                             f"{len(batch)} sentences (e.g. {batch[0]!r}...).")
        blocks.append(out)
    if not blocks:
        return np.zeros((0, 0), dtype=np.float32)
    return np.concatenate(blocks)[rows]


def _cosine(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    u = u.astype(np.float64)
    v = v.astype(np.float64)
    norms = np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1)
    dots = np.sum(u * v, axis=1)
    return np.where(norms > 0, dots / np.where(norms > 0, norms, 1.0), 0.0)


@EVALUATIONS.register(
    "sts", result="sts", modality="text",
    params={"tasks": Param("any", help="STS tasks: any of " + ", ".join(STS_TASKS)),
            "batch_size": Param(int, low=1, help="sentences per embed_fn call"),
            "missing": Param(str, choices=("error", "skip"),
                             help="a missing task folder: raise, or skip it and list it")})
def sts_scores(embed_fn: Callable[[list], np.ndarray], benchmark_dir: str,
               tasks: Sequence[str] = STS_TASKS, batch_size: int = 128,
               missing: str = "error") -> dict:
    """SimCSE's unsupervised STS evaluation (see the module docstring): Spearman x 100.

    Args:
        embed_fn: ``list[str] -> [n, d]`` sentence embeddings (e.g. tokenize + encode).
        benchmark_dir: the folder holding ``STS/`` and ``SICK/`` in the SentEval layout.
        tasks: names from :data:`STS_TASKS` (default all seven).
        batch_size: sentences per ``embed_fn`` call; each distinct sentence of all the tasks is
            embedded once.
        missing: ``"error"`` (default): a missing folder or file raises a ``FileNotFoundError``
            naming it and the expected layout. ``"skip"``: the task is left out, listed in
            ``"skipped"`` and reported by a ``UserWarning``; the average covers the tasks scored.

    Returns:
        ``{task: Spearman x 100 for each scored task, "avg": their mean,
        "subsets": {task: {subset: Spearman x 100}}, "pairs": {task: scored pairs},
        "skipped": [tasks left out]}``. STS12-16 are in the "all" setting (one Spearman over
        the concatenated subsets); ``"subsets"`` also gives each subset's own correlation
        (for STS-B and SICK-R, ``{"test": ...}``). A constant cosine (a collapsed encoder) gives
        NaN.

    Example:
        >>> import numpy as np, os, tempfile
        >>> root = tempfile.mkdtemp(); folder = os.path.join(root, "SICK"); os.makedirs(folder)
        >>> rows = ["pair_ID\\tsentence_A\\tsentence_B\\trelatedness_score\\tentailment",
        ...         "1\\ta b\\ta b\\t5.0\\tE", "2\\ta b\\ta c\\t3.0\\tN", "3\\ta b\\tc d\\t1.0\\tN"]
        >>> _ = open(os.path.join(folder, "SICK_test_annotated.txt"), "w").write("\\n".join(rows))
        >>> vec = {"a": [1, 0, 0], "b": [0, 1, 0], "c": [0, 0, 1], "d": [0, 0, 1]}
        >>> embed = lambda batch: np.array([np.sum([vec[w] for w in s.split()], 0) for s in batch])
        >>> sts_scores(embed, root, tasks=["SICKRelatedness"])["SICKRelatedness"]
        100.0
    """
    tasks = _check_tasks(tasks, STS_TASKS, "tasks")
    if missing not in ("error", "skip"):
        raise ValueError(f"`missing` must be 'error' or 'skip'; got {missing!r}.")
    if not isinstance(benchmark_dir, (str, os.PathLike)) or not os.path.isdir(benchmark_dir):
        raise FileNotFoundError(f"`benchmark_dir` {benchmark_dir!r} is not a folder; it must hold "
                                f"STS/ and SICK/ in the SentEval layout.")
    benchmark_dir = os.fspath(benchmark_dir)
    data, skipped = {}, []
    for task in tasks:
        try:
            data[task] = read_sts_task(benchmark_dir, task)
        except FileNotFoundError as e:
            if missing == "error":
                raise
            skipped.append(task)
            warnings.warn(f"sts_scores: skipping {e}", UserWarning, stacklevel=2)
    sentences = [s for subsets in data.values() for pairs in subsets.values()
                 for s in (*pairs.first, *pairs.second)]
    embeddings = embed_sentences(embed_fn, sentences, batch_size=batch_size)
    out: dict = {}
    per_subset: dict = {}
    counts: dict = {}
    offset = 0
    for task, subsets in data.items():
        predictions, golds = [], []
        per_subset[task] = {}
        for name, pairs in subsets.items():
            n = len(pairs)
            u = embeddings[offset:offset + n]
            v = embeddings[offset + n:offset + 2 * n]
            offset += 2 * n
            cosine = _cosine(u, v)
            per_subset[task][name] = _percent(cosine, pairs.targets, f"{task}/{name}", True)
            predictions.append(cosine)
            golds.append(pairs.targets)
        out[task] = _percent(np.concatenate(predictions), np.concatenate(golds), task,
                             False)
        counts[task] = int(sum(len(p) for p in subsets.values()))
    scored = [out[t] for t in data]
    out["avg"] = float(np.mean(scored)) if scored else float("nan")
    out["subsets"] = per_subset
    out["pairs"] = counts
    out["skipped"] = skipped
    return out


def _percent(predictions: np.ndarray, golds: np.ndarray, where: str, quiet: bool) -> float:
    if len(golds) < 2:
        return float("nan")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        value = spearman(predictions, golds)
    if math.isnan(value) and not quiet:
        warnings.warn(f"sts_scores: {where}: the cosine similarities or the gold scores are "
                      f"constant; Spearman's correlation is undefined (NaN).", RuntimeWarning,
                      stacklevel=3)
    return 100.0 * value


def _check_tasks(tasks, allowed: Sequence[str], name: str) -> list[str]:
    if isinstance(tasks, str):
        tasks = [tasks]
    try:
        tasks = list(tasks)
    except TypeError:
        raise ValueError(f"`{name}` must be a list of task names; got {tasks!r}.") from None
    unknown = [t for t in tasks if t not in allowed]
    if unknown or not tasks:
        raise ValueError(f"`{name}` must be a non-empty list of {', '.join(allowed)}; got "
                         f"{tasks!r}.")
    if len(set(tasks)) != len(tasks):
        raise ValueError(f"`{name}` lists a task twice: {tasks!r}.")
    return tasks
