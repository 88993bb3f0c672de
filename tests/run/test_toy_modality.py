"""The guard: a fourth modality from this file alone, whose input is a dict of two tensors.

Each example is two numeric parts (``"table"`` ``[6]`` and ``"counts"`` ``[3]``: think a
row of a table and a few counts); the encoder takes both (a two-input MLP). One
``Modality`` subclass registered in ``MODALITIES`` (plus the dataset, encoder and view maker
of that modality, each in its own registry) is all it takes for ``keras-hardneg train
--recipe`` to train it, export it as a SavedModel with a model card and write its Keras
preset, for ``load_encoder`` / ``load_preset`` to read them back, and for ``keras-hardneg
report`` / ``evaluate`` to report it: no file of the package changes for it.

The second test reads the package (AST): no module outside ``keras_hardneg/modalities/``
compares a modality's name (``== "text"``, ``in ("graph", ...)``, a modality literal as a
default), so what differs between modalities can only live in a modality.

The registrations live for this module's tests only (a fixture removes them), so the
registry walks of other test files never see them.
"""

import ast
import json
import os

import keras
import numpy as np
import pytest

from keras_hardneg import cli, export
from keras_hardneg.augment.views import ViewMaker
from keras_hardneg.modalities import Figure, Modality
from keras_hardneg.registry import DATASETS, ENCODERS, MODALITIES, VIEW_MAKERS, Param

NAME = "toy_pairs"
PARTS = {"table": 6, "counts": 3}
WIDTH = 8
N, B = 64, 16


# ------------------------------------------------------------------ components
def toy_pairs(seed: int) -> tuple:
    """Four clusters; each example a dict of two float32 parts; 3/4 train, 1/4 test."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 4, size=N)
    x = {part: (rng.normal(0.0, 3.0, size=(4, d))[y]
                + rng.normal(0.0, 0.5, size=(N, d))).astype("float32")
         for part, d in PARTS.items()}
    cut = N * 3 // 4
    return (({k: v[:cut] for k, v in x.items()}, y[:cut]),
            ({k: v[cut:] for k, v in x.items()}, y[cut:]), "toy pairs: 4 clusters")


def toy_two_part_mlp(input_shape: tuple) -> keras.Model:
    """Both parts through a Dense each, concatenated, then Dense: ``{part: [B, d]}`` ->
    ``[B, WIDTH]``. ``input_shape`` is the parts' widths."""
    inputs = {part: keras.Input((int(d),), name=part) for part, d in zip(PARTS, input_shape)}
    hidden = keras.layers.Concatenate()([keras.layers.Dense(WIDTH, activation="relu")(t)
                                         for t in inputs.values()])
    return keras.Model(inputs, keras.layers.Dense(WIDTH)(hidden), name="toy_two_part_mlp")


@keras.saving.register_keras_serializable(package="khn_toy_modality_test")
class NoisyParts(ViewMaker):
    """Two views of a dict batch: Gaussian noise on every part, drawn twice."""

    modality = NAME

    def __init__(self, stddev: float = 0.1, seed: int | None = None, **kwargs):
        super().__init__(**kwargs)
        self.stddev = stddev
        self.noise = keras.layers.GaussianNoise(stddev, seed=seed)

    def check_input(self, x):
        pass

    def make_views(self, x, training):
        def view():
            return {k: self.noise(v, training=True) for k, v in x.items()}
        return view(), view()

    def get_config(self):
        return {**super().get_config(), "stddev": self.stddev}


class PairBatches(keras.utils.PyDataset):
    """Shuffled ``({part: [B, d]}, labels [B])`` batches, the last partial one dropped."""

    def __init__(self, x, y, batch_size, seed):
        super().__init__()
        self.x, self.y, self.b = x, y, batch_size
        self.order = np.random.default_rng(seed).permutation(len(y))

    def __len__(self):
        return len(self.y) // self.b

    def __getitem__(self, i):
        rows = self.order[i * self.b:(i + 1) * self.b]
        return {k: v[rows] for k, v in self.x.items()}, self.y[rows]


class PairsModality(Modality):
    """Examples as a dict of two float32 parts; kNN accuracy; exported with both inputs."""

    name = NAME
    default_recipe = {
        "framework": {"name": "simclr"}, "encoder": {"name": "toy_two_part_mlp"},
        "loss": {"name": "nt_xent", "temperature": 0.5}, "sampler": {"name": "uniform"},
        "optimizer": {"name": "adam", "learning_rate": 1e-3},
        "schedule": {"name": "constant"}, "augmentation": {"name": "toy_noisy_parts"},
        "data": {"name": NAME}, "annealing": {},
        "evaluation": {"monitor_every": 0, "linear_probe": False},
        "batch_size": B, "epochs": 1, "projection_dims": [8, 4],
    }
    examples = "pairs"
    figures = (Figure("knn_accuracy", "kNN accuracy", short="kNN", scale=100.0),)
    signature_form = "a dict {'table': ((None, 6), 'float32'), 'counts': ...}"

    def num_examples(self, x):
        return len(next(iter(x.values())))

    def input_shape(self, x):
        return tuple(int(v.shape[1]) for v in x.values())

    def probe_batch(self, x, indices):
        return {k: v[indices] for k, v in x.items()}

    def feed(self, recipe, x, y, sampler, views):
        return PairBatches(x, y, recipe["batch_size"], recipe["seed"]), {}

    def evaluate(self, encoder, recipe, train, test, extras=None):
        from keras_hardneg.evaluation.knn import weighted_knn_accuracy

        def features(x):
            return keras.ops.convert_to_numpy(encoder(x, training=False))

        ev = recipe["evaluation"]
        return {"knn_accuracy": float(weighted_knn_accuracy(
            features(train[0]), train[1], features(test[0]), test[1], k=ev["knn_k"],
            temperature=ev["knn_temperature"]))}

    # what its artifacts are: the two parts, by name
    def input_signature(self, value):
        if not isinstance(value, dict) or set(value) != set(PARTS):
            return None
        return {k: (tuple(shape), dtype) for k, (shape, dtype) in value.items()}

    def preset_spec(self, encoder, x, run_dir=None):
        return {"widths": [int(d) for d in self.input_shape(x)]}, None

    def export_arguments(self, input_spec, assets=None):
        return {"input_signature": {part: ((None, int(d)), "float32") for part, d in
                                    zip(PARTS, input_spec["widths"])}}

    def example_input(self, input_spec, seed=0):
        rng = np.random.default_rng(seed)
        return {part: rng.normal(size=(3, int(d))).astype("float32")
                for part, d in zip(PARTS, input_spec["widths"])}

    def output_batch(self, input_shape):
        return next(iter(input_shape.values()))[0]


@pytest.fixture(scope="module")
def toy_modality():
    registered = []

    def register(registry, name, factory, **kwargs):
        registry.register(name, factory, **kwargs)
        registered.append((registry, name))

    register(DATASETS, NAME, toy_pairs, modality=NAME)
    register(ENCODERS, "toy_two_part_mlp", toy_two_part_mlp, modality=NAME)
    register(VIEW_MAKERS, "toy_noisy_parts", NoisyParts, modality=NAME,
             params={"stddev": Param(float, default=0.1, low=0.0, help="noise stddev")})
    register(MODALITIES, NAME, PairsModality)
    yield MODALITIES.get(NAME).factory()
    for registry, name in registered:  # components register for a process's life:
        registry._components.pop(name)  # no public removal, so the test undoes its own


# ------------------------------------------------------------------------ tests
def test_a_dict_input_modality_trains_exports_reloads_and_reports_through_the_cli(
        toy_modality, tmp_path, capsys):
    recipe = tmp_path / "recipe.json"
    recipe.write_text(json.dumps({"data": {"name": NAME}, "name": "toy"}))
    run_dir = tmp_path / "run"
    assert cli.main(["train", "--recipe", str(recipe), "--output", str(run_dir),
                     "--no-report"]) == 0  # the report: below, once
    printed = capsys.readouterr().out
    assert "training pairs/s" in printed and "kNN accuracy" in printed  # its own names
    results = json.loads((run_dir / "results.json").read_text())
    assert results["modality"] == NAME and 0.0 <= results["knn_accuracy"] <= 1.0
    assert results["pairs_per_second"] > 0 and "images_per_second" not in results

    x_test = toy_pairs(0)[1][0]
    preset = export.load_preset(results["preset_dir"], trainable=False)
    assert preset.preset_metadata["modality"] == NAME
    expected = keras.ops.convert_to_numpy(preset(x_test))
    assert expected.shape == (len(x_test["table"]), WIDTH)
    if keras.backend.backend() == "tensorflow":  # the SavedModel export and its card
        card = export.load_model_card(results["export_dir"])
        assert card.modality == NAME and set(card.input_signature) == set(PARTS)
        saved = export.load_encoder(results["export_dir"])
        np.testing.assert_allclose(keras.ops.convert_to_numpy(saved(x_test)), expected,
                                   atol=1e-5)

    assert cli.main(["report", str(run_dir)]) == 0
    page = (run_dir / "report.html").read_text()
    assert "kNN accuracy" in page and NAME in page
    assert cli.main(["evaluate", str(run_dir)]) == 0
    assert "kNN accuracy" in capsys.readouterr().out


#: Modality names as the package spells them (the built-in ones).
BUILT_IN = ("image", "graph", "text")


def _compared_names(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, text)`` of each comparison with a modality name, each modality literal given
    as a default (``.get(key, "image")``) and each modality literal written as the value of
    a ``"modality"`` key. (A component's registration tag, ``modality="graph"``, declares
    the component's modality: not a test of it.)"""
    found = []

    def names_a_modality(node):
        if isinstance(node, ast.Constant) and node.value in BUILT_IN:
            return True
        return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and any(
            names_a_modality(e) for e in node.elts)

    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            if any(names_a_modality(n) for n in [node.left, *node.comparators]):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("get", "setdefault", "pop") and len(node.args) == 2 \
                and names_a_modality(node.args[1]):
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value == "modality" \
                        and names_a_modality(value):
                    found.append((node.lineno, ast.unparse(node)))
    return found


def test_the_reader_catches_the_old_leaks():
    old = ['if _modality(recipe) == "text":\n    pass',
           'm = DATASETS.get(n).tags.get("modality", "image")',
           'record = {"status": "weights", "modality": meta.get("modality", "image")}',
           'ok = card.modality in ("graph", "text")']
    assert [len(_compared_names(ast.parse(code))) >= 1 for code in old] == [True] * 4
    assert _compared_names(ast.parse('kind = "image_size" in params')) == []


def test_no_module_outside_modalities_compares_a_modality_name():
    package = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "keras_hardneg")
    found = []
    for folder, _, files in os.walk(package):
        if os.path.relpath(folder, package).split(os.sep)[0] == "modalities":
            continue
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as f:
                    tree = ast.parse(f.read())
                found += [f"{os.path.relpath(path, package)}:{line}: {text}"
                          for line, text in _compared_names(tree)]
    assert found == [], "what differs between modalities belongs to keras_hardneg/modalities/"
