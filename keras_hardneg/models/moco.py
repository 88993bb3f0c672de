"""MoCo v2 (Chen et al. 2020, "Improved Baselines with Momentum Contrastive
Learning") and MoCo v3 (Chen, Xie & He, ICCV 2021) as a Keras model."""

import keras
import tensorflow as tf

from keras_hardneg.encoders import prediction_head
from keras_hardneg.encoders.heads import ProjectionHead
from keras_hardneg.losses import core
from keras_hardneg.models.base import ContrastiveModel

__all__ = ["MoCo"]

_HEADS = {"v2": "moco_v2", "v3": "moco_v3"}


def _unit_rows_initializer(seed):
    normal = keras.initializers.RandomNormal(seed=seed)

    def init(shape, dtype=None):
        return core.l2_normalize(normal(shape, dtype="float32"))

    return init


@keras.saving.register_keras_serializable(package="keras_hardneg")
class MoCo(ContrastiveModel):
    """Momentum contrast: a query encoder trained by gradient, a key encoder that
    is its exponential moving average, and (v2) a queue of past keys as negatives.

    * ``version="v2"``: query ``q = head(enc(view1))``, key ``k = key_head(key_enc(view2))``;
      the loss is ``loss.call_with_negatives(q, k, queue)`` (any loss of the family);
      then the keys of all replicas are enqueued (first-in first-out).
    * ``version="v3"``: symmetric, no queue: a predictor on the query branch, and
      each query's negatives are the other examples' keys of the (global) batch;
      the loss is the mean of ``ctr(q1, k2)`` and ``ctr(q2, k1)``.

    Before each step the key encoder and head take
    ``key = momentum * key + (1 - momentum) * query`` for every trainable weight
    (in the same order as ``encoder.weights``); the key branch runs batch norm
    in training mode (batch statistics, its own moving averages), as in MoCo.
    Shuffle-BN (MoCo's multi-GPU trick) is not implemented; v3 uses
    synchronized BN in the heads when there are several replicas.

    Attributes:
        queue: ``[queue_size, d]`` non-trainable variable of unit-norm keys (v2).
        queue_labels: ``[queue_size]`` labels of the queued keys, ``-1`` if unknown,
            used only for the ``false_negative_rate`` metric.
        key_encoder, key_projector: the momentum copies.

    Args:
        encoder: keras.Model, images ``[B, H, W, 3]`` in ``[0, 1]`` -> ``[B, F]``.
        projection_dims: ``(hidden..., output)``, e.g. ``(2048, 128)``.
        queue_size: ``K`` (v2), default 65536.
        momentum: EMA coefficient in ``[0, 1]``, default 0.999.
        version: ``"v2"`` or ``"v3"``.
        predictor_dims: ``(hidden, output)`` of the v3 predictor (default
            ``(4 * d, d)`` with ``d = projection_dims[-1]``).
        augmentation, gather_across_replicas, memory_bank_size, sync_batchnorm:
            as in :class:`SimCLR`.

    Example:
    >>> import numpy as np, keras_hardneg as khn
    >>> enc = khn.encoders.small_convnet(input_shape=(8, 8, 3), width=4)
    >>> model = MoCo(enc, projection_dims=(16, 8), queue_size=32, momentum=0.99)
    >>> model.compile(optimizer="sgd", loss=khn.losses.NTXentLoss(temperature=0.2))
    >>> x = np.random.default_rng(0).uniform(size=(8, 8, 8, 3)).astype("float32")
    >>> h = model.fit({"view1": x, "view2": x[:, ::-1]}, batch_size=8, epochs=1, verbose=0)
    """

    def __init__(self, encoder, projection_dims=(2048, 128), queue_size=65536, momentum=0.999,
                 version="v2", predictor_dims=None, augmentation=None, head_version=None,
                 seed=0, **kwargs):
        if version not in _HEADS:
            raise ValueError(f"`version` must be 'v2' (queue) or 'v3' (in-batch); got {version!r}.")
        if isinstance(momentum, bool) or not isinstance(momentum, (int, float)) or \
                not 0.0 <= float(momentum) <= 1.0:
            raise ValueError(f"`momentum` must be a number in [0, 1]; got {momentum!r}.")
        if isinstance(queue_size, bool) or not isinstance(queue_size, int) or queue_size < 1:
            raise ValueError(f"`queue_size` must be an int >= 1; got {queue_size!r}.")
        super().__init__(encoder, projection_dims=projection_dims,
                         head_version=head_version or _HEADS[version],
                         augmentation=augmentation, **kwargs)
        self.version = version
        self.momentum = float(momentum)
        self.queue_size = int(queue_size)
        self.seed = seed
        dim = self.projection_dims[-1]

        self.key_encoder = keras.models.clone_model(encoder)
        self.key_encoder.set_weights(encoder.get_weights())
        self.key_projector = ProjectionHead.from_config(
            {**self.projector.get_config(), "name": "key_projection_head"})
        self.key_projector.set_weights(self.projector.get_weights())

        self.predictor = None
        self.predictor_dims = None
        if version == "v3":
            self.predictor_dims = tuple(predictor_dims or (4 * dim, dim))
            self.predictor = prediction_head(dim, self.predictor_dims[0], self.predictor_dims[1],
                                             sync_batchnorm=self.sync_batchnorm)
            if self.predictor_dims[1] != dim:
                raise ValueError(
                    f"`predictor_dims[-1]` must equal the projection size {dim}; got "
                    f"{self.predictor_dims}."
                )
        self.queue = None
        self.queue_labels = None
        if version == "v2":
            self.queue = self.add_weight(
                shape=(self.queue_size, dim), initializer=_unit_rows_initializer(seed),
                trainable=False, name="queue", aggregation="only_first_replica")
            self.queue_labels = self.add_weight(
                shape=(self.queue_size,), initializer=keras.initializers.Constant(-1),
                dtype="int64", trainable=False, name="queue_labels",
                aggregation="only_first_replica")
            self.queue_pointer = self.add_weight(
                shape=(), initializer="zeros", dtype="int64", trainable=False,
                name="queue_pointer", aggregation="only_first_replica")
        self.built = True  # every sub-model is built: weights can be saved before fit

    # ----------------------------------------------------------------- weights
    def query_variables(self):
        """The weights trained by gradient (encoder, head, predictor)."""
        out = self.encoder.trainable_variables + self.projector.trainable_variables
        if self.predictor is not None:
            out += self.predictor.trainable_variables
        return out

    @property
    def trainable_variables(self):
        # The key branch is updated by momentum, never by the optimizer.
        return self.query_variables()

    def momentum_update(self):
        """``key = m * key + (1 - m) * query`` over encoder and head weights."""
        m = self.momentum
        for query, key in ((self.encoder, self.key_encoder), (self.projector, self.key_projector)):
            for q, k in zip(query.trainable_variables, key.trainable_variables):
                k.assign(m * k + (1.0 - m) * tf.cast(q, k.dtype))

    def enqueue(self, keys, labels=None, step_finite=True):
        """Writes unit-norm ``keys [B, d]`` (all replicas') at the queue pointer, FIFO.
        Nothing is written when ``step_finite`` is False or a key is not finite."""
        keys = self.gathered(tf.stop_gradient(core.l2_normalize(keys)))
        n = tf.shape(keys)[0]
        slots = (self.queue_pointer.value + tf.range(tf.cast(n, tf.int64))) % self.queue_size
        # A batch larger than the queue keeps its last `queue_size` keys.
        keep = tf.maximum(n - self.queue_size, 0)
        slots, keys = slots[keep:], keys[keep:]
        # Non-finite keys (a broken batch) are not enqueued: the queue stays clean.
        ok = tf.logical_and(tf.reduce_all(tf.math.is_finite(keys)), step_finite)
        self.queue.assign(tf.where(
            ok, tf.tensor_scatter_nd_update(self.queue.value, slots[:, None], keys),
            self.queue.value))
        if labels is None:
            labels = -tf.ones([n], tf.int64)
        else:
            labels = self.gathered(tf.cast(tf.reshape(labels, [-1]), tf.int64))
        self.queue_labels.assign(tf.where(
            ok, tf.tensor_scatter_nd_update(self.queue_labels.value, slots[:, None], labels[keep:]),
            self.queue_labels.value))
        self.queue_pointer.assign(tf.where(
            ok, (self.queue_pointer.value + tf.cast(n, tf.int64)) % self.queue_size,
            self.queue_pointer.value))

    # -------------------------------------------------------------------- steps
    def _query(self, images, training):
        h = self.encoder(images, training=training)
        z, feats = self.projector(h, training=training, return_features=True)
        if self.predictor is not None:
            z, feats = self.predictor(z, training=training, return_features=True)
        if self.contrastive_loss.needs_features:
            return {"embeddings": z, "features": feats}
        return z

    def _keys(self, images):
        h = self.key_encoder(images, training=True)
        return tf.stop_gradient(self.key_projector(h, training=True))

    def _step_v2(self, view1, view2, labels, training):
        k = self._keys(view2)
        negatives = tf.stop_gradient(self.queue.value)
        with tf.GradientTape() as tape:
            q = self._query(view1, training)
            pairs = core.queue_pairs(q, k, negatives)
            terms = self.contrastive_loss.compute_terms(pairs)
            loss_value = tf.reduce_mean(terms["loss"])
            objective = self.objective(loss_value)
        if labels is not None:
            self.record(terms, loss_value, pairs, labels, self.queue_labels.value)
        else:
            self.record(terms, loss_value)
        if training:
            finite = self.apply_update(tape, objective, loss_value)
            self.record_health((view1, view2), (q, k), terms, loss_value, finite)
            self.enqueue(k, labels, step_finite=finite)
            return q, finite
        return q, None

    def _step_v3(self, view1, view2, labels, training):
        k1, k2 = tf.split(self._keys(tf.concat([view1, view2], 0)), 2, axis=0)
        with tf.GradientTape() as tape:
            q = self._query(tf.concat([view1, view2], 0), training)
            if isinstance(q, dict):
                q1 = {key: v[: tf.shape(v)[0] // 2] for key, v in q.items()}
                q2 = {key: v[tf.shape(v)[0] // 2:] for key, v in q.items()}
            else:
                q1, q2 = tf.split(q, 2, axis=0)
            batch = tf.shape(k1)[0]
            offset = self.replica_offset(batch)
            pairs_a = core.cross_view_pairs(q1, k2, pool=(self.gathered(k2), offset))
            pairs_b = core.cross_view_pairs(q2, k1, pool=(self.gathered(k1), offset))
            terms_a = self.contrastive_loss.compute_terms(pairs_a)
            terms_b = self.contrastive_loss.compute_terms(pairs_b)
            loss_value = 0.5 * (tf.reduce_mean(terms_a["loss"]) + tf.reduce_mean(terms_b["loss"]))
            objective = self.objective(loss_value)
        terms = {key: 0.5 * (terms_a[key] + terms_b[key]) for key in terms_a if key != "loss"}
        if labels is not None:
            self.record(terms, loss_value, pairs_a, labels, self.gathered(labels))
        else:
            self.record(terms, loss_value)
        if training:
            finite = self.apply_update(tape, objective, loss_value)
            self.record_health((view1, view2), (q, k1, k2), terms, loss_value, finite)
            return q1, finite
        return q1, None

    def _step(self, data, training):
        x, labels = self.unpack(data)
        view1, view2, index = self.make_views(x, training=training)
        if labels is not None:
            labels = tf.cast(tf.reshape(labels, [-1]), tf.int64)
        if training:
            snapshot = self.snapshot_state()
            self.momentum_update()
        step = self._step_v2 if self.version == "v2" else self._step_v3
        q, finite = step(view1, view2, labels, training)
        if training:
            self.restore_state_unless(finite, snapshot)
        if training:
            self.update_bank(index, q["embeddings"] if isinstance(q, dict) else q)
        return {m.name: m.result() for m in self.metrics}

    def train_step(self, data):
        return self._step(data, training=True)

    def test_step(self, data):
        return self._step(data, training=False)


    def get_config(self):
        config = super().get_config()
        config.update(queue_size=self.queue_size, momentum=self.momentum, version=self.version,
                      predictor_dims=None if self.predictor_dims is None else list(self.predictor_dims),
                      seed=self.seed)
        return config
