"""The one image decoder: every route that reads an image file decodes it here (Pillow).

:func:`decode_image` turns an image file (a path or its bytes) into uint8 pixels; the
``tf.data`` routes (:func:`keras_hardneg.data.image_folder`,
:func:`keras_hardneg.data.load_image_folder_arrays`, the sampler's path reader
``keras_hardneg.sampling.make_dataset(sampler, paths)``) call it through
``tf.numpy_function`` (:func:`tf_decode_images`, a chunk of files per call), so one file gives the same pixels by every
route, with or without TensorFlow (this module imports only NumPy and Pillow; TensorFlow is
imported only by :func:`tf_decode_images`). :func:`to_unit_float` is the one place where
pixels become float32 in ``[0, 1]``.

Decoding (Pillow, no JPEG draft/DCT scaling, first frame of an animation):

* grayscale (``L``, ``1``), grayscale+alpha (``LA``), palette (``P``, ``PA``, with or without
  transparency), ``RGBA``, ``CMYK``, ``YCbCr`` -> RGB (Pillow's ``convert("RGB")``; alpha is
  dropped, not composited);
* 16-bit images (``I;16*`` / ``I`` modes: 16-bit grayscale PNG) -> 8 bits by keeping the high
  byte (``v >> 8``, as ``tf.image.convert_image_dtype`` does); 16-bit RGB PNGs Pillow already
  reads as 8-bit RGB the same way;
* ``channels=1`` gives Pillow's ``convert("L")`` luma (ITU-R 601-2) instead.

Resizing: only when the size differs from ``image_size``, with Pillow's ``BILINEAR`` filter
(``Image.resize(..., resample=BILINEAR, reducing_gap=None)``): a triangle kernel whose support
is widened by the scale factor when shrinking, i.e. antialiased bilinear (the same filter
family as ``tf.image.resize(..., "bilinear", antialias=True)``, the previous
``image_folder`` behaviour), computed in Pillow's fixed point and rounded to uint8. No
``reducing_gap`` pre-reduction (which would trade accuracy for speed on large downscales).

Errors: an undecodable file (truncated, empty, not an image) raises
:class:`ImageDecodeError` (a ``ValueError``) naming the file.

Example:
    >>> import io, numpy as np
    >>> from PIL import Image
    >>> buf = io.BytesIO(); Image.new("L", (5, 3), 128).save(buf, format="PNG")
    >>> image = decode_image(buf.getvalue(), image_size=(6, 10))
    >>> image.shape, image.dtype.name, int(image.max())
    ((6, 10, 3), 'uint8', 128)
"""

import io
import logging
import os
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from PIL import Image, UnidentifiedImageError

from keras_hardneg.data._tf import is_tf_tensor, require_tensorflow

logger = logging.getLogger("keras_hardneg.data")

__all__ = [
    "RESIZE_FILTER",
    "ImageDecodeError",
    "decode_image",
    "decode_images",
    "tf_decode_images",
    "to_unit_float",
]

RESIZE_FILTER = Image.Resampling.BILINEAR
_SIXTEEN_BIT_MODES = ("I", "I;16", "I;16B", "I;16L", "I;16N")


class ImageDecodeError(ValueError):
    """An image file that cannot be decoded; the message names the file."""


def _name(source):
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    return f"<{len(source)} bytes>"


def _to_channels(image, channels):
    if image.mode in _SIXTEEN_BIT_MODES:
        grey = (np.asarray(image).astype(np.int64) >> 8).clip(0, 255).astype(np.uint8)
        image = Image.fromarray(grey, mode="L")
    target = "L" if channels == 1 else "RGB"
    if image.mode == target:
        return image
    if image.mode == "P" and "transparency" in image.info:
        image = image.convert("RGBA")  # palette transparency: via RGBA, then drop alpha
    return image.convert(target)


def decode_image(source, image_size=None, channels=3):
    """Decodes one image file to uint8 pixels (Pillow; no TensorFlow).

    Args:
        source: a path (``str`` / ``os.PathLike``) or the file's encoded ``bytes``.
        image_size: ``None`` (keep the file's size), an int ``s`` (``(s, s)``) or
            ``(height, width)``; other sizes are resized with :data:`RESIZE_FILTER`
            (bilinear, antialiased when shrinking).
        channels: 3 (RGB, the default) or 1 (luma).

    Returns:
        uint8 ``[H, W, channels]`` array.

    Raises:
        ImageDecodeError: (a ``ValueError``) naming the file when it cannot be decoded.
        ValueError: for a bad ``image_size`` or ``channels``.
    """
    if channels not in (1, 3):
        raise ValueError(f"`channels` must be 1 or 3; got {channels!r}.")
    if image_size is not None:
        if isinstance(image_size, (int, np.integer)):
            image_size = (image_size, image_size)
        height, width = (int(s) for s in image_size)
        if height < 1 or width < 1:
            raise ValueError(f"`image_size` must be positive; got {image_size!r}.")
    try:
        stream = io.BytesIO(source) if isinstance(source, (bytes, bytearray)) else source
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. palette-transparency notices
            with Image.open(stream) as opened:
                opened.load()  # decodes now: truncated data fails here
                image = _to_channels(opened, channels)
                if image_size is not None and image.size != (width, height):
                    image = image.resize((width, height), resample=RESIZE_FILTER,
                                         reducing_gap=None)
                pixels = np.array(image, dtype=np.uint8)  # a copy: valid after close
    except FileNotFoundError as err:
        raise ImageDecodeError(f"Cannot read image file {_name(source)!r}: {err}") from err
    except UnidentifiedImageError as err:
        raise ImageDecodeError(
            f"Cannot decode image file {_name(source)!r}: not an image Pillow can read"
        ) from err
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as err:
        raise ImageDecodeError(f"Cannot decode image file {_name(source)!r}: {err}") from err
    if channels == 1:
        pixels = pixels[..., None]
    return np.ascontiguousarray(pixels)


def decode_images(paths, image_size=None, channels=3, on_error="raise", threads=None):
    """:func:`decode_image` of many files, stacked: uint8 ``[n, H, W, channels]``.

    Args:
        paths: sequence of paths (``str`` / ``bytes`` / ``os.PathLike``).
        image_size: as in :func:`decode_image`; required with ``on_error="skip"`` and when
            the files differ in size.
        channels: 3 or 1.
        on_error: ``"raise"`` the first :class:`ImageDecodeError`, or ``"skip"``: the failed
            file's slot is zeros and its ``ok`` entry is ``False`` (its name is logged).
        threads: decode with this many threads (Pillow releases the GIL while decoding);
            ``None`` or 1: in the calling thread.

    Returns:
        ``(images, ok)``: uint8 ``[n, H, W, channels]`` and bool ``[n]``.
    """
    if on_error not in ("raise", "skip"):
        raise ValueError(f"`on_error` must be 'raise' or 'skip'; got {on_error!r}.")
    if image_size is not None and isinstance(image_size, (int, np.integer)):
        image_size = (image_size, image_size)
    if on_error == "skip" and image_size is None:
        raise ValueError("`on_error='skip'` needs an `image_size` (for the skipped slots).")
    paths = [p.decode("utf-8") if isinstance(p, bytes) else os.fspath(p) for p in paths]

    def one(path):
        try:
            return decode_image(path, image_size, channels)
        except ImageDecodeError as err:
            if on_error == "raise":
                raise
            logger.warning("Skipped unreadable image file: %s", err)
            return None

    if threads and threads > 1 and len(paths) > 1:
        with ThreadPoolExecutor(min(threads, len(paths))) as pool:
            decoded = list(pool.map(one, paths))
    else:
        decoded = [one(path) for path in paths]
    ok = np.array([image is not None for image in decoded], dtype=bool)
    if image_size is not None:
        shape = (int(image_size[0]), int(image_size[1]), channels)
    else:
        shapes = sorted({image.shape for image in decoded})
        if len(shapes) > 1:
            raise ValueError(f"images of different sizes {shapes[:3]} (e.g. {paths[0]!r}); "
                             "pass `image_size`.")
        shape = shapes[0] if shapes else (0, 0, channels)
    images = np.zeros((len(paths),) + tuple(shape), np.uint8)
    for i, image in enumerate(decoded):
        if image is not None:
            images[i] = image
    return images, ok


def tf_decode_images(paths, image_size=None, channels=3, on_error="raise"):
    """:func:`decode_images` as a TensorFlow op (``tf.numpy_function``) for ``tf.data`` maps.

    Decoding a chunk of files per call (rather than one) keeps the per-call overhead of
    ``tf.numpy_function`` small; ``tf.data``'s ``num_parallel_calls`` runs chunks in parallel.

    Args:
        paths: string tensor ``[n]`` of file paths.
        image_size: ``None`` or ``(height, width)`` (Python ints, fixed for the pipeline).
        channels: 3 or 1.
        on_error: ``"raise"`` (an undecodable file stops iteration with an error whose
            message names the file) or ``"skip"`` (see :func:`decode_images`).

    Returns:
        ``(images, ok)``: uint8 tensor ``[n, H, W, channels]`` (static ``H, W`` when
        ``image_size`` is given) and bool ``[n]``.
    """
    tf = require_tensorflow("tf_decode_images (decoding inside a tf.data pipeline)")
    size = None if image_size is None else tuple(int(s) for s in image_size)

    def decode(raw_paths):
        return decode_images(list(raw_paths), size, channels, on_error)

    images, ok = tf.numpy_function(decode, [paths], (tf.uint8, tf.bool), stateful=False)
    images.set_shape([paths.shape[0]] + list(size or (None, None)) + [channels])
    ok.set_shape([paths.shape[0]])
    return images, ok


def resize_float_images(images, image_size):
    """Float images ``[n, H, W, C]`` resized to ``image_size`` ``(height, width)`` with Pillow
    (bilinear, antialiased when shrinking: Pillow widens the filter by the scale), each channel
    as a 32-bit float image; NumPy in, float32 NumPy out, clipped to ``[0, 1]``.

    The same pixels as ``tf.image.resize(..., "bilinear", antialias=True)`` to within 1e-6
    (measured on the digits at 4x4, 16x12, 32x32 and 224x224), without TensorFlow.

    Example:
    >>> resize_float_images(np.ones((2, 8, 8, 3), np.float32), (16, 12)).shape
    (2, 16, 12, 3)
    """
    images = np.asarray(images, dtype=np.float32)
    if images.ndim != 4:
        raise ValueError(f"`images` must be [n, H, W, C]; got shape {images.shape}.")
    height, width = (int(s) for s in image_size)
    out = np.empty((images.shape[0], height, width, images.shape[3]), np.float32)
    for i, image in enumerate(images):
        for c in range(images.shape[3]):
            plane = Image.fromarray(np.ascontiguousarray(image[..., c]), mode="F")
            out[i, ..., c] = np.asarray(plane.resize((width, height), Image.BILINEAR))
    return np.clip(out, 0.0, 1.0, out=out)


def to_unit_float(images):
    """uint8 pixels -> float32 in ``[0, 1]``; uint16 likewise; float images pass through as
    float32 (assumed in ``[0, 1]``).

    The one place where decoded pixels become floats: NumPy in, NumPy out; a TensorFlow
    tensor in (e.g. inside a ``tf.data`` map), a tensor out. Both compute
    ``float32(x) * float32(1 / 255)`` (``1 / 65535`` for uint16), the formula of
    ``tf.image.convert_image_dtype``, so they are bit-identical (a division would not be:
    TensorFlow's graph optimiser may turn ``x / 255`` into that product; 255 maps to 1.0
    exactly either way).
    """
    if isinstance(images, np.ndarray) or np.isscalar(images):
        images = np.asarray(images)
        scale = _scale(images.dtype.name)
        out = images.astype(np.float32)
        return out if scale is None else out * np.float32(1.0 / scale)
    if is_tf_tensor(images):
        import tensorflow as tf

        scale = _scale(images.dtype.name)
        out = tf.cast(images, tf.float32)
        return out if scale is None else out * tf.constant(1.0 / scale, tf.float32)
    import keras  # a backend tensor (JAX array, ...): keras.ops

    scale = _scale(keras.backend.standardize_dtype(images.dtype))
    out = keras.ops.cast(images, "float32")
    return out if scale is None else out * np.float32(1.0 / scale)


def _scale(dtype_name):
    if dtype_name == "uint8":
        return 255.0
    if dtype_name == "uint16":
        return 65535.0
    if dtype_name.startswith(("int", "uint")):
        raise ValueError(f"integer images must be uint8 or uint16, got {dtype_name}.")
    return None
