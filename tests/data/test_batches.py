"""ShuffledBatches: the uniform feed as a keras.utils.PyDataset (no TensorFlow)."""

import keras
import numpy as np
import pytest

from keras_hardneg.data import ShuffledBatches, load_digits

pytestmark = pytest.mark.backends


def test_epochs_are_seeded_permutations_without_the_remainder():
    x, y = np.arange(10, dtype=np.float32)[:, None] * np.ones((1, 3), np.float32), np.arange(10)
    feed = ShuffledBatches(x, y, batch_size=3, seed=5)
    assert feed.num_batches is None and feed.steps_per_epoch == 3
    epoch0 = np.concatenate([feed[i][1] for i in range(3)])
    epoch1 = np.concatenate([feed[i][1] for i in range(3, 6)])
    assert len(set(epoch0)) == 9 and len(set(epoch1)) == 9  # one dropped per epoch
    assert not np.array_equal(epoch0, epoch1)
    again = ShuffledBatches(x, y, batch_size=3, seed=5)
    np.testing.assert_array_equal(again[4][0], feed[4][0])  # batch i is a function of i
    np.testing.assert_array_equal(feed[0][0][:, 0], feed[0][1])
    assert ShuffledBatches(x, batch_size=4)[0].shape == (4, 3)


@pytest.mark.parametrize("kwargs, name", [
    ({"batch_size": 0}, "batch_size"), ({"batch_size": 11}, "batch_size"),
    ({"seed": -1}, "seed"), ({"y": np.arange(3)}, "y"),
])
def test_bad_arguments_name_the_parameter(kwargs, name):
    with pytest.raises(ValueError, match=name):
        ShuffledBatches(np.zeros((10, 2)), **{"batch_size": 2, **kwargs})


def test_fit_on_numpy_arrays_and_on_the_feed():
    (x, y), _ = load_digits()
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Flatten(),
                              keras.layers.Dense(10)])
    model.compile(optimizer="adam",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, batch_size=128, epochs=1, verbose=0)  # plain arrays
    feed = ShuffledBatches(x, y, batch_size=128, seed=0)
    history = model.fit(feed, epochs=2, steps_per_epoch=feed.steps_per_epoch, verbose=0)
    assert history.history["loss"][1] < history.history["loss"][0]
