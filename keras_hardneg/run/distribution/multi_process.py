"""JAX multi-process training: ``jax.distributed`` + ``keras.distribution.DataParallel``.

Registered as ``"jax_multi_process"`` in :data:`keras_hardneg.registry.DISTRIBUTIONS`.
Every process runs the same program (same recipe, same seed). Building the entry

1. makes sure JAX's CPU client gets cross-process collectives (``gloo`` over TCP; the
   default of jax >= 0.5, set explicitly for older versions; GPUs and TPUs bring their own
   collectives -- NCCL, ICI -- and ignore this option);
2. calls ``jax.distributed.initialize(coordinator_address, num_processes, process_id)``
   (keys not given are left to JAX's own cluster detection: SLURM, Open MPI, Cloud TPU,
   Kubernetes ...); this must happen before the process runs any JAX computation;
3. makes every process agree on one random seed when none was set yet (so that each
   process initialises the same weights: a replicated variable is initialised
   independently in each process), as ``keras.distribution.initialize`` does;
4. builds ``keras.distribution.DataParallel`` over the devices of *all* processes, ordered
   by process, with ``auto_shard_dataset=False``.

Data convention (that of :mod:`keras_hardneg.run.distribution`): every process draws the
same global batches and feeds ``fit`` only its contiguous block of rows,
``place.local_rows(global_batch)``. Keras's JAX trainer turns each process's block into one
global array with ``jax.make_array_from_process_local_data`` (the batch axis sharded over
the mesh; process ``p`` owns block ``p`` because the mesh is ordered by process), and jits
one step over that global array: the forward pass, the loss -- hence the in-batch
negatives -- and batch norm's statistics see the global batch, and XLA inserts the
all-reduce of the gradients. :func:`keras_hardneg.distribute.gather` stays the identity.

Reference: JAX, "Multi-process environments"
(https://docs.jax.dev/en/latest/multi_process.html); Keras, ``keras.distribution``
("Distributed training with Keras 3", https://keras.io/guides/distribution/).

Example (two processes on one machine; run the same script twice, with ``ID`` 0 and 1)::

    dist = build_distribution({"name": "jax_multi_process",
                               "coordinator_address": "127.0.0.1:12345",
                               "num_processes": 2, "process_id": ID})
    rows = dist.place.local_rows(256)          # this process's block of each global batch
    with dist.scope():
        model = ...; model.compile(...)
        model.fit(local_views, batch_size=rows.stop - rows.start, shuffle=False)
"""

from __future__ import annotations

from typing import Any, ContextManager

import keras

from keras_hardneg.registry import DISTRIBUTIONS, ConfigError, Param
from keras_hardneg.run.distribution.base import Distribution, WorkerPlace

__all__ = ["JaxMultiProcess"]

_COLLECTIVES = ("gloo", "mpi")


def _check(config: dict[str, Any]) -> str | None:
    num, pid = config["num_processes"], config["process_id"]
    if (num is None) != (pid is None):
        return "'num_processes' and 'process_id' are given together or not at all"
    if num is not None and not 0 <= pid < num:
        return f"'process_id' must be in [0, 'num_processes') = [0, {num}); got {pid}"
    if config["coordinator_address"] is not None and ":" not in config["coordinator_address"]:
        return ("'coordinator_address' must be 'host:port' (the address of process 0); got "
                f"{config['coordinator_address']!r}")
    return None


def _set_cpu_collectives(implementation: str) -> None:
    import jax

    try:
        current = jax.config.jax_cpu_collectives_implementation
    except AttributeError:  # jax < 0.4.34: a boolean flag for gloo
        if implementation == "gloo":
            jax.config.update("jax_cpu_enable_gloo_collectives", True)
        return
    if current != implementation:
        jax.config.update("jax_cpu_collectives_implementation", implementation)


def _agree_on_seed() -> None:
    """Sets one global seed in every process when none is set (process 0's draw)."""
    import numpy as np
    from jax.experimental import multihost_utils

    try:  # Keras keeps the seed it was given; reading it has no public API.
        from keras.src.utils.rng_utils import get_random_seed
        if get_random_seed() is not None:
            return
    except ImportError:
        pass
    draw = np.random.SeedSequence().generate_state(1)[0] % (2 ** 31)
    seed = int(multihost_utils.broadcast_one_to_all(np.int32(draw)))
    keras.utils.set_random_seed(seed)


@DISTRIBUTIONS.register(
    "jax_multi_process",
    params={
        "coordinator_address": Param(str, help="'host:port' of process 0 (default: JAX "
                                                "detects the cluster)"),
        "num_processes": Param(int, low=1, help="how many processes (default: detected)"),
        "process_id": Param(int, low=0, help="this process's index, 0 = chief "
                                             "(default: detected)"),
        "initialization_timeout": Param(int, low=1, help="seconds to wait for every process "
                                                         "to join"),
        "cpu_collectives": Param(str, choices=_COLLECTIVES,
                                 help="cross-process collectives of JAX's CPU backend"),
    },
    check=_check,
    help="JAX: jax.distributed over several processes/hosts, keras.distribution.DataParallel "
         "over all their devices (KERAS_BACKEND=jax)")
class JaxMultiProcess(Distribution):
    """Several JAX processes training one model on the global batch (module docstring).

    Args:
        coordinator_address: ``"host:port"`` where process 0 serves the coordination
            service (every process passes the same address). ``None``: JAX's detection.
        num_processes: how many processes take part. ``None``: detected.
        process_id: this process's index in ``[0, num_processes)``; 0 is the chief.
        initialization_timeout: seconds ``jax.distributed.initialize`` waits for all
            processes before it fails (a worker that never starts fails the others).
        cpu_collectives: ``"gloo"`` (TCP, no extra software) or ``"mpi"`` (needs an MPI
            library) for cross-process collectives between CPU devices.

    Raises:
        ConfigError: when the Keras backend is not JAX, the keys are inconsistent, JAX
            cannot find the cluster, or JAX already ran a computation in this process.
    """

    name = "jax_multi_process"

    def __init__(self, coordinator_address: str | None = None,
                 num_processes: int | None = None, process_id: int | None = None,
                 initialization_timeout: int = 300, cpu_collectives: str = "gloo"):
        backend = keras.backend.backend()
        if backend != "jax":
            raise ConfigError(f"distribution 'jax_multi_process' needs the JAX backend "
                              f"(KERAS_BACKEND=jax); the Keras backend is {backend!r}. On "
                              "TensorFlow use the TensorFlow multi-worker distribution.")
        problem = _check({"coordinator_address": coordinator_address,
                          "num_processes": num_processes, "process_id": process_id})
        if problem:
            raise ConfigError(f"distribution 'jax_multi_process': {problem}.")
        import jax

        if not jax.distributed.is_initialized():
            _set_cpu_collectives(cpu_collectives)
            try:
                jax.distributed.initialize(coordinator_address=coordinator_address,
                                           num_processes=num_processes,
                                           process_id=process_id,
                                           initialization_timeout=initialization_timeout)
            except (ValueError, RuntimeError) as err:
                raise ConfigError(
                    "distribution 'jax_multi_process': jax.distributed.initialize failed "
                    f"({err}). Give 'coordinator_address', 'num_processes' and 'process_id', "
                    "or run under a cluster JAX detects (SLURM, Open MPI, Cloud TPU); build "
                    "the distribution before anything runs a JAX computation.") from err
            _agree_on_seed()
        devices = sorted(jax.devices(), key=lambda d: (d.process_index, d.id))
        self.devices = devices
        self.keras_distribution = keras.distribution.DataParallel(devices=devices,
                                                                  auto_shard_dataset=False)
        super().__init__(WorkerPlace(jax.process_count(), jax.process_index()))

    def scope(self) -> ContextManager[Any]:
        """``keras.distribution.DataParallel``'s scope: build, compile and fit inside it."""
        return self.keras_distribution.scope()

    def same_on_every_worker(self, what: str, value: int, hint: str = "") -> None:
        """Raises (on every process) unless ``value`` is the same in all processes (one
        ``multihost_utils.process_allgather``)."""
        import numpy as np
        from jax.experimental import multihost_utils

        values = np.asarray(multihost_utils.process_allgather(np.int64(value))).ravel()
        if np.any(values != values[0]):
            raise ConfigError(
                f"the processes disagree on {what} (per process: {values.tolist()}). "
                f"{hint}".rstrip())

    def describe(self) -> str:
        return (f"{self.name} ({self.place.num_workers} process(es), "
                f"{len(self.devices)} device(s))")
