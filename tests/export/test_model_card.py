"""ModelCard with modalities (format /2): round trips with the new fields, validation,
Markdown, input signatures, and the wave-1 cards (format /1) of the model zoo still load.
No TensorFlow: runs under every backend."""

import glob
import json
import os

import pytest

from keras_hardneg.export import ModelCard, graph_input_signature, text_input_signature
from keras_hardneg.export.model_card import CARD_FORMAT, CARD_FORMATS
from keras_hardneg.modalities.signatures import normalize_input_signature, signature_to_json

pytestmark = pytest.mark.backends

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GRAPH_SIG = signature_to_json(normalize_input_signature(graph_input_signature(7))[1])
TEXT_SIG = {"token_ids": {"shape": [None, 32], "dtype": "int32"}}


def test_round_trip_with_the_new_fields():
    graph = ModelCard(name="gin", modality="graph", input_signature=GRAPH_SIG, output_dim=96,
                      metrics={"svm_accuracy": 0.89, "svm_accuracy_std": 0.02},
                      created="2026-01-01T00:00:00+00:00")
    text = ModelCard(name="simcse", modality="text", input_signature=TEXT_SIG, max_length=32,
                     assets=["tokenizer.json"], output_dim=128,
                     metrics={"sts": {"STS12": 0.61, "STS-B": 0.7, "avg": 0.655}})
    for card in (graph, text, ModelCard(name="img", input_shape=(32, 32, 3))):
        data = json.loads(card.to_json())
        assert data["format"] == CARD_FORMAT
        assert ModelCard.from_json(card.to_json()) == card
    assert graph.input_dtype is None and graph.input_range is None   # image-only fields
    assert "padded batch of graphs" in graph.preprocessing
    assert "tokenizer.json" in text.preprocessing
    md = text.to_markdown()
    for line in ("| sts | value |", "| STS-B | 0.7 |", "| `token_ids` | `[batch, 32]` | int32 |",
                 "max_length (L): 32", "embed_sentences", "assets: `assets/tokenizer.json`"):
        assert line in md, line
    md = graph.to_markdown()
    for line in ("- svm_accuracy: 0.89", "| `nodes` | `[N, 7]` | float32 |",
                 "| `node_graph` | `[N]` | int32 |", "serving_default'](**graph)"):
        assert line in md, line
    assert "kNN" not in md


def test_validation_of_the_new_fields():
    bad = [
        dict(modality="audio"),
        dict(modality="graph", input_shape=(8, 8, 3)),
        dict(modality="graph", input_signature=TEXT_SIG),
        dict(modality="graph", input_signature={"nodes": {"shape": [None, 7],
                                                          "dtype": "float32"}}),
        dict(modality="graph", max_length=4),
        dict(modality="text", input_signature=GRAPH_SIG),
        dict(modality="text", input_signature={"token_ids": {"shape": [None, 8],
                                                             "dtype": "float32"}}),
        dict(modality="text", input_signature=TEXT_SIG, max_length=16),
        dict(modality="text", max_length=0),
        dict(modality="text", input_dtype="int32"),
        dict(input_signature=TEXT_SIG),
        dict(max_length=32),
        dict(metrics={"sts": {"avg": float("nan")}}),
        dict(metrics={"sts": {"avg": "high"}}),
        dict(assets=["../tokenizer.json"]),
        dict(assets="tokenizer.json"),
    ]
    for kwargs in bad:
        with pytest.raises(ValueError, match="Invalid ModelCard"):
            ModelCard(**kwargs).validate()


def test_wave1_cards_still_load():
    paths = sorted(glob.glob(os.path.join(REPO, "models", "*", "encoder", "model_card.json")))
    # The zoo's wave-1 cards (format /1); entries exported since are /2 cards.
    paths = [p for p in paths if json.load(open(p))["format"] == CARD_FORMATS[0]]
    if not paths:
        pytest.skip("no wave-1 exported encoders in models/")
    for path in paths:
        with open(path) as f:
            text = f.read()
        assert json.loads(text)["format"] == CARD_FORMATS[0]
        card = ModelCard.from_json(text)
        assert card.modality == "image" and card.input_signature is None
        assert card.knn_accuracy is not None and card.output_dim > 0
        card.to_markdown()
        # Written again it is a /2 card with the same content.
        again = json.loads(card.to_json())
        assert again["format"] == CARD_FORMAT and again["modality"] == "image"
        old = json.loads(text)
        assert {k: v for k, v in again.items() if k in old and k != "format"} == \
            {k: v for k, v in old.items() if k != "format"}


def test_format_1_is_images_only():
    d = ModelCard(name="x").to_dict()
    d["format"] = CARD_FORMATS[0]
    with pytest.raises(ValueError, match="unknown fields"):
        ModelCard.from_dict(d)          # a /1 card cannot carry the /2 fields
    old = {k: v for k, v in d.items()
           if k not in ("modality", "input_signature", "max_length", "assets")}
    assert ModelCard.from_dict(old).modality == "image"
    with pytest.raises(ValueError, match="format"):
        ModelCard.from_dict({**old, "format": "keras_hardneg.model_card/3"})


def test_input_signature_helpers():
    assert normalize_input_signature(text_input_signature(16)) == (
        "text", {"token_ids": ((None, 16), "int32")})
    assert normalize_input_signature(((None, None, 3), "float32"))[0] == "image"
    modality, sig = normalize_input_signature(graph_input_signature())
    assert modality == "graph" and sig["nodes"] == ((None, None), "float32")
    for bad, match in [({"nodes": ((None, 3), "float32")}, "missing"),
                       (((4, 4), "float32"), "graph dict"),
                       (((None, 8), "int32"), "one example's shape"),
                       (((8,), "int64"), "must be int32"),
                       ("graph", "pair"),
                       (((0,), "int32"), "positive int"),
                       (((8,), "not-a-dtype"), "dtype")]:
        with pytest.raises(ValueError, match=match):
            normalize_input_signature(bad)
    with pytest.raises(ValueError, match="max_length"):
        text_input_signature(0)
