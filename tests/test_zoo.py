"""Zoo entries trained here: `keras-hardneg evaluate` reproduces their model cards."""

import glob
import json
import os

import pytest

from keras_hardneg import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAINED = sorted(os.path.dirname(p) for p in glob.glob(
    os.path.join(ROOT, "models", "*", "encoder", "model_card.json")))
DATA = os.path.join(ROOT, "..", "shared", "data", "cifar10-jpg")


def test_at_least_two_entries_were_trained_here():
    assert len(TRAINED) >= 2, TRAINED


@pytest.mark.skipif(not os.path.isdir(DATA), reason="needs ../shared/data/cifar10-jpg")
def test_evaluate_reproduces_the_card_of_a_zoo_entry(capsys):
    encoder = TRAINED[0]
    card = json.load(open(os.path.join(encoder, "model_card.json")))
    recipe = os.path.join(os.path.dirname(encoder), "recipe.json")
    assert cli.main(["evaluate", encoder, "--recipe", recipe, "--no-linear-probe",
                     "--json"]) == 0
    measured = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert measured["knn_accuracy"] == pytest.approx(card["knn_accuracy"], abs=1e-6)
