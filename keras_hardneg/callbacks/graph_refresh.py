"""Keeping BatchSampler's graph fresh during training (Yang et al., KDD 2023, Alg. 1, App. E).

``GraphRefreshCallback`` rebuilds the proximity graph every ``t = every_n_steps`` training
batches (paper: 100) from embeddings the model computed during training -- no extra forward
pass -- and decays the restart probability linearly (paper, vision: 0.2 -> 0.05).

Contract with the frameworks (``khn.models.SimCLR`` / ``MoCo`` built with
``memory_bank_size=N``): ``model.embedding_bank`` is a non-trainable ``[N, d]`` variable with
unit-norm rows that ``train_step`` fills at the positions ``x["index"]`` with the projections
it just computed.  Rows of examples not yet seen are zero; a zero row scores 0 against every
candidate; by default (``keep_unseen_rows``) such a node keeps its previous neighbour list
until it is seen.  The elements must therefore carry
``"index"`` (``make_dataset`` does).

``reencode`` (optional, exact but costs a forward pass over the data): a callable
``reencode(model) -> [N, d]`` or a tuple ``(encoder_model, dataset)`` whose
``encoder_model.predict(dataset)`` returns ``[N, d]`` in index order.

A rebuild costs ``2 N M d`` flops plus a top-k (timings in ``docs/notes/sampling.md``) and by
default runs synchronously between two batches;
``asynchronous=True`` builds in a background thread while training continues.  Because tf.data
prefetches, a new graph / restart probability is used from a few batches later.

Several workers (issue #19; :class:`~keras_hardneg.sampling.WorkerShard`): every worker runs
this callback on its shard of the same global walk. The bank holds every worker's projections
(the model writes the rows of the whole global batch, gathered across replicas, on every
replica), so each worker rebuilds the same graph from the same bank with the same seed (the
exact build is bit-deterministic; ``docs/notes/sampling_workers.md``). For the walks to stay
in step, a shard takes updates keyed to training steps: this callback runs the shard's clock
(``start_clock`` / ``step_done`` / ``stop_clock``, called when the sampler has them) and, when
``asynchronous``, applies a background build at the next refresh step (or at the end of
training) instead of whenever the thread happens to finish. ``agree`` (e.g.
``Distribution.same_on_every_worker``) checks after every rebuild that all workers hold the
same graph (a checksum, one collective). Under JAX multi-process training a bank that is not
fully addressable in this process is gathered first (``multihost_utils.process_allgather``).

Example
-------
>>> from keras_hardneg.callbacks import GraphRefreshCallback
>>> from keras_hardneg.sampling import BatchSampler, make_dataset
>>> # sampler = BatchSampler(initial_embeddings, batch_size=256, restart_prob=0.2)
>>> # model = khn.models.SimCLR(..., memory_bank_size=len(x_train))
>>> # model.fit(make_dataset(sampler, x_train), epochs=100,
>>> #           steps_per_epoch=sampler.steps_per_epoch,
>>> #           callbacks=[GraphRefreshCallback(sampler, every_n_steps=100)])
"""

from __future__ import annotations

import threading
import time
import zlib
from typing import Any, Callable

import keras
import numpy as np

from keras_hardneg.sampling.graph import ProximityGraph

__all__ = ["GraphRefreshCallback", "linear_restart_prob", "graph_checksum"]


def linear_restart_prob(step, total_steps, start=0.2, end=0.05):
    """Linear schedule: ``start`` at step 0, ``end`` at step ``total_steps - 1`` and after."""
    if total_steps <= 1:
        return float(end)
    frac = min(max(step / (total_steps - 1), 0.0), 1.0)
    return float(start + (end - start) * frac)


@keras.saving.register_keras_serializable(package="keras_hardneg")
class GraphRefreshCallback(keras.callbacks.Callback):
    """Rebuild the sampler's proximity graph from ``model.embedding_bank`` every N steps.

    Args:
        sampler: a ``BatchSampler`` (anything with ``update_graph`` / ``set_restart_prob``).
        every_n_steps: rebuild interval ``t`` in training batches (paper: 100).
        restart_prob_schedule: ``(start, end)`` for a linear decay over
            ``epochs * steps_per_epoch`` steps (from ``self.params``); ``"sampler"`` (default)
            for the sampler's own ``restart_prob_schedule`` (BatchSampler's), none if it has
            none; or None to leave ``restart_prob`` alone.
        reencode: None (use ``model.embedding_bank``), a callable ``model -> [N, d]`` or a
            tuple ``(encoder_model, dataset)``.
        num_candidates, num_neighbors, backend: graph settings (default: the sampler's).
        seed: base seed of the candidate draws (refresh ``r`` uses ``seed + r``).
        rebuild_on_train_begin: also rebuild once before the first batch (needs a filled bank
            or ``reencode``).
        reencode_on_train_begin: None, or a callable ``model -> [N, d]``: the first graph is
            rebuilt before the first batch from these embeddings (e.g. a pretrained
            encoder's features: BatchSampler builds its graph with the encoder), the later
            ones from the bank (or ``reencode``).
        keep_unseen_rows: nodes whose bank row is still all-zero (not seen yet this run) keep
            their previous neighbour lists instead of getting arbitrary ones (their scores are
            all 0).  Seen nodes rank unseen candidates at 0, below typical positive
            similarities.
        asynchronous: build in a background thread from a snapshot of the embeddings and swap
            the graph in at the first batch end after it is ready (training continues during the
            build; NumPy releases the GIL).  A refresh due while the previous one is still
            building waits for it; the last one is applied at ``on_train_end``.  With a
            clocked sampler (a ``WorkerShard``) the graph is swapped in at the next refresh
            step, the same step on every worker.
        agree: None, or ``agree(what, value, hint=...)`` raising unless every worker passes
            the same int (``Distribution.same_on_every_worker``): called with a checksum of
            each new graph.

    Attributes:
        refreshes: list of dicts ``{"step", "seconds"}``, one per rebuild.

    Example:

    >>> import numpy as np, keras_hardneg as khn
    >>> x = np.random.default_rng(0).uniform(size=(128, 8, 8, 3)).astype("float32")  # [N, 8, 8, 3]
    >>> sampler = khn.sampling.BatchSampler(x.reshape(128, -1), batch_size=32,
    ...                                     num_candidates=64, num_neighbors=8, seed=0)
    >>> model = khn.models.SimCLR(
    ...     khn.encoders.small_convnet(input_shape=(8, 8, 3), width=4), projection_dims=(16, 8),
    ...     memory_bank_size=128,       # the bank [N, d] the graph is rebuilt from
    ...     augmentation=khn.augment.simclr_augmentation(image_size=8, strength=0.5))
    >>> model.compile(optimizer="sgd", loss=khn.losses.HardNegativeContrastiveLoss())
    >>> refresh = khn.callbacks.GraphRefreshCallback(sampler, every_n_steps=2)
    >>> history = model.fit(khn.sampling.make_dataset(sampler, x), epochs=1,
    ...                     steps_per_epoch=sampler.steps_per_epoch, callbacks=[refresh], verbose=0)
    >>> [r["step"] for r in refresh.refreshes], round(sampler.restart_prob, 2)  # annealed to 0.05
    ([2, 4], 0.05)
    """

    def __init__(self, sampler: Any = None, every_n_steps: int = 100,
                 restart_prob_schedule: tuple[float, float] | str | None = "sampler",
                 reencode: Callable[[keras.Model], Any] | tuple[keras.Model, Any] | None = None,
                 num_candidates: int | None = None, num_neighbors: int | None = None,
                 backend: str = "auto", seed: int | None = 0,
                 rebuild_on_train_begin: bool = False, keep_unseen_rows: bool = True,
                 asynchronous: bool = False, agree: Callable[..., None] | None = None,
                 reencode_on_train_begin: Callable[[keras.Model], Any] | None = None):
        super().__init__()
        if isinstance(every_n_steps, bool) or not isinstance(every_n_steps, (int, np.integer)) \
                or every_n_steps < 1:
            raise ValueError(f"`every_n_steps` must be an integer >= 1, got {every_n_steps!r}.")
        if restart_prob_schedule is not None and restart_prob_schedule != "sampler":
            if isinstance(restart_prob_schedule, str) or len(restart_prob_schedule) != 2 or not all(
                    0.0 <= float(a) < 1.0 for a in restart_prob_schedule):
                raise ValueError("`restart_prob_schedule` must be (start, end) with both in "
                                 f"[0, 1), got {restart_prob_schedule!r}.")
            restart_prob_schedule = tuple(float(a) for a in restart_prob_schedule)
        if reencode is not None and not callable(reencode) and not (
                isinstance(reencode, (tuple, list)) and len(reencode) == 2):
            raise ValueError("`reencode` must be None, a callable model -> [N, d] or a tuple "
                             "(encoder_model, dataset).")
        if reencode_on_train_begin is not None and not callable(reencode_on_train_begin):
            raise ValueError("`reencode_on_train_begin` must be None or a callable model -> "
                             f"[N, d]; got {reencode_on_train_begin!r}.")
        self.reencode_on_train_begin = reencode_on_train_begin
        self.sampler = sampler
        self.every_n_steps = int(every_n_steps)
        self.restart_prob_schedule = restart_prob_schedule
        self.reencode = reencode
        self.num_candidates = num_candidates
        self.num_neighbors = num_neighbors
        self.backend = backend
        self.seed = seed
        self.rebuild_on_train_begin = rebuild_on_train_begin
        self.asynchronous = bool(asynchronous)
        self.keep_unseen_rows = bool(keep_unseen_rows)
        if agree is not None and not callable(agree):
            raise ValueError(f"`agree` must be None or a callable (what, value); got {agree!r}.")
        self.agree = agree
        self._thread = None
        self._pending = None
        self.refreshes = []
        self._step = 0
        self._total = None

    # ---------------------------------------------------------------- helpers
    def _embeddings(self):
        if self.reencode is not None:
            if callable(self.reencode):
                emb = self.reencode(self.model)
            else:
                enc, ds = self.reencode
                emb = enc.predict(ds, verbose=0)
            return np.asarray(_host_array(emb))
        bank = getattr(self.model, "embedding_bank", None)
        if bank is None:
            raise ValueError(
                "GraphRefreshCallback needs `model.embedding_bank` (an [N, d] variable the "
                "model fills in train_step): build the model with `memory_bank_size=N` (the "
                "dataset size), e.g. khn.models.SimCLR(..., memory_bank_size=len(x_train)), "
                "or pass `reencode=` to re-encode the data explicitly.")
        return _host_array(bank)

    def _graph_settings(self):
        m = self.num_candidates or getattr(self.sampler, "num_candidates", None) or 1000
        k = self.num_neighbors or self.sampler.neighbors.shape[1]
        seed = None if self.seed is None else int(self.seed) + len(self.refreshes)
        return m, k, seed

    def _check_rows(self, emb):
        if emb.shape[0] != self.sampler.num_nodes:
            raise ValueError(f"embeddings have {emb.shape[0]} rows, the sampler has "
                             f"{self.sampler.num_nodes} nodes (memory_bank_size must be N).")

    def rebuild(self, embeddings=None):
        """Rebuild the graph now (synchronously) from ``embeddings`` ``[N, d]`` (default:
        the bank, or ``reencode``) and hand it to the sampler."""
        t0 = time.perf_counter()
        fresh = embeddings is not None
        emb = np.asarray(_host_array(embeddings)) if fresh else self._embeddings()
        self._check_rows(emb)
        m, k, seed = self._graph_settings()
        g = ProximityGraph.build(emb, m, k, backend=self.backend, seed=seed)
        self._update(g.neighbors if fresh else self._merge(g.neighbors, emb))
        self.refreshes.append({"step": self._step, "seconds": time.perf_counter() - t0})
        return g

    def _update(self, neighbors):
        self.sampler.update_graph(neighbors)
        if self.agree is not None:
            self.agree("the rebuilt proximity graph (checksum)", graph_checksum(neighbors),
                       hint="The graph build must be deterministic across workers: use the "
                            "exact ('brute') backend and the same data on every worker.")

    def _clock(self, name):
        tick = getattr(self.sampler, name, None)
        if callable(tick):
            tick()

    def _merge(self, new, emb):
        if not self.keep_unseen_rows or self.reencode is not None:
            return new
        old = self.sampler.neighbors
        unseen = ~np.any(emb != 0, axis=1)
        if not unseen.any() or old.shape != new.shape:
            return new
        new = np.array(new, copy=True)
        new[unseen] = old[unseen]
        return new

    def _start_async(self):
        self._finish_async(wait=True)
        emb = np.array(self._embeddings(), copy=True)  # snapshot
        self._check_rows(emb)
        m, k, seed = self._graph_settings()
        step, t0 = self._step, time.perf_counter()
        box = {"emb": emb}

        def work():
            try:
                box["graph"] = ProximityGraph.build(emb, m, k, backend=self.backend, seed=seed)
            except Exception as e:  # re-raised in the training thread
                box["error"] = e
            box["seconds"] = time.perf_counter() - t0

        self._pending = (box, step)
        # reserve the seed index now so seeds stay deterministic
        self.refreshes.append(None)
        self._thread = threading.Thread(target=work, daemon=True)
        self._thread.start()

    def _finish_async(self, wait):
        if self._thread is None:
            return
        if not wait and self._thread.is_alive():
            return
        self._thread.join()
        box, step = self._pending
        self._thread, self._pending = None, None
        if "error" in box:
            raise box["error"]
        self._update(self._merge(box["graph"].neighbors, box["emb"]))
        i = self.refreshes.index(None)
        self.refreshes[i] = {"step": step, "seconds": box["seconds"],
                             "applied_at_step": self._step}

    def _set_alpha(self):
        schedule = self.restart_prob_schedule
        if schedule == "sampler":
            schedule = getattr(self.sampler, "restart_prob_schedule", None)
        if schedule is None:
            return
        a0, a1 = schedule
        self.sampler.set_restart_prob(
            linear_restart_prob(self._step, self._total or 1, a0, a1))

    # -------------------------------------------------------------- callbacks
    def on_train_begin(self, logs=None):
        if self.sampler is None:
            raise ValueError("GraphRefreshCallback has no `sampler`.")
        if self.reencode is None and getattr(self.model, "embedding_bank", None) is None:
            self._embeddings()  # raises the explanatory error
        params = self.params or {}
        steps = params.get("steps") or getattr(self.sampler, "steps_per_epoch", None)
        epochs = params.get("epochs") or 1
        self._total = int(epochs) * int(steps) if steps else None
        self._step = 0
        self._set_alpha()
        if self.reencode_on_train_begin is not None:
            self.rebuild(self.reencode_on_train_begin(self.model))
        elif self.rebuild_on_train_begin:
            self.rebuild()
        self._clock("start_clock")

    def on_train_batch_end(self, batch, logs=None):
        self._step += 1
        if self.asynchronous and not callable(getattr(self.sampler, "step_done", None)):
            self._finish_async(wait=False)
        if self._step % self.every_n_steps == 0:
            if self.asynchronous:
                self._start_async()
            else:
                self.rebuild()
        self._set_alpha()
        self._clock("step_done")

    def on_train_end(self, logs=None):
        self._finish_async(wait=True)
        self._clock("stop_clock")

    def get_state(self):
        """Resume state: the step counter (position in the ``restart_prob``
        schedule) and the number of refreshes so far (seed of the next build)."""
        return {"step": int(self._step), "refreshes": len(self.refreshes)}

    def set_state(self, state):
        """Restores :meth:`get_state` (call after ``on_train_begin``)."""
        self._step = int(state["step"])
        self.refreshes = [{"step": None, "seconds": None, "restored": True}] * int(
            state["refreshes"])

    def get_config(self):
        return {"every_n_steps": self.every_n_steps,
                "restart_prob_schedule": self.restart_prob_schedule,
                "num_candidates": self.num_candidates, "num_neighbors": self.num_neighbors,
                "backend": self.backend, "seed": self.seed,
                "rebuild_on_train_begin": self.rebuild_on_train_begin,
                "keep_unseen_rows": self.keep_unseen_rows, "asynchronous": self.asynchronous}

    @classmethod
    def from_config(cls, config, sampler=None):
        return cls(sampler=sampler, **config)


def graph_checksum(neighbors) -> int:
    """A checksum of a neighbour array in ``[0, 2**26)`` (small enough for an exact float64
    sum of squares across workers): equal graphs give equal checksums."""
    nb = np.ascontiguousarray(np.asarray(neighbors, dtype=np.int64))
    return zlib.crc32(nb.tobytes(), zlib.crc32(repr(nb.shape).encode())) & ((1 << 26) - 1)


def _host_array(value):
    """``value`` (a Keras variable or tensor) as a NumPy array holding every row: under JAX
    multi-process training an array not fully addressable here is gathered from all
    processes first (a collective: every process refreshes at the same step)."""
    if keras.backend.backend() == "jax":
        import jax

        arr = getattr(value, "value", value)
        if isinstance(arr, jax.Array) and not (arr.is_fully_addressable
                                               or arr.is_fully_replicated):
            from jax.experimental import multihost_utils

            return np.asarray(multihost_utils.process_allgather(arr, tiled=True))
    return keras.ops.convert_to_numpy(value)
