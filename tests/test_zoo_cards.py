"""The zoo's Markdown cards (issue 26): what was trained, no internal words or machine paths,
no Keras config noise in the hyper-parameter tables."""

import glob
import json
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CARDS = sorted(glob.glob(os.path.join(ROOT, "models", "*", "model_card.md")))
CPU = [os.path.join(ROOT, "models", f"simclr-{k}-cifar10-r18w8-cpu") for k in ("ntxent", "hard")]
ABSOLUTE = re.compile(r"(?<![\w.])/(work|home|tmp|root|mnt|Users)/")


def test_cards_hold_no_internal_words_paths_or_keras_config_keys():
    assert len(CARDS) > 40
    for path in CARDS:
        text = open(path).read()
        assert "wave" not in text.lower(), path
        assert not ABSOLUTE.search(text), path
        assert "| name |" not in text and "| reduction |" not in text, path


def test_cpu_cards_state_the_trained_optimizer_and_plain_figure_names():
    for entry in CPU:
        recipe = json.load(open(os.path.join(entry, "recipe.json")))
        results = json.load(open(os.path.join(entry, "results.json")))
        assert recipe["optimizer"]["weight_decay"] is None  # what was trained
        for card in ("model_card.md", os.path.join("encoder", "model_card.md")):
            text = open(os.path.join(entry, card)).read()
            row = next(line for line in text.splitlines() if line.startswith("| optimizer |"))
            assert json.loads(row.split("|")[2]) == recipe["optimizer"], (card, row)
            assert "1e-06" not in text and "wave" not in text.lower()
            assert f"{results['knn_accuracy_tensorflow_jpeg_decoder']:.4g}" in text
        for card in ("preset", "encoder"):
            data = json.load(open(os.path.join(entry, card, "model_card.json")))
            assert data["hyperparameters"]["optimizer"] == recipe["optimizer"]
        text = json.dumps(results)
        assert "wave" not in text and not ABSOLUTE.search(text)


def test_run_cards_leave_out_keras_config_keys():
    from keras_hardneg import losses
    from keras_hardneg.run.artifacts import loss_hyperparameters

    hp = loss_hyperparameters(losses.HardNegativeContrastiveLoss(temperature=0.3))
    assert hp["temperature"] == 0.3
    assert not {"name", "reduction", "dtype"} & set(hp)


def test_image_cards_state_the_input_contract_of_their_preset():
    """Issue 33, item 3: an image entry's card says what its preset's encoder reads (float
    [0, 1] or 0-255 pixels under ``input_range="auto"``), not the old "float32 in [0, 1]"."""
    from keras_hardneg.export.preset import image_contract

    presets = [os.path.dirname(p) for p in
               glob.glob(os.path.join(ROOT, "models", "*", "preset", "model_card.json"))]
    checked = 0
    for preset in presets:
        contract = image_contract(preset)
        if contract is None:                      # graph and text entries
            continue
        card = json.load(open(os.path.join(preset, "model_card.json")))
        assert card["preprocessing"] == contract, preset
        assert "0-255" in contract
        text = open(os.path.join(os.path.dirname(preset), "model_card.md")).read()
        assert contract in text, preset
        checked += 1
    assert checked >= 4
