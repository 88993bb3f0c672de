"""tfds_dataset on tiny datasets built locally (no download)."""

import os

import numpy as np
import pytest
import tensorflow_datasets as tfds
from etils import epath

from keras_hardneg.data import tfds_dataset

NUM_TRAIN, NUM_TEST = 10, 4


class KhnTinyGray(tfds.core.GeneratorBasedBuilder):
    """6x5 grayscale images, 3 classes; label = index % 3, pixel value = 20 * index."""

    VERSION = tfds.core.Version("1.0.0")
    # A builder defined in a test module: give TFDS its paths instead of letting it infer
    # them from package resources (needs the optional `importlib_resources`).
    pkg_dir_path = epath.Path(os.path.dirname(os.path.abspath(__file__)))
    code_path = epath.Path(os.path.abspath(__file__))

    def _info(self):
        return self.dataset_info_from_configs(
            features=tfds.features.FeaturesDict({
                "image": tfds.features.Image(shape=(6, 5, 1)),
                "label": tfds.features.ClassLabel(names=["a", "b", "c"]),
            }),
            supervised_keys=("image", "label"),
        )

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples(NUM_TRAIN), "test": self._generate_examples(NUM_TEST)}

    def _generate_examples(self, n):
        for i in range(n):
            image = np.full((6, 5, 1), 20 * i, dtype=np.uint8)
            yield i, {"image": image, "label": i % 3}


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("tfds")
    KhnTinyGray(data_dir=str(data_dir)).download_and_prepare(
        download_config=tfds.download.DownloadConfig(try_download_gcs=False)
    )
    return str(data_dir)


def _collect(ds):
    xs, ys = zip(*[(x.numpy(), y.numpy()) for x, y in ds])
    return np.concatenate(xs), np.concatenate(ys)


def test_format_and_grey_to_rgb(tiny_dir):
    ds = tfds_dataset("khn_tiny_gray", split="train", data_dir=tiny_dir, batch_size=4,
                      shuffle=False)
    assert ds.class_names == ["a", "b", "c"]
    x, y = _collect(ds)
    assert x.shape == (NUM_TRAIN, 6, 5, 3) and x.dtype == np.float32 and y.dtype == np.int64
    order = np.argsort(x[:, 0, 0, 0])
    np.testing.assert_allclose(x[order, 0, 0, 0], 20 * np.arange(NUM_TRAIN) / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(y[order], np.arange(NUM_TRAIN) % 3)
    np.testing.assert_array_equal(x[..., 0], x[..., 2])


def test_resize_shuffle_seed_and_images_only(tiny_dir):
    kwargs = dict(split="train", data_dir=tiny_dir, image_size=8, batch_size=3, seed=5)
    a = _collect(tfds_dataset("khn_tiny_gray", **kwargs))
    b = _collect(tfds_dataset("khn_tiny_gray", **kwargs))
    assert a[0].shape == (NUM_TRAIN, 8, 8, 3)
    np.testing.assert_array_equal(a[1], b[1])
    images = next(iter(tfds_dataset("khn_tiny_gray", split="test", data_dir=tiny_dir,
                                    with_labels=False, batch_size=8)))
    assert images.shape == (NUM_TEST, 6, 5, 3)


def test_slicing_split(tiny_dir):
    x, _ = _collect(tfds_dataset("khn_tiny_gray", split="train[:5]", data_dir=tiny_dir,
                                 shuffle=False))
    assert x.shape[0] == 5


def test_not_prepared_explains_how_to_prepare(tmp_path):
    with pytest.raises(ValueError, match=r"not prepared in data_dir.*tfds build khn_tiny_gray"):
        tfds_dataset("khn_tiny_gray", data_dir=str(tmp_path))


@pytest.mark.parametrize("kwargs, name", [
    ({"name": "khn_no_such_dataset_xyz"}, "name"),
    ({"split": "validation"}, "split"),
    ({"image_key": "img"}, "image_key"),
    ({"label_key": "y"}, "label_key"),
    ({"batch_size": 0}, "batch_size"),
    ({"image_size": (4, 0)}, "image_size"),
])
def test_invalid_arguments_name_the_parameter(tiny_dir, kwargs, name):
    args = {"name": "khn_tiny_gray", "data_dir": tiny_dir, **kwargs}
    with pytest.raises(ValueError, match=name):
        tfds_dataset(**args)


def test_offline_download_stops_at_once_and_leaves_nothing(tmp_path, monkeypatch):
    """``download=True`` without network: one line within seconds (tfds alone retries each
    file for minutes), and nothing left in the data dir."""
    import time

    from keras_hardneg.data import tfds_loader

    for key in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(tfds_loader, "NETWORK_PROBE", ("127.0.0.1", 9))  # nothing listens
    start = time.perf_counter()
    with pytest.raises(ValueError) as err:
        tfds_dataset("mnist", data_dir=str(tmp_path), download=True)
    assert time.perf_counter() - start < 30
    message = str(err.value)
    assert len(message.splitlines()) == 1 and "cannot be fetched" in message
    assert "tfds build mnist" in message
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


def test_a_failed_prepare_removes_its_temporaries(tmp_path, monkeypatch):
    from keras_hardneg.data import tfds_loader

    monkeypatch.setattr(tfds_loader, "_offline_reason", lambda: None)
    (tmp_path / "kept.tmp.mine").mkdir()  # there before: not ours to remove

    def fail(self, *args, **kwargs):
        (tmp_path / "downloads").mkdir(exist_ok=True)
        (tmp_path / "downloads" / "file.tmp.123").mkdir()
        (tmp_path / "khn_tiny_gray" / "1.0.0.incomplete7").mkdir(parents=True)
        raise ConnectionError("no route to host")

    monkeypatch.setattr(KhnTinyGray, "download_and_prepare", fail)
    with pytest.raises(ValueError, match="could not be fetched and prepared.*ConnectionError"):
        tfds_dataset("khn_tiny_gray", data_dir=str(tmp_path), download=True)
    assert not (tmp_path / "downloads" / "file.tmp.123").exists()
    assert not (tmp_path / "khn_tiny_gray" / "1.0.0.incomplete7").exists()
    assert (tmp_path / "kept.tmp.mine").is_dir()
