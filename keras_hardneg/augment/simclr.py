"""SimCLR data augmentation (Chen et al. 2020, "A Simple Framework for Contrastive Learning
of Visual Representations", appendix A), vectorised and random **per image**.

For each image, in this order:

1. random resized crop: area fraction ``U(crop_scale)`` (paper: 0.08-1.0), log-uniform
   aspect ratio in ``[3/4, 4/3]`` (10 attempts, else the whole image), resized (bilinear)
   to ``image_size x image_size``. ``crop_boxes="continuous"`` (default) samples a box of
   real-valued size and offset, resampled pixel centre to pixel centre (TF's
   ``crop_and_resize``); ``"integer"`` is torchvision's ``RandomResizedCrop`` (lightly's):
   a box of whole pixels (rounded size, integer offset; a failed draw falls back to the
   centre crop of the ratio range), resized with half-pixel centres inside the box (as
   Pillow's bilinear resize of the cropped image);
2. horizontal flip with p = 0.5;
3. colour jitter with p = ``jitter_prob`` (0.8): brightness, contrast, saturation, hue in a
   random order (drawn per image), each clipped to ``[0, 1]``; contrast scales each pixel's
   distance from the image's mean -- per channel (``contrast_mean="channel"``, SimCLR's
   ``tf.image.adjust_contrast``) or the mean grey level (``"gray"``, torchvision's and
   Pillow's ``adjust_contrast``, so lightly's); maximal strengths
   ``strength * (0.4, 0.4, 0.4, 0.1)``. ``strength=1`` is the paper's CIFAR colour
   strength ``s = 0.5`` (jitter ``0.8 s, 0.8 s, 0.8 s, 0.2 s``); ``strength=2`` is its
   ImageNet ``s = 1``. Brightness is additive (``x + U(-b, b)``) for ``version="v1"``
   and multiplicative (``x * U(1-b, 1+b)``) for ``"v2"``/``"v3"``, as in the reference
   implementation's two colour-jitter variants;
4. grayscale with p = ``grayscale_prob`` (0.2);
5. Gaussian blur with p = ``blur_prob``, sigma ``U(0.1, 2.0)`` per image, kernel size 10%
   of ``image_size`` (odd). Default p = 0.5 when ``image_size >= 64`` (ImageNet-like) and
   0 for smaller images (SimCLR does not blur CIFAR);
6. ``version="v3"`` only: solarization (``x -> 1 - x`` where ``x >= 0.5``) with p = 0.2
   on the **second view** (as in BYOL's asymmetric pipeline, Grill et al. 2020).

Because the two views may differ (v3), draw views with ``layer(x, view=1)`` and
``layer(x, view=2)``, or with :meth:`SimCLRAugmentation.two_views` / :func:`two_views`.
``view=None`` means view 1.

Input ``[B, H, W, 3]`` or ``[H, W, 3]`` float in ``[0, 1]`` (any ``H, W``); output
``[B, image_size, image_size, 3]`` (or ``[image_size, image_size, 3]``) float32 in
``[0, 1]``. With ``training=False`` images are only resized to ``image_size``
(identity when they already have that size); ``training=None`` (not inside a model's
``fit``/``predict``) augments.

The layer is written in ``keras.ops`` with ``keras.random`` and a
:class:`keras.random.SeedGenerator` held as a layer attribute (its state is a
non-trainable variable of the layer, so it travels through a compiled step), so it runs
on every Keras backend: eagerly, inside a model's ``train_step`` (``tf.function``, with or
without ``jit_compile``; ``jax.jit``), and on TensorFlow inside
``tf.data.Dataset.map`` (batched or single images). Every shape it uses is the input's,
so a jitted step compiles once per input shape, not once per call. The random resized
crop and the flip are one separable bilinear interpolation per image (two batched
matmuls with ``[B, image_size, H]`` and ``[B, image_size, W]`` weight matrices, the
flip reversing the second); the blur is the same with ``[B, image_size, image_size]``
Gaussian matrices (reflect border). A given seed gives the same views on a backend, not
across backends.

Example:

>>> import numpy as np
>>> aug = simclr_augmentation(image_size=32, seed=0)
>>> v1, v2 = aug.two_views(np.random.rand(4, 32, 32, 3).astype("float32"))
>>> tuple(v1.shape), tuple(v2.shape)
((4, 32, 32, 3), (4, 32, 32, 3))
"""

from __future__ import annotations

import math
from typing import Any

import keras
import numpy as np
from keras import ops

__all__ = ["SimCLRAugmentation", "RandomApply", "simclr_augmentation", "two_views",
           "VERSIONS", "CONTRAST_MEANS", "CROP_BOXES"]

#: The recipe versions ``SimCLRAugmentation(version=...)`` takes: ``"v1"`` (additive
#: brightness), ``"v2"`` (multiplicative brightness), ``"v3"`` (v2 plus solarization).
VERSIONS = ("v1", "v2", "v3")
_JITTER = (0.4, 0.4, 0.4, 0.1)          # brightness, contrast, saturation, hue at strength 1
_GRAY = (0.2989, 0.5870, 0.1140)
#: ``contrast_mean``: the mean that colour-jitter contrast scales distances from.
CONTRAST_MEANS = ("channel", "gray")
#: How the random resized crop samples its box (module docstring, step 1).
CROP_BOXES = ("continuous", "integer")
_CROP_ATTEMPTS = 10
# Columns of the one uniform draw ``[B, _N_DRAWS]`` a call makes. One PRNG call instead of
# one per parameter: XLA inlines the threefry generator at every call site, and on CPU
# compiling ~15 of them took longer than everything else in the step.
_DRAWS = {"area": (0, 10), "log_ratio": (10, 20), "oy": 20, "ox": 21, "flip": 22,
          "jitter": 23, "brightness": 24, "contrast": 25, "saturation": 26, "hue": 27,
          "order": (28, 32), "grayscale": 32, "blur": 33, "sigma": 34, "solarize": 35}
_N_DRAWS = 36


def _check_probability(p, what):
    if not isinstance(p, (int, float)) or isinstance(p, bool) or not 0.0 <= p <= 1.0:
        raise ValueError(f"{what} must be a probability in [0, 1], got {p!r}")
    return float(p)


def _to_gray(x):
    return ops.sum(x * ops.convert_to_tensor(_GRAY, x.dtype), axis=-1, keepdims=True)


def _select(mask, a, b):
    """Per-image ``where``: ``mask`` [B] bool picks ``a`` else ``b`` (same shapes, batch first).

    Written as a blend ``b + m * (a - b)``: on CPU (TF) it is several times faster than
    ``where`` with a broadcast condition.
    """
    m = ops.cast(mask, a.dtype)
    m = ops.reshape(m, (-1,) + (1,) * (len(a.shape) - 1))
    return b + m * (a - b)


def _clip01(x):
    # min/max is ~5x faster than clip (TF's ClipByValue kernel) on CPU.
    return ops.minimum(ops.maximum(x, 0.0), 1.0)


def _interpolation_weights(positions, size):
    """Bilinear weights ``[B, S, size]`` of sample ``positions`` ``[B, S]`` (pixel units).

    ``w[b, s, n] = max(0, 1 - |positions[b, s] - n|)``: the two neighbours of a position
    share its weight, an integer position picks one pixel exactly.
    """
    grid = ops.arange(size, dtype="float32")
    return ops.relu(1.0 - ops.abs(positions[:, :, None] - grid[None, None, :]))


@keras.saving.register_keras_serializable(package="keras_hardneg")
class SimCLRAugmentation(keras.layers.Layer):
    """SimCLR augmentation pipeline as one Keras layer (see the module docstring).

    Args:
        image_size: output height = width (>= 8).
        version: ``"v1"`` (additive brightness), ``"v2"`` (multiplicative brightness) or
            ``"v3"`` (v2 + solarization p=0.2 on view 2).
        strength: colour-jitter strength multiplier (>= 0), see the module docstring.
        crop_scale: ``(min, max)`` area fraction of the random resized crop.
        crop_ratio: ``(min, max)`` aspect ratio of the crop.
        flip: random horizontal flip (p = 0.5).
        jitter_prob: probability of colour jitter.
        grayscale_prob: probability of grayscale.
        blur_prob: probability of Gaussian blur; ``None`` -> 0.5 if ``image_size >= 64`` else 0.
        solarize_prob: ``(view1, view2)`` probabilities of solarization; ``None`` ->
            ``(0, 0.2)`` for v3 and ``(0, 0)`` otherwise.
        exact_color_jitter: ``False`` (default): the jitter is composed as one per-image
            affine colour map and clipped once, with the hue shift done as a rotation about
            the grey axis (~10x cheaper on CPU). ``True``: the reference behaviour -- the 4
            ops applied one after another, clipped after each, hue shifted in HSV space.
        contrast_mean: what contrast scales the distance from: ``"channel"`` (default; each
            channel's mean, as SimCLR's TensorFlow code) or ``"gray"`` (the image's mean grey
            level, as torchvision's ``ColorJitter``, which lightly's ``SimCLRTransform`` uses).
        crop_boxes: ``"continuous"`` (default) or ``"integer"`` (torchvision's whole-pixel
            crop box and half-pixel resize), see the module docstring.
        seed: int seed of the layer's :class:`keras.random.SeedGenerator` (``None``: random).

    Example:

    >>> import numpy as np
    >>> aug = SimCLRAugmentation(image_size=16, version="v3", seed=0)
    >>> tuple(aug(np.random.rand(2, 24, 24, 3), view=2).shape)
    (2, 16, 16, 3)
    """

    def __init__(self, image_size: int = 32, version: str = "v1", strength: float = 1.0,
                 crop_scale: tuple[float, float] = (0.08, 1.0),
                 crop_ratio: tuple[float, float] = (3.0 / 4.0, 4.0 / 3.0), flip: bool = True,
                 jitter_prob: float = 0.8, grayscale_prob: float = 0.2,
                 blur_prob: float | None = None, solarize_prob: float | None = None,
                 exact_color_jitter: bool = False, contrast_mean: str = "channel",
                 crop_boxes: str = "continuous", seed: int | None = None, **kwargs: Any):
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        if (isinstance(image_size, bool) or not isinstance(image_size, int) or image_size < 8):
            raise ValueError(f"image_size must be an int >= 8, got {image_size!r}")
        if version not in VERSIONS:
            raise ValueError(f"version must be one of {VERSIONS}, got {version!r}")
        if not isinstance(strength, (int, float)) or isinstance(strength, bool) or strength < 0:
            raise ValueError(f"strength must be a float >= 0, got {strength!r}")
        try:
            lo, hi = (float(v) for v in crop_scale)
        except (TypeError, ValueError):
            raise ValueError(f"crop_scale must be a (min, max) pair, got {crop_scale!r}") \
                from None
        if not 0.0 < lo <= hi <= 1.0:
            raise ValueError(f"crop_scale must satisfy 0 < min <= max <= 1, got {crop_scale!r}")
        try:
            rlo, rhi = (float(v) for v in crop_ratio)
        except (TypeError, ValueError):
            raise ValueError(f"crop_ratio must be a (min, max) pair, got {crop_ratio!r}") \
                from None
        if not 0.0 < rlo <= rhi:
            raise ValueError(f"crop_ratio must satisfy 0 < min <= max, got {crop_ratio!r}")
        self.image_size = image_size
        self.version = version
        self.strength = float(strength)
        self.crop_scale = (lo, hi)
        self.crop_ratio = (rlo, rhi)
        self.flip = bool(flip)
        self.jitter_prob = _check_probability(jitter_prob, "jitter_prob")
        self.grayscale_prob = _check_probability(grayscale_prob, "grayscale_prob")
        if blur_prob is None:
            blur_prob = 0.5 if image_size >= 64 else 0.0
        self.blur_prob = _check_probability(blur_prob, "blur_prob")
        if solarize_prob is None:
            solarize_prob = (0.0, 0.2) if version == "v3" else (0.0, 0.0)
        if isinstance(solarize_prob, (int, float)):
            solarize_prob = (solarize_prob, solarize_prob)
        try:
            solarize_prob = tuple(solarize_prob)
        except TypeError:
            raise ValueError("solarize_prob must be a probability or a (view1, view2) pair, "
                             f"got {solarize_prob!r}") from None
        if len(solarize_prob) != 2:
            raise ValueError(f"solarize_prob must be a (view1, view2) pair, got {solarize_prob!r}")
        self.solarize_prob = tuple(_check_probability(p, "solarize_prob")
                                   for p in solarize_prob)
        self.exact_color_jitter = bool(exact_color_jitter)
        if contrast_mean not in CONTRAST_MEANS:
            raise ValueError(f"contrast_mean must be one of {list(CONTRAST_MEANS)}, "
                             f"got {contrast_mean!r}")
        self.contrast_mean = contrast_mean
        if crop_boxes not in CROP_BOXES:
            raise ValueError(f"crop_boxes must be one of {list(CROP_BOXES)}, got {crop_boxes!r}")
        self.crop_boxes = crop_boxes
        self.seed = seed
        # A layer attribute: its state is one of the layer's non-trainable variables, so
        # a compiled step (Keras's JAX trainer, ``stateless_call``) threads it through.
        self.seed_generator = keras.random.SeedGenerator(seed)
        # SimCLR: kernel size 10% of the image side, odd.
        self.blur_radius = max(1, image_size // 20)
        self.supports_masking = False
        # No shape-dependent weights: usable by ``stateless_call`` before any call.
        self.built = True

    # -- random draws ----------------------------------------------------------------
    def _draw(self, batch):
        """All of a call's random numbers: ``U(0, 1)`` of shape ``[batch, _N_DRAWS]``."""
        return keras.random.uniform((batch, _N_DRAWS), dtype="float32",
                                    seed=self.seed_generator)

    @staticmethod
    def _take(u, name, minval=0.0, maxval=1.0):
        """Column(s) ``name`` of the draw ``u``, scaled to ``U(minval, maxval)``."""
        idx = _DRAWS[name]
        v = u[:, idx[0]:idx[1]] if isinstance(idx, tuple) else u[:, idx]
        return v if (minval, maxval) == (0.0, 1.0) else minval + (maxval - minval) * v

    # -- ops (x: [B, H, W, 3] float32) -------------------------------------------------
    def _crop_weights(self, u, height, width):
        """Bilinear weights ``[B, S, H]`` and ``[B, S, W]`` of each image's random crop.

        Area fraction ``U(crop_scale)``, log-uniform ratio, first of 10 attempts that fits,
        uniform offset. ``crop_boxes="continuous"``: sample ``s`` of a crop of ``c``
        pixels from offset ``o`` is at ``o + s (c - 1) / (S - 1)`` (pixel centres, as TF's
        ``crop_and_resize``: a crop of the whole image at its own size is the identity);
        no attempt fits -> the whole image. ``"integer"`` (torchvision): ``c`` rounded, ``o``
        an integer in ``[0, size - c]``, sample ``s`` at ``o + (s + 1/2) c / S - 1/2``
        clamped to ``[o, o + c - 1]`` (Pillow's bilinear resize of the cropped image); no
        attempt fits -> the centre crop of the ratio range.
        """
        h = ops.cast(height, "float32")
        w = ops.cast(width, "float32")
        n = _CROP_ATTEMPTS
        integer = self.crop_boxes == "integer"
        area = self._take(u, "area", *self.crop_scale) * h * w
        log_r = self._take(u, "log_ratio", math.log(self.crop_ratio[0]),
                           math.log(self.crop_ratio[1]))
        ratio = ops.exp(log_r)
        cw = ops.sqrt(area * ratio)
        ch = ops.sqrt(area / ratio)
        if integer:  # torchvision: int(round(.)); a box of 0 pixels does not fit
            cw, ch = ops.round(cw), ops.round(ch)
            ok = ops.logical_and(ops.logical_and(cw <= w, ch <= h),
                                 ops.logical_and(cw > 0, ch > 0))
        else:
            ok = ops.logical_and(cw <= w, ch <= h)
        first = ops.one_hot(ops.argmax(ops.cast(ok, "int32"), axis=1), n, dtype="float32")
        any_ok = ops.any(ok, axis=1)
        fall_w, fall_h = w, h
        if integer:  # torchvision's fallback: the centre crop of the clamped ratio
            lo, hi = self.crop_ratio
            fall_w = ops.where(w / h > hi, ops.round(h * hi), w)
            fall_h = ops.where(w / h < lo, ops.round(w / lo), h)
        cw = ops.where(any_ok, ops.sum(first * cw, axis=1), fall_w)
        ch = ops.where(any_ok, ops.sum(first * ch, axis=1), fall_h)
        steps = ops.arange(self.image_size, dtype="float32")[None, :]
        if not integer:
            oy = self._take(u, "oy") * (h - ch)
            ox = self._take(u, "ox") * (w - cw)
            # s (c - 1) / (S - 1) in this order: exact for a whole number of pixels.
            last = float(self.image_size - 1)
            py = ops.clip(oy[:, None] + steps * (ch - 1.0)[:, None] / last, 0.0, h - 1.0)
            px = ops.clip(ox[:, None] + steps * (cw - 1.0)[:, None] / last, 0.0, w - 1.0)
            return _interpolation_weights(py, height), _interpolation_weights(px, width)
        # randint(0, size - c + 1); the centre crop's offset is (size - c) // 2.
        oy = ops.where(any_ok, ops.minimum(ops.floor(self._take(u, "oy") * (h - ch + 1.0)),
                                           h - ch), ops.floor((h - ch) / 2.0))
        ox = ops.where(any_ok, ops.minimum(ops.floor(self._take(u, "ox") * (w - cw + 1.0)),
                                           w - cw), ops.floor((w - cw) / 2.0))
        centres = steps + 0.5
        size = float(self.image_size)
        py = ops.clip(oy[:, None] + centres * ch[:, None] / size - 0.5, oy[:, None],
                      (oy + ch - 1.0)[:, None])
        px = ops.clip(ox[:, None] + centres * cw[:, None] / size - 0.5, ox[:, None],
                      (ox + cw - 1.0)[:, None])
        return _interpolation_weights(py, height), _interpolation_weights(px, width)

    def _jitter_factors(self, u):
        b, c, s, hue = (self.strength * f for f in _JITTER)
        if self.version == "v1":    # additive brightness delta
            fb = self._take(u, "brightness", -b, b)
        else:                       # multiplicative brightness factor
            fb = self._take(u, "brightness", max(0.0, 1.0 - b), 1.0 + b)
        fc = self._take(u, "contrast", max(0.0, 1.0 - c), 1.0 + c)
        fs = self._take(u, "saturation", max(0.0, 1.0 - s), 1.0 + s)
        dh = self._take(u, "hue", -hue, hue)
        # A random order of the 4 operations per image: argsort of uniform keys.
        order = ops.cast(ops.argsort(self._take(u, "order"), axis=1), "int32")
        return fb, fc, fs, dh, order

    def _color_jitter(self, x, u):
        if self.exact_color_jitter:
            return self._color_jitter_exact(x, u)
        return self._color_jitter_affine(x, u)

    def _color_jitter_affine(self, x, u):
        """Jitter as one per-image affine colour map ``y = A x + t``, clipped once.

        Brightness, contrast (per-channel mean), saturation (blend with grey) and the hue
        rotation about the grey axis are all affine in the colour, so their composition in
        the image's random order is computed on ``[B, 3, 3]`` matrices and applied once.
        """
        fb, fc, fs, dh, order = self._jitter_factors(u)
        col = lambda v: v[:, None, None]  # noqa: E731  [B] -> [B, 1, 1]
        eye = col(ops.zeros_like(fb)) + ops.eye(3, dtype="float32")              # [B, 3, 3]
        gray_rows = ops.ones((3, 1), "float32") * ops.convert_to_tensor(
            _GRAY, "float32")[None, :]                                            # [3, 3]
        sat = col(fs) * eye + col(1.0 - fs) * gray_rows[None]
        theta = 2.0 * math.pi * dh
        cos = col(ops.cos(theta))
        sin = col(ops.sin(theta))
        cross = ops.convert_to_tensor([[0.0, -1.0, 1.0], [1.0, 0.0, -1.0], [-1.0, 1.0, 0.0]],
                                      "float32")[None]
        rot = cos * eye + (1.0 - cos) * ops.ones((1, 3, 3), "float32") / 3.0 + \
            sin / math.sqrt(3.0) * cross
        mu0 = ops.mean(x, axis=(1, 2))                                            # [B, 3]
        mat, shift = eye, ops.zeros_like(mu0)
        for slot in range(4):
            cands = []
            if self.version == "v1":
                cands.append((mat, shift + fb[:, None]))
            else:
                cands.append((col(fb) * mat, fb[:, None] * shift))
            mu = ops.einsum("bij,bj->bi", mat, mu0) + shift                       # [B, 3]
            if self.contrast_mean == "gray":  # the mean grey level, the same for R, G, B
                mu = ops.sum(mu * gray_rows[0][None, :], axis=1, keepdims=True) * ops.ones(
                    (1, 3), "float32")
            cands.append((col(fc) * mat, fc[:, None] * shift + (1.0 - fc)[:, None] * mu))
            cands.append((ops.matmul(sat, mat), ops.einsum("bij,bj->bi", sat, shift)))
            cands.append((ops.matmul(rot, mat), ops.einsum("bij,bj->bi", rot, shift)))
            onehot = ops.one_hot(order[:, slot], 4, dtype="float32")              # [B, 4]
            mat = sum(col(onehot[:, k]) * m for k, (m, _) in enumerate(cands))
            shift = sum(onehot[:, k, None] * t for k, (_, t) in enumerate(cands))
        y = ops.einsum("bhwc,bdc->bhwd", x, mat) + shift[:, None, None, :]
        return _clip01(y)

    def _color_jitter_exact(self, x, u):
        """Reference-style jitter: 4 ops in a random order, clipping after each, HSV hue."""
        fb, fc, fs, dh, order = self._jitter_factors(u)
        fb4, fc4, fs4 = (f[:, None, None, None] for f in (fb, fc, fs))
        dh3 = dh[:, None, None]
        additive = self.version == "v1"

        def brightness(y):
            return _clip01(y + fb4 if additive else y * fb4)

        def contrast(y):
            mean = ops.mean(_to_gray(y) if self.contrast_mean == "gray" else y, axis=(1, 2),
                            keepdims=True)
            return _clip01((y - mean) * fc4 + mean)

        def saturation(y):
            gray = _to_gray(y)
            return _clip01(gray + (y - gray) * fs4)

        def hue_shift(y):
            hsv = ops.image.rgb_to_hsv(y, data_format="channels_last")
            hh = ops.mod(hsv[..., 0] + dh3, 1.0)
            rgb = ops.image.hsv_to_rgb(ops.stack([hh, hsv[..., 1], hsv[..., 2]], axis=-1),
                                       data_format="channels_last")
            return _clip01(rgb)

        fns = [brightness, contrast, saturation, hue_shift]
        for slot in range(4):
            chosen = order[:, slot]
            out = x
            for k, fn in enumerate(fns):
                out = _select(ops.equal(chosen, k), fn(x), out)
            x = out
        return x

    def _blur_weights(self, u):
        """Per-image Gaussian blur as ``[B, S, S]`` matrices (reflect border, no edge
        repeat): ``m[b, i, j]`` is the weight of pixel ``j`` in output pixel ``i``."""
        r, size = self.blur_radius, self.image_size
        sigma = self._take(u, "sigma", 0.1, 2.0)
        inv = (-0.5 / ops.square(sigma))[:, None, None]                           # [B, 1, 1]
        taps = ops.arange(-r, r + 1, dtype="float32")
        norm = ops.sum(ops.exp(ops.square(taps)[None, :] * inv[:, 0]), axis=1)     # [B]
        i = np.arange(size, dtype="float32")[:, None]
        j = np.arange(size, dtype="float32")[None, :]
        m = 0.0
        # Tap offset t = source - i: direct, reflected at 0 (source -j), reflected at
        # size - 1 (source 2 (size - 1) - j); a radius < size needs one reflection.
        for offset, valid in ((j - i, np.ones_like(i * j, bool)),
                              (-j - i, np.broadcast_to(j >= 1, (size, size))),
                              (2 * (size - 1) - j - i, np.broadcast_to(j <= size - 2,
                                                                       (size, size)))):
            mask = (np.abs(offset) <= r) & valid
            if not mask.any():
                continue
            d2 = np.where(mask, np.square(offset), 0.0).astype("float32")
            m = m + ops.exp(ops.convert_to_tensor(d2)[None] * inv) * mask.astype("float32")
        return m / norm[:, None, None]

    def _augment(self, x, view):
        shape = ops.shape(x)
        u = self._draw(shape[0])
        wy, wx = self._crop_weights(u, shape[1], shape[2])
        if self.flip:
            wx = _select(self._take(u, "flip") < 0.5, ops.flip(wx, axis=1), wx)
        # Random resized crop (+ flip): one separable bilinear resampling per image.
        x = ops.einsum("bsh,bhwc->bswc", wy, x)
        x = ops.einsum("btw,bswc->bstc", wx, x)
        if self.jitter_prob > 0 and self.strength > 0:
            x = _select(self._take(u, "jitter") < self.jitter_prob, self._color_jitter(x, u), x)
        if self.grayscale_prob > 0:
            gray = ops.repeat(_to_gray(x), 3, axis=-1)
            x = _select(self._take(u, "grayscale") < self.grayscale_prob, gray, x)
        if self.blur_prob > 0:
            blur = self._take(u, "blur") < self.blur_prob
            m = self._blur_weights(u)
            blurred = ops.einsum("bij,bjwc->biwc", m, x)
            blurred = ops.einsum("bkw,biwc->bikc", m, blurred)
            x = _select(blur, blurred, x)
        p_sol = self.solarize_prob[1 if view == 2 else 0]
        if p_sol > 0:
            x = _select(self._take(u, "solarize") < p_sol, ops.where(x < 0.5, x, 1.0 - x), x)
        return _clip01(x)

    def call(self, images, training=None, view=None):
        if view not in (None, 1, 2):
            raise ValueError(f"view must be None, 1 or 2, got {view!r}")
        x = ops.cast(images, "float32")
        rank = len(x.shape)
        if rank not in (3, 4) or x.shape[-1] not in (None, 3):
            raise ValueError("images must have shape [batch, height, width, 3] or "
                             f"[height, width, 3]; got {tuple(x.shape)}")
        unbatched = rank == 3
        if unbatched:
            x = x[None]
        size = self.image_size
        if training is False:
            if x.shape[1] != size or x.shape[2] != size:
                x = ops.image.resize(x, (size, size), data_format="channels_last")
        else:
            x = self._augment(x, view)
        return x[0] if unbatched else x

    def two_views(self, images, training=None):
        """Two independently augmented views ``(view1, view2)`` of ``images``."""
        return self(images, training=training, view=1), self(images, training=training, view=2)

    def compute_output_shape(self, input_shape):
        if len(input_shape) == 3:
            return (self.image_size, self.image_size, 3)
        return (input_shape[0], self.image_size, self.image_size, 3)

    def get_config(self):
        config = super().get_config()
        config.update({
            "image_size": self.image_size, "version": self.version, "strength": self.strength,
            "crop_scale": list(self.crop_scale), "crop_ratio": list(self.crop_ratio),
            "flip": self.flip, "jitter_prob": self.jitter_prob,
            "grayscale_prob": self.grayscale_prob, "blur_prob": self.blur_prob,
            "solarize_prob": list(self.solarize_prob), "exact_color_jitter": self.exact_color_jitter,
            "contrast_mean": self.contrast_mean, "crop_boxes": self.crop_boxes,
            "seed": self.seed,
        })
        return config


@keras.saving.register_keras_serializable(package="keras_hardneg")
class RandomApply(keras.layers.Layer):
    """Apply ``layer`` to each image independently with probability ``probability``.

    The wrapped layer runs on the whole batch; a per-image Bernoulli mask then chooses
    between its output and the input (so ``layer`` must preserve the shape). Use it to
    add a probability to Keras 3 layers that have none, e.g.
    ``RandomApply(keras.layers.Solarization(threshold_factor=(0.5, 0.5),
    value_range=(0, 1)), 0.2)``.

    Args:
        layer: a Keras layer mapping ``[B, H, W, C]`` to the same shape.
        probability: per-image probability of applying ``layer``.
        seed: seed of the Bernoulli draws.

    Example:

    >>> import numpy as np
    >>> flip = RandomApply(keras.layers.Lambda(lambda x: 1.0 - x), 0.5, seed=0)
    >>> tuple(flip(np.zeros((8, 4, 4, 3), "float32")).shape)
    (8, 4, 4, 3)
    """

    def __init__(self, layer: keras.layers.Layer, probability: float = 0.5,
                 seed: int | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.layer = layer
        self.probability = _check_probability(probability, "probability")
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def call(self, images, training=None):
        if training is False:
            return images
        x = ops.convert_to_tensor(images)
        unbatched = len(x.shape) == 3
        if unbatched:
            x = x[None]
        out = ops.cast(self.layer(x), x.dtype)
        mask = keras.random.uniform((ops.shape(x)[0],), seed=self.seed_generator) \
            < self.probability
        x = _select(mask, out, x)
        return x[0] if unbatched else x

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"layer": keras.saving.serialize_keras_object(self.layer),
                       "probability": self.probability, "seed": self.seed})
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["layer"] = keras.saving.deserialize_keras_object(config["layer"])
        return cls(**config)


def simclr_augmentation(image_size: int = 32, version: str = "v1", strength: float = 1.0,
                        seed: int | None = None, **kwargs: Any) -> SimCLRAugmentation:
    """The SimCLR augmentation pipeline (Chen et al. 2020) as a :class:`SimCLRAugmentation`.

    Args:
        image_size: output side (>= 8).
        version: ``"v1"``, ``"v2"`` or ``"v3"`` (see the module docstring).
        strength: colour-jitter strength (1.0 = jitter 0.4/0.4/0.4/0.1).
        seed: int seed or ``None``.
        **kwargs: any other :class:`SimCLRAugmentation` argument (``crop_scale``,
            ``blur_prob``, ``solarize_prob``, ``jitter_prob``, ``grayscale_prob``, ...).

    Returns:
        :class:`SimCLRAugmentation`: ``[B, H, W, 3]`` in ``[0, 1]`` ->
        ``[B, image_size, image_size, 3]`` in ``[0, 1]``.

    Any backend; on TensorFlow it also runs in ``tf.data``
    (``ds.batch(B).map(two_views(aug))``).

    Example:

    >>> import numpy as np
    >>> aug = simclr_augmentation(image_size=32, version="v2", seed=1)
    >>> views = two_views(aug)(np.random.rand(4, 40, 40, 3).astype("float32"), training=True)
    >>> [tuple(v.shape) for v in views]
    [(4, 32, 32, 3), (4, 32, 32, 3)]
    """
    return SimCLRAugmentation(image_size=image_size, version=version, strength=strength,
                              seed=seed, **kwargs)


def two_views(augmentation):
    """Return ``f(images, training=None) -> (view1, view2)`` for an augmentation.

    Uses ``augmentation.two_views`` when it exists (so v3's asymmetric solarization is
    honoured), otherwise calls ``augmentation`` twice.

    Example:

    >>> import numpy as np
    >>> v1, v2 = two_views(simclr_augmentation(16, seed=0))(np.random.rand(2, 16, 16, 3))
    >>> tuple(v1.shape)
    (2, 16, 16, 3)
    """
    if hasattr(augmentation, "two_views"):
        return augmentation.two_views

    def _views(images, training=None):
        return augmentation(images, training=training), augmentation(images, training=training)

    return _views
