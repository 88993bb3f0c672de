"""run.make_train_feed follows the Keras backend (tf.data on TensorFlow, a PyDataset
elsewhere), and run.train trains a BatchSampler recipe end to end on either."""

import contextlib
import json
import os

import keras
import numpy as np
import pytest

from keras_hardneg import run
from keras_hardneg.data import load_digits

pytestmark = pytest.mark.backends

TINY = {"encoder": {"name": "small_convnet", "width": 8}, "projection_dims": [16, 8],
        "data": {"name": "digits", "test_fraction": 0.75}, "batch_size": 64, "epochs": 2,
        "evaluation": {"monitor_every": 1, "linear_probe": False, "knn_k": 20}}
GRAPH = {"name": "batchsampler", "num_candidates": 40, "num_neighbors": 8, "refresh_every": 3}


@pytest.fixture(scope="module")
def digits():
    return load_digits(test_fraction=0.75)[0]


def _is_tf_data(ds):
    return type(ds).__module__.startswith("tensorflow")


@pytest.mark.parametrize("sampler", [{"name": "uniform"}, GRAPH])
def test_feed_type_and_elements_follow_the_backend(digits, sampler):
    x, y = digits
    feed = run.make_train_feed({**TINY, "sampler": sampler}, x, y)
    on_tf = keras.backend.backend() == "tensorflow"
    if on_tf:
        assert _is_tf_data(feed.dataset)
        element = next(iter(feed.dataset))
    else:
        assert isinstance(feed.dataset, keras.utils.PyDataset)
        element = feed.dataset[0]
    features, labels = element
    if sampler["name"] == "uniform":
        assert feed.sampler is None and feed.steps_per_epoch == len(x) // 64
        images = np.asarray(features)
    else:
        assert feed.steps_per_epoch == feed.sampler.steps_per_epoch
        assert len(feed.callbacks) == 1  # the graph refresh
        index = np.asarray(features["index"])
        images = np.asarray(features["images"])
        np.testing.assert_array_equal(images, x[index])
        np.testing.assert_array_equal(np.asarray(labels), y[index])
    assert images.shape == (64, 8, 8, 3) and images.dtype == np.float32


@pytest.mark.heavy  # heavy tier since 2026-11-29 (suite time: docs/notes/suite_time.md)
def test_train_batchsampler_recipe_saves_sampler_state(tmp_path):
    out = str(tmp_path / "run")
    on_tf = keras.backend.backend() == "tensorflow"
    with contextlib.nullcontext() if on_tf else pytest.warns(UserWarning, match="TensorFlow backend"):
        result = run.train({**TINY, "sampler": GRAPH}, out, verbose=0)
    assert result["epochs_run"] == 2 and np.isfinite(result["history"]["loss"]).all()
    assert 0.0 <= result["knn_accuracy"] <= 1.0 and len(result["history"]["knn_accuracy"]) == 2
    with open(os.path.join(out, "backup", "training_metadata.json")) as f:
        meta = json.load(f)
    assert meta["epoch"] == 2 and meta["state"]  # the sampler's state is in the backup
    if on_tf:
        assert os.path.isdir(result["export_dir"])
    else:
        assert "TensorFlow backend" in result["export_skipped"]
        assert "export_dir" not in result


@pytest.mark.parametrize("sampler", [{"name": "uniform"}, GRAPH])
def test_the_schedule_counts_the_feeds_steps(digits, sampler):
    # The learning-rate schedule ends with the last step the feed gives: N // B uniform
    # steps an epoch, ceil(N / B) for a graph sampler (449 digits, batch 64: 7 and 8).
    x, y = digits
    recipe = {**TINY, "sampler": sampler, "epochs": 3,
              "schedule": {"name": "warmup_cosine", "warmup_epochs": 1}}
    feed = run.make_train_feed(recipe, x, y)
    model = run.build_model(recipe, x_train=x)
    assert feed.steps_per_epoch == (7 if sampler["name"] == "uniform" else 8)
    schedule = model.optimizer.learning_rate if callable(model.optimizer.learning_rate) \
        else model.optimizer._learning_rate
    assert schedule.get_config()["total_steps"] == 3 * feed.steps_per_epoch


def test_initial_graph_from_the_encoder(digits, tmp_path):
    """``sampler.initial_graph = "encoder"``: the refresh callback rebuilds the first graph
    from the encoder's features of every training example before the first step; a run
    trains with it; graphs refuse it in one line."""
    from keras_hardneg.evaluation import extract_features
    from keras_hardneg.run.recipe import RecipeError

    x, y = digits
    recipe = {**TINY, "sampler": {**GRAPH, "initial_graph": "encoder"}}
    feed = run.make_train_feed(recipe, x, y)
    first = feed.callbacks[0].reencode_on_train_begin
    model = run.build_model(recipe, x_train=x)
    np.testing.assert_allclose(first(model), extract_features(model.encoder, x), atol=1e-6)
    assert run.make_train_feed({**TINY, "sampler": GRAPH}, x, y).callbacks[
        0].reencode_on_train_begin is None  # the default: a projection of the inputs
    result = run.train({**recipe, "epochs": 1}, str(tmp_path / "run"), verbose=0,
                       export=False)
    assert result["epochs_run"] == 1 and np.isfinite(result["history"]["loss"]).all()
    with pytest.raises(RecipeError, match=r"'sampler.initial_graph' = 'encoder' is not "
                                          r"available for graphs"):
        run.modality_of({"data": {"name": "tu"}}).check_encoder_features(None)
    from keras_hardneg.run.distribution import WorkerPlace

    with pytest.raises(RecipeError, match=r"'sampler.initial_graph' = 'encoder' is not "
                                          r"available with several workers"):
        run.make_train_feed(recipe, x, y, place=WorkerPlace(num_workers=2, index=0))
