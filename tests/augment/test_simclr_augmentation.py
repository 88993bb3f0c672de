"""SimCLR augmentation: shapes/range, per-image randomness, crop/flip/blur geometry,
seeding, serialization -- on every backend (tf.function / tf.data / XLA in test_simclr_tf.py,
compiled steps in test_simclr_compiled.py)."""

import keras
import numpy as np
import pytest

from keras_hardneg.augment import RandomApply, SimCLRAugmentation, simclr_augmentation, two_views
from tests.augment.backend_utils import images as _images
from tests.augment.backend_utils import n_distinct as _n_distinct
from tests.augment.backend_utils import run
from tests.augment.backend_utils import same_image_batch as _same_image_batch

pytestmark = pytest.mark.backends

# Everything off except what a test switches on.
OFF = dict(crop_scale=(1.0, 1.0), crop_ratio=(1.0, 1.0), flip=False, jitter_prob=0.0,
           grayscale_prob=0.0, blur_prob=0.0, solarize_prob=(0.0, 0.0))


@pytest.mark.parametrize("version", ["v1", "v2", "v3"])
def test_shape_range_dtype(version):
    aug = simclr_augmentation(16, version=version, seed=0, blur_prob=0.5)
    v1, v2 = aug.two_views(_images())
    for v in (v1, v2):
        v = np.asarray(v)
        assert v.shape == (8, 16, 16, 3) and v.dtype == np.float32
        assert v.min() >= 0.0 and v.max() <= 1.0
    assert not np.allclose(v1, v2)


def test_other_input_size_and_unbatched():
    aug = simclr_augmentation(16, seed=0)  # shapes no other test uses: jitted under JAX
    assert tuple(run(aug, np.random.rand(2, 40, 24, 3)).shape) == (2, 16, 16, 3)
    assert tuple(run(aug, _images(1)[0]).shape) == (16, 16, 3)
    assert tuple(aug(_images(), training=False).shape) == (8, 16, 16, 3)
    np.testing.assert_allclose(aug(_images(), training=False), _images())


def test_identity_when_everything_off():
    aug = SimCLRAugmentation(16, seed=0, **OFF)
    np.testing.assert_allclose(aug(_images()), _images(), atol=1e-5)


def test_per_image_randomness_of_default_pipeline():
    out = simclr_augmentation(16, seed=0)(_same_image_batch())
    assert _n_distinct(out) == 16


@pytest.mark.parametrize("option, value", [("grayscale_prob", 0.5), ("jitter_prob", 0.5),
                                           ("flip", True), ("blur_prob", 0.5)])
def test_random_apply_is_per_image(option, value):
    """With p=0.5 one batch has both changed and unchanged copies of the same image."""
    kwargs = dict(OFF)
    kwargs[option] = value
    x = _same_image_batch(32)
    out = np.asarray(SimCLRAugmentation(16, seed=3, **kwargs)(x))
    unchanged = np.all(np.isclose(out, x, atol=1e-5), axis=(1, 2, 3))
    assert 0 < unchanged.sum() < 32
    if option == "grayscale_prob":
        gray = np.all(np.isclose(out[..., 0], out[..., 1], atol=1e-5), axis=(1, 2))
        np.testing.assert_array_equal(gray, ~unchanged)


def test_jitter_parameters_differ_per_image():
    kwargs = dict(OFF, jitter_prob=1.0)
    out = SimCLRAugmentation(16, seed=0, **kwargs)(_same_image_batch(16))
    assert _n_distinct(out) == 16


def test_solarization_second_view_only_v3():
    kwargs = dict(OFF)
    kwargs.pop("solarize_prob")
    aug = SimCLRAugmentation(16, version="v3", seed=0, **kwargs)
    assert aug.solarize_prob == (0.0, 0.2)
    aug = SimCLRAugmentation(16, version="v3", seed=0, solarize_prob=(0.0, 1.0), **kwargs)
    x = _images()
    v1, v2 = two_views(aug)(x)
    np.testing.assert_allclose(v1, x, atol=1e-5)
    np.testing.assert_allclose(v2, np.where(x < 0.5, x, 1.0 - x), atol=1e-5)


def test_blur_smooths():
    x = _images(4, 32)
    out = np.asarray(run(SimCLRAugmentation(32, seed=0, **dict(OFF, blur_prob=1.0)), x))
    tv = lambda a: np.abs(np.diff(a, axis=1)).mean()  # noqa: E731
    assert tv(out) < 0.8 * tv(x)
    np.testing.assert_allclose(out.mean(), x.mean(), atol=0.02)


def test_seed_reproducible():
    a = simclr_augmentation(16, seed=7)(_images())
    b = simclr_augmentation(16, seed=7)(_images())
    np.testing.assert_array_equal(a, b)


def test_mixed_precision_policy_keeps_float32():
    old = keras.mixed_precision.global_policy()
    try:
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
        out = simclr_augmentation(16, seed=0)(_images())
        assert keras.backend.standardize_dtype(out.dtype) == "float32"
    finally:
        keras.mixed_precision.set_global_policy(old)


def test_serialization(tmp_path):
    aug = simclr_augmentation(16, version="v2", strength=0.5, seed=3, blur_prob=0.25)
    restored = SimCLRAugmentation.from_config(aug.get_config())
    assert restored.get_config() == aug.get_config()
    model = keras.Sequential([keras.Input((16, 16, 3)), aug, keras.layers.Flatten(),
                              keras.layers.Dense(1)])
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.layers[0].get_config() == aug.get_config()


def test_random_apply_wrapper_per_image():
    sol = keras.layers.Solarization(threshold_factor=(0.5, 0.5), value_range=(0, 1))
    layer = RandomApply(sol, 0.5, seed=0)
    x = _same_image_batch(32)
    out = np.asarray(layer(x))
    changed = ~np.all(np.isclose(out, x), axis=(1, 2, 3))
    assert 0 < changed.sum() < 32
    np.testing.assert_allclose(layer(x, training=False), x)
    restored = RandomApply.from_config(layer.get_config())
    assert restored.probability == 0.5 and isinstance(restored.layer, keras.layers.Solarization)


@pytest.mark.parametrize("kwargs, name", [
    (dict(image_size=7), "image_size"),
    (dict(version="v4"), "version"),
    (dict(strength=-1.0), "strength"),
    (dict(crop_scale=(0.5, 0.2)), "crop_scale"),
    (dict(blur_prob=1.5), "blur_prob"),
    (dict(jitter_prob=-0.1), "jitter_prob"),
])
def test_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        simclr_augmentation(**kwargs)


def test_affine_jitter_close_to_exact_reference_jitter():
    """Same seed -> same factors/order; the fast affine jitter ~ sequential HSV jitter."""
    x = 0.3 + 0.4 * _images(16)
    for version in ("v1", "v2"):
        kw = dict(OFF, jitter_prob=1.0, strength=0.25, version=version)
        fast = np.asarray(SimCLRAugmentation(16, seed=4, **kw)(x))
        exact = np.asarray(SimCLRAugmentation(16, seed=4, exact_color_jitter=True, **kw)(x))
        assert not np.allclose(fast, x, atol=1e-3)
        assert np.abs(fast - exact).mean() < 0.01


def _coordinate_images(b, height, width):
    """Channel 0 = row / (H - 1), channel 1 = column / (W - 1), channel 2 = 0.5."""
    rows = np.broadcast_to(np.linspace(0, 1, height)[:, None], (height, width))
    cols = np.broadcast_to(np.linspace(0, 1, width)[None, :], (height, width))
    img = np.stack([rows, cols, np.full((height, width), 0.5)], axis=-1).astype("float32")
    return np.repeat(img[None], b, axis=0)


@pytest.mark.parametrize("crop_scale, crop_ratio", [((0.08, 1.0), (3 / 4, 4 / 3)),
                                                    ((0.3, 0.3), (2.0, 2.0))])
def test_random_resized_crop_is_a_bilinear_window(crop_scale, crop_ratio):
    """Replaces the TF version's pixel-exact CropAndResize behaviour: resampling a linear
    ramp bilinearly gives a linear ramp, so each output recovers its crop window, whose
    area fraction and aspect ratio must be in range (crop_ratio 2 on a 3/4 image fits; a
    window that never fits falls back to the whole image)."""
    h, w, s = 30, 40, 16
    x = _coordinate_images(64, h, w)
    aug = SimCLRAugmentation(s, seed=5, **dict(OFF, crop_scale=crop_scale,
                                                  crop_ratio=crop_ratio))
    out = np.asarray(aug(x))
    rows, cols = out[..., 0], out[..., 1]
    # Rows depend only on the output row, columns only on the output column, linearly.
    np.testing.assert_allclose(rows, rows[:, :, :1].repeat(s, axis=2), atol=1e-5)
    np.testing.assert_allclose(cols, cols[:, :1, :].repeat(s, axis=1), atol=1e-5)
    np.testing.assert_allclose(np.diff(rows[:, :, 0], 2, axis=1), 0, atol=1e-4)
    np.testing.assert_allclose(out[..., 2], 0.5, atol=1e-6)
    assert rows.min() >= 0 and rows.max() <= 1 and cols.min() >= 0 and cols.max() <= 1
    ch = (rows[:, -1, 0] - rows[:, 0, 0]) * (h - 1) + 1          # crop height in pixels
    cw = (cols[:, 0, -1] - cols[:, 0, 0]) * (w - 1) + 1
    area, ratio = ch * cw / (h * w), cw / ch
    whole = np.isclose(area, 1.0, atol=1e-3)
    fits = ~whole
    assert fits.sum() >= 48                      # 10 attempts: nearly always a crop
    assert np.all(area[fits] >= crop_scale[0] - 1e-3) and np.all(area[fits] <= crop_scale[1] + 1e-3)
    assert np.all(ratio[fits] >= crop_ratio[0] - 1e-3) and np.all(ratio[fits] <= crop_ratio[1] + 1e-3)
    if crop_scale[0] < crop_scale[1]:
        assert np.ptp(area) > 0.3 and len(np.unique(np.round(rows[:, 0, 0], 3))) > 32


def _torchvision_box(u, height, width, scale, ratio):
    """NumPy transcription of torchvision's ``RandomResizedCrop.get_params`` on the layer's
    uniform draw ``u`` (columns 0-9 area, 10-19 log-ratio, 20 / 21 row / column offset):
    ``(top, left, h, w)`` of a box of whole pixels."""
    f = np.float32
    for k in range(10):
        area = f(height * width) * (f(scale[0]) + f(scale[1] - scale[0]) * u[k])
        log_r = f(np.log(ratio[0])) + f(np.log(ratio[1]) - np.log(ratio[0])) * u[10 + k]
        w = int(np.round(np.sqrt(area * np.exp(log_r))))
        h = int(np.round(np.sqrt(area / np.exp(log_r))))
        if 0 < w <= width and 0 < h <= height:
            top = min(int(np.floor(u[20] * f(height - h + 1))), height - h)
            left = min(int(np.floor(u[21] * f(width - w + 1))), width - w)
            return top, left, h, w
    in_ratio = width / height  # the fallback: a centre crop of the clamped ratio
    w, h = width, height
    if in_ratio < ratio[0]:
        h = int(round(w / ratio[0]))
    elif in_ratio > ratio[1]:
        w = int(round(h * ratio[1]))
    return (height - h) // 2, (width - w) // 2, h, w


@pytest.mark.parametrize("height, width, crop_scale", [(20, 28, (0.08, 1.0)),
                                                       (10, 40, (1.0, 1.0))])
def test_integer_crop_boxes_equal_pillows_crop_and_bilinear_resize(height, width, crop_scale):
    """``crop_boxes="integer"``: torchvision's box (whole pixels; the second case never fits
    and takes the centre-crop fallback), cropped and resized as Pillow does (bilinear,
    half-pixel centres, upsampling: the output is not smaller than the box)."""
    from PIL import Image

    size, b = 40, 24
    x = np.random.default_rng(3).random((b, height, width, 3), dtype=np.float32)
    kw = dict(OFF, crop_scale=crop_scale, crop_ratio=(3 / 4, 4 / 3), crop_boxes="integer")
    out = np.asarray(SimCLRAugmentation(size, seed=11, **kw)(x))
    # A fresh layer with the same seed makes the same one draw the call made.
    u = np.asarray(SimCLRAugmentation(size, seed=11, **kw)._draw(b))
    boxes = set()
    for i in range(b):
        top, left, h, w = _torchvision_box(u[i], height, width, crop_scale, (3 / 4, 4 / 3))
        boxes.add((h, w))
        want = np.stack([np.asarray(Image.fromarray(x[i, :, :, c])  # float32: mode "F"
                                    .crop((left, top, left + w, top + h))
                                    .resize((size, size), Image.BILINEAR)) for c in range(3)], -1)
        np.testing.assert_allclose(out[i], want, atol=2e-5, err_msg=f"image {i}")
    assert len(boxes) > (10 if crop_scale[0] < 1 else 0), boxes
    if crop_scale == (1.0, 1.0):
        assert boxes == {(10, 13)}  # round(10 * 4/3) wide, the full height


def test_continuous_and_integer_crop_boxes_are_checked_and_serialized():
    with pytest.raises(ValueError, match="crop_boxes must be one of"):
        SimCLRAugmentation(16, crop_boxes="pixel")
    aug = SimCLRAugmentation(16, crop_boxes="integer")
    assert SimCLRAugmentation.from_config(aug.get_config()).crop_boxes == "integer"
    assert SimCLRAugmentation(16).crop_boxes == "continuous"


def test_flip_reverses_columns_exactly():
    x = _images(32)
    out = np.asarray(SimCLRAugmentation(16, seed=1, **dict(OFF, flip=True))(x))
    flipped = np.all(np.isclose(out, x[:, :, ::-1], atol=1e-5), axis=(1, 2, 3))
    same = np.all(np.isclose(out, x, atol=1e-5), axis=(1, 2, 3))
    assert np.all(flipped ^ same) and 0 < flipped.sum() < 32


def _reflect_blur_reference(x, sigma, radius):
    """NumPy: separable Gaussian (radius r, normalised over 2r+1 taps), reflect border."""
    t = np.arange(-radius, radius + 1)
    out = []
    for img, s in zip(x, sigma):
        k = np.exp(-t ** 2 / (2 * s ** 2))
        k /= k.sum()
        pad = np.pad(img, ((radius, radius), (radius, radius), (0, 0)), mode="reflect")
        rows = sum(k[i] * pad[i:i + img.shape[0]] for i in range(len(t)))
        out.append(sum(k[i] * rows[:, i:i + img.shape[1]] for i in range(len(t))))
    return np.stack(out)


@pytest.mark.parametrize("size", [8, 40])
def test_blur_matrices_equal_reflect_padded_gaussian(size):
    aug = SimCLRAugmentation(size, seed=2, **dict(OFF, blur_prob=1.0))
    aug.blur_radius = 5 if size == 8 else aug.blur_radius   # radius > size / 2 on 8 px
    x = _images(3, size)
    # Replay the call's one uniform draw to read each image's sigma.
    state = keras.ops.convert_to_numpy(aug.seed_generator.state.value).copy()
    out = np.asarray(run(aug, x))  # one jax.jit compilation under JAX (eager on TF)
    aug.seed_generator.state.assign(state)
    sigma = keras.ops.convert_to_numpy(aug._take(aug._draw(3), "sigma", 0.1, 2.0))
    np.testing.assert_allclose(out, _reflect_blur_reference(x, sigma, aug.blur_radius),
                               atol=1e-5)


def test_bad_image_shape_names_the_input():
    with pytest.raises(ValueError, match=r"images must have shape"):
        simclr_augmentation(16)(np.zeros((2, 16, 16, 4), "float32"))


def test_seed_generator_state_is_a_layer_variable():
    """What lets a compiled step (JAX trainer, stateless_call) carry the random state."""
    aug = simclr_augmentation(16, seed=0)
    assert any(v is aug.seed_generator.state for v in aug.non_trainable_variables)
    assert not aug.trainable_variables


def _only_contrast_draw(batch, contrast_u, order=(1, 0, 2, 3)):
    """A draw ``u`` whose jitter is contrast alone (brightness and saturation factor 1,
    hue 0) with factor ``1 - b + 2 b * contrast_u``; the other ops' slots come after it."""
    from keras_hardneg.augment.simclr import _DRAWS, _N_DRAWS

    u = np.full((batch, _N_DRAWS), 0.5, "float32")
    u[:, _DRAWS["contrast"]] = contrast_u
    lo, hi = _DRAWS["order"]
    u[:, lo:hi] = np.argsort(order)[None, :] / 4.0   # argsort of the keys -> ``order``
    return u


@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize("contrast_mean", ["channel", "gray"])
def test_contrast_scales_distances_from_the_chosen_mean(exact, contrast_mean):
    """Contrast alone against NumPy: ``clip((x - m) c + m)`` with ``m`` each channel's mean
    (SimCLR's TF code) or the image's mean grey level (torchvision's ``adjust_contrast``)."""
    aug = SimCLRAugmentation(image_size=8, version="v2", exact_color_jitter=exact,
                             contrast_mean=contrast_mean, seed=0)
    x = np.random.default_rng(3).uniform(0.2, 0.8, size=(2, 8, 8, 3)).astype("float32")
    x[1, ..., 0] += 0.15                                    # a colour cast: means differ
    u = _only_contrast_draw(2, np.array([0.1, 0.9], "float32"))
    y = keras.ops.convert_to_numpy(aug._color_jitter(keras.ops.convert_to_tensor(x),
                                                     keras.ops.convert_to_tensor(u)))
    factor = 1 - 0.4 + 0.8 * np.array([0.1, 0.9])
    if contrast_mean == "gray":
        gray = x @ np.array([0.2989, 0.5870, 0.1140])
        m = gray.mean(axis=(1, 2))[:, None, None, None]
    else:
        m = x.mean(axis=(1, 2), keepdims=True)
    ref = np.clip((x - m) * factor[:, None, None, None] + m, 0, 1)
    np.testing.assert_allclose(y, ref, atol=2e-5)


def test_contrast_mean_is_checked_and_serialized():
    aug = SimCLRAugmentation(image_size=8, contrast_mean="gray")
    assert SimCLRAugmentation.from_config(aug.get_config()).contrast_mean == "gray"
    with pytest.raises(ValueError, match="^contrast_mean must be one of"):
        SimCLRAugmentation(image_size=8, contrast_mean="grey")
