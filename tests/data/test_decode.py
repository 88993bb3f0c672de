"""One decoder: every route that reads an image file gives the same pixels."""

import io

import numpy as np
import pytest
from PIL import Image

from keras_hardneg.data import image_folder, load_image_folder_arrays
from keras_hardneg.data.decode import (ImageDecodeError, decode_image, decode_images,
                                       to_unit_float)
from keras_hardneg.sampling import UniformSampler, make_dataset

HEIGHT, WIDTH = 13, 7  # odd on purpose


def _write_folder(root):
    """root/{a,b}: JPEG RGB, JPEG grayscale, PNG RGB, PNG grayscale, PNG RGBA, palette PNG
    with transparency, 16-bit grayscale PNG, GIF; all 13x7. Returns paths in label-then-name
    order (the loaders' order)."""
    rng = np.random.default_rng(0)
    smooth = np.linspace(0, 255, HEIGHT * WIDTH * 3).reshape(HEIGHT, WIDTH, 3)
    rgb = (0.5 * smooth + 0.5 * rng.integers(0, 256, (HEIGHT, WIDTH, 3))).astype(np.uint8)
    gray = rng.integers(0, 256, (HEIGHT, WIDTH), dtype=np.uint8)
    files = {
        "a/0_rgb.jpg": lambda p: Image.fromarray(rgb).save(p, quality=85),
        "a/1_gray.jpg": lambda p: Image.fromarray(gray, mode="L").save(p, quality=90),
        "a/2_rgb.png": lambda p: Image.fromarray(rgb).save(p),
        "a/3_gray.png": lambda p: Image.fromarray(gray, mode="L").save(p),
        "b/4_rgba.png": lambda p: Image.fromarray(
            rng.integers(0, 256, (HEIGHT, WIDTH, 4), dtype=np.uint8), mode="RGBA").save(p),
        "b/5_palette.png": lambda p: Image.fromarray(rgb).convert("P").save(p, transparency=3),
        "b/6_gray16.png": lambda p: Image.fromarray(
            (rng.random((HEIGHT, WIDTH)) * 65535).astype(np.uint16)).save(p),
        "b/7_anim.gif": lambda p: Image.fromarray(rgb).convert("P").save(p),
    }
    paths = []
    for name, write in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        write(path)
        paths.append(str(path))
    return paths


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("decode") / "images"
    return root, _write_folder(root)


def _by_sampler(paths, image_size):
    ds = make_dataset(UniformSampler(len(paths), 4, seed=3), paths, image_size=image_size,
                      repeat=False)
    out = {}
    for element in ds:
        for i, image in zip(element["index"].numpy(), element["images"].numpy()):
            out[int(i)] = image
    assert sorted(out) == list(range(len(paths)))
    return np.stack([out[i] for i in range(len(paths))])


@pytest.mark.parametrize("image_size", [None, (9, 11), (24, 5), (4, 3)])
def test_every_route_gives_the_same_pixels(folder, image_size):
    root, paths = folder
    size = image_size or (HEIGHT, WIDTH)
    reference = np.stack([to_unit_float(decode_image(p, image_size)) for p in paths])
    assert reference.shape == (len(paths), *size, 3) and reference.dtype == np.float32

    arrays, labels = load_image_folder_arrays(root, image_size=size)
    np.testing.assert_array_equal(labels, [0, 0, 0, 0, 1, 1, 1, 1])
    np.testing.assert_array_equal(arrays, reference)

    ds = image_folder(root, image_size=size, batch_size=3, shuffle=False)
    assert ds.report.file_paths == paths
    pipeline = np.concatenate([x.numpy() for x, _ in ds])
    np.testing.assert_array_equal(pipeline, reference)

    np.testing.assert_array_equal(_by_sampler(paths, image_size), reference)

    cached = image_folder(root, image_size=size, batch_size=8, shuffle=False, cache=True)
    for _ in range(2):  # the first epoch fills the uint8 cache, the second reads it
        np.testing.assert_array_equal(next(iter(cached))[0].numpy(), reference)


def test_decoding_conventions(folder):
    _, paths = folder
    names = [p.rsplit("/", 1)[-1] for p in paths]
    get = {n: decode_image(p) for n, p in zip(names, paths)}
    pil = {n: Image.open(p) for n, p in zip(names, paths)}
    # lossless formats: exactly Pillow's pixels; grey replicated; alpha dropped
    np.testing.assert_array_equal(get["2_rgb.png"], np.asarray(pil["2_rgb.png"]))
    gray = np.asarray(pil["3_gray.png"])
    np.testing.assert_array_equal(get["3_gray.png"], np.stack([gray] * 3, -1))
    np.testing.assert_array_equal(get["4_rgba.png"], np.asarray(pil["4_rgba.png"])[..., :3])
    np.testing.assert_array_equal(get["6_gray16.png"][..., 0],
                                  (np.asarray(pil["6_gray16.png"]).astype(np.int64) >> 8))
    np.testing.assert_array_equal(get["0_rgb.jpg"], np.asarray(pil["0_rgb.jpg"].convert("RGB")))
    for image in get.values():
        assert image.shape == (HEIGHT, WIDTH, 3) and image.dtype == np.uint8
    # bytes in = path in; an int size means square; the resize filter is Pillow's BILINEAR
    raw = open(paths[0], "rb").read()
    np.testing.assert_array_equal(decode_image(raw, 6), decode_image(paths[0], (6, 6)))
    want = np.asarray(pil["0_rgb.jpg"].convert("RGB").resize((11, 9), Image.BILINEAR))
    np.testing.assert_array_equal(decode_image(paths[0], (9, 11)), want)
    luma = decode_image(paths[0], channels=1)
    assert luma.shape == (HEIGHT, WIDTH, 1)


def test_unit_float_is_bit_identical_in_numpy_and_tensorflow():
    import tensorflow as tf

    pixels = np.arange(256, dtype=np.uint8).reshape(16, 16)
    np_out = to_unit_float(pixels)
    tf_out = tf.function(to_unit_float)(tf.constant(pixels)).numpy()
    assert np_out.dtype == np.float32 and np_out[-1, -1] == 1.0
    np.testing.assert_array_equal(np_out, tf_out)
    np.testing.assert_array_equal(to_unit_float(np.array([65535], np.uint16)), [1.0])
    np.testing.assert_array_equal(tf.image.convert_image_dtype(tf.constant(pixels), tf.float32),
                                  np_out)  # the tfds route's conversion agrees
    with pytest.raises(ValueError, match="uint8 or uint16"):
        to_unit_float(np.array([1], np.int32))


def test_undecodable_files_are_named(tmp_path, folder):
    bad = tmp_path / "broken.jpg"
    bad.write_bytes(open(folder[1][0], "rb").read()[:60])
    text = tmp_path / "text.png"
    text.write_text("not an image")
    for path in (bad, text, tmp_path / "missing.png"):
        with pytest.raises(ImageDecodeError, match=path.name):
            decode_image(path)
    with pytest.raises(ValueError, match="broken.jpg"):
        decode_image(str(bad))
    images, ok = decode_images([folder[1][0], str(bad)], (5, 5), on_error="skip")
    assert ok.tolist() == [True, False] and not images[1].any()
    with pytest.raises(ImageDecodeError, match="broken.jpg"):
        decode_images([folder[1][0], str(bad)], (5, 5))
    Image.new("RGB", (2, 2)).save(tmp_path / "small.png")
    with pytest.raises(ValueError, match="different sizes"):
        decode_images([folder[1][0], str(tmp_path / "small.png")])
    # the sampler's reader names the file too
    ds = make_dataset(UniformSampler(2, 2, seed=0), [folder[1][0], str(bad)], image_size=(5, 5))
    with pytest.raises(Exception, match="broken.jpg"):
        next(iter(ds))


def test_image_folder_pipeline_skips_without_prepass(tmp_path, folder, caplog):
    root = tmp_path / "r"
    (root / "c").mkdir(parents=True)
    good = open(folder[1][2], "rb").read()
    (root / "c" / "0.png").write_bytes(good)
    (root / "c" / "1.png").write_bytes(good[:40])
    ds = image_folder(root, image_size=(HEIGHT, WIDTH), validate="none", shuffle=False)
    x, _ = next(iter(ds))
    assert x.shape[0] == 1
    assert "1.png" in caplog.text
    with pytest.raises(Exception, match="1.png"):
        list(image_folder(root, image_size=4, validate="none", on_error="raise"))


def test_png_bytes_roundtrip():
    buf = io.BytesIO()
    Image.new("LA", (3, 2), (200, 10)).save(buf, format="PNG")
    np.testing.assert_array_equal(decode_image(buf.getvalue()), np.full((2, 3, 3), 200))
