import numpy as np
import pytest

import keras_hardneg as khn
from keras_hardneg.callbacks.annealing import beta_schedule, ring_upper_schedule
from tests.models.helpers import sgd, tiny_encoder, views


def test_beta_schedule_follows_robinson_appendix_d1():
    # e = 8 epochs, l = 4 changes: beta drops by beta/4 every 2 epochs.
    assert [beta_schedule(2.0, 8, 4, e) for e in range(8)] == [2.0, 2.0, 1.5, 1.5, 1.0, 1.0, 0.5, 0.5]


def test_ring_schedule_is_linear_100_to_10():
    values = [ring_upper_schedule(100, 10, 4, e) for e in range(4)]
    np.testing.assert_allclose(values, [100, 70, 40, 10])


def _fit(loss, callback, epochs):
    model = khn.models.SimCLR(tiny_encoder(), projection_dims=(16, 8))
    model.compile(optimizer=sgd(), loss=loss)
    history = model.fit(views(n=8), batch_size=8, epochs=epochs, callbacks=[callback], verbose=0)
    return model, history


def test_beta_annealing_changes_the_loss_used_in_training():
    loss = khn.losses.HardNegativeContrastiveLoss(temperature=0.5, beta=1.0)
    model, history = _fit(loss, khn.callbacks.BetaAnnealing(epochs=4, num_changes=2), epochs=4)
    assert history.history["beta"] == [1.0, 1.0, 0.5, 0.5]
    # The traced step really uses the new beta: its loss equals a fresh loss with beta=0.5.
    x = views(n=8)
    logs = model.evaluate(x, batch_size=8, verbose=0, return_dict=True)
    model.compile(optimizer=sgd(), loss=khn.losses.HardNegativeContrastiveLoss(0.5, beta=0.5))
    fresh = model.evaluate(x, batch_size=8, verbose=0, return_dict=True)
    assert logs["loss"] == pytest.approx(fresh["loss"], rel=1e-6)


def test_ring_annealing_moves_the_upper_percentile():
    loss = khn.losses.RingContrastiveLoss(temperature=0.5, lower_percentile=0, upper_percentile=100)
    _, history = _fit(loss, khn.callbacks.RingAnnealing(epochs=3, start=100, end=10), epochs=3)
    np.testing.assert_allclose(history.history["upper_percentile"], [100, 55, 10])


def test_annealing_needs_the_right_loss():
    with pytest.raises(ValueError, match="beta"):
        _fit(khn.losses.NTXentLoss(), khn.callbacks.BetaAnnealing(epochs=2), epochs=1)
    with pytest.raises(ValueError, match="epochs"):
        khn.callbacks.BetaAnnealing(epochs=0)
    with pytest.raises(ValueError, match="start"):
        khn.callbacks.RingAnnealing(epochs=3, start=0)
