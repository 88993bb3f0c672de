"""A text preset's ``assets/tokenizer.json`` is the Hugging Face file under its standard name,
keras-hardneg's settings beside it (issue 33); presets of the one-file layout still read."""

import json
import os
import shutil

import numpy as np
import pytest

import keras_hardneg as khn
from keras_hardneg.export import load_preset, save_preset

tokenizers = pytest.importorskip("tokenizers")

from keras_hardneg.data.tokenizer import (TOKENIZER_SETTINGS, load_tokenizer,  # noqa: E402
                                          train_tokenizer, write_tokenizer_assets)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OLD_LAYOUT = os.path.join(ROOT, "models", "quickthought-ntxent-wiki", "preset", "assets",
                          "tokenizer.json")
SENTENCES = ["the cat sat on the mat", "the dog sat on the log", "a man plays a guitar"] * 5


def test_a_text_preset_stores_the_standard_file_and_our_settings_beside_it(tmp_path):
    tok = train_tokenizer(SENTENCES, vocab_size=300)
    one_file = tok.save(str(tmp_path / "tokenizer.json"))
    text = khn.encoders.text_transformer(input_shape=(6,), vocab_size=tok.vocab_size, width=8,
                                         num_layers=1, num_heads=2)
    path = save_preset(text, str(tmp_path / "p"), modality="text",
                       input_spec={"max_length": 6}, assets={"tokenizer.json": one_file})
    assets = os.path.join(path, "assets")
    assert sorted(os.listdir(assets)) == [TOKENIZER_SETTINGS, "tokenizer.json"]
    hf = tokenizers.Tokenizer.from_file(os.path.join(assets, "tokenizer.json"))
    assert hf.encode("the cat sat").ids == tok.tokenizer.encode("the cat sat").ids
    again = load_tokenizer(os.path.join(assets, "tokenizer.json"))
    np.testing.assert_array_equal(again.encode(SENTENCES, 8), tok.encode(SENTENCES, 8))
    meta = json.load(open(os.path.join(path, "metadata.json")))
    assert {"assets/tokenizer.json", f"assets/{TOKENIZER_SETTINGS}"} <= set(meta["files"])
    load_preset(path)  # both hashes verified
    # The Hugging Face file without our settings beside it: one line saying what is missing.
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copyfile(os.path.join(assets, "tokenizer.json"), alone / "tokenizer.json")
    with pytest.raises(ValueError, match=f"no {TOKENIZER_SETTINGS} lies beside it"):
        load_tokenizer(str(alone / "tokenizer.json"))


@pytest.mark.skipif(not os.path.isfile(OLD_LAYOUT), reason="needs the repository's models/")
def test_the_one_file_layout_of_older_presets_still_reads_and_converts_identically(tmp_path):
    with open(OLD_LAYOUT) as f:
        assert json.load(f)["format"] == "keras_hardneg.SentenceTokenizer"  # the old layout
    old = load_tokenizer(OLD_LAYOUT)
    names = write_tokenizer_assets(OLD_LAYOUT, str(tmp_path))
    assert names == ["tokenizer.json", TOKENIZER_SETTINGS]
    new = load_tokenizer(str(tmp_path / "tokenizer.json"))
    np.testing.assert_array_equal(new.encode(SENTENCES, 32), old.encode(SENTENCES, 32))
    assert (new.cls_id, new.id_offset, new.vocab_size) == (old.cls_id, old.id_offset,
                                                           old.vocab_size)
