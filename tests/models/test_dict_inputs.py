"""An encoder whose input is a dict of two tensors trains and embeds through the frameworks:
a dict is a views container only with "view1"/"view2" or "images"; any other dict is a raw
batch handed to the view maker and the encoder as is."""

import keras
import numpy as np
import pytest
from keras import ops

import keras_hardneg as khn

pytestmark = pytest.mark.backends

B, DA, DB = 8, 5, 3


def two_input_encoder():
    a = keras.Input((DA,), name="a")
    b = keras.Input((DB,), name="b")
    h = keras.layers.Concatenate()([keras.layers.Dense(6)(a), keras.layers.Dense(6)(b)])
    return keras.Model({"a": a, "b": b}, keras.layers.Dense(4)(h))


def batch(seed=0):
    rng = np.random.default_rng(seed)
    return {"a": rng.normal(size=(B, DA)).astype("float32"),
            "b": rng.normal(size=(B, DB)).astype("float32")}


class JitterViews(khn.augment.ViewMaker):
    """Two noisy copies of a dict batch (leaf by leaf)."""

    def make_views(self, x, training=None):
        def one(offset):
            return keras.tree.map_structure(lambda t: t + offset, x)
        return one(0.01), one(-0.01)


FRAMEWORKS = {
    "simclr": lambda: khn.models.SimCLR(two_input_encoder(), projection_dims=(8, 4)),
    "moco": lambda: khn.models.MoCoV2(two_input_encoder(), projection_dims=(8, 4), queue_size=16),
    "moco_v3": lambda: khn.models.MoCoV3(two_input_encoder(), projection_dims=(8, 4)),
}


@pytest.mark.parametrize("name", sorted(FRAMEWORKS))
def test_fit_on_views_of_dicts_and_call_on_a_dict(name):
    model = FRAMEWORKS[name]()
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="nt_xent")
    before = [np.array(w) for w in model.encoder.trainable_weights]
    history = model.fit({"view1": batch(0), "view2": batch(1)}, batch_size=B, epochs=1,
                        verbose=0)
    assert np.isfinite(history.history["loss"][-1])
    assert any(not np.allclose(a, np.array(w))
               for a, w in zip(before, model.encoder.trainable_weights))
    x = batch(2)
    features = model(x)  # a raw dict batch: given to the encoder as is
    assert tuple(features.shape) == (B, 4)
    np.testing.assert_allclose(ops.convert_to_numpy(features),
                               ops.convert_to_numpy(model.encoder(x)), rtol=1e-6)


def test_a_raw_dict_batch_is_given_to_the_view_maker():
    model = khn.models.SimCLR(two_input_encoder(), projection_dims=(8, 4),
                              augmentation=JitterViews())
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="nt_xent")
    logs = model.train_on_batch(batch(0), return_dict=True)
    assert np.isfinite(logs["loss"]) and logs["nonfinite_steps"] == 0


def test_a_views_container_without_both_views_is_refused_in_one_line():
    model = khn.models.SimCLR(two_input_encoder(), projection_dims=(8, 4))
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="nt_xent")
    with pytest.raises(ValueError, match="'view1' and 'view2'"):
        model.train_on_batch({"view1": batch(0)}, return_dict=True)
