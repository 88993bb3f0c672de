"""A fourth modality from this file alone: fixed-length numeric rows (tabular data) with an
MLP encoder. One ``Modality`` subclass registered in ``MODALITIES`` (plus the dataset,
encoder and view maker of that modality, each in its own registry) is all it takes for
``run.train`` to train it, export it as a SavedModel with a model card, write its Keras
preset, and for ``load_encoder`` / ``load_preset`` / ``evaluate_directory`` to read them
back: no file of the package names this modality.

The registrations live for this module's tests only (a fixture removes them), so the
registry walks of other test files never see them.
"""

import os
import re

import numpy as np
import pytest

import keras
from keras_hardneg import export, run
from keras_hardneg.augment.views import ViewMaker
from keras_hardneg.export.signatures import normalize_input_signature, shape_and_dtype
from keras_hardneg.registry import (DATASETS, ENCODERS, MODALITIES, VIEW_MAKERS, Param,
                                    get_modality)
from keras_hardneg.run.modality import Modality

NAME = "toy_rows"
FEATURES = 6
INPUT = "rows"


# ------------------------------------------------------------------ components
def toy_rows(seed: int, num_examples: int = 192) -> tuple:
    """Four Gaussian clusters in 6-D (labels = cluster), 3/4 train, 1/4 test."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(0.0, 3.0, size=(4, FEATURES))
    y = rng.integers(0, 4, size=num_examples)
    x = (centers[y] + rng.normal(0.0, 0.5, size=(num_examples, FEATURES))).astype("float32")
    cut = num_examples * 3 // 4
    return (x[:cut], y[:cut]), (x[cut:], y[cut:]), "toy rows: 4 Gaussian clusters in 6-D"


def toy_mlp(input_shape: tuple, width: int = 16) -> keras.Model:
    """Dense-ReLU-Dense: rows ``[B, D]`` -> features ``[B, width]``."""
    inputs = keras.Input(input_shape, name=INPUT)
    hidden = keras.layers.Dense(width, activation="relu")(inputs)
    return keras.Model(inputs, keras.layers.Dense(width)(hidden), name="toy_mlp")


@keras.saving.register_keras_serializable(package="khn_toy_modality_test")
class NoisyRows(ViewMaker):
    """Two views of a batch of rows: Gaussian noise drawn twice."""

    modality = NAME

    def __init__(self, stddev: float = 0.1, seed: int | None = None, **kwargs):
        super().__init__(**kwargs)
        self.stddev = stddev
        self.noise = keras.layers.GaussianNoise(stddev, seed=seed)

    def make_views(self, x, training):
        return self.noise(x, training=True), self.noise(x, training=True)

    def get_config(self):
        return {**super().get_config(), "stddev": self.stddev}


def toy_noise(stddev: float = 0.1, seed: int | None = None) -> NoisyRows:
    """Gaussian-noise views of numeric rows."""
    return NoisyRows(stddev, seed=seed)


class RowsModality(Modality):
    """Numeric rows ``[N, D]`` float32 with class labels: kNN accuracy; exported as one
    input ``rows`` float32 ``[B, D]``."""

    name = NAME
    default_recipe = {
        "framework": {"name": "simclr"},
        "encoder": {"name": "toy_mlp"},
        "loss": {"name": "nt_xent", "temperature": 0.5},
        "sampler": {"name": "uniform"},
        "optimizer": {"name": "adam", "learning_rate": 1e-3},
        "schedule": {"name": "constant"},
        "augmentation": {"name": "toy_noise"},
        "data": {"name": NAME},
        "annealing": {},
        "evaluation": {"monitor_every": 0, "linear_probe": False},
        "batch_size": 32,
        "epochs": 2,
        "projection_dims": [16, 8],
    }
    result_keys = ("knn_accuracy",)
    knn_evaluation = True  # evaluate() is kNN on labelled splits, as for images
    input_description = "numeric rows"
    signature_form = "rows ((D,), 'float32')"

    def feed(self, recipe, x, y, sampler, views):
        from keras_hardneg import sampling
        from keras_hardneg.data import ShuffledBatches

        if sampler is not None:
            return sampling.make_py_dataset(sampler, x, y), {}
        return ShuffledBatches(x, y, recipe["batch_size"], seed=recipe["seed"]), {}

    def evaluate(self, encoder, recipe, train, test, extras=None):
        from keras_hardneg.evaluation.knn import weighted_knn_accuracy

        def features(x):
            return keras.ops.convert_to_numpy(encoder(x, training=False))

        ev = recipe["evaluation"]
        return {"knn_accuracy": float(weighted_knn_accuracy(
            features(train[0]), train[1], features(test[0]), test[1], k=ev["knn_k"],
            temperature=ev["knn_temperature"]))}

    def describe_evaluation(self, recipe):
        return "weighted kNN on frozen features, train split -> test split"

    # what its artifacts are
    def input_signature(self, value):
        if isinstance(value, dict):
            return None
        shape, dtype = shape_and_dtype(value, "the single input")
        if len(shape) == 1 and dtype == "float32":
            return {INPUT: ((None,) + shape, dtype)}
        return None

    def default_preset_spec(self, encoder):
        return {"num_features": int(encoder.input_shape[-1])}

    def export_arguments(self, input_spec, assets=None):
        return {"input_signature": ((int(input_spec["num_features"]),), "float32")}

    def example_input(self, input_spec, seed=0):
        rng = np.random.default_rng(seed)
        return rng.normal(size=(3, int(input_spec["num_features"]))).astype("float32")


@pytest.fixture(scope="module")
def toy_modality():
    registered = []

    def register(registry, name, factory, **kwargs):
        registry.register(name, factory, **kwargs)
        registered.append((registry, name))

    register(DATASETS, NAME, toy_rows, modality=NAME,
             params={"num_examples": Param(int, low=16, help="rows in all")})
    register(ENCODERS, "toy_mlp", toy_mlp, modality=NAME,
             params={"width": Param(int, low=1, help="hidden and output width")})
    register(VIEW_MAKERS, "toy_noise", toy_noise, modality=NAME,
             params={"stddev": Param(float, low=0.0, help="noise standard deviation")})
    register(MODALITIES, NAME, RowsModality)
    yield get_modality(NAME)
    for registry, name in registered:  # components register for a process's life:
        registry._components.pop(name)  # no public removal, so the test undoes its own


# ------------------------------------------------------------------------ tests
def test_the_signature_of_rows_is_the_new_modality(toy_modality):
    assert normalize_input_signature(((FEATURES,), "float32")) == (
        NAME, {INPUT: ((None, FEATURES), "float32")})
    with pytest.raises(ValueError, match=r"rows \(\(D,\), 'float32'\)"):
        normalize_input_signature(((FEATURES, 2), "float32"))  # nobody takes [B, D, 2]
    card = export.ModelCard(name="toy", modality=NAME)
    assert card.input_dtype is None and card.input_range is None  # not an image card
    assert "Self-supervised toy_rows encoder" in card.to_markdown()


def test_a_fourth_modality_trains_exports_and_loads(toy_modality, tmp_path):
    run_dir = tmp_path / "run"
    results = run.train({"data": {"name": NAME}}, str(run_dir), verbose=0)
    recipe = run.load_recipe(str(run_dir / "recipe.json"))
    assert recipe["encoder"]["name"] == "toy_mlp" and recipe["augmentation"]["name"] == \
        "toy_noise"  # the modality's default recipe
    assert results["epochs_run"] == 2
    assert all(np.isfinite(results["history"]["loss"]))
    assert 0.0 <= results["knn_accuracy"] <= 1.0

    # the SavedModel export and its card
    card = export.load_model_card(results["export_dir"])
    assert card.modality == NAME
    assert card.input_signature == {INPUT: {"shape": [None, FEATURES], "dtype": "float32"}}
    assert card.knn_accuracy == pytest.approx(results["knn_accuracy"]) and card.metrics == {}
    markdown = (run_dir / "encoder" / "model_card.md").read_text()
    assert f"| `{INPUT}` | `[batch, {FEATURES}]` | float32 |" in markdown
    assert "- linear-probe accuracy: not measured" in markdown  # knn_evaluation's card lines
    saved = export.load_encoder(results["export_dir"])
    (_, _), (x_test, _), _ = toy_rows(0)
    from_saved = keras.ops.convert_to_numpy(saved(x_test))
    assert from_saved.shape == (len(x_test), 16)

    # the Keras preset (the run's and the export's) gives the same features
    for folder in (results["preset_dir"], str(run_dir / "encoder")):
        model = export.load_preset(folder, trainable=False)
        assert model.preset_metadata["modality"] == NAME
        assert model.preset_metadata["input"] == {"num_features": FEATURES}
        np.testing.assert_allclose(keras.ops.convert_to_numpy(model(x_test)), from_saved,
                                   atol=1e-5)

    # the run directory evaluates through its export
    figures, info = run.evaluate_directory(str(run_dir))
    assert info["modality"] == NAME
    assert figures["knn_accuracy"] == pytest.approx(results["knn_accuracy"])


#: A test of a modality's name: ``modality == "image"``, ``card.modality in ("graph",
#: "text")``, ``meta["modality"] != ...``, ``.tags.get("modality", "image") != "image"``.
NAME_TEST = re.compile(
    r"""modality(?:\.name)?\s*(?:==|!=|\bin\b|\bnot in\b)\s*[("'\[{]"""
    r"""|\[["']modality["']\]\s*(?:==|!=)"""
    r"""|get\(["']modality["'][^)]*\)\s*(?:==|!=)\s*["']""")


def test_no_module_but_the_modality_module_tests_a_modality_name():
    package = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "keras_hardneg")
    found = []
    for folder, _, files in os.walk(package):
        for name in files:
            path = os.path.join(folder, name)
            if not name.endswith(".py") or path.endswith(os.path.join("run", "modality.py")):
                continue
            with open(path) as f:
                found += [f"{os.path.relpath(path, package)}:{i}: {line.strip()}"
                          for i, line in enumerate(f, 1) if NAME_TEST.search(line)]
    assert found == [], "what differs between modalities belongs to run/modality.py"
