"""TensorFlow multi-worker training: ``tf.distribute.MultiWorkerMirroredStrategy``.

Registered as ``"tf_multi_worker"`` in :data:`keras_hardneg.registry.DISTRIBUTIONS`. Every
worker runs the same program (same recipe, same seed); the cluster comes from the
``TF_CONFIG`` environment variable (TensorFlow's convention:
``{"cluster": {"worker": ["host:port", ...]}, "task": {"type": "worker", "index": i}}``,
optionally with a ``"chief"`` job) or from the ``workers`` and ``task_index`` keys.

Data convention (that of :mod:`keras_hardneg.run.distribution`): every worker draws the
same global batches and feeds only its contiguous block of rows,
``place.local_rows(global_batch)``. :meth:`TFMultiWorker.distribute_dataset` hands that
block to Keras as a ``tf.distribute`` dataset made with
``strategy.distribute_datasets_from_function``: no auto-sharding and no re-batching by
TensorFlow, so replica ``r`` (workers in cluster order, worker 0 = the chief) holds block
``r`` of the global batch. Inside the step, :func:`keras_hardneg.distribute.gather`
(``ReplicaContext.all_gather``) concatenates the blocks of all replicas of all workers in
replica order: the loss -- and its in-batch negatives -- sees the global batch, and the
gradients (summed over replicas by the strategy) are those of one process on that batch.

Keras 3's TF trainer needs two fixes under this strategy; they live with the train step
(:func:`keras_hardneg.models.steps.tf_prebuild_across_workers` and
:func:`~keras_hardneg.models.steps.tf_step_logs`, see ``docs/notes/multi_worker.md``), so
the library's own models train with ``fit`` (plain Keras models still hit the upstream
bug: keras-team/keras#20585).

Reference: TensorFlow, "Multi-worker training with Keras"
(https://www.tensorflow.org/tutorials/distribute/multi_worker_with_keras) and
``tf.distribute.MultiWorkerMirroredStrategy``.

Example (two workers on one machine; run the same script twice, with ``I`` 0 and 1)::

    dist = build_distribution({"name": "tf_multi_worker",
                               "workers": "localhost:12345,localhost:12346", "task_index": I})
    with dist.scope():
        model = ...; model.compile(...)
        model.fit(dist.distribute_dataset(local_batches), steps_per_epoch=...)

or simply ``keras_hardneg.run.train(recipe, out, distribution=dist)`` in each worker.
"""

from __future__ import annotations

import json
import os
from typing import Any, ContextManager

import keras

from keras_hardneg.registry import DISTRIBUTIONS, ConfigError, Param
from keras_hardneg.run.distribution.base import Distribution, WorkerPlace

__all__ = ["TFMultiWorker", "cluster_from_tf_config"]

_COMMUNICATION = ("auto", "ring", "nccl")


def cluster_from_tf_config(tf_config: str | None = None) -> tuple[dict[str, list], str, int]:
    """``(cluster, task_type, task_index)`` read from ``TF_CONFIG`` (or the given JSON)."""
    text = os.environ.get("TF_CONFIG", "") if tf_config is None else tf_config
    if not text:
        raise ConfigError(
            "distribution 'tf_multi_worker' needs the cluster: set TF_CONFIG (e.g. "
            '{"cluster": {"worker": ["host1:port", "host2:port"]}, '
            '"task": {"type": "worker", "index": 0}}) or give the keys \'workers\' '
            "('host:port,host:port') and 'task_index'.")
    try:
        config = json.loads(text)
        cluster, task = dict(config["cluster"]), dict(config["task"])
        return cluster, str(task["type"]), int(task["index"])
    except (ValueError, KeyError, TypeError) as err:
        raise ConfigError(f"TF_CONFIG must be JSON with 'cluster' and 'task' "
                          f"({{'type', 'index'}}); got {text!r} ({err}).") from err


def _place(cluster: dict[str, list], task_type: str, task_index: int) -> WorkerPlace:
    """Where this task sits among the training tasks: the ``chief`` job first (if any),
    then ``worker`` -- the order in which the strategy numbers replicas."""
    tasks = [("chief", i) for i in range(len(cluster.get("chief", [])))]
    tasks += [("worker", i) for i in range(len(cluster.get("worker", [])))]
    if (task_type, task_index) not in tasks:
        raise ConfigError(f"distribution 'tf_multi_worker': this task ({task_type!r}, "
                          f"{task_index}) is not a training task of the cluster "
                          f"{cluster} (only 'chief' and 'worker' tasks train).")
    return WorkerPlace(len(tasks), tasks.index((task_type, task_index)))


def _check(config: dict[str, Any]) -> str | None:
    workers, index = config["workers"], config["task_index"]
    if (workers is None) != (index is None):
        return "'workers' and 'task_index' are given together or not at all"
    if workers is not None:
        addresses = [a.strip() for a in workers.split(",")]
        if any(":" not in a for a in addresses):
            return f"'workers' must be 'host:port,host:port,...'; got {workers!r}"
        if not 0 <= index < len(addresses):
            return f"'task_index' must be in [0, {len(addresses)}); got {index}"
    return None


@DISTRIBUTIONS.register(
    "tf_multi_worker",
    params={
        "workers": Param(str, help="'host:port,host:port,...' of every worker, chief first "
                                   "(default: TF_CONFIG)"),
        "task_index": Param(int, low=0, help="this worker's index in 'workers', 0 = chief "
                                             "(default: TF_CONFIG)"),
        "communication": Param(str, choices=_COMMUNICATION,
                               help="collective implementation: auto, ring (gRPC) or nccl "
                                    "(GPUs)"),
    },
    check=_check,
    help="TensorFlow: MultiWorkerMirroredStrategy over several processes/hosts (TF_CONFIG), "
         "one model trained on the global batch (KERAS_BACKEND=tensorflow)")
class TFMultiWorker(Distribution):
    """Several TensorFlow workers training one model on the global batch (module docstring).

    Args:
        workers: ``"host:port,host:port"`` of all workers, chief (index 0) first.
            ``None``: the cluster of ``TF_CONFIG``.
        task_index: this worker's index in ``workers``. ``None``: ``TF_CONFIG``'s task.
        communication: ``"auto"``, ``"ring"`` (gRPC, any device) or ``"nccl"`` (GPUs).

    Attributes:
        strategy: the ``tf.distribute.MultiWorkerMirroredStrategy``.

    Raises:
        ConfigError: when the Keras backend is not TensorFlow, the cluster is missing or
            inconsistent, or TensorFlow already ran an operation in this process (the
            strategy must be created first: build the distribution before anything else).
    """

    name = "tf_multi_worker"

    def __init__(self, workers: str | None = None, task_index: int | None = None,
                 communication: str = "auto"):
        backend = keras.backend.backend()
        if backend != "tensorflow":
            raise ConfigError(f"distribution 'tf_multi_worker' needs the TensorFlow backend "
                              f"(KERAS_BACKEND=tensorflow); the Keras backend is {backend!r}. "
                              "On JAX use 'jax_multi_process'.")
        problem = _check({"workers": workers, "task_index": task_index})
        if problem:
            raise ConfigError(f"distribution 'tf_multi_worker': {problem}.")
        import tensorflow as tf

        if workers is not None:
            cluster = {"worker": [a.strip() for a in workers.split(",")]}
            task_type, index = "worker", int(task_index)
        else:
            cluster, task_type, index = cluster_from_tf_config()
        place = _place(cluster, task_type, index)
        resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
            tf.train.ClusterSpec(cluster), task_type=task_type, task_id=index,
            rpc_layer="grpc")
        options = tf.distribute.experimental.CommunicationOptions(
            implementation=getattr(tf.distribute.experimental.CommunicationImplementation,
                                   communication.upper()))
        try:
            self.strategy = tf.distribute.MultiWorkerMirroredStrategy(
                cluster_resolver=resolver, communication_options=options)
        except RuntimeError as err:
            raise ConfigError(
                "distribution 'tf_multi_worker': TensorFlow could not start the "
                f"multi-worker strategy ({err}). Build the distribution before the process "
                "runs any TensorFlow operation (keras_hardneg.run.train does it first).") from err
        super().__init__(place)

    def scope(self) -> ContextManager[Any]:
        """The strategy's scope: build, compile and fit inside it."""
        return self.strategy.scope()

    @property
    def local_replicas(self) -> int:
        """Replicas (devices) in this worker."""
        return len(self.strategy.extended.worker_devices)

    def distribute_dataset(self, dataset: Any) -> Any:
        """This worker's ``tf.data`` feed (its block of every global batch) as the
        ``tf.distribute`` dataset ``fit`` takes: one pipeline per worker, no sharding; with
        several devices in the worker the block is cut into one consecutive piece per
        device (replica order = row order)."""
        import tensorflow as tf

        local = self.local_replicas
        if local > 1:
            spec = tf.nest.flatten(dataset.element_spec)[0]
            rows = spec.shape[0]
            if rows is None or rows % local:
                raise ConfigError(f"each worker's block of the global batch ({rows} rows) "
                                  f"must divide among its {local} devices.")
            dataset = dataset.rebatch(rows // local, drop_remainder=True)
        return self.strategy.distribute_datasets_from_function(lambda context: dataset)

    def same_on_every_worker(self, what: str, value: int, hint: str = "") -> None:
        """Raises (on every worker) unless ``value`` is the same on all workers: one
        all-reduce (sum) of ``value`` and ``value**2``; they agree iff the variance is 0,
        ``n * sum(v**2) == sum(v)**2`` (``tf.distribute`` reduces only by SUM or MEAN)."""
        import tensorflow as tf

        v = tf.constant([int(value), int(value) ** 2], tf.float64)
        total, squares = self.strategy.reduce("SUM", v, axis=None).numpy()
        n = self.place.num_workers
        if n * squares != total * total:
            raise ConfigError(
                f"the workers disagree on {what} (their mean: {total / n:g}; this worker: "
                f"{value}). {hint}".rstrip())

    def describe(self) -> str:
        return (f"{self.name} ({self.place.num_workers} worker(s), "
                f"{self.strategy.num_replicas_in_sync} replica(s))")
