"""``train``: one recipe end to end. It only composes: load data, build, fit (resumable),
evaluate, export. Each step is a public function of :mod:`keras_hardneg.run`."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
import time
import warnings
from typing import Any, Iterable

import keras
import numpy as np

from keras_hardneg import callbacks
from keras_hardneg._io import atomic_write_json
from keras_hardneg.data.random_access import is_random_access
from keras_hardneg.export.preset import PRESET_DIR
from keras_hardneg.modalities import TrainFeed, modality_of
from keras_hardneg.run.artifacts import export_trained_encoder, write_preset
from keras_hardneg.run.build import build_model, load_data, make_train_feed
from keras_hardneg.run.distribution import build_distribution  # registers every entry
from keras_hardneg.run.recipe import load_recipe, save_recipe
from keras_hardneg.run.report.progress import (HISTORY_PLOT, ShortProgress, plot_history,
                                               resolve_verbose)
from keras_hardneg.run.resume import (_committed_epoch, check_own_files, check_output_dir,
                                      check_resume, clear_previous_run, mark_run,
                                      remove_new_files)
from keras_hardneg.run.report.run_report import (REPORT_FILE, make_probe_callback,
                                                 write_run_report)

__all__ = ["train", "trim_history_csv", "HISTORY_CSV", "TENSORBOARD_DIR"]

class _EpochTimer(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["epoch_seconds"] = time.perf_counter() - self._start


def _recipe_callbacks(recipe, modality, train, test):
    ann = recipe["annealing"]
    out = [_EpochTimer()] + (modality.monitors(recipe, train, test)
                             if not _unlabeled(modality, test) else [])
    if "beta_changes" in ann:
        out.append(callbacks.BetaAnnealing(recipe["epochs"], ann["beta_changes"]))
    if "ring_start" in ann or "ring_end" in ann:
        ring = {k: ann[f"ring_{k}"] for k in ("start", "end") if f"ring_{k}" in ann}
        out.append(callbacks.RingAnnealing(recipe["epochs"], **ring))
    return out


class _SameResumePoint(keras.callbacks.Callback):
    """Before the backup's restore (itself collective): every worker is about to resume from
    the same epoch. A worker that cannot read the chief's backup would otherwise leave the
    others waiting in the restore, or run more steps than they do."""

    def __init__(self, dist, backup_cb):
        super().__init__()
        self.dist, self.backup_cb = dist, backup_cb

    def on_train_begin(self, logs=None):
        self.dist.same_on_every_worker(
            "the epoch the run resumes from", self.backup_cb.committed_epoch(),
            hint="Every worker must read the chief's output directory: give them the same "
                 "OUTPUT_DIR on a shared file system.")


def _worker_feed(recipe, x_train, y_train, dist):
    """The feed of this worker: its block of every global batch (all of it on one worker).
    With several workers, every graph refresh also checks that the workers rebuilt the same
    graph (a checksum compared across them), so their walks cannot part silently."""
    place = dist.place
    if place.num_workers == 1:
        return make_train_feed(recipe, x_train, y_train)
    feed = make_train_feed(recipe, x_train, y_train, place=place)
    for cb in feed.callbacks:
        if hasattr(cb, "agree"):
            cb.agree = dist.same_on_every_worker
    return feed


def _as_json(recipe: dict[str, Any]) -> Any:
    return json.loads(json.dumps(recipe, default=str))


def _finished(stored: dict[str, Any] | None, recipe: dict[str, Any], output_dir: str,
              export: bool) -> dict[str, Any] | None:
    """The stored results of a run that finished (every epoch committed, results.json
    written, the encoder exported when asked for on TensorFlow), else None."""
    if not stored or not stored["results"] or stored["epoch"] < recipe["epochs"]:
        return None
    on_tf = keras.backend.backend() == "tensorflow"
    if export and on_tf and not os.path.isfile(os.path.join(output_dir, "encoder",
                                                            "saved_model.pb")):
        return None
    results = dict(stored["results"])
    try:
        with open(os.path.join(output_dir, "history.json")) as f:
            results["history"] = json.load(f)
    except (OSError, ValueError):
        results["history"] = {}
    results.update({"epochs_trained_now": 0, modality_of(recipe).throughput_key: None,
                    "output_dir": output_dir, "already_complete": True})
    return results


def _skip_batches(feed: Any, n: int) -> Any:
    """A resumed run's uniform feed, ``n`` batches in: where the interrupted run stopped,
    so its epochs see the orders of an uninterrupted run (a sampler's feed resumes from the
    sampler's saved state instead)."""
    if feed.sampler is not None or feed.state:
        return feed
    dataset = feed.dataset
    if hasattr(dataset, "start_batch"):  # ShuffledBatches (off TensorFlow)
        dataset.start_batch = n
        return feed
    if hasattr(dataset, "skip"):  # tf.data: the same seeded orders, n batches on
        return TrainFeed(dataset.skip(n), feed.steps_per_epoch, feed.callbacks, feed.sampler,
                         feed.state)
    return feed


#: The random encoder's figures, measured before the first epoch (kept for resumes).
BASELINE_FILE = "baseline.json"


def _evaluation_splits(modality, recipe, train_split, test_split):
    """``(reference, queries)`` the run evaluates on: the train and test splits, or, when
    the training images are unlabeled and a labelled folder is given as ``test``, that
    folder split by ``data.test_fraction`` (seeded)."""
    x, y = train_split
    if not modality.knn_evaluation or y is not None or test_split is None or \
            is_random_access(x) or is_random_access(test_split[0]) or test_split[1] is None:
        return train_split, test_split
    xt, yt = test_split
    order = np.random.default_rng(recipe["seed"]).permutation(len(xt))
    cut = int(len(order) * (1 - recipe["data"].get("test_fraction", 0.2)))
    return (xt[order[:cut]], yt[order[:cut]]), (xt[order[cut:]], yt[order[cut:]])


def _unlabeled(modality, test_split) -> bool:
    """An image run without labels (a folder of unlabeled images): no monitor, no
    evaluation."""
    return modality.knn_evaluation and not _labelled(test_split)


def _labelled(split) -> bool:
    """Whether a split has class labels (arrays with ``y``, or a random-access source,
    which carries its own)."""
    return split is not None and split[0] is not None and (
        split[1] is not None or is_random_access(split[0]))


def _baseline(modality, model, recipe, train_split, test_split, output_dir, start_epoch,
              verbose):
    """The random encoder's headline figure ("epoch 0": :meth:`Modality.baseline`, e.g. an
    image run's kNN accuracy, a graph run's SVM accuracy), so that a user sees what
    pre-training bought; measured at a fresh start and stored in
    ``output_dir/baseline.json``."""
    path = os.path.join(output_dir, BASELINE_FILE)
    if start_epoch:
        try:
            with open(path) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None
    figures = modality.baseline(model.encoder, recipe, train_split, test_split)
    if not figures:
        return None
    baseline = {key: float(value) for key, value in figures.items()}
    atomic_write_json(path, baseline, indent=1)
    if verbose:
        print("epoch 0 (before training): " + ", ".join(
            f"{key.replace('_', ' ').replace('knn', 'kNN').replace('svm', 'SVM')} {value:.4f}"
            for key, value in baseline.items()), flush=True)
    return baseline


def _write_report(recipe, model, train_split, test_split, history, results, baseline,
                  probe_cb, output_dir) -> str | None:
    """``report.html`` of a finished run (its path), or a warning and None when it cannot
    be written (the run itself is complete)."""
    probe = None
    if probe_cb is not None and probe_cb.available:
        probe = {"probe_size": int(len(probe_cb.probe.indices)), "records": probe_cb.records,
                 "seconds": probe_cb.seconds}
    path = os.path.join(output_dir, REPORT_FILE)
    try:
        write_run_report(path, recipe=recipe, encoder=model.encoder, train=train_split,
                         test=test_split, history=history, results=results,
                         baseline=baseline, probe=probe, where=output_dir,
                         probe_path=probe_cb.path if probe is not None else None)
    except Exception as e:  # noqa: BLE001 -- the run is complete; the page can be redone
        warnings.warn(f"report.html was not written ({type(e).__name__}: {e}); write it with "
                      f"`keras-hardneg report {output_dir}`.", stacklevel=4)
        return None
    return path


#: Every epoch's logs, one CSV row each (``keras.callbacks.CSVLogger``; a resumed run
#: continues the file from its last committed epoch).
HISTORY_CSV = "history.csv"
#: TensorBoard's event files, when ``train(..., tensorboard=True)``.
TENSORBOARD_DIR = "tensorboard"


@dataclasses.dataclass
class _Run:
    """One call of :func:`train`: what it was given, and what its steps build in turn."""

    recipe: dict[str, Any]
    output_dir: str
    dist: Any
    resume: bool
    verbose: int
    export: bool
    report: bool
    tensorboard: bool
    stored: dict[str, Any] | None = None  # the run found in output_dir (resume)
    before: set[str] | None = None  # what the output folder held (None: it did not exist)
    private: str | None = None  # a worker's own backup directory (not the chief's)
    modality: Any = None
    train_split: Any = None
    test_split: Any = None
    description: Any = None
    eval_train: Any = None
    eval_test: Any = None
    feed: Any = None
    model: Any = None
    start_epoch: int = 0
    baseline: dict[str, float] | None = None

    @property
    def place(self):
        return self.dist.place

    @property
    def backup(self) -> str:
        return os.path.join(self.output_dir, "backup")


def _check_before_writing(run: _Run) -> dict[str, Any] | None:
    """Before anything is read or written: no file of the user's is replaced, and a rerun
    must train the recipe stored there. Returns the results of a run found complete."""
    recipe, output_dir = run.recipe, run.output_dir
    if run.place.is_chief:
        check_own_files(output_dir, recipe)
        run.before = set(os.listdir(output_dir)) if os.path.isdir(output_dir) else None
    run.stored = check_resume(recipe, output_dir, run.resume) if run.place.is_chief else None
    check_output_dir(output_dir)
    finished = _finished(run.stored, recipe, output_dir, run.export) if run.resume else None
    if finished is not None and run.verbose:  # nothing to train: the files stay as they are
        print(f"{output_dir}: the run is complete ({recipe['epochs']} epochs); nothing to "
              "train (rerun with --no-resume to start over).", flush=True)
    return finished


def _train(run: _Run, data: tuple | None, extra_callbacks) -> dict[str, Any]:
    """The run itself, under the recipe's dtype policy (the caller's is put back however it
    ends); a run that committed no epoch leaves the folder as it found it."""
    caller_policy = keras.config.dtype_policy()
    keras.config.set_dtype_policy(run.recipe["precision"])
    try:
        _start_files(run)
        _load_and_build(run, data)
        cbs, backup_cb, probe_cb = _callbacks(run, extra_callbacks)
        history, seconds = _fit(run, cbs)
        hist, trained_now = _full_history(backup_cb, history)
        if run.place.num_workers > 1:
            done = _to_the_chief(run, hist, trained_now, seconds)
            if done is not None:  # a worker other than the chief
                return done
        atomic_write_json(os.path.join(run.output_dir, "history.json"), hist, indent=1)
        plot_history(hist, os.path.join(run.output_dir, HISTORY_PLOT), run.baseline)
        results = _evaluate(run, hist, seconds, trained_now)
        _write_artifacts(run, results)
        if run.report:
            results["report"] = _write_report(run.recipe, run.model, run.eval_train,
                                              run.eval_test, hist, results, run.baseline,
                                              probe_cb, run.output_dir)
        return results
    except BaseException:
        # A later run resumes from the backup, so a folder with a committed epoch stays.
        if run.place.is_chief and not _committed_epoch(run.backup):
            remove_new_files(run.output_dir, run.before)
        raise
    finally:
        keras.config.set_dtype_policy(caller_policy)
        if run.private is not None:
            shutil.rmtree(run.private, ignore_errors=True)


def _start_files(run: _Run) -> None:
    """The chief's first writes: the earlier run cleared (starting over), the run's marker,
    and ``recipe.json`` unless the stored one is this recipe."""
    if not run.place.is_chief:
        return
    if not run.resume:  # starting over: nothing of the earlier run stays
        clear_previous_run(run.output_dir)
    mark_run(run.output_dir)
    if run.stored is None or run.stored["recipe"] != _as_json(run.recipe):
        save_recipe(run.recipe, os.path.join(run.output_dir, "recipe.json"))


def _load_and_build(run: _Run, data: tuple | None) -> None:
    """Data (``data`` or the recipe's), the evaluation splits, the feed of this worker, the
    model, and the epoch the run resumes from (its feed moved on to there)."""
    recipe = run.recipe
    run.train_split, run.test_split, run.description = (
        data if data is not None else load_data(recipe))
    x_train, y_train = run.train_split
    run.eval_train, run.eval_test = _evaluation_splits(modality_of(recipe), recipe,
                                                       run.train_split, run.test_split)
    run.modality = modality_of(recipe)
    if run.place.is_chief:
        run.modality.save_run_files(x_train, run.output_dir)
    keras.utils.set_random_seed(recipe["seed"])
    run.feed = _worker_feed(recipe, x_train, y_train, run.dist)
    with run.dist.scope():
        run.model = build_model(recipe, x_train=x_train)
    run.start_epoch = _committed_epoch(run.backup) if run.resume else 0
    if run.start_epoch:
        run.feed = _skip_batches(run.feed, run.start_epoch * run.feed.steps_per_epoch)
        if run.verbose and run.place.is_chief:
            print(f"resuming from epoch {run.start_epoch} (of {recipe['epochs']}) in "
                  f"{run.output_dir}", flush=True)


def _callbacks(run: _Run, extra_callbacks) -> tuple[list, Any, Any]:
    """``(callbacks, backup callback, probe callback or None)`` of the fit, in order: the
    recipe's, the feed's, progress, the probe and the logs (each before the backup: an
    epoch's record is written before the epoch commits), the backup, the caller's."""
    place, feed = run.place, run.feed
    if place.is_chief and place.num_workers == 1:
        run.baseline = _baseline(run.modality, run.model, run.recipe, run.eval_train,
                                 run.eval_test, run.output_dir, run.start_epoch, run.verbose)
    cbs = _recipe_callbacks(run.recipe, run.modality, run.eval_train, run.eval_test) + list(
        feed.callbacks)
    if run.verbose:
        cbs.append(ShortProgress())  # replaces Keras's: the figures that matter
    backup_cb = _backup_callback(run)
    if place.num_workers > 1:
        cbs.append(_SameResumePoint(run.dist, backup_cb))
    probe_cb = None
    if run.report and place.is_chief and place.num_workers == 1:
        x_train, y_train = run.train_split
        probe_cb = make_probe_callback(run.recipe, run.modality, x_train, y_train, feed,
                                       run.output_dir, run.start_epoch)
        cbs.append(probe_cb)
    if place.is_chief:
        cbs += _log_callbacks(run)
    return cbs + [backup_cb, *extra_callbacks], backup_cb, probe_cb


def _backup_callback(run: _Run) -> callbacks.AtomicBackupAndRestore:
    """The resumable backup, with the state it keeps besides the weights (the sampler and
    its refreshes -- after them, as their on_train_begin resets what it restores -- the
    feed's state, the augmentation's generators). A worker other than the chief saves with
    the chief (a save may run collectives) into a private directory and restores what the
    chief committed."""
    feed, place = run.feed, run.place
    state = {}
    if feed.sampler is not None:
        state["sampler"] = feed.sampler
        state.update({f"refresh{i}": cb for i, cb in enumerate(feed.callbacks)})
    state.update(feed.state)
    state["random"] = callbacks.RandomState(run.model)
    if place.is_chief:
        return callbacks.AtomicBackupAndRestore(run.backup, delete_checkpoint=False,
                                                state=state)
    run.private = tempfile.mkdtemp(prefix=f"khn-worker{place.index}-backup-")
    return callbacks.AtomicBackupAndRestore(run.private, delete_checkpoint=False, state=state,
                                            restore_dir=run.backup if run.resume else None)


def _log_callbacks(run: _Run) -> list[keras.callbacks.Callback]:
    """``history.csv`` (every epoch's logs; a resumed run keeps the committed epochs' rows
    and appends) and, when asked for, TensorBoard's event files."""
    path = os.path.join(run.output_dir, HISTORY_CSV)
    if run.start_epoch:
        trim_history_csv(path, run.start_epoch)
    out = [keras.callbacks.CSVLogger(path, append=bool(run.start_epoch))]
    if run.tensorboard:
        out.append(keras.callbacks.TensorBoard(os.path.join(run.output_dir, TENSORBOARD_DIR)))
    return out


def trim_history_csv(path: str, epochs: int) -> None:
    """Keeps the header and the rows of epochs ``0 .. epochs - 1`` of a ``history.csv``:
    rows of epochs that did not commit (a run killed after the row was written) and a
    partly written last line go, so the resumed run appends each epoch once."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            lines = f.readlines()
    except OSError:
        return
    kept = lines[:1] if lines and lines[0].endswith("\n") else []
    for line in lines[1:]:
        field = line.split(",", 1)[0].strip().strip('"')
        if line.endswith("\n") and field.isdigit() and int(field) < epochs:
            kept.append(line)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        f.write("".join(kept))
    os.replace(tmp, path)


def _fit(run: _Run, cbs: list) -> tuple[Any, float]:
    """``model.fit`` over the recipe's epochs; ``(history, seconds)`` (a run with nothing
    left to train keeps the stored run's seconds)."""
    start = time.perf_counter()
    with run.dist.scope():
        history = run.model.fit(run.dist.distribute_dataset(run.feed.dataset),
                                epochs=run.recipe["epochs"],
                                steps_per_epoch=run.feed.steps_per_epoch, shuffle=False,
                                callbacks=cbs, verbose=run.verbose)
    seconds = time.perf_counter() - start
    stored = run.stored
    if not len(history.history.get("loss", [])) and stored and stored["results"]:
        seconds = stored["results"].get("seconds", seconds)  # nothing trained now
    return history, seconds


def _full_history(backup_cb, history) -> tuple[dict[str, list], int]:
    """``(every epoch's logs, epochs trained by this call)``: the epochs restored from the
    backup first, then this call's."""
    hist = {}
    for logs in backup_cb.history:
        for k, v in logs.items():
            hist.setdefault(k, []).append(float(v))
    if not hist:
        hist = {k: [float(v) for v in vals] for k, vals in history.history.items()}
    return hist, len(history.history.get("loss", []))


def _to_the_chief(run: _Run, hist, trained_now, seconds) -> dict[str, Any] | None:
    """Several workers: every one reads the weights (a read may run collectives); a worker
    other than the chief returns its short result, the chief continues with a
    single-process copy of the model (evaluated and exported outside the strategy)."""
    weights = run.model.get_weights()
    if not run.place.is_chief:
        return {"history": hist, "epochs_run": len(hist.get("loss", [])),
                "epochs_trained_now": trained_now, "seconds": seconds,
                "worker": run.place.index, "output_dir": run.output_dir}
    run.model = build_model(run.recipe, x_train=run.train_split[0])
    run.model.set_weights(weights)
    return None


def _evaluate(run: _Run, hist, seconds, trained_now) -> dict[str, Any]:
    """The modality's evaluation of the trained encoder (or why there is none), with the
    run's figures: history, time, throughput, the random encoder's, the distribution."""
    modality, feed, output_dir = run.modality, run.feed, run.output_dir
    if _unlabeled(modality, run.test_split):
        results = {"evaluation": (
            "off: the training images are unlabeled; give a labelled folder as data.test "
            f"(or FOLDER/test beside FOLDER/train), or measure the encoder with "
            f"`keras-hardneg evaluate {output_dir} --dataset LABELLED_FOLDER`")}
    else:
        results = modality.evaluate(run.model.encoder, run.recipe, run.eval_train,
                                    run.eval_test)
    results.update(
        history=hist, seconds=seconds, epochs_run=len(hist.get("loss", [])),
        epochs_trained_now=trained_now, steps_per_epoch=feed.steps_per_epoch,
        data=run.description, modality=modality.name, output_dir=output_dir)
    results[modality.throughput_key] = (
        trained_now * feed.steps_per_epoch * run.recipe["batch_size"] / seconds
        if seconds > 0 and trained_now else None)
    for key, value in (run.baseline or {}).items():
        results[f"{key}_epoch0"] = value
    if run.place.num_workers > 1:
        results["distribution"] = run.dist.describe()
    return results


def _write_artifacts(run: _Run, results: dict[str, Any]) -> None:
    """The SavedModel (TensorFlow backend; elsewhere ``results["export_skipped"]`` says
    how to write it), the preset (every backend) and ``results.json``."""
    model, recipe, description, output_dir = run.model, run.recipe, run.description, \
        run.output_dir
    x_train = run.train_split[0]
    if run.export and keras.backend.backend() != "tensorflow":
        # The weights stay in backup/; `keras-hardneg export` writes encoder/ under TF.
        results["export_skipped"] = (
            f"SavedModel export needs the TensorFlow backend (this run used "
            f"{keras.backend.backend()!r}): train with JAX, export under TF with "
            f"`KERAS_BACKEND=tensorflow keras-hardneg export {output_dir}`.")
        warnings.warn(results["export_skipped"], stacklevel=4)
    elif run.export:
        results["export_dir"] = export_trained_encoder(
            model, recipe, results, description, os.path.join(output_dir, "encoder"),
            x_train=x_train, run_dir=output_dir)
    # The Keras-native artifact, under every backend (loads without TensorFlow).
    results["preset_dir"] = write_preset(
        model, recipe, results, description, os.path.join(output_dir, PRESET_DIR),
        x_train=x_train, run_dir=output_dir)
    atomic_write_json(os.path.join(output_dir, "results.json"),
                      {k: v for k, v in results.items() if k != "history"}, indent=1,
                      default=str)


def train(recipe: Any, output_dir: str, *, resume: bool = True, verbose: Any = "auto",
          export: bool = True, extra_callbacks: Iterable[keras.callbacks.Callback] = (),
          data: tuple | None = None, distribution: Any = None,
          report: bool = True, tensorboard: bool = False) -> dict[str, Any]:
    """Trains, evaluates and exports what ``recipe`` describes, into ``output_dir``.

    ``output_dir`` receives ``recipe.json``, ``backup/`` (resume state: a killed run
    continues from its last finished epoch when run again), ``history.json``,
    ``history.csv``, ``results.json`` and ``encoder/`` (the exported SavedModel with its model card; under a
    backend other than TensorFlow the export is skipped with a warning and
    ``results["export_skipped"]`` says why: ``keras-hardneg export OUTPUT_DIR`` run under
    TensorFlow writes it from the backup). The input feed follows the backend
    (:func:`~keras_hardneg.run.make_train_feed`).

    Args:
        recipe: path or dict (see :func:`~keras_hardneg.run.load_recipe`).
        output_dir: where everything goes (created). A folder that holds a file or folder
            of the names a run writes (``results.json``, ``history.json``, ``recipe.json``,
            ``preset/``, ...: :data:`~keras_hardneg.run.resume.RUN_FILES`) that this package
            did not write is refused (``OutputDirError`` naming it) before anything is
            written; ``.keras-hardneg-run.json``, written first, marks a folder's run as
            this package's. A run that fails before its first committed epoch removes what
            it created there.
        resume: continue from ``output_dir/backup`` if present.
        verbose: Keras progress bars (1), one line per epoch (2), silent (0) or
            ``"auto"``: 1 when stdout is a terminal, else 2 (no ``\r`` in log files).
            Lines show the loss and the kNN monitor (every metric is in history.json).
        export: write the SavedModel.
        extra_callbacks: more Keras callbacks.
        data: optional ``((x_train, y_train), (x_test, y_test), description)`` to skip
            :func:`~keras_hardneg.run.load_data` (the tuner reuses loaded data).
        distribution: how the run spreads over processes: ``None`` (one process), a
            registered name, ``{"name": ..., <keys>}`` or a
            :class:`~keras_hardneg.run.distribution.Distribution` (see
            :data:`keras_hardneg.registry.DISTRIBUTIONS`; e.g. ``"tf_multi_worker"``,
            ``"jax_multi_process"``). Every worker calls ``train`` with the same recipe and
            ``output_dir`` (a directory they share) and feeds its block of every global
            batch. Only the chief (worker 0) writes ``recipe.json``, ``backup/``,
            ``history.json``, ``results.json`` and ``encoder/``, evaluating and exporting
            a single-process copy of the trained model; the others save into a private
            temporary directory, resume from the chief's ``backup/`` and return only
            ``history``, ``epochs_run``, ``epochs_trained_now``, ``seconds``, ``worker``
            and ``output_dir``.
        report: write ``report.html`` (:mod:`keras_hardneg.run.report.run_report`): a
            fixed probe batch is scored after every epoch into ``probe.json`` (one process
            only); a page that cannot be written is a warning, not a failed run.
        tensorboard: also write TensorBoard event files under ``output_dir/tensorboard/``
            (the chief only; needs TensorFlow installed, whatever the backend). Every
            epoch's logs go to ``output_dir/history.csv`` in any case.

    Returns:
        dict with the modality's figures (its ``result_keys``, see
        :mod:`keras_hardneg.modalities`; text only when the recipe's
        ``evaluation.benchmark_dir`` is set), ``modality``, ``history`` (all epochs,
        restored ones included), ``epochs_run``, ``epochs_trained_now`` (the epochs this
        call trained; ``seconds`` and the throughput cover only those),
        ``steps_per_epoch``, ``seconds``, the throughput (training examples per second,
        under the modality's ``throughput_key``: ``images_per_second``,
        ``graphs_per_second``, ``sentences_per_second``), ``data``, ``export_dir`` and
        ``output_dir``.

    Example:
    >>> from keras_hardneg import run
    >>> result = run.train({"epochs": 1}, "/tmp/khn-doc-run", verbose=0)  # doctest: +SKIP
    >>> sorted(result)[:3]  # doctest: +SKIP
    ['data', 'epochs_run', 'epochs_trained_now']
    """
    dist = build_distribution(distribution)  # first: before the process runs any TF op
    verbose = resolve_verbose(verbose)
    run = _Run(load_recipe(recipe), output_dir, dist, resume=resume, verbose=verbose,
               export=export, report=report, tensorboard=tensorboard)
    finished = _check_before_writing(run)
    return finished if finished is not None else _train(run, data, extra_callbacks)
