"""Issue 24: every class registered under ``package="keras_hardneg"`` loads in a fresh process
that imports only ``keras`` and ``keras_hardneg``: ``.keras`` files of every framework
(compiled: loss, optimizer and schedule inside), of an encoder of each modality, of a model
wrapping a SavedModel; and the configs of the losses, layers and callbacks. A class that no
artifact below contains fails the coverage test (add it to ``_artifacts``)."""

import json
import os
import subprocess
import sys
import zipfile

import keras
import numpy as np
import pytest

import keras_hardneg as khn
from tests.models.graph_helpers import GraphBatches

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: Registered under an old name only so that earlier files load (see models/moco.py).
ALIASES = {"keras_hardneg>MoCo"}

CHILD = r"""
import json, sys
import keras, keras_hardneg  # nothing else: the package must register what it saved
out = {}
for path, kind in json.loads(sys.argv[1]).items():
    if kind == "model":
        obj = keras.models.load_model(path)
    else:
        with open(path) as f:
            obj = keras.saving.deserialize_keras_object(json.load(f))
    out[path] = type(obj).__name__
print(json.dumps(out))
"""


#: Registered classes that need an optional extra (keras-hub) to be built.
NEEDS_KERAS_HUB = {"keras_hardneg>BertTokenStates"}


def _pretrained_available():
    import importlib.util

    return all(importlib.util.find_spec(m) is not None
               for m in ("keras_hub", "safetensors", "tokenizers"))


def _registered():
    return {k for k in keras.saving.get_custom_objects() if k.startswith("keras_hardneg>")}


def _fit_once(model, x, **kwargs):
    model.fit(x, epochs=1, verbose=0, **kwargs)
    return model


def _built(model, x):
    """Built by one forward call (cheaper than a fit: no train step is traced)."""
    model(x)
    return model


def _artifacts(folder):
    """``{path: (kind, expected class name)}`` written into ``folder``."""
    enc = lambda w=4: khn.encoders.small_convnet(input_shape=(8, 8, 3), width=w)  # noqa: E731
    (x, _), _ = khn.data.load_digits()
    x = x[:16]
    out = {}

    def save(model, name):
        path = os.path.join(folder, f"{name}.keras")
        model.save(path)
        out[path] = ("model", type(model).__name__)

    def config(obj, name):
        path = os.path.join(folder, f"{name}.json")
        with open(path, "w") as f:
            json.dump(keras.saving.serialize_keras_object(obj), f)
        out[path] = ("config", type(obj).__name__)

    schedule = khn.optimizers.WarmupCosineDecay(0.1, total_steps=10, warmup_steps=2)
    simclr = khn.models.SimCLR(
        khn.encoders.resnet18_cifar(width=2, input_shape=(8, 8, 3)), projection_dims=(8, 4),
        head_version="simclr_v1_bn",
        augmentation=khn.augment.simclr_augmentation(image_size=8, strength=0.5, seed=0))
    simclr.compile(optimizer=khn.optimizers.SGDL2(schedule, momentum=0.9, weight_decay=5e-4),
                   loss=khn.losses.HardNegativeContrastiveLoss(tau_plus=0.1, beta=1.0))
    save(_fit_once(simclr, x, batch_size=16), "simclr")
    save(simclr.encoder, "resnet18_encoder")
    v2 = khn.models.MoCo(enc(), projection_dims=(8, 4), queue_size=16, momentum=0.9,
                         version="v2", augmentation=khn.augment.simclr_augmentation(image_size=8))
    v2.compile(optimizer=khn.optimizers.LARS(0.1), loss=khn.losses.RingContrastiveLoss())
    save(_built(v2, x), "moco_v2")
    v3 = khn.models.MoCo(enc(), projection_dims=(8, 4), momentum=0.9, version="v3",
                         augmentation=khn.augment.simclr_augmentation(image_size=8))
    v3.compile(optimizer="adam", loss=khn.losses.DebiasedContrastiveLoss(tau_plus=0.1))
    save(_built(v3, x), "moco_v3")
    gin = khn.encoders.gin(input_shape=(4,), width=4, num_layers=2)
    graphcl = khn.models.GraphCL(gin, pairing="in_batch")
    graphcl.compile(optimizer="adam", loss=khn.losses.NTXentLoss())
    save(_built(graphcl, GraphBatches(num_batches=1, batch_size=4)[0][0]["view1"]), "graphcl")
    infograph = khn.models.InfoGraph(khn.encoders.gin(input_shape=(4,), width=4, num_layers=2))
    infograph.compile(optimizer="adam", loss=khn.losses.UnReMixContrastiveLoss())
    save(_built(infograph, GraphBatches(num_batches=1, batch_size=4, plain=True)[0][0]),
         "infograph")
    text = khn.encoders.text_transformer(input_shape=(6,), vocab_size=20, width=8,
                                         num_layers=1, num_heads=2)
    simcse = khn.models.SimCLR(text, projection_dims=(8, 4),
                               augmentation=khn.augment.DropoutViews())
    simcse.compile(optimizer="adam", loss=khn.losses.NTXentLoss(temperature=0.05))
    ids = np.random.default_rng(0).integers(1, 20, size=(8, 6)).astype("int32")
    save(_built(simcse, ids), "simcse")
    dual = khn.models.DualEncoder(
        khn.encoders.text_transformer(input_shape=(6,), vocab_size=20, width=8, num_layers=1,
                                      num_heads=2), num_negatives=1, guard="self")
    dual.compile(optimizer=keras.optimizers.AdamW(khn.optimizers.WarmupLinearDecay(
        1e-3, total_steps=10, warmup_steps=1)), loss=khn.losses.NTXentLoss(temperature=0.05))
    save(_built(dual, ids), "dual_encoder")
    config(khn.augment.NoViews(), "no_views")
    # Built by their model from its config (projection_dims, augmentation): saved alone.
    config(khn.encoders.projection_head(8, 8, 4), "projection_head")
    config(khn.augment.ImageViews(khn.augment.simclr_augmentation(image_size=8)), "image_views")
    config(infograph.local_projector, "infograph_projection")
    config(khn.losses.NTXentLoss(temperature=0.2), "nt_xent")
    config(khn.losses.MinedNegativesLoss("hard", num_negatives=1, guard="self"),
           "mined_negatives")
    if hasattr(khn.encoders, "pretrained_text"):  # the pretrained-text encoder's input layer
        from keras_hardneg.encoders.pretrained_text import BertInputs

        config(BertInputs(), "bert_inputs")
    if _pretrained_available():  # a tiny random BERT through keras-hub (BertTokenStates)
        from keras_hardneg.encoders.pretrained_text import write_tiny_bert

        tiny = write_tiny_bert(os.path.join(folder, "tiny_bert"))
        save(khn.encoders.pretrained_text(preset=tiny), "pretrained_bert")
    config(khn.augment.AdjacentViews(), "adjacent_views")
    config(khn.augment.RandomApply(keras.layers.Identity(), probability=0.5), "random_apply")
    config(khn.callbacks.BetaAnnealing(epochs=4), "beta_annealing")
    config(khn.callbacks.RingAnnealing(epochs=4), "ring_annealing")
    config(khn.models.NonFiniteGuard(), "non_finite_guard")
    config(khn.callbacks.GraphRefreshCallback(every_n_steps=5), "graph_refresh")
    config(khn.callbacks.AtomicBackupAndRestore(os.path.join(folder, "backup")), "backup")
    # A model that wraps a SavedModel export (keras_hardneg.export.load_encoder), saved with
    # a relative path from another working directory: it must not depend on the cwd.
    small = enc()
    khn.export.export_encoder(small, os.path.join(folder, "export"))
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        wrapped = keras.Sequential([keras.Input((8, 8, 3)), khn.export.load_encoder("export")])
        save(wrapped, "savedmodel_wrapper")
    finally:
        os.chdir(cwd)
    return out


def _contained(path):
    """The registered names a saved artifact's config mentions."""
    if path.endswith(".keras"):
        with zipfile.ZipFile(path) as z:
            text = z.read("config.json").decode()
    else:
        with open(path) as f:
            text = f.read()
    return {name for name in _registered() if f'"{name}"' in text}


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    folder = tmp_path_factory.mktemp("serialization")
    keras.utils.set_random_seed(0)
    return _artifacts(str(folder))


@pytest.mark.timeout(600)
def test_every_registered_class_is_in_an_artifact(artifacts):
    covered = set().union(*(_contained(p) for p in artifacts))
    optional = set() if _pretrained_available() else NEEDS_KERAS_HUB
    missing = sorted(_registered() - covered - ALIASES - optional)
    assert missing == [], f"registered classes no artifact contains: {missing}"


@pytest.mark.timeout(600)
def test_each_artifact_loads_in_a_process_that_imports_only_keras_hardneg(artifacts, tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps({p: k for p, (k, _) in artifacts.items()})],
        cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded == {p: name for p, (_, name) in artifacts.items()}


def test_a_moved_savedmodel_gives_a_clear_error(artifacts, tmp_path):
    wrapper = next(p for p in artifacts if p.endswith("savedmodel_wrapper.keras"))
    export_dir = os.path.join(os.path.dirname(wrapper), "export")
    moved = export_dir + "-moved"
    os.rename(export_dir, moved)
    try:
        with pytest.raises(ValueError, match=r"SavedModel .*export.* (is gone|not found).*preset"):
            keras.models.load_model(wrapper)
    finally:
        os.rename(moved, export_dir)


def test_a_reloaded_framework_keeps_its_loss_and_optimizer(artifacts):
    path = next(p for p in artifacts if p.endswith("simclr.keras"))
    model = keras.models.load_model(path)
    assert type(model.contrastive_loss).__name__ == "HardNegativeContrastiveLoss"
    assert model.contrastive_loss.beta == 1.0 and model.contrastive_loss.tau_plus == 0.1
    assert type(model.optimizer).__name__ == "SGDL2" and model.optimizer.l2 == 5e-4
    assert model.view_maker is not None  # the augmentation came back too


# ----------------------------------------------- every registered class: config round trip
# Issue 56, bug 3: a ``get_config`` that skips ``super().get_config()`` loses ``trainable``
# and the dtype policy. Every class registered under ``package="keras_hardneg"`` is built
# small here and goes through ``serialize -> json -> deserialize``; layers and models are
# built with ``trainable=False`` and a ``mixed_bfloat16`` policy, which must come back.

_POLICY = "mixed_bfloat16"


def _import_every_module():
    """Imports every module of the package, so that every registered class is registered
    (whatever ``import keras_hardneg`` itself loads)."""
    import importlib
    import pkgutil

    from keras_hardneg.data._tf import TensorFlowBackendRequiredError

    for info in pkgutil.walk_packages(khn.__path__, "keras_hardneg."):
        if info.name.endswith(".__main__"):  # a command's entry: importing it runs it
            continue
        try:
            importlib.import_module(info.name)
        except (ImportError, TensorFlowBackendRequiredError):
            pass  # an optional extra (keras-hub) missing, or export/ under another backend


def _tiny_conv(**kw):
    return khn.encoders.small_convnet(input_shape=(8, 8, 3), width=4, **kw)


def _tiny_gin(**kw):
    return _module("encoders.gin").GINEncoder(4, width=4, num_layers=2, **kw)


def _bert_token_states(kw, folder):
    from keras_hardneg.encoders.pretrained_text import BertTokenStates, write_tiny_bert

    encoder = khn.encoders.pretrained_text(preset=write_tiny_bert(os.path.join(folder, "bert")))
    states = next(l for l in encoder._flatten_layers() if isinstance(l, BertTokenStates))
    return BertTokenStates(states.backbone, **kw)


def _saved_model_encoder(kw, folder):
    path = os.path.join(folder, "export")
    khn.export.export_encoder(_tiny_conv(), path)
    return _module("export.load").SavedModelEncoder(path, **kw)


#: Registered name -> ``(kind, build)``; ``build(kw, folder)`` makes a small instance, with
#: ``kw`` (``trainable``, ``dtype``) passed on for ``"layer"`` entries. A newly registered
#: class needs an entry here.
_ROUND_TRIP = {
    # augment/
    "AdjacentViews": ("layer", lambda kw, _: khn.augment.AdjacentViews(**kw)),
    "NoViews": ("layer", lambda kw, _: khn.augment.NoViews(**kw)),
    "DropoutViews": ("layer", lambda kw, _: khn.augment.DropoutViews(**kw)),
    "ImageViews": ("layer", lambda kw, _: khn.augment.ImageViews(
        khn.augment.simclr_augmentation(image_size=8), **kw)),
    "RandomApply": ("layer", lambda kw, _: khn.augment.RandomApply(
        keras.layers.Identity(), probability=0.5, **kw)),
    "SimCLRAugmentation": ("layer", lambda kw, _: khn.augment.SimCLRAugmentation(
        image_size=8, seed=1, **kw)),
    # encoders/
    "FusedBatchNormalization": ("layer", lambda kw, _: _fused_bn(**kw)),
    "GINEncoder": ("layer", lambda kw, _: _tiny_gin(**kw)),
    "ImageNormalization": ("layer", lambda kw, _: khn.encoders.ImageNormalization(**kw)),
    "MaskedPooling": ("layer", lambda kw, _: _text_layer("MaskedPooling", mode="cls", **kw)),
    "PositionEmbedding": ("layer", lambda kw, _: _text_layer("PositionEmbedding",
                                                             max_length=6, **kw)),
    "TokenMask": ("layer", lambda kw, _: _text_layer("TokenMask", **kw)),
    "TransformerBlock": ("layer", lambda kw, _: _text_layer(
        "TransformerBlock", width=8, num_heads=2, mlp_dim=16, **kw)),
    "ProjectionHead": ("layer", lambda kw, _: khn.encoders.ProjectionHead(8, 8, 4, **kw)),
    "BertInputs": ("layer", lambda kw, _: _pretrained_layer("BertInputs")(**kw)),
    "BertTokenStates": ("layer", _bert_token_states),
    # models/
    "SimCLR": ("layer", lambda kw, _: khn.models.SimCLR(_tiny_conv(), projection_dims=(8, 4),
                                                        **kw)),
    "MoCoV2": ("layer", lambda kw, _: khn.models.MoCoV2(
        _tiny_conv(), projection_dims=(8, 4), queue_size=16, momentum=0.9, **kw)),
    "MoCoV3": ("layer", lambda kw, _: khn.models.MoCoV3(
        _tiny_conv(), projection_dims=(8, 4), momentum=0.9, **kw)),
    "GraphCL": ("layer", lambda kw, _: khn.models.GraphCL(_tiny_gin(), pairing="in_batch",
                                                          **kw)),
    "InfoGraph": ("layer", lambda kw, _: khn.models.InfoGraph(_tiny_gin(), **kw)),
    "DualEncoder": ("layer", lambda kw, _: khn.models.DualEncoder(
        khn.encoders.text_transformer(input_shape=(6,), vocab_size=20, width=8, num_layers=1,
                                      num_heads=2), num_negatives=2, symmetric=True,
        query_length=3, **kw)),
    "InfoGraphProjection": ("layer", lambda kw, _: _module("models.infograph").InfoGraphProjection(
        8, [8, 4], **kw)),
    # export/
    "SavedModelEncoder": ("layer", _saved_model_encoder),
    # losses/
    "NTXentLoss": ("object", lambda kw, _: khn.losses.NTXentLoss(temperature=0.2)),
    "DebiasedContrastiveLoss": ("object", lambda kw, _: khn.losses.DebiasedContrastiveLoss(
        tau_plus=0.1)),
    "HardNegativeContrastiveLoss": ("object", lambda kw, _:
                                    khn.losses.HardNegativeContrastiveLoss(tau_plus=0.1,
                                                                           beta=0.5)),
    "RingContrastiveLoss": ("object", lambda kw, _: khn.losses.RingContrastiveLoss()),
    "UnReMixContrastiveLoss": ("object", lambda kw, _: khn.losses.UnReMixContrastiveLoss()),
    "MinedNegativesLoss": ("object", lambda kw, _: khn.losses.MinedNegativesLoss(
        "hard", num_negatives=1, symmetric=True, hardness_strength=2.0,
        hardness_mode="all_negatives", guard="self", guard_margin=0.1)),
    # optimizers/
    "WarmupCosineDecay": ("object", lambda kw, _: khn.optimizers.WarmupCosineDecay(
        0.1, total_steps=10, warmup_steps=2, end_learning_rate=0.01, hold_steps=2)),
    "WarmupLinearDecay": ("object", lambda kw, _: khn.optimizers.WarmupLinearDecay(
        0.1, total_steps=10, warmup_steps=2)),
    "LARS": ("object", lambda kw, _: khn.optimizers.LARS(0.2, weight_decay=1e-4)),
    "SGDL2": ("object", lambda kw, _: khn.optimizers.SGDL2(
        khn.optimizers.WarmupCosineDecay(0.1, total_steps=10), weight_decay=5e-4)),
    # callbacks (and the models' guard)
    "AtomicBackupAndRestore": ("object", lambda kw, folder:
                               khn.callbacks.AtomicBackupAndRestore(
                                   os.path.join(folder, "backup"), save_freq=3)),
    "BetaAnnealing": ("object", lambda kw, _: khn.callbacks.BetaAnnealing(epochs=4)),
    "RingAnnealing": ("object", lambda kw, _: khn.callbacks.RingAnnealing(epochs=4, end=20.0)),
    "GraphRefreshCallback": ("object", lambda kw, _: khn.callbacks.GraphRefreshCallback(
        every_n_steps=5)),
    "NonFiniteGuard": ("object", lambda kw, _: khn.models.NonFiniteGuard(raise_error=False)),
}


def _module(name):
    import importlib

    return importlib.import_module(f"keras_hardneg.{name}")


def _fused_bn(**kw):
    return _module("encoders.batch_norm").FusedBatchNormalization(**kw)


def _text_layer(name, **kw):
    return getattr(_module("encoders.text_transformer"), name)(**kw)


def _pretrained_layer(name):
    return getattr(_module("encoders.pretrained_text"), name)


def _registered_after_full_import():
    _import_every_module()
    return sorted(_registered() - ALIASES)


def test_every_registered_class_has_a_round_trip_entry():
    names = {n.split(">", 1)[1] for n in _registered_after_full_import()}
    assert sorted(names - set(_ROUND_TRIP)) == [], "add the class to _ROUND_TRIP"
    if keras.backend.backend() == "tensorflow":  # export/ (SavedModelEncoder) needs TF
        assert sorted(set(_ROUND_TRIP) - names) == [], "_ROUND_TRIP names an unregistered class"


@pytest.mark.parametrize("name", sorted(_ROUND_TRIP))
def test_config_round_trip_keeps_trainable_and_dtype_policy(name, tmp_path):
    if f"keras_hardneg>{name}" in NEEDS_KERAS_HUB and not _pretrained_available():
        pytest.skip("needs keras-hub (the [pretrained] extra)")
    if name == "SavedModelEncoder" and keras.backend.backend() != "tensorflow":
        pytest.skip("a SavedModel export needs the TensorFlow backend")
    _import_every_module()
    kind, build = _ROUND_TRIP[name]
    kw = {"trainable": False, "dtype": _POLICY} if kind == "layer" else {}
    obj = build(kw, str(tmp_path))
    assert type(obj).__name__ == name
    if kind == "layer":  # the constructor honours them (else the round trip proves nothing)
        assert obj.trainable is False and obj.dtype_policy.name == _POLICY
    text = json.dumps(keras.saving.serialize_keras_object(obj))  # JSON-serialisable
    back = keras.saving.deserialize_keras_object(json.loads(text))
    assert type(back) is type(obj)
    if kind == "layer":
        assert back.trainable is False, f"{name}: trainable False came back True"
        assert back.dtype_policy.name == _POLICY, \
            f"{name}: dtype policy {_POLICY} came back {back.dtype_policy.name}"
    again = json.loads(json.dumps(keras.saving.serialize_keras_object(back)))
    assert again == json.loads(text)
