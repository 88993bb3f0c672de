"""Bad input: every public constructor and CLI flag refuses out-of-range or mistyped values
with a message naming the argument; degenerate datasets and files are handled as documented."""

import os

import numpy as np
import pytest
import tensorflow as tf

import keras_hardneg as khn
from keras_hardneg import cli, sampling
from keras_hardneg import run as runlib
from keras_hardneg.callbacks import GraphRefreshCallback, KNNMonitor
from keras_hardneg.run import RecipeError, load_recipe


def _enc():
    return khn.encoders.small_convnet(input_shape=(8, 8, 3), width=4)


X = np.random.default_rng(0).uniform(size=(20, 8, 8, 3)).astype("float32")
Y = np.arange(20) % 3
EMB = np.random.default_rng(1).normal(size=(50, 4)).astype("float32")

# (id, regex the message must match (names the argument), callable)
CONSTRUCTORS = [
    ("NTXentLoss.temperature=0", r"`temperature`", lambda: khn.losses.NTXentLoss(temperature=0)),
    ("NTXentLoss.temperature=str", r"`temperature`", lambda: khn.losses.NTXentLoss(temperature="a")),
    ("NTXentLoss.temperature=nan", r"`temperature`",
     lambda: khn.losses.NTXentLoss(temperature=float("nan"))),
    ("Debiased.tau_plus=1", r"`tau_plus`", lambda: khn.losses.DebiasedContrastiveLoss(tau_plus=1.0)),
    ("Hard.beta=-1", r"`beta`", lambda: khn.losses.HardNegativeContrastiveLoss(beta=-1)),
    ("Hard.tau_plus=-0.1", r"`tau_plus`",
     lambda: khn.losses.HardNegativeContrastiveLoss(tau_plus=-0.1)),
    ("Ring.lower>=upper", r"`lower_percentile`",
     lambda: khn.losses.RingContrastiveLoss(lower_percentile=60, upper_percentile=50)),
    ("Ring.upper=101", r"`upper_percentile`",
     lambda: khn.losses.RingContrastiveLoss(upper_percentile=101)),
    ("UnReMix.weights=len2", r"`weights`", lambda: khn.losses.UnReMixContrastiveLoss(weights=(1, 2))),
    ("UnReMix.weights<0", r"`weights\[0\]`",
     lambda: khn.losses.UnReMixContrastiveLoss(weights=(-1, 1, 1))),
    ("losses.get(unknown)", r"unknown loss 'foo'; allowed: debiased, hard", lambda: khn.losses.get("foo")),
    ("small_convnet.width=0", r"width", lambda: khn.encoders.small_convnet((8, 8, 3), width=0)),
    ("small_convnet.input_shape=rank2", r"input_shape",
     lambda: khn.encoders.small_convnet(input_shape=(8, 8), width=4)),
    ("small_convnet.input_shape=1ch", r"input_shape",
     lambda: khn.encoders.small_convnet(input_shape=(8, 8, 1), width=4)),
    ("resnet18_cifar.width=-1", r"width", lambda: khn.encoders.resnet18_cifar(width=-1)),
    ("resnet50.input_shape", r"input_shape", lambda: khn.encoders.resnet50(input_shape=(0, 224, 3))),
    ("projection_head.output_dim=0", r"output_dim", lambda: khn.encoders.projection_head(8, [8], 0)),
    ("projection_head.version", r"version", lambda: khn.encoders.projection_head(8, [8], 4, version="x")),
    ("prediction_head.hidden=0", r"hidden_dim", lambda: khn.encoders.prediction_head(8, 0, 8)),
    ("SimCLR.encoder=str", r"`encoder`", lambda: khn.models.SimCLR("enc")),
    ("SimCLR.projection_dims", r"`projection_dims`",
     lambda: khn.models.SimCLR(_enc(), projection_dims=(16,))),
    ("SimCLR.head_version", r"`head_version`",
     lambda: khn.models.SimCLR(_enc(), projection_dims=(16, 8), head_version="zz")),
    ("SimCLR.memory_bank_size=1", r"`memory_bank_size`",
     lambda: khn.models.SimCLR(_enc(), projection_dims=(16, 8), memory_bank_size=1)),
    ("SimCLR.compile(loss=mse)", r"unknown loss 'mse'; allowed: ",
     lambda: khn.models.SimCLR(_enc(), projection_dims=(16, 8)).compile(loss="mse")),
    ("MoCo.momentum=1.5", r"`momentum`",
     lambda: khn.models.MoCo(_enc(), projection_dims=(16, 8), momentum=1.5)),
    ("MoCo.queue_size=0", r"`queue_size`",
     lambda: khn.models.MoCo(_enc(), projection_dims=(16, 8), queue_size=0)),
    ("MoCo.version=v1", r"`version`",
     lambda: khn.models.MoCo(_enc(), projection_dims=(16, 8), version="v1")),
    ("LARS.learning_rate=-1", r"learning_rate", lambda: khn.optimizers.LARS(-1.0)),
    ("LARS.momentum=2", r"momentum", lambda: khn.optimizers.LARS(0.1, momentum=2)),
    ("LARS.weight_decay=-1", r"weight_decay", lambda: khn.optimizers.LARS(0.1, weight_decay=-1)),
    ("LARS.eta=0", r"eta", lambda: khn.optimizers.LARS(0.1, eta=0)),
    ("WarmupCosineDecay.total_steps=0", r"total_steps",
     lambda: khn.optimizers.WarmupCosineDecay(0.1, total_steps=0)),
    ("WarmupCosineDecay.warmup>total", r"warmup_steps",
     lambda: khn.optimizers.WarmupCosineDecay(0.1, total_steps=10, warmup_steps=20)),
    ("WarmupCosineDecay.lr<0", r"learning_rate",
     lambda: khn.optimizers.WarmupCosineDecay(-0.1, total_steps=10)),
    ("BetaAnnealing.epochs=0", r"`epochs`", lambda: khn.callbacks.BetaAnnealing(0)),
    ("BetaAnnealing.num_changes=0", r"`num_changes`",
     lambda: khn.callbacks.BetaAnnealing(10, num_changes=0)),
    ("RingAnnealing.start=0", r"`start`", lambda: khn.callbacks.RingAnnealing(10, start=0)),
    ("NonFiniteGuard.raise_error=str", r"`raise_error`",
     lambda: khn.callbacks.NonFiniteGuard(raise_error="no")),
    ("AtomicBackupAndRestore.state", r"`state\['a'\]`",
     lambda: khn.callbacks.AtomicBackupAndRestore("/tmp/unused", state={"a": 1})),
    ("AtomicBackupAndRestore.save_freq", r"save_freq",
     lambda: khn.callbacks.AtomicBackupAndRestore("/tmp/unused", save_freq="batch")),
    ("KNNMonitor.k=0", r"`k`", lambda: KNNMonitor((X, Y), (X, Y), k=0)),
    ("KNNMonitor.temperature=0", r"`temperature`", lambda: KNNMonitor((X, Y), (X, Y), temperature=0)),
    ("KNNMonitor.every_n_epochs=-1", r"`every_n_epochs`",
     lambda: KNNMonitor((X, Y), (X, Y), every_n_epochs=-1)),
    ("KNNMonitor.labels=None", r"`train_data`: labels missing",
     lambda: KNNMonitor((X, None), (X, Y))),
    ("KNNMonitor.images_only", r"`test_data`: labels missing", lambda: KNNMonitor((X, Y), X)),
    ("KNNMonitor.label_count", r"`train_data`: 20 images and 5 labels",
     lambda: KNNMonitor((X, Y[:5]), (X, Y))),
    ("BatchSampler.batch_size=0", r"`batch_size`",
     lambda: sampling.BatchSampler(EMB, 0, num_candidates=10, num_neighbors=3)),
    ("BatchSampler.batch_size>N", r"`batch_size` \(51\) must be <= the number of examples N=50",
     lambda: sampling.BatchSampler(EMB, 51, num_candidates=10, num_neighbors=3)),
    ("BatchSampler.restart_prob=1", r"`restart_prob`",
     lambda: sampling.BatchSampler(EMB, 8, restart_prob=1.0, num_candidates=10, num_neighbors=3)),
    ("BatchSampler.num_neighbors>=num_candidates", r"`num_neighbors`.*`num_candidates`",
     lambda: sampling.BatchSampler(EMB, 8, num_candidates=10, num_neighbors=10)),
    ("BatchSampler.tail", r"`tail`",
     lambda: sampling.BatchSampler(EMB, 8, num_candidates=10, num_neighbors=3, tail="x")),
    ("BatchSampler.zero_examples", r"`embeddings` must have at least 2 rows",
     lambda: sampling.BatchSampler(np.zeros((0, 4), "float32"), 8, num_candidates=10,
                                   num_neighbors=3)),
    ("UniformSampler.batch_size>N", r"`batch_size`", lambda: sampling.UniformSampler(10, 11)),
    ("KNNSampler.num_neighbors=0", r"`num_neighbors`",
     lambda: sampling.KNNSampler(EMB, 8, num_neighbors=0)),
    ("ProximityGraph.num_neighbors>=num_candidates", r"`num_neighbors`",
     lambda: sampling.ProximityGraph.build(EMB, 10, 10)),
    ("ProximityGraph.nan_embeddings", r"`embeddings` contains non-finite",
     lambda: sampling.ProximityGraph.build(np.full((50, 4), np.nan, "float32"), 10, 3)),
    ("ProximityGraph.backend", r"`backend`", lambda: sampling.ProximityGraph.build(EMB, 10, 3,
                                                                                  backend="zz")),
    ("GraphRefreshCallback.every_n_steps=0", r"`every_n_steps`",
     lambda: GraphRefreshCallback(None, every_n_steps=0)),
    ("make_dataset.source_size", r"`source` has 20 examples",
     lambda: sampling.make_dataset(sampling.UniformSampler(10, 2), X)),
    ("simclr_augmentation.image_size=0", r"image_size",
     lambda: khn.augment.simclr_augmentation(image_size=0)),
    ("simclr_augmentation.strength=-1", r"strength",
     lambda: khn.augment.simclr_augmentation(image_size=8, strength=-1)),
    ("simclr_augmentation.version", r"version",
     lambda: khn.augment.simclr_augmentation(image_size=8, version="v9")),
    ("load_digits.test_fraction=1.5", r"`test_fraction`",
     lambda: khn.data.load_digits(test_fraction=1.5)),
    ("weighted_knn_accuracy.k=0", r"`k`", lambda: khn.evaluation.weighted_knn_accuracy(
        EMB, np.arange(50), EMB, np.arange(50), k=0)),
    ("export_encoder.encoder=str", r"encoder must be a keras.Model",
     lambda: khn.export.export_encoder("x", "/tmp/unused-export")),
    ("recipe.unknown_key", r"unknown recipe key 'lr'", lambda: load_recipe({"lr": 1})),
    ("recipe.batch_size=1", r"'batch_size' = 1 is out of range", lambda: load_recipe({"batch_size": 1})),
    ("recipe.loss.temperature=str", r"'loss.temperature' must be a number",
     lambda: load_recipe({"loss": {"temperature": "hot"}})),
    ("recipe.num_neighbors>=num_candidates", r"'sampler.num_neighbors' must be < "
     r"'sampler.num_candidates'", lambda: load_recipe(
         {"sampler": {"name": "batchsampler", "num_candidates": 10, "num_neighbors": 10}})),
]


@pytest.mark.parametrize("pattern,make", [c[1:] for c in CONSTRUCTORS],
                         ids=[c[0] for c in CONSTRUCTORS])
def test_constructor_refuses_bad_value_naming_it(pattern, make):
    with pytest.raises((ValueError, TypeError), match=pattern):
        make()


CLI_CASES = [
    (["train", "--epochs", "0"], "--epochs"),
    (["train", "--epochs", "two"], "--epochs"),
    (["train", "--batch-size", "-3"], "--batch-size"),
    (["train", "--width", "0"], "--width"),
    (["train", "--temperature", "-1"], "--temperature"),
    (["train", "--tau-plus", "x"], "--tau-plus"),
    (["train", "--beta", "-0.5"], "--beta"),
    (["train", "--learning-rate", "-1"], "--learning-rate"),
    (["train", "--loss", "mse"], "--loss"),
    (["train", "--framework", "byol"], "--framework"),
    (["train", "--precision", "float64"], "--precision"),
    (["train", "--verbose", "7"], "--verbose"),
    (["train", "--seed", "x"], "--seed"),
    (["train", "--image-size", "0"], "--image-size"),
    (["evaluate", "/nonexistent/encoder", "--k", "0"], "--k"),
    (["evaluate", "/nonexistent/encoder", "--temperature", "-1"], "--temperature"),
    (["tune", "--output", "/tmp/unused", "--trials", "0"], "--trials"),
    (["tune", "--output", "/tmp/unused", "--tuner", "grid"], "--tuner"),
    # --output defaults to RUN/encoder: the run directory is what is refused.
    (["export", "/nonexistent/run"], "not a keras-hardneg run directory"),
]


@pytest.mark.parametrize("argv,flag", CLI_CASES, ids=[" ".join(c[0][:3]) for c in CLI_CASES])
def test_cli_flag_refused_with_exit_2(argv, flag, capsys):
    code = _cli(argv)
    assert code == 2
    assert flag in capsys.readouterr().err


def _cli(argv):
    try:
        return cli.main(argv)
    except SystemExit as e:  # argparse's own errors
        return e.code


@pytest.mark.parametrize("argv,key", [
    (["train", "--temperature", "0", "--output", "OUT"], "loss.temperature"),
    (["train", "--dataset", "digits", "--image-size", "4", "--output", "OUT"], "data.image_size"),
    (["train", "--batch-size", "1", "--output", "OUT"], "batch_size"),
    (["train", "--dataset", "MISSING", "--output", "OUT"], "MISSING"),
])
def test_cli_value_refused_by_recipe_check(argv, key, tmp_path, capsys):
    argv = [str(tmp_path / "nope") if a == "MISSING" else str(tmp_path / "out") if a == "OUT"
            else a for a in argv]
    key = str(tmp_path / "nope") if key == "MISSING" else key
    assert _cli(argv) == 2
    assert key in capsys.readouterr().err


# ---------------------------------------------------------------- degenerate data
def test_batch_larger_than_dataset_is_refused_by_training():
    recipe = load_recipe({"batch_size": 64})
    with pytest.raises(RecipeError, match=r"'batch_size' = 64 is larger than the dataset \(20"):
        runlib.make_train_feed(recipe, X, Y)


def test_num_candidates_larger_than_dataset_is_clipped():
    s = sampling.BatchSampler(EMB, 8, num_candidates=500, num_neighbors=5)
    assert s.neighbors.shape == (50, 5)
    # num_neighbors left unset: the default K = 100 is fitted to the data, with a warning.
    recipe = load_recipe({"batch_size": 4, "sampler": {"name": "batchsampler",
                                                      "num_candidates": 500}})
    with pytest.warns(UserWarning, match="num_neighbors"):
        _, steps, _, sampler = runlib.make_train_feed(recipe, X, Y)
    assert sampler.neighbors.shape == (20, 18)  # M = N - 1 = 19, K = M - 1
    assert steps == sampler.steps_per_epoch


def test_num_neighbors_the_dataset_cannot_have_is_refused():
    # An explicit K is never changed behind the recipe's back (issue 56, bug 6).
    recipe = load_recipe({"batch_size": 4, "sampler": {"name": "batchsampler",
                                                      "num_candidates": 500,
                                                      "num_neighbors": 100}})
    with pytest.raises(ValueError, match=r"`num_neighbors` \(K=100\) must be <"):
        runlib.make_train_feed(recipe, X, Y)


def test_zero_example_image_folder_is_refused(tmp_path):
    (tmp_path / "cls").mkdir()
    with pytest.raises(ValueError, match=r"empty|no image|no readable"):
        khn.data.load_image_folder_arrays(str(tmp_path), image_size=(8, 8))


def test_empty_arrays_are_refused():
    with pytest.raises(ValueError, match="`batch_size`"):
        sampling.UniformSampler(0, 2)
    with pytest.raises(ValueError, match=r"`train_data`: 0 images"):
        KNNMonitor((X[:0], Y[:0]), (X, Y))


@pytest.mark.parametrize("shape", [(4, 8, 8), (4, 8, 8, 1), (4, 8, 8, 4)])
def test_images_of_wrong_rank_or_channels_are_refused(shape):
    model = khn.models.SimCLR(_enc(), projection_dims=(16, 8),
                              augmentation=khn.augment.simclr_augmentation(image_size=8))
    model.compile(loss="nt_xent")
    with pytest.raises(ValueError, match=r"Images must have shape \[batch, height, width, 3\]"):
        model.fit(np.zeros(shape, "float32"), batch_size=4, epochs=1, verbose=0)


def _folder_with_bad_files(root):
    from PIL import Image

    for c in ("a", "b"):
        (root / c).mkdir(parents=True)
        for i in range(3):
            Image.fromarray(np.full((8, 8, 3), 40 * i, np.uint8)).save(root / c / f"{i}.png")
    good = (root / "a" / "0.png").read_bytes()
    (root / "a" / "truncated.png").write_bytes(good[: len(good) // 2])
    (root / "b" / "garbage.jpg").write_bytes(b"not an image at all")
    return root


def test_unreadable_and_truncated_images_skipped_and_counted(tmp_path):
    root = _folder_with_bad_files(tmp_path / "imgs")
    out = khn.data.load_image_folder_arrays(str(root), image_size=(8, 8), return_report=True)
    x, report = out[0], out[-1]
    assert len(x) == 6 and len(report.skipped) == 2
    assert sorted(os.path.basename(p) for p, _ in report.skipped) == ["garbage.jpg",
                                                                       "truncated.png"]


def test_unreadable_images_refused_on_request(tmp_path):
    root = _folder_with_bad_files(tmp_path / "imgs")
    with pytest.raises(ValueError, match=r"truncated\.png|garbage\.jpg"):
        khn.data.load_image_folder_arrays(str(root), image_size=(8, 8), on_error="raise")
    # ... and from a recipe (the CLI's way in): data.on_error reaches the loader
    recipe = runlib.load_recipe({"data": {"name": "image_folder", "train": str(root),
                                            "image_size": 8, "on_error": "raise"}})
    with pytest.raises(ValueError, match=r"truncated\.png|garbage\.jpg"):
        runlib.load_data(recipe)
    recipe["data"]["on_error"] = "skip"
    (x, _), _, _ = runlib.load_data(recipe)
    assert len(x) > 0
    with pytest.raises(RecipeError, match="data.on_error"):
        runlib.load_recipe({"data": {"name": "image_folder", "train": str(root),
                                       "on_error": "ignore"}})


def test_savedmodel_from_another_program_is_refused(tmp_path, capsys):
    class Other(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
        def __call__(self, x):
            return 2 * x

    path = str(tmp_path / "other")
    tf.saved_model.save(Other(), path)
    with pytest.raises(ValueError, match=r"not written by|export_encoder|model card"):
        khn.export.load_encoder(path)
    assert _cli(["evaluate", path]) == 2
    assert path in capsys.readouterr().err
