"""SimCLR ``batch_norm_views``: one batch-norm batch of both views (``joint``) or one forward
pass per view (``per_view``, lightly's SimCLR); under TensorFlow and JAX."""

import keras
import numpy as np
import pytest

import keras_hardneg as khn

pytestmark = pytest.mark.backends


def _model(batch_norm_views, head_init="glorot_uniform"):
    keras.utils.set_random_seed(0)
    # Any encoder with batch norm shows the modes (a ResNet-18 here cost ~30 CPU-s per
    # backend in tracing and the .keras round trip; docs/notes/suite_time.md).
    enc = khn.encoders.small_convnet(input_shape=(8, 8, 3), width=4)
    return khn.models.SimCLR(enc, projection_dims=(16, 8), head_version="simclr_v1_bn",
                             head_init=head_init, batch_norm_views=batch_norm_views)


def _views(n=6):
    rng = np.random.default_rng(0)
    return (rng.random((n, 8, 8, 3)).astype("float32"),
            rng.random((n, 8, 8, 3)).astype("float32"))


def _np(x):
    return keras.ops.convert_to_numpy(x)


@pytest.mark.parametrize("mode", ["joint", "per_view"])
def test_projections_use_the_batch_statistics_of_their_mode(mode):
    model = _model(mode)
    v1, v2 = _views()
    z1, z2 = model.project(v1, v2, training=True)
    enc, head = model.encoder, model.projector
    if mode == "per_view":
        ref1 = head(enc(v1, training=True), training=True)
        ref2 = head(enc(v2, training=True), training=True)
    else:
        ref1, ref2 = np.split(_np(head(enc(np.concatenate([v1, v2]), training=True),
                                       training=True)), 2)
    np.testing.assert_allclose(_np(z1), _np(ref1), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(_np(z2), _np(ref2), rtol=1e-4, atol=1e-5)


def test_the_two_modes_differ_in_training_and_agree_in_inference():
    joint, per_view = _model("joint"), _model("per_view")
    per_view.set_weights(joint.get_weights())
    v1, v2 = _views()
    a = _np(joint.project(v1, v2, training=True)[0])
    b = _np(per_view.project(v1, v2, training=True)[0])
    assert not np.allclose(a, b, atol=1e-3)
    fresh_joint, fresh_per_view = _model("joint"), _model("per_view")
    fresh_per_view.set_weights(fresh_joint.get_weights())
    np.testing.assert_allclose(_np(fresh_joint.project(v1, v2, training=False)[0]),
                               _np(fresh_per_view.project(v1, v2, training=False)[0]),
                               rtol=1e-5, atol=1e-6)


def test_per_view_trains_and_round_trips(tmp_path):
    model = _model("per_view", head_init="torch_linear")
    model.compile(optimizer="sgd", loss="nt_xent")
    v1, v2 = _views(8)
    logs = model.train_on_batch({"view1": v1, "view2": v2}, return_dict=True)
    assert np.isfinite(logs["loss"])
    path = str(tmp_path / "m.keras")
    model.save(path)
    again = keras.models.load_model(path)
    assert (again.batch_norm_views, again.head_init) == ("per_view", "torch_linear")
    with pytest.raises(ValueError, match="`batch_norm_views` must be one of"):
        _model("separate")
