"""The sampler feed as a keras.utils.PyDataset (make_py_dataset / SamplerPyDataset): the
make_dataset element format without TensorFlow, the sampler's batches in order, resume."""

import io
from concurrent.futures import ThreadPoolExecutor

import keras
import numpy as np
import pytest
from PIL import Image

from keras_hardneg.sampling import (BatchSampler, ProximityGraph, SamplerPyDataset,
                                    UniformSampler, make_py_dataset)

pytestmark = pytest.mark.backends


@pytest.fixture(scope="module")
def images():
    return np.random.default_rng(0).integers(0, 256, size=(60, 6, 5, 3), dtype=np.uint8)


@pytest.fixture(scope="module")
def graph(images):
    return ProximityGraph.build(images.reshape(60, -1).astype(np.float32), 30, 5, seed=0)


def _check(elem, images, labels=None):
    if labels is not None:
        feats, y = elem
        np.testing.assert_array_equal(y, labels[feats["index"]])
    else:
        feats = elem
    assert feats["index"].dtype == np.int64 and feats["images"].dtype == np.float32
    np.testing.assert_allclose(feats["images"], images[feats["index"]] / 255.0, atol=1e-6)
    return feats["index"]


def test_arrays_with_and_without_labels_one_epoch_covers_all(images):
    labels = np.arange(60) * 10
    feed = make_py_dataset(UniformSampler(60, 8, seed=0), images, labels=labels)
    assert isinstance(feed, keras.utils.PyDataset) and feed.num_batches is None
    assert feed.steps_per_epoch == 8
    seen = [_check(feed[i], images, labels) for i in range(feed.steps_per_epoch)]
    assert np.unique(np.concatenate(seen)).size == 60
    assert set(make_py_dataset(UniformSampler(60, 8), images)[0]) == {"images", "index"}


def test_batches_follow_the_sampler_in_order_even_with_threads(images, graph):
    ref = BatchSampler(graph, 10, seed=4)
    want = [ref.next_batch() for _ in range(12)]
    feed = SamplerPyDataset(BatchSampler(graph, 10, seed=4), images)
    with ThreadPoolExecutor(4) as pool:  # out-of-order reads (Keras worker threads)
        got = list(pool.map(lambda i: feed[i]["index"], [3, 0, 2, 1, 5, 4]))
    got = [got[i] for i in np.argsort([3, 0, 2, 1, 5, 4])]
    assert all((a == b).all() for a, b in zip(want[:6], got))
    # Element 0 again starts a new pass that continues the stream (nothing repeated).
    assert (feed[0]["index"] == want[6]).all() and (feed[1]["index"] == want[7]).all()
    with pytest.raises(IndexError, match="already read"):
        feed[1]


def test_resume_from_the_sampler_state(images, graph):
    sampler = BatchSampler(graph, 10, seed=1)
    feed = make_py_dataset(sampler, images)
    for i in range(7):
        feed[i]
    state = sampler.get_state()
    want = [feed[i]["index"] for i in range(7, 12)]
    resumed = BatchSampler(graph, 10, seed=99)
    resumed.set_state(state)  # what AtomicBackupAndRestore does at on_train_begin
    feed2 = make_py_dataset(resumed, images)
    got = [feed2[i]["index"] for i in range(5)]
    assert all((a == b).all() for a, b in zip(want, got))


def test_image_files_and_random_access(images, tmp_path):
    paths = []
    for i, im in enumerate(images[:20]):
        p = tmp_path / f"{i}.png"
        Image.fromarray(im).save(p)
        paths.append(str(p))
    labels = np.arange(100, 120)
    feed = make_py_dataset(UniformSampler(20, 4, seed=1), paths, labels=labels)
    out = [_check(feed[i], images[:20], labels) for i in range(5)]
    assert np.unique(np.concatenate(out)).size == 20
    resized = make_py_dataset(UniformSampler(20, 4, seed=1), paths, image_size=(12, 10))
    assert resized[0]["images"].shape == (4, 12, 10, 3)

    class Source:
        def __len__(self):
            return 60

        def __getitem__(self, i):
            return {"image": images[i], "label": np.int64(i % 7)}

    feed = make_py_dataset(UniformSampler(60, 12, seed=2), Source())
    feats, y = feed[0]
    np.testing.assert_array_equal(y, feats["index"] % 7)
    np.testing.assert_allclose(feats["images"], images[feats["index"]] / 255.0, atol=1e-6)
    feats = make_py_dataset(UniformSampler(60, 12, seed=2), Source(), labels=False,
                            image_size=(12, 10))[0]
    assert set(feats) == {"images", "index"} and feats["images"].shape == (12, 12, 10, 3)
    assert 0.0 <= feats["images"].min() and feats["images"].max() <= 1.0


def test_bad_arguments_name_the_parameter(images):
    with pytest.raises(ValueError, match="source"):
        make_py_dataset(UniformSampler(50, 5), images)
    with pytest.raises(ValueError, match="labels"):
        make_py_dataset(UniformSampler(60, 5), images, labels=np.arange(3))
    with pytest.raises(ValueError, match="use_multiprocessing"):
        make_py_dataset(UniformSampler(60, 5), images, use_multiprocessing=True, workers=2)
    with pytest.raises(ValueError, match="channels"):
        make_py_dataset(UniformSampler(60, 5), images, channels=2)


def test_fit_trains_on_the_sampler_batches(images):
    # A model that records the "index" of every element fit trains on.
    class Recorder(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(1)

        def call(self, x):
            return self.dense(keras.ops.reshape(x["images"], (-1, 90)))

    sampler = UniformSampler(60, 6, seed=3)
    feed = make_py_dataset(sampler, images, labels=np.zeros(60, np.float32))
    drawn = []
    draw = sampler.next_batch
    sampler.next_batch = lambda: drawn.append(draw()) or drawn[-1]
    model = Recorder()
    model.compile(optimizer="sgd", loss="mse")
    history = model.fit(feed, epochs=2, steps_per_epoch=feed.steps_per_epoch, verbose=0)
    assert len(history.history["loss"]) == 2
    # 2 epochs of 10 steps. Keras reads one element ahead to build the unbuilt model. (On
    # TensorFlow Keras wraps a PyDataset in tf.data, whose prefetch reads a varying number
    # ahead; run.train uses make_dataset there.)
    if keras.backend.backend() == "jax":
        assert len(drawn) == 21
    else:
        assert len(drawn) >= 20
