"""What the contrastive frameworks share: inputs and views, heads, the update step.

The frameworks (SimCLR, Chen et al. 2020, "A Simple Framework for Contrastive Learning
of Visual Representations"; MoCo, He et al. 2020 and its v2/v3) differ only in how a
step turns two views into a loss. Everything around that lives here or in the
concern's own module:

* views: :mod:`keras_hardneg.augment.views` (a view maker per modality);
* the embedding bank: :mod:`keras_hardneg.models.memory_bank`;
* the metrics: :mod:`keras_hardneg.models.metrics`;
* health, guarded state and :class:`~keras_hardneg.models.health.NonFiniteGuard`:
  :mod:`keras_hardneg.models.health`;
* cross-replica gathering: :mod:`keras_hardneg.distribute`;
* the per-backend train and test steps: :mod:`keras_hardneg.models.steps`.

The step is described once, backend-agnostic (``keras.ops`` and ``variable.assign``):
:meth:`ContrastiveModel.step_inputs`, :meth:`~ContrastiveModel.prepare_step`,
:meth:`~ContrastiveModel.forward` (subclasses implement
``contrastive_forward(view1, view2, labels, training)``),
:meth:`~ContrastiveModel.after_update` and :meth:`~ContrastiveModel.record_metrics`;
:mod:`.steps` runs it under TensorFlow (``GradientTape``) or JAX (stateless, jitted).
Subclasses say which networks they have through :meth:`ContrastiveModel.query_layers`
and :meth:`ContrastiveModel.guarded_layers`.
"""

from __future__ import annotations

import warnings
from typing import Any, Sequence

import keras
from keras import ops

from keras_hardneg import distribute
from keras_hardneg import losses as losses_lib
from keras_hardneg.losses import core
from keras_hardneg.augment.views import ViewMaker, as_view_maker
from keras_hardneg.encoders import projection_head
from keras_hardneg.encoders.heads import DENSE_INITS, HEAD_VERSIONS
from keras_hardneg.models.health import HEALTH_FIELDS, GuardedState, NonFiniteGuard, health_values
from keras_hardneg.models.memory_bank import EmbeddingBank, check_bank_size
from keras_hardneg.models import steps
from keras_hardneg.models.metrics import ContrastiveMetrics

__all__ = ["ContrastiveModel", "HEALTH_FIELDS", "DroppedBatchWarning"]

#: The key under which ``fit(x, sample_weight=w)`` without labels carries ``w`` in the place
#: of the labels (Keras's ``pack_x_y_sample_weight`` drops the weights when ``y`` is None).
_WEIGHTS_KEY = "keras_hardneg_sample_weight"


def _carry_sample_weight(args: tuple, kwargs: dict) -> tuple:
    """``fit``/``evaluate``'s arguments with ``sample_weight`` given without ``y`` moved into
    ``y`` as ``{_WEIGHTS_KEY: w}`` (:meth:`ContrastiveModel.unpack` takes it out again)."""
    args, kwargs = list(args), dict(kwargs)
    y = args[1] if len(args) > 1 else kwargs.get("y")
    if y is not None or kwargs.get("sample_weight") is None:
        return tuple(args), kwargs
    carrier = {_WEIGHTS_KEY: kwargs.pop("sample_weight")}
    if len(args) > 1:
        args[1] = carrier
    else:
        kwargs["y"] = carrier
    return tuple(args), kwargs


def _has_negatives(num_negatives: Any) -> Any:
    """Whether a step's pairs have negatives: True/False when ``num_negatives`` is a Python
    int (or absent: True), else a scalar bool tensor."""
    if num_negatives is None:
        return True
    if isinstance(num_negatives, int):
        return num_negatives > 0
    return ops.greater(num_negatives, 0)


class DroppedBatchWarning(keras.callbacks.Callback):
    """Warns once per ``fit`` when batches were dropped for having no negative (the
    ``dropped_batches`` metric: e.g. the final batch of one example that ``fit`` keeps when
    ``len(x) % batch_size == 1``). ``ContrastiveModel.fit`` adds it."""

    def on_train_begin(self, logs=None):
        self.warned = False

    def on_epoch_end(self, epoch, logs=None):
        dropped = float((logs or {}).get("dropped_batches", 0.0) or 0.0)
        if dropped > 0 and not getattr(self, "warned", False):
            self.warned = True
            warnings.warn(
                f"{type(self.model).__name__}.fit dropped {dropped:g} batch(es) of epoch "
                f"{epoch + 1} that had no negative (e.g. a final batch of one example: the "
                "data's size modulo batch_size is 1); they were not trained on. Choose a "
                "batch_size that leaves no such batch, or drop the remainder. This warning "
                "is given once per fit; the count is the `dropped_batches` metric.",
                UserWarning, stacklevel=2)


def _feature_dim(encoder):
    shape = getattr(encoder, "output_shape", None)
    if shape is not None and shape[-1] is not None:
        return int(shape[-1])
    raise ValueError(
        "`encoder` must be a built keras.Model with a known output shape [batch, features]; "
        f"got {encoder!r}."
    )


#: The keys that make a dict a *views container* (``make_views``): views made elsewhere
#: (``"view1"``/``"view2"``) or a raw batch under ``"images"``. Any other dict (a graph
#: batch, the inputs of a multi-input encoder) is a raw batch itself.
VIEW_KEYS = ("view1", "view2", "images")


def _is_views_container(x: Any) -> bool:
    return isinstance(x, dict) and any(key in x for key in VIEW_KEYS)


def concat_batches(a: Any, b: Any) -> Any:
    """``a`` and ``b`` joined along the batch axis, leaf by leaf: tensors ``[B, ...]``, or
    equal structures (e.g. dicts) of them, as an encoder with several inputs takes."""
    return keras.tree.map_structure(lambda u, v: ops.concatenate([u, v], axis=0), a, b)


def _check_projection_dims(projection_dims):
    try:
        if isinstance(projection_dims, str):
            raise TypeError
        dims = [int(d) for d in projection_dims]
    except (TypeError, ValueError):
        raise ValueError(
            "`projection_dims` must be a sequence (hidden..., output) of positive ints, "
            f"e.g. (512, 128); got {projection_dims!r}."
        ) from None
    if len(dims) < 2 or min(dims) < 1:
        raise ValueError(
            "`projection_dims` must have at least 2 positive ints (hidden..., output), "
            f"e.g. (512, 128); got {projection_dims!r}."
        )
    return tuple(dims)


class ContrastiveModel(keras.Model):
    """Base of :class:`SimCLR`, :class:`MoCoV2` and :class:`MoCoV3` (not used directly).

    Dataset elements for ``fit``: ``x`` or ``(x, labels)`` where ``x`` is a raw
    batch (images ``[B, H, W, 3]`` in ``[0, 1]`` for the image view maker, or any dict of
    tensors the view maker and the encoder take as is, e.g. a graph batch; two views are
    drawn by ``view_maker``), or a *views container*: a dict with ``"view1"`` and
    ``"view2"`` (views made elsewhere, no augmentation; each may be a dict of tensors) or
    ``"images"`` (a raw batch), optionally with ``"index"`` (``[B]`` dataset positions,
    from :mod:`keras_hardneg.sampling`). A dict is a views container only when it has one
    of these keys (:data:`VIEW_KEYS`). Labels never enter the loss; they feed the
    ``false_negative_rate`` metric.

    Attributes:
        augmentation: the ``augmentation`` argument as given (a layer, a
            :class:`~keras_hardneg.augment.ViewMaker`, or None).
        view_maker: the :class:`~keras_hardneg.augment.ViewMaker` that draws the views
            (an augmentation layer is wrapped in :class:`~keras_hardneg.augment.ImageViews`).
        embedding_bank: ``[memory_bank_size, d]`` projections (None without a bank).
        health: ``[len(HEALTH_FIELDS)]`` record of the last training step.
    """

    def __init__(self, encoder: keras.Model, projection_dims: Sequence[int] = (512, 128),
                 head_version: str = "simclr_v1", augmentation: Any = None,
                 gather_across_replicas: bool = True, memory_bank_size: int | None = None,
                 sync_batchnorm: bool | None = None, head_init: str = "glorot_uniform",
                 **kwargs: Any):
        super().__init__(**kwargs)
        if not isinstance(encoder, keras.Model):
            raise ValueError(f"`encoder` must be a keras.Model; got {type(encoder).__name__}.")
        self.encoder = encoder
        self.projection_dims = _check_projection_dims(projection_dims)
        self.feature_dim = _feature_dim(encoder)
        if sync_batchnorm is None:
            sync_batchnorm = distribute.num_replicas() > 1
        self.sync_batchnorm = bool(sync_batchnorm)
        if head_version not in HEAD_VERSIONS:
            raise ValueError(f"`head_version` must be one of {list(HEAD_VERSIONS)}; "
                             f"got {head_version!r}.")
        self.head_version = head_version
        if head_init not in DENSE_INITS:
            raise ValueError(f"`head_init` must be one of {list(DENSE_INITS)}; "
                             f"got {head_init!r}.")
        self.head_init = head_init
        self.projector = self.make_projector()
        self.augmentation = augmentation
        self.view_maker: ViewMaker | None = as_view_maker(augmentation)
        self.gather_across_replicas = bool(gather_across_replicas)
        # Weights are created in this order (bank, health, then the subclass's): the
        # order of a saved file's own variables.
        self.memory_bank_size = check_bank_size(memory_bank_size)
        self._bank = None if self.memory_bank_size is None else EmbeddingBank(
            self, self.memory_bank_size, self.projection_dims[-1])
        self._metrics_record = ContrastiveMetrics()
        # What the last step looked like, for NonFiniteGuard's report (HEALTH_FIELDS).
        self.health = self.add_weight(shape=(len(HEALTH_FIELDS),), initializer="zeros",
                                      trainable=False, name="step_health",
                                      aggregation="only_first_replica")
        self.contrastive_loss = None
        self.nonfinite_guard: bool | NonFiniteGuard = True

    # ------------------------------------------------------------------- hooks
    def make_projector(self) -> keras.layers.Layer:
        """The projection network, built once in ``__init__`` (after ``encoder``,
        ``feature_dim``, ``projection_dims``, ``head_version`` and ``sync_batchnorm`` are
        set): the :func:`~keras_hardneg.encoders.projection_head` of ``head_version``.
        A framework with its own network overrides this."""
        return projection_head(
            self.feature_dim, list(self.projection_dims[:-1]), self.projection_dims[-1],
            version=self.head_version, sync_batchnorm=self.sync_batchnorm,
            dense_init=self.head_init,
        )

    def query_layers(self) -> list:
        """The networks trained by gradient, in order (subclasses add theirs)."""
        return [self.encoder, self.projector]

    def guarded_layers(self) -> list:
        """The networks whose state (batch-norm moving statistics) a training step's
        forward pass changes; it is put back when the step is not finite."""
        return self.query_layers()

    @property
    def embedding_bank(self):
        """``[memory_bank_size, d]`` unit-norm projections by dataset position, or None."""
        return None if self._bank is None else self._bank.variable

    @property
    def uses_features(self) -> bool:
        """Whether the compiled loss needs the heads' features too (UnReMix)."""
        return self.contrastive_loss is not None and self.contrastive_loss.needs_features

    # ------------------------------------------------------------------ compile
    def compile(self, optimizer: Any = "adam", loss: Any = None, metrics: Any = None,
                weighted_metrics: Any = None, jit_compile: Any = "auto",
                nonfinite_guard: Any = True, **kwargs: Any) -> None:
        """Like :meth:`keras.Model.compile`; ``loss`` is any contrastive loss of the
        family (instance, short name or serialized config, default NT-Xent), whose
        ``reduction`` and the data's ``sample_weight`` the training and test steps honour
        (see :class:`~keras_hardneg.losses.ContrastiveLoss`; ``reduction=None`` is refused:
        a step needs one scalar).

        ``metrics`` / ``weighted_metrics`` are refused (``ValueError``): a contrastive step
        has no ``y_pred`` for them; the frameworks show ``loss``, ``positive_cosine``,
        ``negative_cosine``, ``clamp_fraction``, ``false_negative_rate`` and
        ``nonfinite_steps``, and :class:`~keras_hardneg.callbacks.KNNMonitor` measures the
        encoder during ``fit``.

        ``jit_compile`` means what it means in Keras: ``"auto"`` (default) compiles with
        XLA where Keras would (JAX; TensorFlow with an accelerator and no
        ``tf.distribute`` strategy; never on a CPU-only TensorFlow), and not when the
        in-model view maker cannot be compiled (``ViewMaker.jit_compatible`` False: the
        model's ``supports_jit``). ``jit_compile=True`` with such a view maker is refused;
        on TensorFlow it needs views a compiled step can make (the default image
        augmentation can) or views made in the input pipeline (``augmentation=None`` and
        ``{"view1", "view2"}``).

        ``nonfinite_guard``: ``True`` (default) puts a
        :class:`~keras_hardneg.models.health.NonFiniteGuard` first among ``fit``'s
        callbacks (a non-finite loss or gradient stops the run with a report); ``False``
        leaves it out (``fit`` runs on, as Keras's; the step still skips a non-finite update
        and counts it in ``nonfinite_steps``); a ``NonFiniteGuard`` instance is used as
        given (e.g. ``NonFiniteGuard(raise_error=False)``: stop without raising)."""
        for key, value in (("metrics", metrics), ("weighted_metrics", weighted_metrics)):
            if value is not None and (not isinstance(value, (list, tuple, dict)) or value):
                raise ValueError(
                    f"`{key}` is not supported by {type(self).__name__}.compile (a "
                    "contrastive step has no y_pred to score); got "
                    f"{value!r}. fit shows loss, positive_cosine, negative_cosine, "
                    "clamp_fraction, false_negative_rate and nonfinite_steps; to measure the "
                    "encoder during fit, add khn.callbacks.KNNMonitor to the callbacks.")
        if not (isinstance(nonfinite_guard, bool) or isinstance(nonfinite_guard, NonFiniteGuard)):
            raise ValueError("`nonfinite_guard` must be True, False or a NonFiniteGuard "
                             f"instance; got {nonfinite_guard!r}.")
        jittable = self.view_maker is None or self.view_maker.jit_compatible
        if jit_compile is True and not jittable:
            raise ValueError(
                "`jit_compile=True` cannot compile this model's in-model `augmentation` "
                f"({type(self.view_maker).__name__} is not jit-compatible). Use "
                "jit_compile=False or 'auto', or build the model with augmentation=None and "
                "feed {'view1', 'view2'} made in the input pipeline.")
        # Keras's "auto" (Trainer._resolve_auto_jit_compile) asks every layer's supports_jit.
        self.supports_jit = jittable
        loss = losses_lib.get("nt_xent") if loss is None else losses_lib.get(loss)
        if not isinstance(loss, losses_lib.ContrastiveLoss):
            raise ValueError(
                "`loss` must be a keras_hardneg contrastive loss (e.g. "
                f"khn.losses.HardNegativeContrastiveLoss()); got {loss!r}."
            )
        if loss.reduction in (None, "none"):
            raise ValueError(
                f"`loss.reduction` = {loss.reduction!r} gives one loss per anchor, but a "
                "training step needs one scalar; use 'sum_over_batch_size' (default), "
                "'mean', 'sum' or 'mean_with_sample_weight'.")
        # The loss is not handed to Keras: it would try it on (labels, outputs).
        super().compile(optimizer=optimizer, jit_compile=jit_compile, **kwargs)
        self.loss = self.contrastive_loss = loss
        self.nonfinite_guard = nonfinite_guard
        self.optimizer.build(self.trainable_variables)

    def get_compile_config(self) -> dict | None:
        """Keras's compile config with the contrastive loss in it (it is not handed to
        Keras's ``compile``), so a ``.keras`` file reloads compiled with the same loss."""
        config = super().get_compile_config()
        if config is not None and self.contrastive_loss is not None:
            config = dict(config)
            config["loss"] = keras.saving.serialize_keras_object(self.contrastive_loss)
            guard = self.nonfinite_guard
            config["nonfinite_guard"] = (guard if isinstance(guard, bool)
                                         else keras.saving.serialize_keras_object(guard))
        return config

    def compile_from_config(self, config: dict) -> None:
        """Compiles from :meth:`get_compile_config`'s output (what ``load_model`` calls)."""
        self.compile(**keras.saving.deserialize_keras_object(config))

    @property
    def metrics(self) -> list:
        has_clamp = self.contrastive_loss is not None and self.contrastive_loss.has_clamp
        return self._metrics_record.metrics(has_clamp)

    def metric_results(self) -> dict:
        """``{name: value}`` of :attr:`metrics` (what a step returns)."""
        return {m.name: m.result() for m in self.metrics}

    # ------------------------------------------------------------------ inputs
    @staticmethod
    def unpack(data: Any) -> tuple:
        """``(x, labels or None, sample_weight or None)`` from a dataset element: ``x``,
        ``(x,)``, ``(x, labels)`` or ``(x, labels, sample_weight)``, as Keras unpacks
        ``(x, y, sample_weight)``; also the weights :meth:`fit` carries in the labels' place
        when ``sample_weight`` is given without labels."""
        if isinstance(data, list):
            data = tuple(data)
        x, labels, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        if isinstance(labels, dict) and _WEIGHTS_KEY in labels:
            labels, sample_weight = None, labels[_WEIGHTS_KEY]
        return x, labels, sample_weight

    def make_views(self, x: Any, training: bool | None) -> tuple:
        """``(view1, view2, index or None)`` from ``x`` (see the class docstring)."""
        index = None
        if _is_views_container(x):
            index = x.get("index")
            if "view1" in x and "view2" in x:
                return x["view1"], x["view2"], index
            if "images" not in x:
                raise ValueError(
                    "A views container needs both 'view1' and 'view2' (or a raw batch under "
                    f"'images'); got keys {sorted(x)}."
                )
            x = x["images"]
        if self.view_maker is None:
            raise ValueError(
                "This model got a raw batch (images, or a dict of tensors) but has no "
                "`augmentation` to make two views: pass an augmentation (e.g. "
                "khn.augment.simclr_augmentation(image_size=...)) or feed "
                "{'view1': ..., 'view2': ...}."
            )
        view1, view2 = self.view_maker(x, training=training)
        return view1, view2, index

    def call(self, x: Any, training: bool = False):
        """Encoder features ``[B, F]`` of a raw batch (images, or any dict of tensors such
        as a graph batch, given to the encoder as is): the representation downstream tasks
        use. Accepts the training input formats too (a views container: ``"images"``, else
        ``"view1"``)."""
        if _is_views_container(x):
            x = x["images"] if "images" in x else x["view1"]
        return self.encoder(x, training=training)

    # ------------------------------------------------------------ distribution
    def gathered(self, x: Any) -> Any:
        """``x`` from every replica when gathering is on (identity on one device, and on
        JAX, where the step already holds the global batch)."""
        return distribute.gather(x) if self.gather_across_replicas else x

    def replica_offset(self, local_batch: Any) -> Any:
        """Global row index of this replica's first row (0 without gathering)."""
        if not self.gather_across_replicas:
            return 0
        _, replica_id = distribute.replica_info()
        if isinstance(replica_id, int) and replica_id == 0:
            return 0
        return ops.cast(replica_id, "int32") * local_batch

    # ------------------------------------------------------------- bookkeeping
    def update_bank(self, index: Any, z: Any) -> None:
        """Writes unit-norm projections ``z`` at dataset positions ``index``."""
        if self._bank is None or index is None:
            return
        self._bank.write(index, z, gather=self.gathered)

    def record(self, terms: dict, loss_value: Any, pairs: Any = None,
               anchor_labels: Any = None, pool_labels: Any = None) -> None:
        """Updates the metrics from the loss's terms (see :mod:`.metrics`)."""
        self._metrics_record.record(terms, loss_value, pairs, anchor_labels, pool_labels)

    def false_negatives(self, pairs: Any, anchor_labels: Any, pool_labels: Any) -> Any:
        """``(rate, count)`` of same-label negatives in ``pairs`` (the
        ``false_negative_rate`` metric), or None without labels."""
        if anchor_labels is None or pool_labels is None:
            return None
        return core.false_negative_fraction(
            pairs, anchor_labels, pool_labels, return_count=True)

    def record_metrics(self, step: dict) -> None:
        """Updates the metrics from a :meth:`forward` result (a batch without negatives,
        ``step["usable"]`` False, counts in ``dropped_batches`` only)."""
        self._metrics_record.record(step["terms"], step["loss"],
                                    false_negatives=step.get("false_negatives"),
                                    usable=step.get("usable", True))

    def count_step(self, finite: Any) -> None:
        """Counts a skipped (non-finite) update in ``nonfinite_steps``."""
        self._metrics_record.count_step(finite)

    def record_health(self, views: Sequence[Any], projections: Sequence[Any], terms: dict,
                      loss_value: Any, grads_finite: Any) -> None:
        """Writes :data:`HEALTH_FIELDS` for the step just taken."""
        self.health.assign(health_values(views, projections, terms, loss_value, grads_finite))

    def guarded_state(self) -> GuardedState:
        """The state of :meth:`guarded_layers`, to snapshot before a training step's
        forward pass and restore when it was not finite."""
        return GuardedState(self.guarded_layers())

    # ------------------------------------------------- the step, for every backend
    def step_inputs(self, data: Any, training: bool) -> dict:
        """``{"view1", "view2", "index", "labels", "sample_weight"}`` of a dataset element
        (views drawn by :attr:`view_maker` for raw input; ``index``, ``labels`` and
        ``sample_weight`` -- one weight per example, ``[B]`` -- may be None)."""
        x, labels, sample_weight = self.unpack(data)
        view1, view2, index = self.make_views(x, training=training)
        if labels is not None:
            labels = ops.reshape(labels, (-1,))
        return {"view1": view1, "view2": view2, "index": index, "labels": labels,
                "sample_weight": sample_weight}

    def prepare_step(self) -> None:
        """Writes before a training step's forward pass (none here; MoCo's momentum
        update)."""

    def forward(self, inputs: dict, training: bool) -> dict:
        """The step's forward pass (differentiated by the train steps): a dict with
        ``loss`` (scalar), ``terms`` (the loss's terms), ``projections`` (for the health
        record), ``bank`` (the projections the embedding bank keeps),
        ``false_negatives`` (``(rate, count)`` or None), ``views``, ``index``, ``usable``
        (whether the pairs had negatives: a Python bool when known when traced, else a
        scalar bool tensor; a batch without is not trained on), and what the subclass's
        :meth:`after_update` needs."""
        step = self.contrastive_forward(inputs["view1"], inputs["view2"], inputs["labels"],
                                        training, sample_weight=inputs.get("sample_weight"))
        step.update(views=(inputs["view1"], inputs["view2"]), index=inputs["index"])
        return self.mark_usable(step)

    @staticmethod
    def mark_usable(step: dict) -> dict:
        """``step`` with ``usable`` from the ``num_negatives`` of its pairs, which
        :meth:`contrastive_forward` returns (absent: usable)."""
        step["usable"] = _has_negatives(step.pop("num_negatives", None))
        return step

    def probe_projections(self, view1: Any, view2: Any) -> tuple | None:
        """``(z1, z2)``: the projections of two views that this framework's loss compares
        (dicts with ``features`` for UnReMix), in inference mode: no random draw, no state
        written, so a run's report can score a fixed probe batch between epochs without
        changing training. ``None`` for a framework without such a pair (InfoGraph)."""
        return None

    def contrastive_forward(self, view1: Any, view2: Any, labels: Any, training: bool,
                            sample_weight: Any = None) -> dict:
        """The framework's forward pass proper (see :meth:`forward`); ``sample_weight`` is
        ``[B]``, one weight per example, or None. Returns :meth:`forward`'s dict, with
        ``num_negatives`` (the pairs' ``N``) in place of ``usable``."""
        raise NotImplementedError(f"{type(self).__name__} must implement contrastive_forward.")

    def reduce_loss(self, per_anchor: Any, sample_weight: Any = None, mask: Any = None,
                    anchors_per_example: int = 1) -> Any:
        """The step's loss: the per-anchor losses ``[A]`` reduced by the compiled loss's
        one reduction (:meth:`~keras_hardneg.losses.ContrastiveLoss.reduce`: its
        ``reduction``, ``sample_weight`` ``[B]`` spread over the ``anchors_per_example``
        blocks of ``B`` anchors, a ``mask`` of the anchors kept), not yet scaled for the
        replicas (:meth:`objective` does that): the value ``fit`` shows. Before
        ``compile`` (InfoGraph's JSD estimator needs no loss), Keras's default reduction."""
        if self.contrastive_loss is None:
            return losses_lib.base.reduce_anchor_losses(
                per_anchor, sample_weight, mask, anchors_per_example=anchors_per_example)
        return self.contrastive_loss.reduce(per_anchor, sample_weight, mask,
                                            anchors_per_example=anchors_per_example,
                                            for_replica=False)

    def after_update(self, step: dict, finite: Any) -> None:
        """Writes after a training step's update: the health record and the embedding
        bank (MoCo v2 adds its queue). ``finite``: whether the update was applied (the step
        was finite and its batch had negatives); MoCo's queue is written only then."""
        self.record_health(step["views"], step["projections"], step["terms"], step["loss"],
                           finite)
        self.update_bank(step["index"], step["bank"])

    def objective(self, loss_value: Any) -> Any:
        """What is differentiated: the step's loss scaled for the ``tf.distribute``
        replicas as the loss's reduction says (the mean reductions are divided by the
        number of replicas, whose gradients are summed; ``"sum"`` is not: Keras's rule,
        :meth:`~keras_hardneg.losses.ContrastiveLoss.scale_for_replicas`) and, under
        ``mixed_float16``, multiplied by the loss scale."""
        return self.optimizer.scale_loss(self.contrastive_loss.scale_for_replicas(loss_value))

    def apply_update(self, tape: Any, objective: Any, loss_value: Any) -> Any:
        """TensorFlow only: gradient step on :meth:`objective` recorded by ``tape``;
        skipped (and counted in ``nonfinite_steps``) when the loss or a gradient is not
        finite. Returns whether the step was finite."""
        return steps.tf_apply_update(self, tape, objective, loss_value)

    # -------------------------------------------------------------------- steps
    def train_step(self, *args: Any) -> Any:
        """Keras's train step: ``(data)`` on TensorFlow, ``(state, data)`` on JAX
        (see :mod:`keras_hardneg.models.steps`)."""
        return steps.run_train_step(self, *args)

    def test_step(self, *args: Any) -> Any:
        return steps.run_test_step(self, *args)

    def _maybe_symbolic_build(self, iterator: Any = None, data_batch: Any = None) -> None:
        # Keras's TF trainer builds here before fit/evaluate, in a way that fails when the
        # strategy spans several workers (see steps.tf_prebuild_across_workers).
        if not steps.tf_prebuild_across_workers(self, iterator, data_batch):
            super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)

    def fit(self, *args: Any, callbacks: Any = None, **kwargs: Any):
        """:meth:`keras.Model.fit`. Unless ``compile(nonfinite_guard=False)``, a
        :class:`~keras_hardneg.models.health.NonFiniteGuard` (the one given to ``compile``,
        else a new one) is put first among the callbacks when none is given: a non-finite
        loss or gradient stops the run with a report, before any later callback (e.g. a
        checkpoint) runs for that batch.

        ``sample_weight`` reaches every step also without labels (Keras drops it when ``y``
        is None: it is carried in the labels' place). A batch without negatives (e.g. the
        final batch of one example when ``len(x) % batch_size == 1``) is not trained on:
        no update, no optimizer step, no metric but ``dropped_batches``; a
        :class:`DroppedBatchWarning` warns once per ``fit``."""
        callbacks = list(callbacks or [])
        guard = getattr(self, "nonfinite_guard", True)
        if guard is not False and not any(isinstance(c, NonFiniteGuard) for c in callbacks):
            callbacks.insert(0, guard if isinstance(guard, NonFiniteGuard) else NonFiniteGuard())
        if not any(isinstance(c, DroppedBatchWarning) for c in callbacks):
            callbacks.append(DroppedBatchWarning())
        args, kwargs = _carry_sample_weight(args, kwargs)
        return super().fit(*args, callbacks=callbacks, **kwargs)

    def evaluate(self, *args: Any, **kwargs: Any):
        """:meth:`keras.Model.evaluate`, with ``sample_weight`` reaching every step also
        without labels (as :meth:`fit`); a batch without negatives counts in
        ``dropped_batches`` only."""
        args, kwargs = _carry_sample_weight(args, kwargs)
        return super().evaluate(*args, **kwargs)

    # ----------------------------------------------------------- serialization
    def get_config(self) -> dict:
        config = super().get_config()
        config.update(
            encoder=keras.saving.serialize_keras_object(self.encoder),
            projection_dims=list(self.projection_dims),
            head_version=self.head_version,
            head_init=self.head_init,
            augmentation=(None if self.augmentation is None
                          else keras.saving.serialize_keras_object(self.augmentation)),
            gather_across_replicas=self.gather_across_replicas,
            memory_bank_size=self.memory_bank_size,
            sync_batchnorm=self.sync_batchnorm,
        )
        return config

    @classmethod
    def from_config(cls, config: dict) -> "ContrastiveModel":
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        if config.get("augmentation") is not None:
            config["augmentation"] = keras.saving.deserialize_keras_object(config["augmentation"])
        return cls(**config)
