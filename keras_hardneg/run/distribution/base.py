"""How a run spreads over devices and processes: one registered entry per way.

A *distribution* tells the run layer (:func:`keras_hardneg.run.train`) three things:

* where this process sits among the workers (:class:`WorkerPlace`: how many workers, this
  one's index; worker 0 is the chief, the only one that writes results and exports);
* the scope in which the model is built and trained (:meth:`Distribution.scope`: a
  ``tf.distribute`` strategy's scope on TensorFlow, a ``keras.distribution`` on JAX);
* nothing about the data: every worker draws the same *global* batches (same recipe, same
  seed, same sampler walk) and feeds only its own contiguous block of rows
  (:meth:`WorkerPlace.local_rows`), so the global batch -- and the in-batch negatives the
  loss sees after the cross-replica gather -- is the one a single process would train on.

Entries live in :data:`keras_hardneg.registry.DISTRIBUTIONS`; adding a way of
distributing is one registration. ``"single"`` (this module) is one process, the default.

Example:
>>> dist = DISTRIBUTIONS.build("single")
>>> dist.place, dist.place.is_chief, dist.place.local_rows(8)
(WorkerPlace(num_workers=1, index=0), True, slice(0, 8, None))
>>> with dist.scope():
...     pass
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, ContextManager

from keras_hardneg.registry import DISTRIBUTIONS, ConfigError

__all__ = ["WorkerPlace", "Distribution", "SingleProcess", "build_distribution"]


@dataclasses.dataclass(frozen=True)
class WorkerPlace:
    """This process's place among ``num_workers`` workers (``index`` 0 is the chief)."""

    num_workers: int = 1
    index: int = 0

    def __post_init__(self):
        if int(self.num_workers) < 1:
            raise ConfigError(f"`num_workers` must be >= 1; got {self.num_workers!r}.")
        if not 0 <= int(self.index) < int(self.num_workers):
            raise ConfigError(f"worker `index` must be in [0, {self.num_workers}); "
                              f"got {self.index!r}.")

    @property
    def is_chief(self) -> bool:
        """Whether this worker writes results, backups that count, and exports."""
        return self.index == 0

    def local_rows(self, global_batch: int) -> slice:
        """This worker's contiguous block of a global batch of ``global_batch`` rows."""
        if global_batch % self.num_workers:
            raise ConfigError(f"recipe key 'batch_size' = {global_batch} must be divisible by "
                              f"the number of workers ({self.num_workers}).")
        per = global_batch // self.num_workers
        return slice(self.index * per, (self.index + 1) * per)


class Distribution:
    """What the run layer asks of a way of distributing (see the module docstring)."""

    #: the registered name.
    name = "single"

    def __init__(self, place: WorkerPlace | None = None):
        self.place = place or WorkerPlace()

    def scope(self) -> ContextManager[Any]:
        """Build the model and call ``fit`` inside this."""
        return contextlib.nullcontext()

    def distribute_dataset(self, dataset: Any) -> Any:
        """What ``fit`` is handed for this worker's feed (its block of every global batch);
        the feed itself here. A ``tf.distribute`` entry wraps it in the strategy's
        distributed dataset."""
        return dataset

    def same_on_every_worker(self, what: str, value: int, hint: str = "") -> None:
        """Raises (:class:`~keras_hardneg.registry.ConfigError` naming ``what``, then
        ``hint``) on every worker unless ``value`` (e.g. the epoch a run resumes from) is
        the same on all of them; nothing to check with one worker."""

    def describe(self) -> str:
        """One line for logs and model cards."""
        return f"{self.name} ({self.place.num_workers} worker(s))"


@DISTRIBUTIONS.register("single", help="one process (its devices as Keras finds them)")
class SingleProcess(Distribution):
    """One process: no strategy, no distribution."""

    name = "single"


def build_distribution(spec: Any = None) -> Distribution:
    """A :class:`Distribution` from ``None`` (single), a registered name, a dict
    ``{"name": ..., <keys>}`` or a :class:`Distribution` (returned as is)."""
    if spec is None:
        return SingleProcess()
    if isinstance(spec, Distribution):
        return spec
    if isinstance(spec, str):
        spec = {"name": spec}
    if not isinstance(spec, dict) or "name" not in spec:
        raise ConfigError("`distribution` must be a registered name, a dict with 'name', or "
                          f"a Distribution; got {spec!r}. Registered: {DISTRIBUTIONS.names()}.")
    config = {k: v for k, v in spec.items() if k != "name"}
    return DISTRIBUTIONS.build(spec["name"], **config)
