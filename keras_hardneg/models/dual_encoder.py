"""The dual encoder: retrieval fine-tuning on (query, positive, ``K`` mined negatives) tuples,
trained with ``fit()``.

One shared encoder embeds queries and documents alike (a Siamese bi-encoder, as
sentence-transformers trains all-MiniLM-L6-v2; Karpukhin et al. 2020, "Dense Passage
Retrieval for Open-Domain Question Answering", with in-batch plus mined negatives). A batch
of ``B`` tuples arrives as ONE flat batch of ``B (2 + K)`` token-id rows in the tuple layout
(``[q_0, p_0, n_0_1 .. n_0_K, q_1, ...]``, :mod:`keras_hardneg.sampling.tuple_feed`); the
encoder embeds it in one pass and :class:`~keras_hardneg.losses.MinedNegativesLoss` -- the
compiled family loss (NT-Xent at temperature 0.05 is sentence-transformers'
MultipleNegativesRankingLoss at ``scale=20``) with this framework's tuple options -- reads
the ``[B (2 + K), d]`` embeddings. By default there is no projection head: retrieval
fine-tunes the encoder's own embedding (what is exported and searched), as
sentence-transformers does; ``projection="head"`` trains through the usual head instead.

It is a :class:`~keras_hardneg.models.ContrastiveModel`: the same TensorFlow / JAX steps
(:mod:`~keras_hardneg.models.steps`), the non-finite guard, the health record and the
metrics ``loss``, ``positive_cosine`` (query vs its positive) and ``negative_cosine`` (query
vs its mined negatives; with ``K = 0``, vs the other positives of the batch).
``model.contrastive_loss`` is the family loss (what the model card and the run report's
probe read); ``model.tuple_loss`` the :class:`~keras_hardneg.losses.MinedNegativesLoss`
differentiated.

Example (a tiny encoder of token ids; two tuples with one mined negative each):
>>> import numpy as np, keras
>>> inputs = keras.Input((4,), dtype="int32")
>>> pooled = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(20, 8)(inputs))
>>> model = DualEncoder(keras.Model(inputs, pooled), num_negatives=1)
>>> from keras_hardneg.losses import NTXentLoss
>>> model.compile(optimizer="adam", loss=NTXentLoss(temperature=0.05))
>>> x = np.random.default_rng(0).integers(1, 20, size=(2 * 3, 4)).astype("int32")
>>> logs = model.train_on_batch(x, return_dict=True)
>>> type(model.tuple_loss).__name__, bool(np.isfinite(logs["loss"]))
('MinedNegativesLoss', True)
"""

from __future__ import annotations

from typing import Any, Sequence

import keras
from keras import ops

from keras_hardneg.losses.base import reduce_anchor_losses, scale_for_replicas
from keras_hardneg.losses.core import l2_normalize
from keras_hardneg.losses.guide_guard import GUARD_STRATEGIES
from keras_hardneg.losses.hardness import HARDNESS_MODES
from keras_hardneg.losses.mined_negatives import MinedNegativesLoss, split_tuples
from keras_hardneg.models.base import ContrastiveModel
from keras_hardneg.registry import FRAMEWORKS, Param

__all__ = ["DualEncoder", "PROJECTIONS", "GUARDS"]

#: ``projection``: the encoder's own embedding, or the projection head on top of it.
PROJECTIONS = ("none", "head")
#: ``guard``: off (None), the encoder itself, or the frozen starting encoder as the guide.
GUARDS = ("self", "guide")


@FRAMEWORKS.register("dual_encoder", modality="retrieval", params={
    "in_batch": Param(bool, help="a query's negatives include the batch's other documents "
                                 "(MultipleNegativesRankingLoss); false: its K mined ones only"),
    "symmetric": Param(bool, help="add the document -> query direction (2B anchors)"),
    "hardness_strength": Param(float, low=0.0, help="sentence-transformers' additive "
                                                    "hardness: strength * stop_grad(cos) on the "
                                                    "negative logits (0: off)"),
    "hardness_mode": Param(str, choices=HARDNESS_MODES, default=None,
                           help="which negatives the hardness offset reaches"),
    "guard": Param(str, choices=GUARDS, default=None,
                   help="false-negative guard (GISTEmbed): a negative scored above the "
                        "positive minus guard_margin is masked; self: by the encoder, guide: "
                        "by the frozen starting encoder"),
    "guard_margin": Param(float, help="the guard's margin"),
    "guard_strategy": Param(str, choices=GUARD_STRATEGIES, help="absolute or relative margin"),
    "projection": Param(str, choices=PROJECTIONS,
                        help="none: train the encoder's embedding (retrieval); head: through "
                             "a projection head of projection_dims"),
})
@keras.saving.register_keras_serializable(package="keras_hardneg")
class DualEncoder(ContrastiveModel):
    """One shared encoder over flat tuple batches, a :class:`MinedNegativesLoss`.

    Args:
        encoder: keras.Model, token ids ``int32 [R, L]`` -> ``float32 [R, d]``.
        num_negatives: ``K >= 0``, mined negatives per tuple (a batch has ``B (2 + K)``
            rows); the run layer takes it from the data's sampler.
        in_batch: :class:`~keras_hardneg.losses.MinedNegativesLoss`'s option.
        symmetric: :class:`~keras_hardneg.losses.MinedNegativesLoss`'s option.
        hardness_strength: :class:`~keras_hardneg.losses.MinedNegativesLoss`'s option.
        hardness_mode: :class:`~keras_hardneg.losses.MinedNegativesLoss`'s option.
        guard_margin: :class:`~keras_hardneg.losses.MinedNegativesLoss`'s option.
        guard_strategy: :class:`~keras_hardneg.losses.MinedNegativesLoss`'s option.
        guard: None, ``"self"`` (the encoder under ``stop_gradient``) or ``"guide"`` (a
            frozen copy of ``encoder`` as it is when this model is made: the starting
            encoder, GISTEmbed's guide; one more inference pass a step).
        projection: ``"none"`` (default) or ``"head"``.
        query_length: ids a query holds at most (the run layer passes the data's
            ``query_max_length``): queries are then encoded at that length
            (:meth:`embed_tuples`); None: every row at the batch's ``L``.
        projection_dims: the head's widths when ``projection="head"``.
        augmentation: must be None (the tuples are the pairs; no views are drawn).

    Dataset elements: ``x`` (``int32 [B (2 + K), L]``) or ``(x, rows)`` as the tuple feed
    yields them (``rows`` is not read).
    """

    def __init__(self, encoder: keras.Model, num_negatives: int = 0, in_batch: bool = True,
                 symmetric: bool = False, hardness_strength: float = 0.0,
                 hardness_mode: str | None = None, guard: str | None = None,
                 guard_margin: float = 0.0, guard_strategy: str = "absolute",
                 projection: str = "none", projection_dims: Sequence[int] = (128, 64),
                 augmentation: Any = None, query_length: int | None = None, **kwargs: Any):
        if projection not in PROJECTIONS:
            raise ValueError(f"`projection` must be one of {list(PROJECTIONS)}; got "
                             f"{projection!r}.")
        if augmentation is not None:
            raise ValueError("`augmentation` must be None for DualEncoder: its batches are "
                             "the tuples themselves (no views are drawn).")
        if guard is not None and guard not in GUARDS:
            raise ValueError(f"`guard` must be None or one of {list(GUARDS)}; got {guard!r}.")
        self.projection = projection
        kwargs.pop("memory_bank_size", None)  # no graph sampler reads a bank here
        super().__init__(encoder, projection_dims=projection_dims, augmentation=None,
                         **kwargs)
        self.options = dict(num_negatives=num_negatives, in_batch=bool(in_batch),
                            symmetric=bool(symmetric),
                            hardness_strength=float(hardness_strength),
                            hardness_mode=hardness_mode, guard=guard,
                            guard_margin=float(guard_margin), guard_strategy=guard_strategy)
        # Checks every option now (one line naming it), with the default family loss.
        MinedNegativesLoss("nt_xent", **self.options)
        self.num_negatives = int(num_negatives)
        if query_length is not None and (isinstance(query_length, bool) or not isinstance(
                query_length, int) or query_length < 1):
            raise ValueError(f"`query_length` must be None or an int >= 1; got "
                             f"{query_length!r}.")
        self.query_length = query_length
        self.guide = None
        if guard == "guide":
            self.guide = keras.models.clone_model(encoder)
            self.guide.set_weights(encoder.get_weights())
            self.guide.trainable = False
        self.tuple_loss: MinedNegativesLoss | None = None
        self.built = True

    def make_projector(self) -> keras.layers.Layer | None:
        return super().make_projector() if self.projection == "head" else None

    def query_layers(self) -> list:
        return [self.encoder] + ([self.projector] if self.projector is not None else [])

    @property
    def metrics(self) -> list:
        return self._metrics_record.metrics(False)

    @property
    def uses_features(self) -> bool:
        return False

    # ------------------------------------------------------------------ compile
    def compile(self, optimizer: Any = "adam", loss: Any = None, **kwargs: Any) -> None:
        """Like :meth:`ContrastiveModel.compile`; ``loss`` is a loss of the family (name,
        instance or config; default NT-Xent), wrapped in a :class:`MinedNegativesLoss` with
        this model's ``K`` and tuple options, or a :class:`MinedNegativesLoss` itself
        (whose ``num_negatives`` must be this model's)."""
        if isinstance(loss, MinedNegativesLoss):
            if loss.num_negatives != self.num_negatives:
                raise ValueError(f"`loss.num_negatives` ({loss.num_negatives}) must be this "
                                 f"model's num_negatives ({self.num_negatives}): it cuts the "
                                 "rows into tuples.")
            mined, loss = loss, loss.loss
        else:
            mined = None
        super().compile(optimizer=optimizer, loss=loss, **kwargs)
        if mined is None:
            mined = MinedNegativesLoss(self.contrastive_loss, reduction=self.contrastive_loss
                                       .reduction, **self.options)
        self.tuple_loss = mined

    # ------------------------------------------------------------------- step
    def call(self, x: Any, training: bool = False):
        """Encoder features ``[R, d]`` of token ids ``[R, L]`` (what retrieval searches)."""
        return self.encoder(x, training=training)

    def step_inputs(self, data: Any, training: bool) -> dict:
        """``{"view1": token ids [B (2 + K), L], "view2": None, ...}`` of a feed element."""
        x, _, sample_weight = self.unpack(data)
        return {"view1": x, "view2": None, "index": None, "labels": None,
                "sample_weight": sample_weight}

    def embed(self, x: Any, training: bool) -> Any:
        """``[R, d]``: the encoder's rows (through the head with ``projection="head"``)."""
        z = self.encoder(x, training=training)
        return z if self.projector is None else self.projector(z, training=training)

    def _reads_any_length(self) -> bool:
        inputs = getattr(self.encoder, "inputs", None)
        return bool(inputs) and len(inputs[0].shape) == 2 and inputs[0].shape[1] is None

    def embed_tuples(self, x: Any, training: bool) -> Any:
        """``[B (2 + K), d]`` of a flat tuple batch ``[B (2 + K), L]``. With
        ``query_length`` ``Lq < L`` (the data's queries hold at most ``Lq`` ids) and an
        encoder that reads any length, the queries are encoded as ``[B, Lq]`` and the
        documents as ``[B (1 + K), L]``: the same embeddings (padding is masked), without
        encoding the queries' padding."""
        width = 2 + self.num_negatives
        length = x.shape[-1]
        if (self.query_length is None or length is None or self.query_length >= length
                or not self._reads_any_length()):
            return self.embed(x, training)
        rows = ops.reshape(x, (-1, width, length))
        zq = self.embed(rows[:, 0, :self.query_length], training)
        zd = self.embed(ops.reshape(rows[:, 1:], (-1, length)), training)
        dim = zq.shape[-1]
        z = ops.concatenate([zq[:, None, :], ops.reshape(zd, (-1, width - 1, dim))], axis=1)
        return ops.reshape(z, (-1, dim))

    def forward(self, inputs: dict, training: bool) -> dict:
        x = inputs["view1"]
        z = self.embed_tuples(x, training=training)
        guide = None
        if self.guide is not None:
            guide = ops.stop_gradient(self.guide(x, training=False))
        loss = self.tuple_loss
        per_anchor = loss.call(guide, z)
        # sample_weight: a scalar or one per tuple [B] (the tuple feed gives none).
        loss_value = reduce_anchor_losses(per_anchor, inputs.get("sample_weight"), None,
                                          loss.reduction, 2 if loss.symmetric else 1,
                                          dtype=loss.dtype)
        terms = {"loss": per_anchor, **self.cosines(z)}
        return {"loss": loss_value, "terms": terms, "projections": (z,), "bank": None,
                "false_negatives": None, "views": (x,), "index": None, "usable": True}

    def cosines(self, z: Any) -> dict:
        """``{"positive_cosine", "negative_cosine"}``: batch means of cos(query, positive)
        and cos(query, mined negative) (``K = 0``: the other positives of the batch)."""
        q, p, n = split_tuples(l2_normalize(z), self.num_negatives)
        positive = ops.mean(ops.sum(q * p, axis=-1))
        if self.num_negatives:
            negative = ops.mean(ops.sum(q[:, None, :] * n, axis=-1))
        else:
            sims = ops.matmul(q, ops.transpose(p))
            b = ops.cast(ops.shape(sims)[0], "float32")
            off = ops.sum(sims) - ops.sum(ops.diagonal(sims))
            negative = off / ops.maximum(b * (b - 1.0), 1.0)
        return {"positive_cosine": positive, "negative_cosine": negative}

    def objective(self, loss_value: Any) -> Any:
        return self.optimizer.scale_loss(scale_for_replicas(loss_value,
                                                            self.tuple_loss.reduction))

    def probe_projections(self, view1: Any, view2: Any) -> tuple:
        """``(queries, positives)`` embeddings in inference mode (the run report's probe:
        pairs, in-batch)."""
        return self.embed(view1, training=False), self.embed(view2, training=False)

    # ----------------------------------------------------------- serialization
    def get_config(self) -> dict:
        config = super().get_config()
        config.update(projection=self.projection, query_length=self.query_length,
                      **self.options)
        return config

