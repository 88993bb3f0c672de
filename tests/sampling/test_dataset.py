import numpy as np
import pytest
import tensorflow as tf

from keras_hardneg.sampling import BatchSampler, ProximityGraph, UniformSampler, make_dataset


@pytest.fixture(scope="module")
def images():
    return np.random.default_rng(0).integers(0, 256, size=(60, 6, 5, 3), dtype=np.uint8)


def _check(elem, images, labels=None):
    if labels is not None:
        feats, y = elem
        np.testing.assert_array_equal(y.numpy(), labels[feats["index"].numpy()])
    else:
        feats = elem
    idx = feats["index"].numpy()
    assert feats["index"].dtype == tf.int64 and feats["images"].dtype == tf.float32
    np.testing.assert_allclose(feats["images"].numpy(), images[idx] / 255.0, atol=1e-6)
    return idx


def test_in_memory_arrays_with_and_without_labels(images):
    labels = np.arange(60) * 10
    s = UniformSampler(60, 8, seed=0)
    ds = make_dataset(s, images, labels=labels, repeat=False)
    seen = [_check(e, images, labels) for e in ds]
    assert len(seen) == 8 and np.unique(np.concatenate(seen)).size == 60
    ds = make_dataset(UniformSampler(60, 8, seed=0), images)
    idx = _check(next(iter(ds)), images)
    assert idx.shape == (8,)


def test_indices_follow_the_sampler(images):
    x = images.reshape(60, -1).astype(np.float32)
    g = ProximityGraph.build(x, 30, 5, seed=0)
    ref = BatchSampler(g, 10, seed=4)
    want = [ref.next_batch() for _ in range(5)]
    ds = make_dataset(BatchSampler(g, 10, seed=4), images, prefetch=1)
    got = [e["index"].numpy() for _, e in zip(range(5), ds)]
    assert all((a == b).all() for a, b in zip(want, got))


def test_image_files(images, tmp_path):
    paths = []
    for i, im in enumerate(images[:20]):
        p = tmp_path / f"{i}.png"
        tf.io.write_file(str(p), tf.io.encode_png(im))
        paths.append(str(p))
    labels = list(range(100, 120))
    ds = make_dataset(UniformSampler(20, 4, seed=1), paths, labels=labels, repeat=False)
    out = [_check(e, images[:20], np.array(labels)) for e in ds]
    assert np.unique(np.concatenate(out)).size == 20
    ds = make_dataset(UniformSampler(20, 4, seed=1), paths, image_size=(12, 10))
    assert next(iter(ds))["images"].shape == (4, 12, 10, 3)


class _Source:
    def __init__(self, images):
        self.images = images

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return {"image": self.images[i], "label": np.int64(i % 7)}


def test_random_access_source(images):
    ds = make_dataset(UniformSampler(60, 12, seed=2), _Source(images), repeat=False)
    for feats, y in ds:
        idx = feats["index"].numpy()
        np.testing.assert_array_equal(y.numpy(), idx % 7)
        np.testing.assert_allclose(feats["images"].numpy(), images[idx] / 255.0, atol=1e-6)
    ds = make_dataset(UniformSampler(60, 12, seed=2), _Source(images), labels=False)
    assert set(next(iter(ds)).keys()) == {"images", "index"}


def test_size_mismatch_raises(images):
    with pytest.raises(ValueError, match="source"):
        make_dataset(UniformSampler(50, 5), images)
    with pytest.raises(ValueError, match="labels"):
        make_dataset(UniformSampler(60, 5), images, labels=np.arange(3))
