"""The run layer on a random-access image source: a recipe trains through run.train, and the
host memory of loading data and building the feed does not grow with N."""

import tracemalloc

import numpy as np

from keras_hardneg import run
from keras_hardneg.modalities import modality_of
from keras_hardneg.sampling import ProximityGraph


def _recipe(n, sampler="batchsampler"):
    extra = ({"num_candidates": 20, "num_neighbors": 4, "refresh_every": 2}
             if sampler == "batchsampler" else {})
    return {"data": {"name": "synthetic", "num_images": n, "test_images": 16, "image_size": 8,
                     "num_classes": 4},
            "encoder": {"name": "small_convnet", "width": 4},
            "sampler": {"name": sampler, **extra},
            "batch_size": 16, "epochs": 1, "projection_dims": [16, 8],
            "evaluation": {"monitor_every": 1, "linear_probe": False}}


def test_synthetic_recipe_trains_through_the_run_layer(tmp_path):
    result = run.train(_recipe(48), str(tmp_path), verbose=0, export=False)
    assert result["steps_per_epoch"] == 3 and np.isfinite(result["history"]["loss"]).all()
    assert result["evaluation_examples"] == {"train": 48, "test": 16}
    assert 0.0 <= result["knn_accuracy"] <= 1.0 and "knn_accuracy" in result["history"]
    assert (tmp_path / "backup").is_dir()


def test_random_access_images_start_from_a_random_graph():
    recipe = run.load_recipe(_recipe(100))
    (x, _), _, _ = run.load_data(recipe)
    first = modality_of(recipe).initial_embeddings(x, 0)
    assert isinstance(first, ProximityGraph) and first.neighbors.shape[0] == 100
    assert modality_of(recipe).input_shape(x) == (8, 8, 3)


def _host_bytes(n):
    """Bytes allocated (and still held) by load_data + the uniform feed + one batch."""
    recipe = run.load_recipe(_recipe(n, sampler="uniform"))
    tracemalloc.start()
    try:
        (x, y), _, _ = run.load_data(recipe)
        feed = run.make_train_feed(recipe, x, y)
        feats, labels = next(iter(feed.dataset))
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert tuple(feats["images"].shape) == (16, 8, 8, 3) and labels.shape[0] == 16
    return held


def test_feed_memory_does_not_grow_with_n():
    small, large = _host_bytes(1_000), _host_bytes(1_000_000)
    # Per extra example: the uniform sampler's permutation (8 bytes) and little else; the
    # images as float32 arrays would be 768 bytes each (0.77 GB at N = 10^6).
    per_example = (large - small) / (1_000_000 - 1_000)
    assert per_example < 40, per_example
