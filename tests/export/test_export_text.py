"""Text encoders exported as SavedModels taking token ids, with the tokenizer as an asset
(issue #17): the export gives the in-memory encoder's vectors, for ids and (through
``load_encoder(...).embed_sentences``) for strings."""

import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

if keras.backend.backend() != "tensorflow":  # collected by the JAX run of tests/test_backends.py
    pytest.skip("SavedModel export needs the TensorFlow backend (tested there)",
                allow_module_level=True)

import tensorflow as tf  # noqa: E402

from keras import ops  # noqa: E402
from keras_hardneg.export import (  # noqa: E402
    ModelCard,
    export_encoder,
    find_device_strings,
    load_encoder,
    load_model_card,
    text_input_signature,
)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# A fresh process: tensorflow_hub (imports tf_keras) on ids, and (with `tokenizers`) strings
# through load_encoder(...).embed_sentences. argv = [export_dir, data.npz].
FRESH_SCRIPT = """
import sys, importlib.util
import numpy as np, tensorflow as tf, tensorflow_hub as hub
d, data = sys.argv[1], np.load(sys.argv[2])
def close(out, expected):
    err = float(np.max(np.abs(np.asarray(out) - expected)))
    assert out.shape == expected.shape and err <= 1e-5, (out.shape, err)
obj = hub.load(d)
close(obj(data["ids"], training=False), data["expected"])
close(obj.signatures["serving_default"](token_ids=tf.constant(data["ids"]))["features"],
      data["expected"])
if "sentences_expected" in data:
    from keras_hardneg.export import load_encoder
    close(load_encoder(d).embed_sentences(list(data["sentences"])), data["sentences_expected"])
print("OK")
"""
ATOL = 1e-5
L = 8
VOCAB = 300
SENTENCES = ["the cat sat on the mat", "a dog barked at the postman all night long",
             "", "cats and dogs", "the mat was red"]
CORPUS = ["the cat sat on the mat", "the dog sat on the log", "a cat and a dog",
          "the postman came at night", "dogs bark and cats sit"] * 4


def stand_in(length=L, dropout=0.0):
    """Embedding + masked mean over ids != 0: int32 [B, L] -> [B, 8]."""
    keras.utils.set_random_seed(0)
    ids = keras.Input((length,), dtype="int32", name="token_ids")
    x = keras.layers.Embedding(VOCAB, 8)(ids)
    x = keras.layers.Dropout(dropout)(x)
    mask = ops.cast(ops.not_equal(ids, 0), "float32")[:, :, None]
    out = ops.sum(x * mask, axis=1) / ops.maximum(ops.sum(mask, axis=1), 1.0)
    return keras.Model(ids, out)


def random_ids(n=6, length=L, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, VOCAB, size=(n, length)).astype("int32")
    for i in range(n):
        ids[i, rng.integers(1, length + 1):] = 0   # right padding
    return ids


@pytest.fixture(scope="module")
def tokenizer_file(tmp_path_factory):
    """A tiny trained SentenceTokenizer saved as one JSON file (None without `tokenizers`)."""
    try:
        import tokenizers  # noqa: F401
        from keras_hardneg.data.tokenizer import train_tokenizer
    except ImportError:
        return None
    path = tmp_path_factory.mktemp("tok") / "tok.json"
    tok = train_tokenizer(CORPUS, vocab_size=VOCAB)
    assert tok.vocab_size <= VOCAB
    tok.save(path)
    return path


@pytest.fixture(scope="module")
def exported(tmp_path_factory, tokenizer_file):
    root = tmp_path_factory.mktemp("text_export")
    enc = stand_in()
    assets = {"tokenizer.json": tokenizer_file} if tokenizer_file else None
    card = ModelCard(name="standin-simcse", modality="text", framework="SimCSE",
                     metrics={"sts": {"STS12": 0.61, "STS-B": 0.7, "avg": 0.655}},
                     evaluation="Spearman x 100 of cosine similarities")
    written = export_encoder(enc, root / "enc", input_signature=text_input_signature(L),
                             assets=assets, model_card=card)
    ids = random_ids()
    data = dict(ids=ids, expected=enc(ids).numpy())
    if tokenizer_file is not None:
        from keras_hardneg.data.tokenizer import load_tokenizer

        data.update(sentences=np.array(SENTENCES), sentences_expected=enc(
            load_tokenizer(tokenizer_file).encode(SENTENCES, max_length=L)).numpy())
    np.savez(root / "data.npz", **data)
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
               TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    env.pop("TF_USE_LEGACY_KERAS", None)
    fresh = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(FRESH_SCRIPT), str(root / "enc"),
         str(root / "data.npz")], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    obj = tf.saved_model.load(str(root / "enc"))
    yield dict(enc=enc, dir=root / "enc", card=written, obj=obj, root=root, fresh=fresh)
    if fresh.poll() is None:
        fresh.kill()
        fresh.communicate()


def test_same_vectors_for_ids(exported):
    enc, obj = exported["enc"], exported["obj"]
    ids = random_ids()
    expected = enc(ids).numpy()
    np.testing.assert_allclose(obj(ids, training=False), expected, atol=ATOL)
    np.testing.assert_allclose(obj(token_ids=ids, training=False), expected, atol=ATOL)
    sig = obj.signatures["serving_default"]
    args, kwargs = sig.structured_input_signature
    assert args == () and list(kwargs) == ["token_ids"]
    assert kwargs["token_ids"].shape.as_list() == [None, L]
    assert kwargs["token_ids"].dtype == tf.int32
    np.testing.assert_allclose(sig(token_ids=tf.constant(ids))["features"], expected, atol=ATOL)
    np.testing.assert_allclose(keras.layers.TFSMLayer(str(exported["dir"]))(ids), expected,
                               atol=ATOL)
    layer = load_encoder(exported["dir"])
    assert layer.modality == "text" and layer.max_length == L and layer.output_dim == 8
    np.testing.assert_allclose(layer(ids.astype("int64")), expected, atol=ATOL)
    assert layer.compute_output_shape((6, L)) == (6, 8)
    inp = keras.Input((L,), dtype="int32")
    model = keras.Model(inp, keras.layers.Dense(2)(layer(inp)))
    assert model(ids).shape == (6, 2)
    assert find_device_strings(exported["dir"]) == []


def test_embed_sentences_equals_tokenize_and_encode(exported, tokenizer_file):
    if tokenizer_file is None:
        pytest.skip("the `tokenizers` package is not installed")
    from keras_hardneg.data.tokenizer import load_tokenizer

    tok = load_tokenizer(tokenizer_file)
    ids = tok.encode(SENTENCES, max_length=L)
    layer = load_encoder(exported["dir"])
    np.testing.assert_array_equal(layer.tokenize(SENTENCES), ids)
    got = layer.embed_sentences(SENTENCES, batch_size=2)  # three chunks
    assert got.dtype == np.float32 and got.shape == (len(SENTENCES), 8)
    np.testing.assert_allclose(got, exported["enc"](ids).numpy(), atol=ATOL)
    assert layer.embed_sentences([]).shape == (0, 8)
    with pytest.raises(ValueError, match="list of strings"):
        layer.embed_sentences("one string")
    # The asset is a tracked tf.saved_model.Asset too (for loaders without keras-hardneg).
    asset = exported["obj"].assets["tokenizer.json"].asset_path.numpy().decode()
    assert asset == os.path.join(str(exported["dir"]), "assets", "tokenizer.json")
    # The Hugging Face file under its standard name, our settings beside it (issue 33).
    assert sorted(os.listdir(exported["dir"] / "assets")) == ["keras_hardneg_tokenizer.json",
                                                              "tokenizer.json"]
    import tokenizers

    hf = tokenizers.Tokenizer.from_file(asset)
    assert hf.get_vocab_size() + tok.id_offset == tok.vocab_size


def test_missing_tokenizers_package_is_a_clear_error(exported, tokenizer_file, monkeypatch):
    if tokenizer_file is None:
        pytest.skip("the `tokenizers` package is not installed")
    monkeypatch.setitem(sys.modules, "tokenizers", None)   # import tokenizers -> ImportError
    layer = load_encoder(exported["dir"])
    with pytest.raises(ImportError, match="embedding strings needs the `tokenizers` package"):
        layer.embed_sentences(["a cat"])


def test_model_card(exported, tokenizer_file):
    card = load_model_card(exported["dir"])
    assert card == exported["card"]
    assert card.modality == "text" and card.max_length == L and card.output_dim == 8
    assert card.input_signature == {"token_ids": {"shape": [None, L], "dtype": "int32"}}
    assert card.metrics["sts"]["avg"] == 0.655
    assert card.assets == (["tokenizer.json", "keras_hardneg_tokenizer.json"]
                           if tokenizer_file else [])
    md = (exported["dir"] / "model_card.md").read_text()
    for text in ("| `token_ids` | `[batch, 8]` | int32 |", "max_length (L): 8",
                 "| STS12 | 0.61 |", "| avg | 0.655 |", "output: `[batch, 8]`"):
        assert text in md, text


def test_export_without_tokenizer_and_variable_length(exported, tokenizer_file):
    root = exported["root"]
    enc = stand_in(length=None, dropout=0.5)
    ids = random_ids()
    card = export_encoder(enc, root / "plain", input_signature=text_input_signature(None),
                          model_card=ModelCard(modality="text", max_length=L))
    assert card.input_signature["token_ids"]["shape"] == [None, None]
    assert card.max_length == L and card.assets == []
    assert "not shipped" in card.preprocessing
    obj = tf.saved_model.load(str(root / "plain"))
    np.testing.assert_allclose(obj(ids[:, :5], training=False), enc(ids[:, :5]), atol=ATOL)
    assert not np.allclose(obj(ids, training=True), obj(ids, training=False))   # dropout
    with pytest.raises(ValueError, match="ships no tokenizer"):
        load_encoder(root / "plain").embed_sentences(["a cat"])
    if tokenizer_file is not None:
        with pytest.raises(ValueError, match="needs max_length"):
            export_encoder(enc, root / "nolen", input_signature=text_input_signature(None),
                           assets={"tokenizer.json": tokenizer_file})
    with pytest.raises(ValueError, match="fixes L=16"):
        export_encoder(stand_in(), root / "bad", input_signature=text_input_signature(16))
    with pytest.raises(ValueError, match="token ids must be int32"):
        export_encoder(stand_in(), root / "bad", input_signature=((L,), "int64"))
    bad_tok = root / "not_a_tokenizer.json"
    bad_tok.write_text('{"model": {}}')
    with pytest.raises(ValueError, match="not a saved keras_hardneg SentenceTokenizer"):
        export_encoder(stand_in(), root / "bad", input_signature=text_input_signature(L),
                       assets={"tokenizer.json": bad_tok})
    with pytest.raises(ValueError, match="plain file name"):
        export_encoder(stand_in(), root / "bad", input_signature=text_input_signature(L),
                       assets={"../x.json": bad_tok})
    with pytest.raises(ValueError, match="max_length=9 but the exported token ids have L=8"):
        export_encoder(stand_in(), root / "bad", input_signature=text_input_signature(L),
                       model_card=ModelCard(modality="text", max_length=9))
    assert not os.path.exists(root / "bad") and not os.path.exists(root / "nolen")
    assert not [n for n in os.listdir(root) if n.startswith(".khn-export")]


def test_real_text_transformer(tmp_path, tokenizer_file):
    module = pytest.importorskip("keras_hardneg.encoders.text_transformer")
    keras.utils.set_random_seed(2)
    enc = module.text_transformer(input_shape=(L,), vocab_size=VOCAB, width=16,
                                  num_layers=1, num_heads=2)
    assets = {"tokenizer.json": tokenizer_file} if tokenizer_file else None
    export_encoder(enc, tmp_path / "tt", input_signature=text_input_signature(L),
                   assets=assets, model_card=ModelCard(name="tt", modality="text"))
    ids = random_ids()
    obj = tf.saved_model.load(str(tmp_path / "tt"))
    np.testing.assert_allclose(obj(ids, training=False), enc(ids), atol=ATOL)
    assert not np.allclose(obj(ids, training=True), obj(ids, training=False))  # dropout 0.1
    if tokenizer_file is not None:
        from keras_hardneg.data.tokenizer import load_tokenizer

        expected = enc(load_tokenizer(tokenizer_file).encode(SENTENCES, max_length=L))
        np.testing.assert_allclose(load_encoder(tmp_path / "tt").embed_sentences(SENTENCES),
                                   expected, atol=ATOL)


# Last, so the fresh process runs alongside the tests above.
def test_hub_load_and_embed_sentences_in_a_fresh_process(exported):
    pytest.importorskip("tensorflow_hub")
    proc = exported["fresh"]
    try:
        out, err = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    tail = "\n".join(err.strip().splitlines()[-20:])
    assert proc.returncode == 0 and out.strip().endswith("OK"), f"{out}\n{tail}"
