"""Re-mining hard negatives during training with the encoder being trained.

Hard negatives mined once with the starting encoder grow stale as it trains: ANCE (Xiong et
al. 2021, "Approximate Nearest Neighbor Negative Contrastive Learning for Dense Text
Retrieval") refreshes them from the current encoder's index during training. Every
``every_n_epochs`` epochs :class:`ReminingCallback` encodes the corpus and the training
queries with the model in inference mode, runs
:func:`~keras_hardneg.sampling.mine_hard_negatives` with the options it was given (the same
every time: ``K``, margins, window and strategy never change), and hands the new tuples to
the feed's :class:`~keras_hardneg.sampling.TupleBatches`, which the next epoch reads
(:mod:`keras_hardneg.sampling.tuple_feed`). A :class:`~keras_hardneg.sampling.TupleBatchSampler`
also gets the new embeddings for its graph.

Logged into ``logs`` (so into ``History``) at the epochs that re-mine, under ``log_prefix``
(default ``"mining/"``): ``tuples`` (``T``), ``queries_without_tuple`` (no positive, or
fewer surviving candidates than ``K``), ``positive_score_p50``, ``negative_score_min``,
``_p25``, ``_p50``, ``_p75``, ``_max`` (cosines) and ``seconds``. Fewer tuples than before
raise one ``UserWarning`` saying how many (the epochs keep their number of batches, so more
tuples repeat); too few for one batch raises ``ValueError``.

Example (a sketch; a runnable one is in ``tests/callbacks/test_remining.py``):
>>> from keras_hardneg.callbacks import ReminingCallback
>>> from keras_hardneg.sampling import TupleBatches, make_tuple_dataset
>>> # batches = TupleBatches(mined, batch_size=32)          # mined with the start encoder
>>> # remine = ReminingCallback(batches, query_texts, doc_texts, split.positives(),
>>> #                           every_n_epochs=1, mining_options={"relative_margin": 0.05,
>>> #                           "range_max": 50, "sampling_strategy": "top"})
>>> # embedder.fit(make_tuple_dataset(batches, query_texts, doc_texts), epochs=3,
>>> #              callbacks=[remine])
"""

from __future__ import annotations

import inspect
import numbers
import time
import warnings
from typing import Any, Callable, Sequence

import keras
import numpy as np

from keras_hardneg.sampling.mining import MinedNegatives, mine_hard_negatives

__all__ = ["ReminingCallback"]

_FIXED = ("query_emb", "corpus_emb", "positives")
_QUANTILE_KEYS = (("min", "min"), ("p25", "25%"), ("p50", "50%"), ("p75", "75%"),
                  ("max", "max"))


def _mining_parameters() -> set[str]:
    return {name for name in inspect.signature(mine_hard_negatives).parameters
            if name not in _FIXED}


class ReminingCallback(keras.callbacks.Callback):
    """Re-mine the feed's tuples with the encoder being trained, every N epochs.

    Args:
        batches: the feed's :class:`~keras_hardneg.sampling.TupleBatches` (or
            ``TupleBatchSampler``; anything with ``set_tuples`` and ``num_negatives``).
        queries: the ``Q`` training queries as the encoder reads them (strings, or token
            ids ``[Q, L]``).
        corpus: the ``N`` documents, same form (``[N, L']``).
        positives: per query, its relevant corpus rows (``RetrievalSplit.positives()``).
        every_n_epochs: re-mine at the end of epochs ``n-1, 2n-1, ...`` (0-based), not after
            the last one.
        mining_options: keyword arguments of
            :func:`~keras_hardneg.sampling.mine_hard_negatives` (``num_negatives`` defaults
            to the feed's ``K`` and must equal it).
        encode_fn: None, or ``encode_fn(model, inputs) -> [n, d]``; default
            ``encoder.predict(inputs, batch_size=batch_size)`` (inference mode).
        encoder: the model that embeds (default: the model being trained).
        batch_size: ``>= 1`` inputs per encoding step.
        mine_on_train_begin: also re-mine before the first epoch.
        log_prefix: prefix of the keys written into ``logs``.

    Attributes:
        history: one dict per re-mining: ``{"epoch", "tuples", "seconds", "summary"}``
            (``summary`` the :class:`~keras_hardneg.sampling.MiningSummary`; ``epoch`` -1
            for the one before training).
    """

    def __init__(self, batches: Any, queries: Any, corpus: Any,
                 positives: Sequence[Sequence[int]], *, every_n_epochs: int = 1,
                 mining_options: dict | None = None,
                 encode_fn: Callable[[Any, Any], Any] | None = None,
                 encoder: Any = None, batch_size: int = 256,
                 mine_on_train_begin: bool = False, log_prefix: str = "mining/"):
        super().__init__()
        if not callable(getattr(batches, "set_tuples", None)):
            raise ValueError("`batches` must be a TupleBatches (with set_tuples); got "
                             f"{type(batches).__name__}.")
        for name, value in (("every_n_epochs", every_n_epochs), ("batch_size", batch_size)):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"`{name}` must be an integer >= 1; got {value!r}.")
        if encode_fn is not None and not callable(encode_fn):
            raise ValueError(f"`encode_fn` must be None or a callable (model, inputs) -> "
                             f"[n, d]; got {encode_fn!r}.")
        if not isinstance(log_prefix, str):
            raise ValueError(f"`log_prefix` must be a string; got {log_prefix!r}.")
        if len(positives) != len(queries):
            raise ValueError(f"`positives` must hold one entry per query ({len(queries)}); "
                             f"got {len(positives)}.")
        options = dict(mining_options or {})
        unknown = sorted(set(options) - _mining_parameters())
        if unknown:
            raise ValueError(f"`mining_options` has {', '.join(map(repr, unknown))}, not "
                             "arguments of mine_hard_negatives; allowed: "
                             f"{', '.join(sorted(_mining_parameters()))}.")
        k = int(batches.num_negatives)
        if k < 1:
            raise ValueError("`batches` holds pairs (K=0): there are no negatives to re-mine; "
                             "build the feed from mined tuples (K >= 1).")
        options.setdefault("num_negatives", k)
        if options["num_negatives"] != k:
            raise ValueError(f"`mining_options['num_negatives']` is "
                             f"{options['num_negatives']!r}; it must be the feed's K={k} (the "
                             "batch layout and the loss are built for it).")
        self.batches = batches
        self.queries = queries
        self.corpus = corpus
        self.positives = positives
        self.every_n_epochs = int(every_n_epochs)
        self.mining_options = options
        self.encode_fn = encode_fn
        self.encoder = encoder
        self.batch_size = int(batch_size)
        self.mine_on_train_begin = bool(mine_on_train_begin)
        self.log_prefix = log_prefix
        self.history: list[dict] = []

    # ------------------------------------------------------------------ work
    def _encode(self, inputs: Any) -> np.ndarray:
        if self.encode_fn is not None:
            out = self.encode_fn(self.model, inputs)
        else:
            encoder = self.encoder if self.encoder is not None else self.model
            out = encoder.predict(inputs, batch_size=self.batch_size, verbose=0)
        emb = np.asarray(keras.ops.convert_to_numpy(out), dtype=np.float32)
        if emb.ndim != 2 or emb.shape[0] != len(inputs):
            raise ValueError(f"the encoder gave {emb.shape} for {len(inputs)} inputs; it must "
                             "give [n, d].")
        if not np.all(np.isfinite(emb)):
            raise ValueError("the encoder gave non-finite embeddings; re-mining stopped "
                             "(the model may have diverged).")
        return emb

    def remine(self, epoch: int = -1) -> MinedNegatives:
        """Encode, mine and hand the tuples to the feed now; returns them. ``epoch``: the
        0-based epoch just ended (Keras' numbering), -1 before training."""
        t0 = time.perf_counter()
        query_emb = self._encode(self.queries)
        corpus_emb = self._encode(self.corpus)
        mined = mine_hard_negatives(query_emb, corpus_emb, self.positives,
                                    **self.mining_options)
        before = int(self.batches.num_tuples)
        if len(mined) < before:
            warnings.warn(
                f"ReminingCallback: {_when(epoch)} left {len(mined)} tuples "
                f"({before} before; {mined.summary.short} queries had too few candidates, "
                f"{mined.summary.without_positive} no positive). Epochs keep "
                f"{self.batches.steps_per_epoch} batches, so more tuples repeat.",
                UserWarning, stacklevel=2)
        if getattr(self.batches, "on", None) in ("positives", "queries"):
            self.batches.set_tuples(mined, embeddings=corpus_emb
                                    if self.batches.on == "positives" else query_emb)
        else:
            self.batches.set_tuples(mined)
        seconds = time.perf_counter() - t0
        self.history.append({"epoch": int(epoch), "tuples": len(mined), "seconds": seconds,
                             "summary": mined.summary})
        return mined

    def _log(self, logs: dict | None) -> None:
        if logs is None or not self.history:
            return
        last = self.history[-1]
        summary, prefix = last["summary"], self.log_prefix
        logs[prefix + "tuples"] = float(last["tuples"])
        logs[prefix + "queries_without_tuple"] = float(summary.short + summary.without_positive)
        logs[prefix + "positive_score_p50"] = float(summary.positive_scores.get("50%", np.nan))
        for key, name in _QUANTILE_KEYS:
            logs[f"{prefix}negative_score_{key}"] = float(summary.negative_scores.get(name,
                                                                                      np.nan))
        logs[prefix + "seconds"] = float(last["seconds"])

    # ------------------------------------------------------------------ hooks
    def on_train_begin(self, logs: dict | None = None) -> None:
        if self.mine_on_train_begin:
            self.remine(-1)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if (epoch + 1) % self.every_n_epochs != 0:
            return
        epochs = (self.params or {}).get("epochs")
        if epochs is not None and epoch + 1 >= int(epochs):
            return  # no epoch left to use them
        self.remine(epoch)
        self._log(logs)

    def get_config(self) -> dict:
        """Settings only: the feed, the data and the encoder are not serialised."""
        return {"every_n_epochs": self.every_n_epochs, "mining_options": self.mining_options,
                "batch_size": self.batch_size, "mine_on_train_begin": self.mine_on_train_begin,
                "log_prefix": self.log_prefix}


def _when(epoch: int) -> str:
    """The mining's moment as a user reads it: Keras prints epochs from 1."""
    return "the mining before training" if epoch < 0 else f"re-mining after epoch {epoch + 1}"
