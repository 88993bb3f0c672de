import keras
import numpy as np
import pytest

from keras_hardneg.callbacks import GraphRefreshCallback
from keras_hardneg.callbacks.graph_refresh import linear_restart_prob
from keras_hardneg.sampling import BatchSampler, ProximityGraph, make_dataset

N, B = 256, 32


class BankModel(keras.Model):
    """Stand-in for the frameworks' contract: ``embedding_bank`` [N, d], filled in train_step
    at x["index"] with the (unit-norm) projections of the batch."""

    def __init__(self, memory_bank_size=None, dim=8):
        super().__init__()
        self.flat = keras.layers.Flatten()
        self.proj = keras.layers.Dense(dim)
        self.embedding_bank = None
        if memory_bank_size:
            self.embedding_bank = keras.Variable(
                np.zeros((memory_bank_size, dim), "float32"), trainable=False,
                name="embedding_bank")

    def call(self, x):
        z = self.proj(self.flat(x))
        return z / keras.ops.maximum(keras.ops.norm(z, axis=1, keepdims=True), 1e-12)

    def train_step(self, data):
        x = data[0] if isinstance(data, tuple) else data
        z = self(x["images"])
        if self.embedding_bank is not None:
            self.embedding_bank.assign(keras.ops.scatter_update(
                self.embedding_bank, keras.ops.expand_dims(x["index"], 1), z))
        return {"loss": keras.ops.mean(z)}


@pytest.fixture()
def setup():
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(N, 4, 4, 3), dtype=np.uint8)
    g = ProximityGraph.build(images.reshape(N, -1).astype("float32"), 64, 8, seed=0)
    sampler = BatchSampler(g, B, restart_prob=0.2, seed=0, num_candidates=64,
                           num_neighbors=8)
    return images, sampler


def test_refresh_from_embedding_bank_and_alpha_decay(setup):
    images, sampler = setup
    model = BankModel(memory_bank_size=N)
    model.compile(optimizer="sgd")
    cb = GraphRefreshCallback(sampler, every_n_steps=5, restart_prob_schedule=(0.2, 0.05))
    before = sampler.neighbors.copy()
    model.fit(make_dataset(sampler, images), epochs=2, steps_per_epoch=10, callbacks=[cb],
              verbose=0)
    assert [r["step"] for r in cb.refreshes] == [5, 10, 15, 20]
    assert not (sampler.neighbors == before).all()
    assert sampler.restart_prob == pytest.approx(0.05)
    # graph equals a rebuild from the bank (same seed as the last refresh)
    bank = keras.ops.convert_to_numpy(model.embedding_bank)
    assert np.abs(np.linalg.norm(bank, axis=1)[np.abs(bank).sum(1) > 0] - 1).max() < 1e-5
    want = ProximityGraph.build(bank, 64, 8, seed=3).neighbors
    seen = np.abs(bank).sum(1) > 0
    assert (sampler.neighbors[seen] == want[seen]).all()


def test_unseen_rows_keep_previous_neighbours(setup):
    images, sampler = setup
    model = BankModel(memory_bank_size=N)
    model.compile(optimizer="sgd")
    before = sampler.neighbors.copy()
    cb = GraphRefreshCallback(sampler, every_n_steps=2)
    model.fit(make_dataset(sampler, images), epochs=1, steps_per_epoch=2, callbacks=[cb],
              verbose=0)
    bank = keras.ops.convert_to_numpy(model.embedding_bank)
    unseen = np.abs(bank).sum(1) == 0
    assert unseen.any() and (~unseen).any()
    assert (sampler.neighbors[unseen] == before[unseen]).all()
    assert not (sampler.neighbors[~unseen] == before[~unseen]).all()


def test_linear_schedule():
    assert linear_restart_prob(0, 101) == pytest.approx(0.2)
    assert linear_restart_prob(50, 101) == pytest.approx(0.125)
    assert linear_restart_prob(100, 101) == pytest.approx(0.05)
    assert linear_restart_prob(500, 101) == pytest.approx(0.05)


def test_missing_bank_raises_clear_error(setup):
    images, sampler = setup
    model = BankModel(memory_bank_size=None)
    model.compile(optimizer="sgd")
    with pytest.raises(ValueError, match="memory_bank_size"):
        model.fit(make_dataset(sampler, images), epochs=1, steps_per_epoch=2,
                  callbacks=[GraphRefreshCallback(sampler)], verbose=0)


def test_reencode_callable(setup):
    images, sampler = setup
    model = BankModel(memory_bank_size=None)
    model.compile(optimizer="sgd")
    calls = []

    def reencode(m):
        calls.append(1)
        return keras.ops.convert_to_numpy(m(images.astype("float32") / 255.0))

    cb = GraphRefreshCallback(sampler, every_n_steps=3, reencode=reencode,
                              restart_prob_schedule=None)
    model.fit(make_dataset(sampler, images), epochs=1, steps_per_epoch=6, callbacks=[cb],
              verbose=0)
    assert len(calls) == 2 and sampler.restart_prob == 0.2


def test_first_graph_from_the_encoder_then_from_the_bank(setup):
    """``reencode_on_train_begin``: the graph is rebuilt once before the first batch from
    the given features (all of them: no row is kept from the previous graph), then from the
    bank every N steps."""
    images, sampler = setup
    model = BankModel(memory_bank_size=N)
    model.compile(optimizer="sgd")
    # Two clusters (even / odd rows): a graph built on these links only rows of one cluster.
    rng = np.random.default_rng(1)
    centers = np.stack([np.eye(8)[0], np.eye(8)[1]]).astype("float32") * 10
    feats = centers[np.arange(N) % 2] + rng.normal(size=(N, 8)).astype("float32")
    seen = []
    cb = GraphRefreshCallback(sampler, every_n_steps=4, restart_prob_schedule=None,
                              reencode_on_train_begin=lambda m: seen.append(m) or feats)
    model.fit(make_dataset(sampler, images), epochs=1, steps_per_epoch=3, callbacks=[cb],
              verbose=0)
    assert seen == [model] and [r["step"] for r in cb.refreshes] == [0]
    want = ProximityGraph.build(feats, 64, 8, seed=0).neighbors
    assert (sampler.neighbors == want).all()
    assert ((sampler.neighbors % 2) == (np.arange(N) % 2)[:, None]).all()
    with pytest.raises(ValueError, match="reencode_on_train_begin"):
        GraphRefreshCallback(sampler, reencode_on_train_begin=feats)


def test_config_roundtrip_and_validation(setup):
    _, sampler = setup
    cb = GraphRefreshCallback(sampler, every_n_steps=7, restart_prob_schedule=(0.3, 0.1))
    cfg = cb.get_config()
    cb2 = GraphRefreshCallback.from_config(cfg, sampler=sampler)
    assert cb2.get_config() == cfg
    assert keras.saving.get_registered_object("keras_hardneg>GraphRefreshCallback") is \
        GraphRefreshCallback
    with pytest.raises(ValueError, match="every_n_steps"):
        GraphRefreshCallback(sampler, every_n_steps=0)
    with pytest.raises(ValueError, match="restart_prob_schedule"):
        GraphRefreshCallback(sampler, restart_prob_schedule=(0.2, 1.0))


def test_asynchronous_refresh(setup):
    images, sampler = setup
    model = BankModel(memory_bank_size=N)
    model.compile(optimizer="sgd")
    cb = GraphRefreshCallback(sampler, every_n_steps=4, asynchronous=True)
    model.fit(make_dataset(sampler, images), epochs=1, steps_per_epoch=12, callbacks=[cb],
              verbose=0)
    assert [r["step"] for r in cb.refreshes] == [4, 8, 12]
    assert all(r["applied_at_step"] >= r["step"] for r in cb.refreshes)
    bank = keras.ops.convert_to_numpy(model.embedding_bank)
    seen = np.abs(bank).sum(1) > 0
    want = ProximityGraph.build(bank, 64, 8, seed=2).neighbors
    assert (sampler.neighbors[seen] == want[seen]).all()
