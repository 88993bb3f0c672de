import numpy as np
import pytest

from keras_hardneg.sampling import false_negative_fraction, mean_in_batch_cosine


def test_mean_cosine_matches_bruteforce():
    x = np.random.default_rng(0).normal(size=(17, 5))
    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    s = xn @ xn.T
    want = (s.sum() - np.trace(s)) / (17 * 16)
    assert mean_in_batch_cosine(x) == pytest.approx(want, abs=1e-12)
    import keras
    got = keras.ops.convert_to_numpy(mean_in_batch_cosine(keras.ops.convert_to_tensor(
        x.astype("float32"))))
    assert float(got) == pytest.approx(want, abs=1e-5)


def test_false_negative_fraction():
    y = np.array([0, 0, 1, 1, 1, 2])
    same = (y[:, None] == y[None, :]).sum() - 6
    assert false_negative_fraction(y) == pytest.approx(same / 30)
    import keras
    got = keras.ops.convert_to_numpy(false_negative_fraction(keras.ops.convert_to_tensor(y)))
    assert float(got) == pytest.approx(same / 30, abs=1e-6)
    assert false_negative_fraction(np.arange(5)) == 0.0
    with pytest.raises(ValueError, match="labels"):
        false_negative_fraction(np.array([1]))
    with pytest.raises(ValueError, match="embeddings"):
        mean_in_batch_cosine(np.ones((1, 3)))
