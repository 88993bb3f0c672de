"""run.artifacts.restore_run: a run whose latest checkpoint is damaged is rebuilt from the
checkpoint the backup kept before it (one epoch earlier, with a warning), as training's
resume does; with both damaged the error names the latest."""

import json
import os

import keras
import numpy as np
import pytest

from keras_hardneg import run
from keras_hardneg.callbacks.backup import committed_weights

TINY = {"encoder": {"name": "small_convnet", "width": 4}, "projection_dims": [8, 8],
        "data": {"name": "digits", "test_fraction": 0.75}, "batch_size": 64, "epochs": 2,
        "evaluation": {"monitor_every": 0, "linear_probe": False, "knn_k": 5}}


def _weights(model):
    return [keras.ops.convert_to_numpy(w) for w in model.encoder.weights]


@pytest.mark.heavy  # heavy tier since 2026-11-29 (suite time: docs/notes/suite_time.md)
def test_a_damaged_latest_checkpoint_falls_back_to_the_one_before(tmp_path):
    out = str(tmp_path / "run")
    run.train(TINY, out, verbose=0, export=False)
    latest, previous = committed_weights(os.path.join(out, "backup"))
    with open(os.path.join(out, "backup", "training_metadata.json")) as f:
        assert json.load(f)["previous"]["epoch"] == 1
    want = run.build_model(run.load_recipe(os.path.join(out, "recipe.json")),
                           x_train=run.load_data(TINY)[0][0])
    want.load_weights(previous)
    with open(latest, "r+b") as f:  # damage the latest checkpoint
        f.truncate(100)
    with pytest.warns(UserWarning, match=r"cannot load weights .*using the checkpoint "
                                         r"before it .*one epoch earlier"):
        model = run.restore_run(out)[0]
    for a, b in zip(_weights(model), _weights(want)):
        np.testing.assert_array_equal(a, b)
    with open(previous, "r+b") as f:
        f.truncate(100)
    with pytest.raises(run.RunDirectoryError, match=r"cannot load weights .*ckpt-00002"):
        run.restore_run(out)


@pytest.mark.parametrize("data, views, title, shown", [
    ({"name": "text_file", "corpus": "wiki1m"}, "simcse", "SimCSE + nt_xent on wiki1m", "wiki1m"),
    ({"name": "text_file", "path": "/x/sents.txt"}, "quick_thought", "quick-thought + nt_xent",
     "sents.txt"),
    ({"name": "tu", "dataset": "MUTAG"}, None, "graphcl + nt_xent on MUTAG", "MUTAG"),
    ({"name": "digits"}, None, "simclr + hard on digits", "digits"),
])
def test_a_run_is_named_by_its_modality(data, views, title, shown):
    """The model card's and the report's title name the method as the modality does: a
    sentence run by its views (SimCSE, quick-thought), not SimCLR's step it runs on; the
    report names the corpus or the dataset, not the loader."""
    from keras_hardneg.modalities import modality_of
    from keras_hardneg.run.artifacts import card_title
    from keras_hardneg.run.report.run_report import _data_name

    recipe = run.load_recipe({"data": data, **({"augmentation": {"name": views}} if views else {})})
    assert card_title(recipe).startswith(title)
    assert _data_name(recipe["data"]) == shown
    if views:
        assert recipe["framework"]["name"] == "simclr"  # the step; the name is the views'
        assert modality_of(recipe).method_name(recipe) == title.split(" + ")[0]
