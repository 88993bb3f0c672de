"""``run_framework_test``: what every contrastive framework promises a Keras user of ``fit``,
checked the same way for each (as keras-hub's ``run_backbone_test``). A framework's test calls
it with a function building the compiled model and one making its data; the calling tests are
marked ``backends`` (TensorFlow and JAX). No TensorFlow import at module level.

* one tiny epoch whose size leaves a final batch of one example (``len(x) % batch_size == 1``):
  that batch has no negative, so it is dropped -- one warning for the run, ``dropped_batches``
  1, the optimizer's step count that of the full batches, and the weights and the epoch's
  loss exactly those of the same fit without that example (metrics not polluted);
* ``sample_weight`` without labels reaches the steps (Keras's own packing drops it): all-zero
  weights give loss 0 and leave the trainable weights unchanged; weights of 2 double
  ``evaluate``'s loss (the default ``"sum_over_batch_size"`` reduction);
* a ``.keras`` round trip: the reloaded model gives the same features and is compiled with the
  same loss.
"""

import warnings

import keras
import numpy as np


def _np(x):
    return np.asarray(keras.ops.convert_to_numpy(x), dtype="float64")


def _trainable(model):
    return [_np(w) for w in model.trainable_variables]  # what the optimizer trains


def _fresh(make_model, seed=0):
    keras.utils.set_random_seed(seed)
    return make_model()


def _first(x, n):
    """The first ``n`` examples of ``x`` (an array or a dict of arrays)."""
    if isinstance(x, dict):
        return {k: _first(v, n) for k, v in x.items()}
    return x[:n]


def _dropped_warnings(caught):
    return [w for w in caught if "had no negative" in str(w.message)]


def run_framework_test(make_model, make_data, batch_size=4, tmp_path=None):
    """Runs the framework contract (see the module docstring).

    Args:
        make_model: ``() -> model``, a compiled framework (plain SGD: zero gradients leave the
            weights as they are); called under the same seed for each comparison.
        make_data: ``n -> x``, ``n`` examples in a form ``fit`` takes without labels (e.g.
            ``{"view1", "view2"}`` arrays), deterministic (no in-model augmentation).
        batch_size: the batch size of the fits.
        tmp_path: a folder for the ``.keras`` round trip (skipped when None).
    """
    full = 2 * batch_size
    x_one_more = make_data(full + 1)
    # 1. The final batch of one is dropped, once warned, and changes nothing.
    model = _fresh(make_model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = model.fit(x_one_more, batch_size=batch_size, epochs=1,
                            shuffle=False, verbose=0)
    assert len(_dropped_warnings(caught)) == 1, [str(w.message) for w in caught]
    assert history.history["dropped_batches"] == [1.0], history.history
    assert history.history["nonfinite_steps"] == [0.0], history.history
    assert int(_np(model.optimizer.iterations)) == 2
    twin = _fresh(make_model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        twin_history = twin.fit(_first(x_one_more, full), batch_size=batch_size, epochs=1,
                                shuffle=False, verbose=0)
    assert not _dropped_warnings(caught)
    assert twin_history.history["dropped_batches"] == [0.0]
    np.testing.assert_allclose(history.history["loss"], twin_history.history["loss"],
                               rtol=1e-5)
    for a, b in zip(_trainable(model), _trainable(twin)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)

    # 2. sample_weight without labels reaches the steps (on the twin, whose step is compiled
    # for this batch size already).
    x, model = _first(x_one_more, full), twin
    before = _trainable(model)
    zero = model.fit(x, sample_weight=np.zeros(full, "float32"), batch_size=batch_size,
                     epochs=1, shuffle=False, verbose=0)
    assert zero.history["loss"] == [0.0], zero.history
    for a, b in zip(before, _trainable(model)):
        np.testing.assert_array_equal(a, b)
    plain = model.evaluate(x, batch_size=batch_size, verbose=0, return_dict=True)["loss"]
    doubled = model.evaluate(x, sample_weight=np.full(full, 2.0, "float32"),
                             batch_size=batch_size, verbose=0, return_dict=True)["loss"]
    assert plain > 0
    np.testing.assert_allclose(doubled, 2 * plain, rtol=1e-5)

    # 3. The .keras round trip.
    if tmp_path is not None:
        path = str(tmp_path / "model.keras")
        model.save(path)
        loaded = keras.saving.load_model(path)
        probe = x["view1"] if isinstance(x, dict) and "view1" in x else x
        np.testing.assert_allclose(_np(loaded(probe)), _np(model(probe)), rtol=1e-5,
                                   atol=1e-6)
        assert loaded.contrastive_loss.get_config() == model.contrastive_loss.get_config()
