"""CPU/TensorFlow side of a GPU-trained zoo entry (issue 18): float16 weights in, the zoo
entry out.

Reads what ``zoo_train.py train`` wrote to ``$OUT`` (``ENTRY.weights-K-of-N.npz``,
``ENTRY.epochs.jsonl``, ``ENTRY.run.json``), loads the weights into the same encoder built
under TensorFlow (float32 compute, the float16 values cast up), computes the card's figures
on the full splits with :func:`keras_hardneg.run.evaluate_encoder` (weighted kNN, k = 200,
t = 0.1, the 50k train set as bank, the 10k test set; logistic-regression linear probe on
frozen features), and writes into ``MODELS/ENTRY/``:

* ``preset/``: the Keras preset (float16 weights, exactly the GPU's float16 values) with
  its model card (figures, epochs, batch, minutes, hardware, the exact recipe and the
  commands), checked by loading it back (same features to 1e-5); ``khn.zoo.load(ENTRY)``
  reads it under TF or JAX, ``keras-hardneg zoo export ENTRY DIR`` writes the SavedModel;
  ``--saved-model`` also writes ``encoder/`` (float32 SavedModel, too large for the zoo);
* ``results.json`` (``knn_accuracy``, ``linear_probe_accuracy``, ``epochs_run``, minutes,
  hardware, ...), ``epochs.jsonl`` and ``history.json`` (the per-epoch log),
  ``trained_recipe.json`` (the recipe trained, which differs from ``recipe.json`` where the
  GPU plan changed it);
* with ``--keep-weights``, ``weights/`` (the float16 parts, from which the entry can be
  rebuilt: ``--from MODELS/ENTRY/weights``).

``--figures RESULTS`` reuses the kNN / probe figures of an earlier import of the same
weights (their SHA-256 checked) instead of evaluating again (~11 min on 2 cores).

Usage (repository root, TensorFlow backend, the device's files fetched to DIR)::

    python benchmarks/gpu/zoo_import.py --entry simclr-ntxent-cifar10 --from DIR

The data default to the zoo recipe's (``../shared/data/cifar10-jpg``, full splits); packs
(``--train-pack``/``--test-pack``) or ``--limit-per-class`` make a small check. Plan and
budgets: ``docs/notes/gpu_zoo.md``.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
for path in (ROOT, HERE):
    if path not in sys.path:
        sys.path.insert(0, path)

import zoo_train  # noqa: E402  (NumPy only at import)


def read_device_files(source: str, entry: str):
    """``(run summary, weights {path: float16}, weights meta, epoch rows)`` of ``source``
    (a folder with ``zoo_train``'s files for ``entry``), the weights checked against the
    summary's SHA-256."""
    summary_path = os.path.join(source, f"{entry}.run.json")
    if not os.path.isfile(summary_path):
        raise SystemExit(f"--from {source}: no {entry}.run.json (written by zoo_train.py "
                         "train --out when the entry finished).")
    with open(summary_path) as f:
        summary = json.load(f)
    parts = sorted(glob.glob(os.path.join(source, f"{entry}.weights-*-of-*.npz")))
    expected = summary.get("weights", {})
    if sorted(os.path.basename(p) for p in parts) != sorted(expected):
        raise SystemExit(f"--from {source}: weight files {[os.path.basename(p) for p in parts]}"
                         f" differ from those the run wrote ({sorted(expected)}).")
    for p in parts:
        digest = zoo_train._sha256(p)
        if digest != expected[os.path.basename(p)]:
            raise SystemExit(f"{p}: SHA-256 {digest} differs from the run's "
                             f"{expected[os.path.basename(p)]} (damaged in transfer?).")
    weights, meta = zoo_train.load_float16_weights(parts)
    rows = zoo_train._read_jsonl(os.path.join(source, f"{entry}.epochs.jsonl"))
    return summary, weights, meta, rows, parts


def evaluation_data(a, entry: str, recipe: dict):
    """``((x, y), (x_test, y_test), description)`` for the figures: packs, or the zoo
    recipe's data section (full splits unless ``--limit-per-class``)."""
    from keras_hardneg.data.decode import to_unit_float
    from keras_hardneg.run import load_data, load_recipe

    if a.train_pack:
        packs = sorted(p for pattern in a.train_pack for p in glob.glob(pattern))
        x, y, _ = zoo_train.load_packs(packs)
        xt, yt, _ = zoo_train.load_packs(a.test_pack)
        return ((to_unit_float(x), y), (to_unit_float(xt), yt),
                f"CIFAR-10 JPEG packs: {len(x)} train (bank / probe fit), {len(xt)} test")
    zoo_path = os.path.join(a.models_dir, entry, "recipe.json")
    data = load_recipe(zoo_path)["data"] if os.path.isfile(zoo_path) else recipe["data"]
    if a.limit_per_class:
        data = {**data, "limit_per_class": a.limit_per_class,
                "test_limit_per_class": a.limit_per_class}
    train, test, description = load_data(load_recipe(recipe, {"data": data}))
    return train, test, f"{description}; test split {len(test[0])} images"


def build_card(entry, recipe, summary, rows, meta, figures, description, import_command):
    from keras_hardneg import export
    from keras_hardneg.run import build_loss
    from keras_hardneg.modalities import ImageModality

    loss = build_loss(recipe)
    enc = recipe["encoder"]
    speeds = [r["images_per_second"] for r in rows[1:] if r.get("images_per_second")]
    last_knn = next((r["knn_monitor"] for r in reversed(rows)
                     if r.get("knn_monitor") is not None), None)
    commands = [i["command"] for i in summary.get("invocations", [])]
    gpu = {"hardware": summary.get("hardware"), "training_minutes": summary.get(
        "training_minutes"), "invocation_minutes": summary.get("invocation_minutes"),
        "invocations": len(commands), "commands": sorted(set(commands)),
        "differs_from_zoo_recipe": summary.get("differs_from_zoo_recipe"),
        "weights": "float16 .npz (max relative rounding error "
                   f"{meta.get('max_relative_rounding_error', 0):.2e} per tensor)",
        "import_command": import_command}
    probe_recipe = {**recipe, "evaluation": {**recipe["evaluation"], "linear_probe":
                                             figures.get("linear_probe_accuracy") is not None}}
    text = (f"{recipe['framework']['name']} encoder ({enc['name']}, width {enc.get('width')}) "
            f"pre-trained with keras-hardneg on CIFAR-10 for {summary['epochs_run']} epochs "
            + ("" if summary["epochs_run"] >= recipe["epochs"] else
               f"of a {recipe['epochs']}-epoch schedule (stopped by the device budget before "
               "the cosine decay ended) ") + "at "
            f"batch {recipe['batch_size']}, {recipe['precision']}, under JAX on "
            f"{summary.get('hardware')}: {summary.get('training_minutes')} training minutes in "
            f"{len(commands)} invocation(s) of `{commands[-1] if commands else '?'}`. "
            "Weights trained under JAX, stored as float16 in a Keras preset on a CPU "
            f"(`{import_command}`). Exact recipe: `trained_recipe.json` next to this folder "
            "and `hyperparameters` below.")
    metrics = {k: v for k, v in {
        "gpu_knn_monitor_last_epoch": last_knn,
        "gpu_knn_full_bank_test_pack": summary.get("gpu_knn_accuracy_full_bank_test_pack"),
        "training_minutes": summary.get("training_minutes"),
        "median_images_per_second": float(np.median(speeds)) if speeds else None}.items()
        if v is not None}
    return export.ModelCard(
        name=entry, description=text, framework=recipe["framework"]["name"],
        loss=type(loss).__name__,
        hyperparameters={**loss.get_config(), **{k: recipe[k] for k in (
            "batch_size", "epochs", "precision", "seed", "projection_dims", "framework",
            "encoder", "sampler", "optimizer", "schedule", "augmentation", "annealing",
            "evaluation")}, "gpu_training": gpu},
        data=description, epochs=int(summary["epochs_run"]),
        knn_accuracy=figures["knn_accuracy"],
        linear_probe_accuracy=figures.get("linear_probe_accuracy"),
        evaluation=ImageModality().describe_evaluation(probe_recipe),
        metrics=metrics, output_dim=int(8 * enc.get("width", 64)), input_shape=(32, 32, 3))


def check_export(encoder, export_dir, images):
    """Max |difference| between ``encoder`` and the export loaded back; raises if the
    loaded features are not ``[n, F]`` finite."""
    import keras

    from keras_hardneg import export

    want = np.asarray(keras.ops.convert_to_numpy(encoder(images, training=False)))
    got = np.asarray(export.load_encoder(export_dir)(images))
    if got.shape != want.shape or not np.all(np.isfinite(got)):
        raise RuntimeError(f"{export_dir}: loaded encoder gives {got.shape} "
                           f"(finite: {np.all(np.isfinite(got))}), expected {want.shape}.")
    return got.shape, float(np.abs(got - want).max())


SHARED = os.path.abspath(os.path.join(ROOT, "..", "shared"))


def _portable(value, shared_as: str):
    """``value`` (str, or dicts / lists of them) with this machine's path of ``shared/``
    written as ``shared_as`` (cards and recipes name no machine's paths)."""
    if isinstance(value, str):
        return value.replace(SHARED, shared_as)
    if isinstance(value, dict):
        return {k: _portable(v, shared_as) for k, v in value.items()}
    if isinstance(value, list):
        return [_portable(v, shared_as) for v in value]
    return value


def _no_paths(command: str) -> str:
    """A command without this machine's paths (for cards): the device files, an earlier
    import and a scratch models folder named by role."""
    command = re.sub(r"--from \S+", "--from DEVICE_FILES", command)
    command = re.sub(r"--figures \S+", "--figures EARLIER_IMPORT/results.json", command)
    return re.sub(r"--models-dir /tmp/\S+", "--models-dir SCRATCH", command)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--entry", required=True)
    p.add_argument("--from", dest="source", required=True,
                   help="folder with zoo_train.py's files ($OUT fetched)")
    p.add_argument("--models-dir", default=os.path.join(ROOT, "models"))
    p.add_argument("--train-pack", nargs="+", help="evaluate on packs instead (globs)")
    p.add_argument("--test-pack")
    p.add_argument("--limit-per-class", type=int, help="a smaller evaluation (not the card's)")
    p.add_argument("--no-linear-probe", action="store_true")
    p.add_argument("--figures", help="results.json of an earlier import of the same weights "
                                     "(SHA-256 checked): reuse its kNN / probe figures")
    p.add_argument("--saved-model", action="store_true",
                   help="also write ENTRY/encoder/ (float32 SavedModel; not for the zoo)")
    p.add_argument("--keep-weights", action="store_true",
                   help="copy the float16 parts to MODELS/ENTRY/weights/")
    a = p.parse_args(argv)
    if bool(a.train_pack) != bool(a.test_pack):
        raise SystemExit("give --train-pack and --test-pack together.")
    import keras

    if keras.backend.backend() != "tensorflow":
        raise SystemExit("zoo_import.py exports a SavedModel: run it with the TensorFlow "
                         f"backend (KERAS_BACKEND={keras.backend.backend()} is set).")
    from keras_hardneg import export
    from keras_hardneg.run import build_encoder, evaluate_encoder, load_recipe

    t0 = time.perf_counter()
    summary, weights, meta, rows, parts = read_device_files(a.source, a.entry)
    recipe = load_recipe(summary["recipe"])
    keras.config.set_dtype_policy("float32")
    encoder = build_encoder(recipe, (32, 32, 3))
    zoo_train.set_encoder_weights(encoder, weights)
    earlier = None
    if a.figures:
        # Figures of an earlier import of the very same weights (checked by SHA-256).
        with open(a.figures) as f:
            earlier = json.load(f)
        if earlier.get("weights_sha256") != summary.get("weights"):
            raise SystemExit(f"--figures {a.figures}: its weights_sha256 differ from the run's "
                             "weights; evaluate again (drop --figures).")
        figures = {k: earlier[k] for k in ("knn_accuracy", "linear_probe_accuracy")
                   if earlier.get(k) is not None}
        description = earlier["data"]
        test = None
        print(f"{a.entry}: figures from {a.figures}: {figures}", flush=True)
    else:
        train, test, description = evaluation_data(a, a.entry, recipe)
        ev = recipe["evaluation"]
        figures = evaluate_encoder(encoder, train, test, k=ev["knn_k"],
                                   temperature=ev["knn_temperature"],
                                   linear_probe=not a.no_linear_probe)
        print(f"{a.entry}: {figures} ({description}; {time.perf_counter() - t0:.0f}s)",
              flush=True)

    entry_dir = os.path.join(a.models_dir, a.entry)
    os.makedirs(entry_dir, exist_ok=True)
    command = "python " + " ".join([os.path.relpath(os.path.abspath(sys.argv[0]), ROOT)]
                                   + (argv if argv is not None else sys.argv[1:]))
    command = _no_paths(command)
    description = _portable(description, "../shared")
    for invocation in summary.get("invocations", []):
        invocation["command"] = re.sub(r"--out \S*/(\S+)", r"--out $OUT/\1",
                                       invocation["command"])
    card = build_card(a.entry, recipe, summary, rows, meta, figures, description, command)
    # The zoo's artifact: the Keras preset, float16 (the weights came as float16, so the
    # storage is exact). The SavedModel (float32, ~45 MB at width 64) only on request:
    # khn.zoo.export / `keras-hardneg zoo export` writes it from the preset.
    from keras_hardneg.export.preset import load_preset, save_preset

    preset_dir = save_preset(encoder, os.path.join(entry_dir, "preset"), model_card=card,
                             weights_dtype="float16", overwrite=True)
    probe = np.random.default_rng(0).random((8, 32, 32, 3), dtype=np.float32)
    want = np.asarray(keras.ops.convert_to_numpy(encoder(probe, training=False)))
    diff = float(np.abs(np.asarray(load_preset(preset_dir)(probe, training=False)) - want).max())
    print(f"wrote {preset_dir}: loads back with max |diff| {diff:.2e}")
    if diff > 1e-5:
        raise SystemExit(f"{preset_dir}: the preset's features differ by {diff:.3g}.")
    if a.saved_model:
        export_dir = os.path.join(entry_dir, "encoder")
        export.export_encoder(encoder, export_dir, model_card=card, overwrite=True)
        shape, sdiff = check_export(encoder, export_dir, probe)
        print(f"exported {export_dir}: load_encoder gives {shape} finite, "
              f"max |diff| {sdiff:.2e}")

    if a.keep_weights:
        wdir = os.path.join(entry_dir, "weights")
        os.makedirs(wdir, exist_ok=True)
        for part in parts + [os.path.join(a.source, f"{a.entry}.run.json")]:
            if os.path.abspath(os.path.dirname(part)) != os.path.abspath(wdir):
                shutil.copyfile(part, os.path.join(wdir, os.path.basename(part)))
    zoo_train._write_jsonl(os.path.join(entry_dir, "epochs.jsonl"), rows)
    history = {}
    for r in rows:
        for k, v in r.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "epoch":
                history.setdefault(k, []).append(v)
    zoo_train._write_json(os.path.join(entry_dir, "history.json"), history)
    zoo_train._write_json(os.path.join(entry_dir, "trained_recipe.json"),
                          _portable(recipe, "../../../shared"))  # as in models/ENTRY/recipe.json
    results = {
        **figures, "epochs_run": int(summary["epochs_run"]),
        "batch_size": recipe["batch_size"], "precision": recipe["precision"],
        "training_minutes": summary.get("training_minutes"),
        "invocation_minutes": summary.get("invocation_minutes"),
        "hardware": summary.get("hardware"), "trained_under": "JAX (GPU plan, zoo_train.py)",
        "data": description, "evaluation": card.evaluation,
        "differs_from_zoo_recipe": summary.get("differs_from_zoo_recipe"),
        "gpu_commands": sorted({i["command"] for i in summary.get("invocations", [])}),
        "import_command": command, "weights_sha256": summary.get("weights"),
        "weights_max_relative_rounding_error": meta.get("max_relative_rounding_error"),
        **({"figures_command": _no_paths(earlier.get("import_command") or "")}
           if a.figures else {}),
        "epochs_planned": int(recipe["epochs"]),
        "finished": bool(summary.get("finished", summary["epochs_run"] >= recipe["epochs"])),
        "learning_rate_at_stop": rows[-1].get("learning_rate") if rows else None,
        "preset_check_max_abs_diff": diff, "preset_dir": "preset",
        **({"export_dir": "encoder"} if a.saved_model else {})}
    zoo_train._write_json(os.path.join(entry_dir, "results.json"), results)
    print(f"wrote {entry_dir}: preset/, results.json, epochs.jsonl, history.json, "
          f"trained_recipe.json{', weights/' if a.keep_weights else ''} "
          f"({time.perf_counter() - t0:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
