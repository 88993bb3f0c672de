"""Every framework keeps the same ``fit`` contract (tests/models/harness.py: a final batch of
one example is dropped with one warning and changes nothing, ``sample_weight`` without labels
reaches the steps, a ``.keras`` round trip); the graph frameworks, whose data comes as padded
graph batches, are checked on a batch of one graph. Runs under TensorFlow and JAX."""

import keras
import numpy as np
import pytest

import keras_hardneg as khn
from tests.models.graph_helpers import F, GraphBatches
from tests.models.harness import run_framework_test
from tests.models.helpers import tiny_encoder, views

pytestmark = pytest.mark.backends


def _data(n):
    return views(n=n)


def _compiled(model, loss="nt_xent"):
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss=loss)
    return model


def test_simclr(tmp_path):
    run_framework_test(lambda: _compiled(khn.models.SimCLR(tiny_encoder(), projection_dims=(16, 8)),
                                         khn.losses.HardNegativeContrastiveLoss(tau_plus=0.0)),
                       _data, tmp_path=tmp_path)


def test_moco_v2():
    # The queue gives every anchor negatives, also in a batch of one: nothing is dropped
    # there, so the contract's sample-weight part is what applies (checked on MoCo v3's
    # in-batch negatives for the rest).
    keras.utils.set_random_seed(0)
    model = _compiled(khn.models.MoCoV2(tiny_encoder(), projection_dims=(16, 8), queue_size=16))
    x = _data(9)
    history = model.fit(x, batch_size=4, epochs=1, shuffle=False, verbose=0)
    assert history.history["dropped_batches"] == [0.0]
    assert int(keras.ops.convert_to_numpy(model.optimizer.iterations)) == 3
    zero = model.evaluate(_data(8), sample_weight=np.zeros(8, "float32"), batch_size=8,
                          verbose=0, return_dict=True)
    assert zero["loss"] == 0.0


def test_moco_v3(tmp_path):
    run_framework_test(lambda: _compiled(khn.models.MoCoV3(tiny_encoder(), projection_dims=(16, 8)),
                                         khn.losses.UnReMixContrastiveLoss()),
                       _data, tmp_path=tmp_path)


@pytest.mark.parametrize("kind", ["graphcl", "infograph"])
def test_graph_frameworks_drop_a_batch_of_one_graph(kind):
    keras.utils.set_random_seed(0)
    encoder = khn.encoders.gin(input_shape=(F,), width=4, num_layers=2)
    if kind == "graphcl":
        model = khn.models.GraphCL(encoder, projection_dims=(8, 8))
        x, labels = GraphBatches(num_batches=1, batch_size=1)[0]
    else:
        model = khn.models.InfoGraph(encoder, projection_dims=(8, 8), estimator="contrastive")
        x, labels = GraphBatches(num_batches=1, batch_size=1, plain=True)[0]
    _compiled(model, khn.losses.HardNegativeContrastiveLoss(tau_plus=0.0))
    before = [np.asarray(keras.ops.convert_to_numpy(w)) for w in model.trainable_weights]
    logs = model.train_on_batch(x, labels, return_dict=True)
    assert logs["dropped_batches"] == 1.0 and logs["nonfinite_steps"] == 0.0, logs
    assert logs["loss"] == 0.0, logs  # no batch recorded in the loss metric
    assert int(keras.ops.convert_to_numpy(model.optimizer.iterations)) == 0
    for a, w in zip(before, model.trainable_weights):
        np.testing.assert_array_equal(a, np.asarray(keras.ops.convert_to_numpy(w)))
