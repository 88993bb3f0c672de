"""benchmarks/gpu/zoo_train.py and zoo_import.py (issue 18), the parts that need no GPU and
no JAX training: packs load back in the image folder's order with its pixels, float16 weight
parts round-trip and respect the size cap, the per-epoch log survives a kill between the
backup and the log line, the GPU recipe differs from the zoo's only where the plan says,
and zoo_import turns a device folder into a zoo entry whose encoder loads.

The JAX training itself (resume after a kill, the wall-clock budget) takes minutes on this
CPU: its manual check is in docs/notes/gpu_zoo.md.
"""

import json
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks", "gpu"))
import zoo_import  # noqa: E402
import zoo_train  # noqa: E402

CIFAR = os.path.join(ROOT, "..", "shared", "data", "cifar10-jpg")
needs_cifar = pytest.mark.skipif(not os.path.isdir(CIFAR), reason="needs ../shared cifar10-jpg")


@needs_cifar
def test_packs_and_shards_load_as_the_image_folder(tmp_path):
    from keras_hardneg.data.decode import to_unit_float
    from keras_hardneg.data.image_folder import load_image_folder_arrays

    train = os.path.join(CIFAR, "train")
    whole = str(tmp_path / "whole.npz")
    assert zoo_train.pack_subset(train, whole, limit=3) == 30
    shards = [str(tmp_path / f"s{k}.npz") for k in range(2)]
    for k, path in enumerate(shards):
        zoo_train.pack_subset(train, path, limit=3, shard=k, shards=2)
    x, y, skipped = zoo_train.load_packs(whole)
    xs, ys, _ = zoo_train.load_packs(shards[::-1])
    ref_x, ref_y = load_image_folder_arrays(train, image_size=(32, 32), limit_per_class=3)
    assert skipped == 0 and x.dtype == np.uint8 and x.shape == (30, 32, 32, 3)
    np.testing.assert_array_equal(to_unit_float(x), ref_x)
    np.testing.assert_array_equal(y, ref_y)
    np.testing.assert_array_equal(xs, x)
    np.testing.assert_array_equal(ys, y)
    with pytest.raises(ValueError, match="overlap"):
        zoo_train.load_packs([whole, shards[0]])
    spread = str(tmp_path / "spread.npz")
    zoo_train.pack_subset(os.path.join(CIFAR, "test"), spread, spread=2)
    with np.load(spread) as z:
        assert len(z["labels"]) == 20 and z["position"][:2].tolist() == [0, 999]


@needs_cifar
def test_pack_skip_train_writes_the_test_pack_only(tmp_path):
    # prepare.sh adds the parity call's 10k test pack without packing the 50k again.
    assert zoo_train.main(["pack", "--source", CIFAR, "--dest", str(tmp_path), "--skip-train",
                           "--test-per-class", "2"]) is None
    assert sorted(os.listdir(tmp_path)) == ["cifar10_test20.npz"]
    with pytest.raises(SystemExit, match="--skip-train needs --test-per-class"):
        zoo_train.main(["pack", "--source", CIFAR, "--dest", str(tmp_path / "none"),
                        "--skip-train", "--test-per-class", "0"])


def _encoder(width=2):
    from keras_hardneg.encoders import resnet18_cifar

    return resnet18_cifar(width=width)


def test_float16_parts_round_trip_under_the_size_cap(tmp_path):
    enc = _encoder()
    names = zoo_train.save_float16_weights(enc, str(tmp_path), "e", {"entry": "e"},
                                           max_part_bytes=20_000)
    assert len(names) > 1
    for n in names:  # the cap counts array bytes; zip + npy headers and meta add < 64 kB
        with np.load(tmp_path / n) as z:
            assert sum(z[k].nbytes for k in z.files if k != "__meta__") <= 20_000
        assert os.path.getsize(tmp_path / n) < 20_000 + 65_536
    weights, meta = zoo_train.load_float16_weights([str(tmp_path / n) for n in names])
    assert meta["parts"] == len(names) and meta["parameters"] == enc.count_params()
    other = _encoder()
    zoo_train.set_encoder_weights(other, weights)
    for a, b in zip(enc.weights, other.weights):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-3, atol=1e-4)
    with pytest.raises(ValueError, match="incomplete"):
        zoo_train.load_float16_weights([str(tmp_path / names[0])])
    with pytest.raises(ValueError, match="shape"):
        zoo_train.set_encoder_weights(_encoder(width=4), weights)
    with pytest.raises(ValueError, match="do not match"):
        zoo_train.set_encoder_weights(other, {k: v for k, v in weights.items()
                                              if "stem" not in k})


def test_epoch_log_fills_an_epoch_the_backup_committed(tmp_path):
    rows = [{"epoch": 1, "loss": 5.0, "knn_monitor": 0.2}]
    zoo_train._write_jsonl(str(tmp_path / "epochs.jsonl"), rows + [{"epoch": 3, "loss": 9.0}])
    os.makedirs(tmp_path / "backup")
    meta = {"epoch": 2, "history": [{"loss": 5.0}, {"loss": 4.0, "knn_accuracy": 0.3}]}
    (tmp_path / "backup" / "training_metadata.json").write_text(json.dumps(meta))
    log = zoo_train.epoch_log(str(tmp_path))
    assert [r["epoch"] for r in log] == [1, 2]  # epoch 3 was never committed
    assert log[1]["recovered"] and log[1]["knn_monitor"] == 0.3


def test_gpu_recipe_changes_only_the_plan():
    zoo, recipe, differs = zoo_train.gpu_recipe(
        "simclr-hard-cifar10", os.path.join(ROOT, "models"), batch_size=512, epochs=200,
        precision="mixed_bfloat16", override={"optimizer": {"learning_rate": 2e-3}})
    # The zoo recipe is already the GPU plan's (lightly's: batch 512, 200 epochs).
    assert set(differs) == {"evaluation.linear_probe", "optimizer.learning_rate"}
    assert recipe["loss"] == zoo["loss"] and recipe["encoder"]["width"] == 64
    with pytest.raises(SystemExit, match="simclr-ntxent-cifar10"):
        zoo_train.gpu_recipe("nope", os.path.join(ROOT, "models"), batch_size=512, epochs=1,
                             precision="float32")


@needs_cifar
def test_zoo_import_writes_an_entry_whose_preset_loads(tmp_path):
    """A device folder (weights of an untrained width-2 encoder) -> models/ENTRY/."""
    from keras_hardneg import export

    _, recipe, differs = zoo_train.gpu_recipe(
        "simclr-ntxent-cifar10", os.path.join(ROOT, "models"), batch_size=16, epochs=2,
        precision="mixed_bfloat16", width=2)
    out = tmp_path / "out"
    out.mkdir()
    names = zoo_train.save_float16_weights(_encoder(), str(out), "simclr-ntxent-cifar10", {})
    rows = [{"epoch": e, "loss": 5.0 - e, "knn_monitor": 0.1 * e, "images_per_second": 10.0}
            for e in (1, 2)]
    zoo_train._write_jsonl(str(out / "simclr-ntxent-cifar10.epochs.jsonl"), rows)
    summary = {"entry": "simclr-ntxent-cifar10", "epochs_run": 2, "recipe": recipe,
               "differs_from_zoo_recipe": differs, "training_minutes": 0.5,
               "invocation_minutes": 0.6, "hardware": "test",
               "invocations": [{"command": "zoo_train.py train ..."}],
               "weights": {n: zoo_train._sha256(str(out / n)) for n in names}}
    (out / "simclr-ntxent-cifar10.run.json").write_text(json.dumps(summary))
    for split, per_class in (("train", 3), ("test", 2)):
        zoo_train.pack_subset(os.path.join(CIFAR, split), str(tmp_path / f"{split}.npz"),
                              limit=per_class)
    models = tmp_path / "models"
    assert zoo_import.main(["--entry", "simclr-ntxent-cifar10", "--from", str(out),
                            "--models-dir", str(models), "--no-linear-probe",
                            "--train-pack", str(tmp_path / "train.npz"),
                            "--test-pack", str(tmp_path / "test.npz")]) == 0
    entry = models / "simclr-ntxent-cifar10"
    results = json.loads((entry / "results.json").read_text())
    assert results["epochs_run"] == 2 and 0.0 <= results["knn_accuracy"] <= 1.0
    assert results["finished"] and results["epochs_planned"] == 2
    assert results["preset_check_max_abs_diff"] <= 1e-5 and not (entry / "encoder").exists()
    card = export.ModelCard.from_dict(json.loads((entry / "preset" / "model_card.json")
                                                 .read_text()))
    assert card.epochs == 2 and card.hyperparameters["batch_size"] == 16
    assert card.hyperparameters["gpu_training"]["differs_from_zoo_recipe"] == differs
    model = export.load_preset(str(entry))
    assert model.preset_metadata["weights_dtype"] == "float16"
    features = np.asarray(model(np.random.default_rng(0).random((3, 32, 32, 3),
                                                                dtype=np.float32)))
    assert features.shape == (3, 16) and np.all(np.isfinite(features))
    assert len((entry / "epochs.jsonl").read_text().splitlines()) == 2
    # The figures of an earlier import of the same weights are reused (no evaluation).
    again = tmp_path / "again"
    assert zoo_import.main(["--entry", "simclr-ntxent-cifar10", "--from", str(out),
                            "--models-dir", str(again),
                            "--figures", str(entry / "results.json")]) == 0
    reused = json.loads((again / "simclr-ntxent-cifar10" / "results.json").read_text())
    assert reused["knn_accuracy"] == results["knn_accuracy"]
    # A damaged transfer is refused.
    with open(out / names[0], "r+b") as f:
        f.seek(-3, 2)
        f.write(b"xyz")
    with pytest.raises(SystemExit, match="SHA-256"):
        zoo_import.main(["--entry", "simclr-ntxent-cifar10", "--from", str(out),
                         "--models-dir", str(models), "--train-pack", "a", "--test-pack", "b"])
