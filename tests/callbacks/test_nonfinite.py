import numpy as np
import pytest

import keras_hardneg as khn
from tests.models.helpers import sgd, tiny_encoder, views


@pytest.mark.parametrize("framework", ["simclr", "moco"])
def test_nan_input_stops_the_run_with_a_report_and_keeps_weights(framework):
    enc = tiny_encoder()
    if framework == "simclr":
        model = khn.models.SimCLR(enc, projection_dims=(16, 8))
    else:
        model = khn.models.MoCo(enc, projection_dims=(16, 8), queue_size=16, momentum=1.0)
    model.compile(optimizer=sgd(), loss=khn.losses.HardNegativeContrastiveLoss())
    x = views(n=16)
    x["view1"][8:] = np.nan  # the second batch is broken
    weights_after_first = {}

    class Snapshot(khn.callbacks.NonFiniteGuard.__bases__[0]):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 0:
                weights_after_first["w"] = [w.numpy().copy() for w in model.weights]

    with pytest.raises(khn.callbacks.NonFiniteError, match=r"batch 1.*non-finite.*input values"):
        model.fit(x, batch_size=8, epochs=1, shuffle=False, verbose=0, callbacks=[Snapshot()])
    # No weight (trainable, moving statistics, queue) took the broken batch.
    for v, before in zip(model.weights, weights_after_first["w"]):
        if "health" not in v.path:
            np.testing.assert_array_equal(v.numpy(), before, err_msg=v.path)
