import logging
import os

import numpy as np
import pytest

from keras_hardneg.data import image_folder, load_image_folder_arrays, scan_image_folder

# The shared data folder, relative to the repository (../shared/data from the project root).
CIFAR_DIR = os.path.normpath(
    os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data", "cifar10-jpg")
)


def _collect(dataset):
    images, labels = [], []
    for x, y in dataset:
        images.append(x.numpy())
        labels.append(y.numpy())
    return np.concatenate(images), np.concatenate(labels)


@pytest.mark.parametrize("validate", ["decode", "header"])
def test_skip_counts_and_names_bad_files(messy_folder, validate, caplog):
    with caplog.at_level(logging.WARNING, logger="keras_hardneg.data"):
        ds = image_folder(messy_folder, image_size=(8, 9), batch_size=4, shuffle=False,
                          validate=validate)
    report = ds.report
    assert ds.class_names == ["cat", "dog"]
    assert report.num_skipped == 2
    skipped = sorted(os.path.basename(p) for p, _ in report.skipped)
    assert skipped == ["10_truncated.jpg", "11_text.jpg"]
    assert [os.path.basename(p) for p in report.ignored] == ["notes.txt"]
    assert "10_truncated.jpg" in caplog.text and "11_text.jpg" in caplog.text
    x, y = _collect(ds)
    assert x.shape == (8, 8, 9, 3) and x.dtype == np.float32
    assert 0.0 <= x.min() and x.max() <= 1.0
    assert y.dtype == np.int64 and y.tolist() == [0, 0, 0, 1, 1, 1, 1, 1]
    # grayscale PNG (index 6) became 3 equal channels; RGBA (index 7) lost its alpha.
    np.testing.assert_allclose(x[6, ..., 0], x[6, ..., 1])
    np.testing.assert_allclose(x[6, ..., 0], x[6, ..., 2])


def test_raise_names_the_file(messy_folder):
    with pytest.raises(ValueError, match="10_truncated.jpg"):
        image_folder(messy_folder, on_error="raise")
    with pytest.raises(ValueError, match="10_truncated.jpg.*truncated"):
        image_folder(messy_folder, on_error="raise", validate="header")
    (messy_folder / "dog" / "10_truncated.jpg").unlink()
    for validate in ("decode", "header"):
        with pytest.raises(ValueError, match="11_text.jpg"):
            image_folder(messy_folder, on_error="raise", validate=validate)
    (messy_folder / "dog" / "11_text.jpg").unlink()
    ds = image_folder(messy_folder, on_error="raise", validate="none", image_size=4)
    assert sum(int(b[0].shape[0]) for b in ds) == 8


def test_validate_none_drops_bad_files_in_pipeline(messy_folder):
    ds = image_folder(messy_folder, image_size=8, batch_size=16, shuffle=False,
                      validate="none")
    assert ds.report.num_skipped == 0  # not counted without a pre-pass
    x, y = _collect(ds)
    assert x.shape == (8, 8, 8, 3)


def test_arrays_match_pipeline_and_limit_per_class(messy_folder):
    x, y, report = load_image_folder_arrays(messy_folder, image_size=(10, 12),
                                            limit_per_class=4, return_report=True)
    # dog: 4 readable wanted; the two bad files are replaced by later readable ones.
    assert y.tolist() == [0, 0, 0, 1, 1, 1, 1, 1][:3] + [1, 1, 1, 1]
    assert x.shape == (7, 10, 12, 3)
    assert report.num_skipped == 2
    xd, yd = _collect(image_folder(messy_folder, image_size=(10, 12), shuffle=False,
                                   limit_per_class=4))
    np.testing.assert_array_equal(x, xd)
    # At the native size no resize happens: the PNGs come out exactly as PIL reads them
    # (grey replicated to RGB, alpha dropped).
    from PIL import Image
    x, y, report = load_image_folder_arrays(messy_folder, image_size=(10, 12),
                                            return_report=True)
    for i in (6, 7):
        assert report.file_paths[i].endswith(("12_gray.png", "13_rgba.png"))
        ref = np.asarray(Image.open(report.file_paths[i]).convert("RGB"), np.float32) / 255.0
        np.testing.assert_allclose(x[i], ref, atol=1e-6)


def test_shuffle_is_seeded_and_a_permutation(messy_folder):
    def order(ds):
        return [tuple(np.round(b[0].numpy()[:, 0, 0, 0], 4)) for b in ds]
    a = image_folder(messy_folder, image_size=4, batch_size=8, seed=1)
    b = image_folder(messy_folder, image_size=4, batch_size=8, seed=1)
    first = order(a)
    assert first == order(b)
    assert sorted(first[0]) == sorted(order(image_folder(messy_folder, image_size=4,
                                                        batch_size=8, shuffle=False))[0])


def test_cache_drop_remainder_and_images_only(messy_folder):
    ds = image_folder(messy_folder, image_size=6, batch_size=3, cache=True,
                      drop_remainder=True, labels=False)
    for _ in range(2):
        shapes = [tuple(b.shape) for b in ds]
        assert shapes == [(3, 6, 6, 3), (3, 6, 6, 3)]
    assert ds.report.labels.tolist() == [-1] * 8


def test_flat_folder_needs_labels_false(tmp_path, messy_folder):
    flat = tmp_path / "flat"
    flat.mkdir()
    for p in (messy_folder / "cat").glob("*.jpg"):
        (flat / p.name).write_bytes(p.read_bytes())
    with pytest.raises(ValueError, match="class sub-folders"):
        image_folder(flat)
    images = load_image_folder_arrays(flat, image_size=5, labels=False)
    assert images.shape == (3, 5, 5, 3)


def test_empty_and_non_image_folders_name_the_directory(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="empty"):
        image_folder(empty)
    (empty / "a").mkdir()
    with pytest.raises(ValueError, match="contains no image"):
        image_folder(empty)
    (empty / "a" / "readme.md").write_text("hi")
    with pytest.raises(ValueError, match=r"'.*a'.*contains no image"):
        image_folder(empty)
    with pytest.raises(ValueError, match="directory"):
        image_folder(tmp_path / "missing")


def test_all_files_bad_is_an_error(tmp_path):
    root = tmp_path / "bad" / "only"
    root.mkdir(parents=True)
    (root / "x.png").write_text("nope")
    with pytest.raises(ValueError, match="no readable image"):
        image_folder(tmp_path / "bad")


@pytest.mark.parametrize("kwargs, name", [
    ({"batch_size": 0}, "batch_size"),
    ({"batch_size": 2.5}, "batch_size"),
    ({"image_size": (32,)}, "image_size"),
    ({"image_size": -1}, "image_size"),
    ({"image_size": None}, "image_size"),
    ({"on_error": "ignore"}, "on_error"),
    ({"validate": "full"}, "validate"),
    ({"limit_per_class": 0}, "limit_per_class"),
    ({"cache": 3}, "cache"),
])
def test_invalid_arguments_name_the_parameter(messy_folder, kwargs, name):
    with pytest.raises(ValueError, match=name):
        image_folder(messy_folder, **kwargs)


@pytest.mark.skipif(not os.path.isdir(CIFAR_DIR),
                    reason=f"shared CIFAR-10 JPEG folder not found at {CIFAR_DIR}")
def test_real_cifar10_slice():
    ds = image_folder(os.path.join(CIFAR_DIR, "test"), image_size=32, batch_size=16,
                      limit_per_class=3, seed=0)
    assert ds.class_names == ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog",
                              "horse", "ship", "truck"]
    assert ds.report.num_images == 30 and ds.report.num_skipped == 0
    x, y = _collect(ds)
    assert x.shape == (30, 32, 32, 3) and np.bincount(y).tolist() == [3] * 10
    assert 0.0 <= x.min() and x.max() <= 1.0 and x.std() > 0.1
    report = scan_image_folder(os.path.join(CIFAR_DIR, "train"), limit_per_class=2,
                               validate="header")
    assert report.num_images == 20


def test_other_formats_and_truncated_png(tmp_path):
    from PIL import Image

    rng = np.random.default_rng(0)
    root = tmp_path / "formats" / "only"
    root.mkdir(parents=True)
    rgb = rng.integers(0, 256, size=(6, 7, 3), dtype=np.uint8)
    Image.fromarray(rgb).save(root / "a.bmp")
    Image.fromarray(rgb).convert("P").save(root / "b.gif")
    Image.fromarray(rgb).convert("P").save(root / "c_palette.png")
    Image.fromarray((rng.random((6, 7)) * 65535).astype(np.uint16)).save(root / "d16.png")
    Image.fromarray(rgb).save(root / "e.PNG")
    data = (root / "e.PNG").read_bytes()
    (root / "f_truncated.png").write_bytes(data[: len(data) - 30])
    (root / "g_empty.jpg").write_bytes(b"")
    for validate in ("decode", "header"):
        x, y, report = load_image_folder_arrays(tmp_path / "formats", image_size=(6, 7),
                                                validate=validate, return_report=True)
        names = [os.path.basename(p) for p, _ in report.skipped]
        assert names == ["f_truncated.png", "g_empty.jpg"], (validate, report.skipped)
        assert x.shape == (5, 6, 7, 3) and 0.0 <= x.min() and x.max() <= 1.0
        np.testing.assert_allclose(x[0], rgb / 255.0, atol=1e-6)   # BMP is lossless
        np.testing.assert_allclose(x[4], rgb / 255.0, atol=1e-6)   # PNG is lossless
        assert x[3].max() > 0.5  # 16-bit PNG scaled to [0, 1], not clipped to 1/255 steps
