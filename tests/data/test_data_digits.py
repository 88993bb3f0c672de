import numpy as np
import pytest

from keras_hardneg.data import load_digits


def test_shapes_ranges_dtypes_and_split():
    (x, y), (xt, yt) = load_digits(test_fraction=0.2, seed=0)
    assert x.shape == (1437, 8, 8, 3) and xt.shape == (360, 8, 8, 3)
    assert x.dtype == np.float32 and y.dtype == np.int64 and yt.dtype == np.int64
    assert x.min() == 0.0 and x.max() == 1.0
    np.testing.assert_array_equal(x[..., 0], x[..., 2])  # grey replicated
    assert set(np.unique(y)) == set(range(10)) and set(np.unique(yt)) == set(range(10))


def test_deterministic_given_seed_and_seed_changes_split():
    (a, ya), _ = load_digits(seed=3)
    (b, yb), _ = load_digits(seed=3)
    (c, _), _ = load_digits(seed=4)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(ya, yb)
    assert not np.array_equal(a, c)


def test_resize():
    (x, _), (xt, _) = load_digits(image_size=(16, 12))
    assert x.shape[1:] == (16, 12, 3) and xt.shape[1:] == (16, 12, 3)
    assert x.dtype == np.float32 and 0.0 <= x.min() and x.max() <= 1.0


@pytest.mark.parametrize("kwargs, name", [
    ({"test_fraction": 0.0}, "test_fraction"),
    ({"test_fraction": 1.5}, "test_fraction"),
    ({"image_size": (0, 8)}, "image_size"),
    ({"image_size": "big"}, "image_size"),
])
def test_invalid_arguments_name_the_parameter(kwargs, name):
    with pytest.raises(ValueError, match=name):
        load_digits(**kwargs)
