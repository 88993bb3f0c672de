"""ReminingCallback: every N epochs the tuples are re-mined with the model being trained and
the next epoch trains on them; the miner's summary is logged; fewer tuples warn once."""

import numpy as np
import pytest

import keras

from keras_hardneg.callbacks import ReminingCallback
from keras_hardneg.sampling import TupleBatches, make_tuple_py_dataset

Q, N, L, K, B = 16, 48, 4, 1, 4


def _data(seed=0):
    """Token ids standing for synthetic vectors: query i is a noisy copy of document i (its
    positive); the first tuples' negatives are documents 32 + i, which the re-mining
    excludes, so re-mined tuples are told apart from the first ones."""
    rng = np.random.default_rng(seed)
    d_ids = rng.integers(1, 50, size=(N, L)).astype("int32")
    q_ids = np.clip(d_ids[:Q] + rng.integers(-1, 2, size=(Q, L)), 1, 49).astype("int32")
    first = (np.arange(Q), np.arange(Q), (32 + np.arange(Q))[:, None])
    exclude = [list(range(32, 48))] * Q
    return q_ids, d_ids, [[i] for i in range(Q)], first, exclude


class _Recorder(keras.losses.Loss):
    """A tuple loss (queries against all positives) that keeps each batch's rows."""

    def __init__(self):
        super().__init__()
        self.rows = []

    def call(self, y_true, y_pred):
        try:  # symbolic builds (JAX) have no values
            self.rows.append(np.asarray(keras.ops.convert_to_numpy(y_true)).reshape(-1, 2 + K))
        except Exception:
            pass
        emb = keras.ops.reshape(y_pred, (-1, 2 + K, y_pred.shape[-1]))
        scores = keras.ops.matmul(emb[:, 0], keras.ops.transpose(emb[:, 1]))
        labels = keras.ops.arange(keras.ops.shape(scores)[0])
        return keras.losses.sparse_categorical_crossentropy(labels, scores, from_logits=True)


def _encoder():
    keras.utils.set_random_seed(0)
    ids = keras.Input((L,), dtype="int32")
    x = (keras.ops.cast(ids, "float32") - 25.0) / 10.0
    return keras.Model(ids, keras.layers.Dense(8)(x))


class _ServedFeed:
    """Records the rows a PyDataset feed serves, per epoch (``on_epoch_begin``)."""

    @staticmethod
    def wrap(feed):
        served = []
        get, begin = feed.__getitem__, feed.on_epoch_begin

        class Recording(type(feed)):
            def on_epoch_begin(self):
                served.append([])
                begin()

            def __getitem__(self, i):
                x, rows = get(i)
                if served:
                    served[-1].append(rows.reshape(-1, 2 + K))
                return x, rows

        feed.__class__ = Recording
        return served


def _fit(feed_kind):
    q_ids, d_ids, positives, first, exclude = _data()
    batches = TupleBatches(first, B, seed=0)
    handed = []
    set_tuples = batches.set_tuples
    batches.set_tuples = lambda t: (handed.append(t), set_tuples(t))
    remine = ReminingCallback(batches, q_ids, d_ids, positives, every_n_epochs=1,
                              mining_options={"range_max": 8, "exclude": exclude},
                              batch_size=16)
    model, loss = _encoder(), _Recorder()
    if feed_kind == "tf":  # the loss records what the model trained on (eager TF)
        from keras_hardneg.sampling import make_tuple_dataset
        feed = make_tuple_dataset(batches, q_ids, d_ids)
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss=loss, run_eagerly=True)
    else:                  # the feed records what it served in each epoch (compiled step)
        feed = make_tuple_py_dataset(batches, q_ids, d_ids)
        served = _ServedFeed.wrap(feed)
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss=loss)
    history = model.fit(feed, epochs=3, callbacks=[remine], verbose=0)
    s = batches.steps_per_epoch
    if feed_kind == "tf":
        epochs = [np.concatenate(loss.rows[-3 * s:][e * s:(e + 1) * s]) for e in range(3)]
    else:
        assert [len(e) for e in served[-3:]] == [s] * 3
        epochs = [np.concatenate(e) for e in served[-3:]]
    return first, handed, epochs, history, remine


def _as_set(tuples):
    return {(int(q), int(p) + Q, *(int(j) + Q for j in n))
            for q, p, n in zip(tuples.query if hasattr(tuples, "query") else tuples[0],
                               tuples.positive if hasattr(tuples, "positive") else tuples[1],
                               tuples.negatives if hasattr(tuples, "negatives") else tuples[2])}


def _check(first, handed, epochs, history, remine):
    assert len(handed) == 2                     # after epochs 0 and 1, not after the last
    seen = [set(map(tuple, e.tolist())) for e in epochs]
    assert seen[0] <= _as_set(first)
    assert seen[1] <= _as_set(handed[0]) and seen[2] <= _as_set(handed[1])
    assert not seen[1] & _as_set(first)       # the re-mined tuples reached epoch 1
    logged = history.history
    assert logged["mining/tuples"] == [16.0, 16.0]
    assert logged["mining/queries_without_tuple"] == [0.0, 0.0]
    assert len(logged["mining/negative_score_p50"]) == 2
    assert all(np.isfinite(v) for v in logged["mining/negative_score_max"])
    assert [h["epoch"] for h in remine.history] == [0, 1]


@pytest.mark.backends
def test_remined_tuples_reach_the_next_epoch_py_dataset():
    _check(*_fit("py"))


def test_remined_tuples_reach_the_next_epoch_tf_data():
    pytest.importorskip("tensorflow")
    if keras.backend.backend() != "tensorflow":
        pytest.skip("the tf.data feed is checked under the TensorFlow backend")
    _check(*_fit("tf"))


@pytest.mark.backends
def test_fewer_tuples_warn_once_and_too_few_raise():
    q_ids, d_ids, positives, first, exclude = _data()
    batches = TupleBatches(first, B, seed=0)
    emb_q = np.tile([[1.0, 0.0]], (Q, 1))
    emb_d = np.tile([[0.0, 1.0]], (N, 1))
    emb_d[:Q] = [1.0, 0.0]                      # positives at cosine 1, the rest at 0
    emb_d[Q:Q + 8] = [0.9, 0.1]                 # 8 candidates above min_score
    fixed = lambda model, inputs: emb_q if len(inputs) == Q else emb_d  # noqa: E731
    positives = [[i] for i in range(8)] + [[] for _ in range(8)]  # 8 queries, no positive
    remine = ReminingCallback(batches, q_ids, d_ids, positives, encode_fn=fixed,
                              mining_options={"min_score": 0.5, "range_max": 4})
    with pytest.warns(UserWarning, match=r"re-mining after epoch 1 left 8 tuples \(16 before"
                      r".*8 no positive") as w:
        remine.remine(0)  # Keras' epoch 0 is the "Epoch 1/N" it prints
    assert len(w) == 1 and batches.num_tuples == 8
    batches = TupleBatches(first, B, seed=0)
    remine = ReminingCallback(batches, q_ids, d_ids, positives, encode_fn=fixed,
                              mining_options={"min_score": 0.5, "range_max": 4})
    with pytest.warns(UserWarning, match=r"the mining before training left 8 tuples"):
        remine.remine(-1)
    remine = ReminingCallback(batches, q_ids, d_ids, [[0]] + [[]] * (Q - 1), encode_fn=fixed,
                              mining_options={"min_score": 0.5, "range_max": 4})
    with pytest.warns(UserWarning), pytest.raises(ValueError, match="`batch_size`"):
        remine.remine(1)


@pytest.mark.backends
@pytest.mark.parametrize("kwargs,match", [
    ({"every_n_epochs": 0}, "`every_n_epochs` must be an integer >= 1"),
    ({"mining_options": {"num_negatives": 3}}, r"`mining_options\['num_negatives'\]` is 3"),
    ({"mining_options": {"margin": 0.1}}, "`mining_options` has 'margin'"),
    ({"encode_fn": 3}, "`encode_fn` must be None or a callable"),
    ({"positives": [[0]]}, "`positives` must hold one entry per query"),
])
def test_bad_settings_are_refused_naming_the_parameter(kwargs, match):
    q_ids, d_ids, positives, first, _ = _data()
    args = {"positives": positives, **kwargs}
    with pytest.raises(ValueError, match=match):
        ReminingCallback(TupleBatches(first, B), q_ids, d_ids, args.pop("positives"), **args)
    with pytest.raises(ValueError, match="pairs \\(K=0\\)"):
        ReminingCallback(TupleBatches(first[:2], B), q_ids, d_ids, positives)
