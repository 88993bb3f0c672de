"""Random-access image sources: the synthetic dataset (deterministic, lazy), and image folders
and tfds splits read by index giving the pixels of the array path."""

import os
import tracemalloc

import numpy as np
import pytest

from keras_hardneg.data.decode import to_unit_float
from keras_hardneg.data.random_access import ImageFiles, SourceBatches, is_random_access
from keras_hardneg.data.sources import dataset_spec
from keras_hardneg.data.synthetic import IMAGENET_TRAIN_SIZE, SyntheticImages
from keras_hardneg.registry import DATASETS, ConfigError


def test_synthetic_is_deterministic_per_index():
    a, b = SyntheticImages(1000, 16, num_classes=10), SyntheticImages(1000, 16, num_classes=10)
    for i in (0, 7, 999, 123):  # another instance, another read order: the same pixels
        assert np.array_equal(a[i][0], b[i][0])
        assert int(a[i][1]) == i % 10
    assert a[3][0].shape == (16, 16, 3) and a[3][0].dtype == np.uint8
    assert not np.array_equal(a[3][0], a[13][0])   # same class, another example
    assert not np.array_equal(a[3][0], a[4][0])    # another class
    # A test split (offset) holds other images of the same classes.
    test = SyntheticImages(10, 16, num_classes=10, offset=1000)
    assert int(test[3][1]) == 3 and not np.array_equal(test[3][0], a[3][0])


def test_synthetic_decodes_a_real_jpeg_per_read():
    src = SyntheticImages(50, 16, stored_size=32)
    assert src.jpeg(5)[:2] == b"\xff\xd8"  # a JPEG file, decoded then resized on each read
    assert src[5][0].shape == (16, 16, 3)


def test_synthetic_at_imagenet_size_allocates_nothing_proportional_to_n():
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        source = SyntheticImages(IMAGENET_TRAIN_SIZE, 64)
        built = tracemalloc.get_traced_memory()[0] - before
        image, label = source[IMAGENET_TRAIN_SIZE - 1]
    finally:
        tracemalloc.stop()
    assert built < 64 * 1024, built  # vs 15.7 GB for the uint8 arrays
    assert len(source) == IMAGENET_TRAIN_SIZE and image.shape == (64, 64, 3)
    assert int(label) == (IMAGENET_TRAIN_SIZE - 1) % 1000


def test_synthetic_dataset_entry_and_spec():
    assert dataset_spec("synthetic:1281167") == {"name": "synthetic", "num_images": 1281167}
    assert dataset_spec("synthetic") == {"name": "synthetic"}
    with pytest.raises(ConfigError, match="synthetic:N"):
        dataset_spec("synthetic:many")
    (x, y), (xt, yt), desc = DATASETS.build("synthetic", 0, num_images=30, test_images=5,
                                            image_size=8)
    assert is_random_access(x) and y is None and len(x) == 30 and len(xt) == 5
    assert "decoded per read" in desc


def test_source_batches_read_a_subset_in_batches():
    src = SyntheticImages(40, 8, num_classes=4)
    batches = SourceBatches(src, [3, 1, 2, 39, 0], batch_size=2)
    assert batches.num_batches == 3
    images, labels = batches[2]
    assert images.shape == (1, 8, 8, 3) and images.dtype == np.float32
    assert labels.tolist() == [0]
    np.testing.assert_array_equal(batches[0][0], to_unit_float(src.images([3, 1])))


def test_image_folder_by_path_gives_the_array_pixels(messy_folder):
    common = dict(train=str(messy_folder), test=str(messy_folder), image_size=8)
    (xa, ya), _, _ = DATASETS.build("image_folder", 0, access="arrays", **common)
    (xr, yr), (xt, _), desc = DATASETS.build("image_folder", 0, access="random", **common)
    assert isinstance(xr, ImageFiles) and yr is None and "read by path" in desc
    assert len(xr) == len(xa) == 8  # the same files kept (bad ones skipped by both)
    np.testing.assert_array_equal(to_unit_float(xr.images(range(len(xr)))), xa)
    np.testing.assert_array_equal(xr.labels_of(range(len(xr))), ya)
    # "auto" keeps small folders as arrays.
    (xs, _), _, _ = DATASETS.build("image_folder", 0, **common)
    assert isinstance(xs, np.ndarray)


tfds = pytest.importorskip("tensorflow_datasets")
pytest.importorskip("array_record")
from etils import epath  # noqa: E402


class KhnTinyRandomAccess(tfds.core.GeneratorBasedBuilder):
    """6x5 RGB images, 3 classes; pixels a function of the index."""

    VERSION = tfds.core.Version("1.0.0")
    pkg_dir_path = epath.Path(os.path.dirname(os.path.abspath(__file__)))
    code_path = epath.Path(os.path.abspath(__file__))

    def _info(self):
        return self.dataset_info_from_configs(features=tfds.features.FeaturesDict({
            "image": tfds.features.Image(shape=(6, 5, 3)),
            "label": tfds.features.ClassLabel(names=["a", "b", "c"])}))

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples(0, 9), "test": self._generate_examples(50, 4)}

    def _generate_examples(self, start, n):
        for i in range(start, start + n):
            image = np.random.default_rng(i).integers(0, 256, (6, 5, 3), dtype=np.uint8)
            yield i, {"image": image, "label": i % 3}


@pytest.fixture(scope="module")
def tfds_dirs(tmp_path_factory):
    dirs = {}
    for fmt in ("array_record", "tfrecord"):
        data_dir = str(tmp_path_factory.mktemp(f"tfds_{fmt}"))
        KhnTinyRandomAccess(data_dir=data_dir, file_format=fmt).download_and_prepare(
            download_config=tfds.download.DownloadConfig(try_download_gcs=False))
        dirs[fmt] = data_dir
    return dirs


def test_tfds_by_index_gives_the_array_pixels(tfds_dirs):
    name = "khn_tiny_random_access"
    # The same examples prepared as TFRecord (streamed into arrays) and as array_record.
    (xa, ya), (xta, yta), _ = DATASETS.build("tfds", 0, dataset=name, access="arrays",
                                             data_dir=tfds_dirs["tfrecord"])
    (xr, yr), (xtr, _), desc = DATASETS.build("tfds", 0, dataset=name, access="random",
                                              data_dir=tfds_dirs["array_record"])
    assert is_random_access(xr) and yr is None and "read by index" in desc
    assert len(xr) == len(xa) == 9 and len(xtr) == len(xta) == 4
    got, labels = xr.arrays(range(9))
    # Both readers may order the files differently: match each image to its array twin.
    twin = {im.tobytes(): (im, lab) for im, lab in zip(xa, ya)}
    assert {im.tobytes() for im in got} == set(twin)
    for image, label in zip(got, labels):
        np.testing.assert_array_equal(image, twin[image.tobytes()][0])
        assert int(label) == int(twin[image.tobytes()][1])
    # access="arrays" on array_record files: the same arrays, through the index reader.
    (xi, _), _, _ = DATASETS.build("tfds", 0, dataset=name, access="arrays",
                                   data_dir=tfds_dirs["array_record"])
    np.testing.assert_array_equal(xi, got)


def test_tfds_tfrecord_falls_back_to_arrays(tfds_dirs):
    common = dict(dataset="khn_tiny_random_access", data_dir=tfds_dirs["tfrecord"])
    (x, y), _, _ = DATASETS.build("tfds", 0, access="auto", **common)
    assert isinstance(x, np.ndarray) and len(y) == 9
    with pytest.raises(ConfigError, match="array_record"):
        DATASETS.build("tfds", 0, access="random", **common)
