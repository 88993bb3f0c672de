"""run_search end to end on digits (tiny encoder, 1 epoch): results, plot, resume, errors."""

import json
import math

import pytest

from keras_hardneg import tuning
from keras_hardneg.tuning import hypermodel as hypermodel_lib

TINY = {"encoder": {"name": "small_convnet", "width": 8}, "projection_dims": [32, 16],
        "batch_size": 64}


def _search(output, trials, **kwargs):
    return tuning.run_search("digits", trials=trials, epochs=1, output=str(output),
                             recipe=TINY, verbose=0, **kwargs)


@pytest.fixture
def count_builds(monkeypatch):
    calls = []
    original = hypermodel_lib.ContrastiveHyperModel.build

    def build(self, hp):
        calls.append(dict(hp.values))
        return original(self, hp)

    monkeypatch.setattr(hypermodel_lib.ContrastiveHyperModel, "build", build)
    return calls


@pytest.mark.heavy  # heavy tier since 2026-11-29 (suite time: docs/notes/suite_time.md)
def test_search_resume_and_plot(tmp_path, count_builds):
    out = tmp_path / "tune"
    # an "interrupted" search: 1 of 2 trials finished
    first = _search(out, trials=1)
    assert len(first) == 1 and len(count_builds) == 1
    on_disk = json.loads((out / "results.json").read_text())
    assert on_disk == json.loads(json.dumps(first))
    t0 = first[0]
    assert t0["status"] == "COMPLETED" and math.isfinite(t0["objective"])
    assert 0.0 <= t0["beta"] <= 2.0 and 0.0 <= t0["tau_plus"] <= 0.2
    assert t0["objective"] == t0["knn_accuracy"]

    # resumed: only the missing trial trains
    trials = _search(out, trials=2)
    assert len(count_builds) == 2
    assert [t["trial_id"] for t in trials] == ["0", "1"]
    assert trials[0]["finished_at"] == t0["finished_at"]
    assert trials[0]["objective"] == t0["objective"]
    for t in trials:
        assert t["status"] == "COMPLETED" and math.isfinite(t["objective"])
        assert set(t["hyperparameters"]) == {"beta", "tau_plus"}
        assert isinstance(t["seed"], int)
    assert trials[0]["hyperparameters"] != trials[1]["hyperparameters"]
    assert json.loads((out / "results.json").read_text()) == json.loads(json.dumps(trials))
    png = out / "objective_beta_tau.png"
    assert png.is_file() and png.read_bytes()[:4] == b"\x89PNG"

    # nothing left to do: no new training
    again = _search(out, trials=2)
    assert len(count_builds) == 2 and len(again) == 2

    # a resumed search must use the same settings
    with pytest.raises(ValueError, match="output"):
        _search(out, trials=2, objective="linear_probe")


@pytest.mark.heavy  # heavy tier since 2026-11-29 (suite time: docs/notes/suite_time.md)
def test_nonfinite_objective_is_a_failed_trial(tmp_path, monkeypatch):
    monkeypatch.setattr(hypermodel_lib.ContrastiveHyperModel, "evaluate",
                        lambda self, encoder, recipe=None: {"knn_accuracy": float("nan")})
    trials = _search(tmp_path / "nan", trials=1)
    assert trials[0]["status"] == "FAILED"
    assert trials[0]["objective"] is None
    assert "non-finite" in trials[0]["error"]
    assert (tmp_path / "nan" / "objective_beta_tau.png").is_file()


def test_trial_seed_is_deterministic():
    a = tuning.trial_seed(0, {"beta": 1.0, "tau_plus": 0.1})
    assert a == tuning.trial_seed(0, {"tau_plus": 0.1, "beta": 1.0, "tuner/epochs": 3})
    assert a != tuning.trial_seed(1, {"beta": 1.0, "tau_plus": 0.1})
    assert a != tuning.trial_seed(0, {"beta": 1.5, "tau_plus": 0.1})


@pytest.mark.parametrize("kwargs, name", [
    ({"trials": 0}, "trials"),
    ({"trials": 1.5}, "trials"),
    ({"epochs": 0}, "epochs"),
    ({"tuner": "grid"}, "tuner"),
    ({"objective": "accuracy"}, "objective"),
    ({"loss": "triplet"}, "loss"),
    ({"framework": "byol"}, "framework"),
    ({"search_space": {"gamma": (0, 1)}}, "search_space"),
    ({"search_space": {"beta": (1.0, 0.5)}}, "search_space"),
    ({"search_space": {"tau_plus": (0.0, 1.5)}}, "search_space"),
    ({"seed": -1}, "seed"),
    ({"batch_size": 1}, "batch_size"),
    ({"validation_fraction": 1.0}, "validation_fraction"),
    ({"dataset": "/no/such/folder"}, "dataset"),
])
def test_bad_arguments(tmp_path, kwargs, name):
    args = {"dataset": "digits", "trials": 1, "epochs": 1, "output": str(tmp_path / "bad"),
            "verbose": 0, "recipe": TINY}
    args.update(kwargs)
    with pytest.raises(ValueError, match=rf"`{name}"):
        tuning.run_search(**args)
    assert not (tmp_path / "bad" / "results.json").exists()


@pytest.mark.heavy  # heavy tier since 2026-11-29 (suite time: docs/notes/suite_time.md)
def test_trial_seconds_are_the_whole_trial_as_keras_tuner_times_it(tmp_path, monkeypatch):
    """Issue 47, item 9: ``seconds`` was the pre-training alone, less than Keras Tuner's
    "Trial N Complete [...]" (which also counts building and the evaluation)."""
    import time

    original = hypermodel_lib.ContrastiveHyperModel.evaluate

    def slow_evaluate(self, encoder, recipe=None):
        time.sleep(1.0)
        return original(self, encoder, recipe)

    monkeypatch.setattr(hypermodel_lib.ContrastiveHyperModel, "evaluate", slow_evaluate)
    (trial,) = _search(tmp_path / "time", trials=1)
    assert trial["seconds"] >= trial["fit_seconds"] + 1.0, trial


def test_the_plot_numbers_trials_as_the_table_does(tmp_path, monkeypatch):
    """Issue 47, item 9: the plot said "best: trial 0" where the table said trial 1."""
    from keras_hardneg.tuning import plot

    labels = []
    recs = [{"trial_id": "0", "status": "COMPLETED", "objective": 0.9, "beta": 1.0,
             "tau_plus": 0.1}]
    from matplotlib.axes import Axes

    real = Axes.scatter

    def scatter(self, *args, **kwargs):
        labels.append(kwargs.get("label"))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Axes, "scatter", scatter)
    plot.plot_objective(recs, str(tmp_path / "p.png"))
    assert "best: trial 1 (0.9)" in labels  # the table's number (records.trial_number)
