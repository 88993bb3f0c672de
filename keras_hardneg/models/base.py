"""What SimCLR and MoCo share: inputs, views, heads, metrics, the update step."""

import keras
import tensorflow as tf

from keras_hardneg import distribute
from keras_hardneg import losses as losses_lib
from keras_hardneg.encoders import projection_head
from keras_hardneg.losses import core

__all__ = ["ContrastiveModel", "HEALTH_FIELDS"]

#: Entries of ``model.health``, written every training step.
HEALTH_FIELDS = (
    "loss_finite", "positive_term_finite", "negative_term_finite", "gradients_finite",
    "input_min", "input_max", "input_nonfinite_values", "projection_nonfinite_values",
)


def _feature_dim(encoder):
    shape = getattr(encoder, "output_shape", None)
    if shape is not None and shape[-1] is not None:
        return int(shape[-1])
    raise ValueError(
        "`encoder` must be a built keras.Model with a known output shape [batch, features]; "
        f"got {encoder!r}."
    )


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
    """Base of :class:`SimCLR` and :class:`MoCo` (not used directly).

    Dataset elements for ``fit``: ``x`` or ``(x, labels)`` where ``x`` is a
    batch of images ``[B, H, W, 3]`` in ``[0, 1]`` (two views are drawn with
    ``augmentation``), or a dict with ``"view1"`` and ``"view2"`` (views made
    elsewhere, no augmentation) or ``"images"``, optionally with ``"index"``
    (``[B]`` dataset positions, from :mod:`keras_hardneg.sampling`). Labels never
    enter the loss; they feed the ``false_negative_rate`` metric.
    """

    def __init__(self, encoder, projection_dims=(512, 128), head_version="simclr_v1",
                 augmentation=None, gather_across_replicas=True, memory_bank_size=None,
                 sync_batchnorm=None, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(encoder, keras.Model):
            raise ValueError(f"`encoder` must be a keras.Model; got {type(encoder).__name__}.")
        self.encoder = encoder
        self.projection_dims = _check_projection_dims(projection_dims)
        self.feature_dim = _feature_dim(encoder)
        if sync_batchnorm is None:
            sync_batchnorm = distribute.num_replicas() > 1
        self.sync_batchnorm = bool(sync_batchnorm)
        from keras_hardneg.encoders.heads import HEAD_VERSIONS

        if head_version not in HEAD_VERSIONS:
            raise ValueError(f"`head_version` must be one of {list(HEAD_VERSIONS)}; "
                             f"got {head_version!r}.")
        self.head_version = head_version
        self.projector = projection_head(
            self.feature_dim, list(self.projection_dims[:-1]), self.projection_dims[-1],
            version=head_version, sync_batchnorm=self.sync_batchnorm,
        )
        self.augmentation = augmentation
        self.gather_across_replicas = bool(gather_across_replicas)
        if memory_bank_size is not None and (
                isinstance(memory_bank_size, bool) or int(memory_bank_size) < 2):
            raise ValueError(
                f"`memory_bank_size` must be an int >= 2 (the dataset size); got {memory_bank_size!r}."
            )
        self.memory_bank_size = None if memory_bank_size is None else int(memory_bank_size)
        self.embedding_bank = None
        if self.memory_bank_size is not None:
            self.embedding_bank = self.add_weight(
                shape=(self.memory_bank_size, self.projection_dims[-1]), initializer="zeros",
                trainable=False, name="embedding_bank", aggregation="only_first_replica",
            )
        self.loss_tracker = keras.metrics.Mean(name="loss")
        self.positive_cosine_tracker = keras.metrics.Mean(name="positive_cosine")
        self.negative_cosine_tracker = keras.metrics.Mean(name="negative_cosine")
        self.clamp_tracker = keras.metrics.Mean(name="clamp_fraction")
        self.false_negative_tracker = keras.metrics.Mean(name="false_negative_rate")
        self.nonfinite_tracker = keras.metrics.Sum(name="nonfinite_steps")
        # What the last step looked like, for NonFiniteGuard's report (HEALTH_FIELDS).
        self.health = self.add_weight(shape=(len(HEALTH_FIELDS),), initializer="zeros",
                                      trainable=False, name="step_health",
                                      aggregation="only_first_replica")

    # ------------------------------------------------------------------ compile
    def compile(self, optimizer="adam", loss=None, jit_compile=False, **kwargs):
        """Like :meth:`keras.Model.compile`; ``loss`` is any contrastive loss of the
        family (instance or short name, default NT-Xent). ``jit_compile`` defaults
        to False: XLA made ResNet steps ~3x slower on the CPUs we measured.
        ``jit_compile=True`` needs the views made outside the model (the random
        resized crop, ``CropAndResize``, has no XLA kernel): map
        :func:`keras_hardneg.augment.two_views` over the ``tf.data`` pipeline and feed
        ``{"view1", "view2"}``, with ``augmentation=None``."""
        if jit_compile is True and self.augmentation is not None:
            raise ValueError(
                "`jit_compile=True` cannot compile this model's in-model `augmentation` "
                "(its random resized crop uses CropAndResize, which has no XLA kernel). "
                "Use jit_compile=False (the default, faster on CPU), or build the model with "
                "augmentation=None and feed {'view1', 'view2'} made in tf.data with "
                "khn.augment.two_views.")
        loss = losses_lib.NTXentLoss() if loss is None else loss
        if isinstance(loss, str):
            loss = losses_lib.get(loss)
        if not isinstance(loss, losses_lib.ContrastiveLoss):
            raise ValueError(
                "`loss` must be a keras_hardneg contrastive loss (e.g. "
                f"khn.losses.HardNegativeContrastiveLoss()); got {loss!r}."
            )
        # The loss is not handed to Keras: it would try it on (labels, outputs).
        super().compile(optimizer=optimizer, jit_compile=jit_compile, **kwargs)
        self.loss = self.contrastive_loss = loss
        self.optimizer.build(self.trainable_variables)

    @property
    def metrics(self):
        tracked = [self.loss_tracker, self.positive_cosine_tracker, self.negative_cosine_tracker]
        if getattr(self, "contrastive_loss", None) is not None and self.contrastive_loss.has_clamp:
            tracked.append(self.clamp_tracker)
        return tracked + [self.false_negative_tracker, self.nonfinite_tracker]

    # ------------------------------------------------------------------ inputs
    @staticmethod
    def unpack(data):
        """``(x, labels or None)`` from a dataset element."""
        if isinstance(data, (tuple, list)):
            if len(data) == 1:
                return data[0], None
            return data[0], data[1]
        return data, None

    def make_views(self, x, training):
        """``(view1, view2, index or None)`` from ``x`` (see the class docstring)."""
        index = None
        if isinstance(x, dict):
            index = x.get("index")
            if "view1" in x and "view2" in x:
                return x["view1"], x["view2"], index
            if "images" not in x:
                raise ValueError(
                    "A dict input needs 'view1' and 'view2', or 'images'; got keys "
                    f"{sorted(x)}."
                )
            x = x["images"]
        if x.shape.rank is not None and (x.shape.rank != 4 or x.shape[-1] not in (None, 3)):
            raise ValueError(
                f"Images must have shape [batch, height, width, 3]; got {x.shape}."
            )
        if self.augmentation is None:
            raise ValueError(
                "This model got a batch of images but has no `augmentation` to make two "
                "views: pass augmentation=khn.augment.simclr_augmentation(image_size=...) "
                "or feed {'view1': ..., 'view2': ...}."
            )
        from keras_hardneg.augment import two_views

        # two_views honours asymmetric recipes (SimCLR v3 solarizes only view 2).
        view1, view2 = two_views(self.augmentation)(tf.cast(x, "float32"), training=training)
        return view1, view2, index

    def call(self, x, training=False):
        """Encoder features ``[B, F]`` of images (the representation downstream
        tasks use). Accepts the training input formats too (a dict with
        ``"images"`` or ``"view1"``)."""
        if isinstance(x, dict):
            x = x["images"] if "images" in x else x["view1"]
        return self.encoder(x, training=training)

    # ------------------------------------------------------------- bookkeeping
    def gathered(self, x):
        """``x`` from every replica when gathering is on (identity on one device)."""
        return distribute.gather(x) if self.gather_across_replicas else x

    def replica_offset(self, local_batch):
        """Global row index of this replica's first row (0 without gathering)."""
        if not self.gather_across_replicas:
            return 0
        _, replica_id = distribute.replica_info()
        return tf.cast(replica_id, tf.int32) * local_batch

    def update_bank(self, index, z):
        """Writes unit-norm projections ``z`` at dataset positions ``index``."""
        if self.embedding_bank is None or index is None:
            return
        index = self.gathered(tf.cast(index, tf.int32))
        z = self.gathered(tf.stop_gradient(core.l2_normalize(z)))
        self.embedding_bank.assign(
            tf.tensor_scatter_nd_update(self.embedding_bank.value, index[:, None], z))

    def record(self, terms, loss_value, pairs=None, anchor_labels=None, pool_labels=None):
        """Updates the metrics from the loss's terms."""
        self.loss_tracker.update_state(loss_value)
        self.positive_cosine_tracker.update_state(terms["positive_cosine"])
        self.negative_cosine_tracker.update_state(terms["negative_cosine"])
        if "clamp_fraction" in terms:
            self.clamp_tracker.update_state(terms["clamp_fraction"])
        if pairs is not None and anchor_labels is not None and pool_labels is not None:
            fraction, count = core.false_negative_fraction(
                pairs, anchor_labels, pool_labels, return_count=True)
            # Batches with no known pool label (an empty MoCo queue) do not count.
            self.false_negative_tracker.update_state(
                fraction, sample_weight=tf.cast(count > 0, "float32"))

    def objective(self, loss_value):
        """What is differentiated (call inside the tape): the loss divided by
        the number of replicas (their gradients are summed) and, under
        ``mixed_float16``, multiplied by the loss scale."""
        scaled = loss_value / tf.cast(distribute.num_replicas(), loss_value.dtype)
        return self.optimizer.scale_loss(scaled)

    def guarded_state(self):
        """Non-trainable float weights a forward pass changes (batch-norm moving
        statistics of the encoders and heads)."""
        seen, out = set(), []
        for layer in (self.encoder, self.projector, getattr(self, "predictor", None),
                      getattr(self, "key_encoder", None), getattr(self, "key_projector", None)):
            if layer is None:
                continue
            for v in layer.non_trainable_variables:
                if id(v) not in seen and "float" in str(v.dtype):
                    seen.add(id(v))
                    out.append(v)
        return out

    def snapshot_state(self):
        """Values of :meth:`guarded_state` before a step's forward pass."""
        return [tf.identity(v.value) for v in self.guarded_state()]

    def restore_state_unless(self, finite, snapshot):
        """Puts the snapshot back when the step was not finite (a NaN batch must
        not poison the moving statistics either)."""
        for v, old in zip(self.guarded_state(), snapshot):
            v.assign(tf.where(finite, v.value, old))

    def record_health(self, views, projections, terms, loss_value, grads_finite):
        """Writes :data:`HEALTH_FIELDS` for the step just taken."""
        def nonfinite(t):
            return tf.reduce_sum(tf.cast(tf.logical_not(tf.math.is_finite(t)), "float32"))

        views = [tf.cast(v, "float32") for v in views]
        projections = [tf.cast(p["embeddings"] if isinstance(p, dict) else p, "float32")
                       for p in projections]
        def finite_min(t):
            return tf.reduce_min(tf.where(tf.math.is_finite(t), t, float("inf")))

        def finite_max(t):
            return tf.reduce_max(tf.where(tf.math.is_finite(t), t, float("-inf")))

        values = [
            tf.cast(tf.math.is_finite(loss_value), "float32"),
            tf.cast(tf.math.is_finite(terms["positive_cosine"]), "float32"),
            tf.cast(tf.math.is_finite(terms["negative_cosine"]), "float32"),
            tf.cast(grads_finite, "float32"),
            tf.reduce_min([finite_min(v) for v in views]),
            tf.reduce_max([finite_max(v) for v in views]),
            tf.add_n([nonfinite(v) for v in views]),
            tf.add_n([nonfinite(p) for p in projections]),
        ]
        self.health.assign(tf.stack(values))

    def apply_update(self, tape, objective, loss_value):
        """Gradient step on :meth:`objective`; skipped (and counted in
        ``nonfinite_steps``) when the loss or a gradient is not finite, so the
        weights are never corrupted."""
        variables = self.trainable_variables
        grads = tape.gradient(objective, variables)
        if isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer):
            # It checks the gradients (and skips non-finite steps) itself; a
            # non-finite *scaled* gradient is its normal way to lower the scale.
            self.optimizer.apply(grads, variables)
            finite = tf.math.is_finite(loss_value)
            self.nonfinite_tracker.update_state(1.0 - tf.cast(finite, "float32"))
            return finite
        finite = tf.math.is_finite(loss_value)
        for g in grads:
            if g is not None:
                finite = tf.logical_and(finite, tf.reduce_all(tf.math.is_finite(g)))
        if distribute.num_replicas() > 1:
            # A cross-replica update cannot sit inside tf.cond: apply zero
            # gradients instead (the NonFiniteGuard callback then stops the run).
            grads = [None if g is None else tf.where(finite, g, tf.zeros_like(g)) for g in grads]
            self.optimizer.apply(grads, variables)
        else:
            tf.cond(finite, lambda: self._apply(grads, variables), lambda: tf.no_op())
        self.nonfinite_tracker.update_state(1.0 - tf.cast(finite, "float32"))
        return finite

    def _apply(self, grads, variables):
        self.optimizer.apply(grads, variables)
        return tf.no_op()

    def fit(self, *args, callbacks=None, **kwargs):
        """:meth:`keras.Model.fit`, with a :class:`~keras_hardneg.callbacks.NonFiniteGuard`
        put first among the callbacks unless one is given: a non-finite loss or
        gradient stops the run with a report, before any later callback (e.g. a
        checkpoint) runs for that batch."""
        from keras_hardneg.callbacks import NonFiniteGuard

        callbacks = list(callbacks or [])
        if not any(isinstance(c, NonFiniteGuard) for c in callbacks):
            callbacks.insert(0, NonFiniteGuard())
        return super().fit(*args, callbacks=callbacks, **kwargs)

    def get_config(self):
        config = super().get_config()
        config.update(
            encoder=keras.saving.serialize_keras_object(self.encoder),
            projection_dims=list(self.projection_dims),
            head_version=self.head_version,
            augmentation=(None if self.augmentation is None
                          else keras.saving.serialize_keras_object(self.augmentation)),
            gather_across_replicas=self.gather_across_replicas,
            memory_bank_size=self.memory_bank_size,
            sync_batchnorm=self.sync_batchnorm,
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        if config.get("augmentation") is not None:
            config["augmentation"] = keras.saving.deserialize_keras_object(config["augmentation"])
        return cls(**config)
