"""What a run directory holds, and publishing its encoder.

A run directory has ``recipe.json``, ``backup/`` (resume state), ``history.json``,
``results.json``, ``preset/`` (the encoder as a Keras preset, written under every backend:
:func:`write_preset`) and ``encoder/`` (the exported SavedModel with its model card and
its own ``preset/``; TensorFlow only). :func:`export_trained_encoder` writes ``encoder/``
with a card derived from the recipe;
:func:`restore_run` rebuilds a run's model from its recipe and last checkpoint.
"""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from typing import Any

from keras_hardneg.export.preset import PRESET_DIR
from keras_hardneg.run.build import build_model, load_data
from keras_hardneg.modalities import DEFAULT_MODALITY, get_modality
from keras_hardneg.modalities import modality_of
from keras_hardneg.run.recipe import RecipeError, load_recipe

__all__ = ["RunDirectoryError", "export_trained_encoder", "write_preset", "model_card",
           "restore_run", "is_run_directory", "evaluate_directory"]


class RunDirectoryError(RecipeError):
    """A folder is not a (complete) keras-hardneg run directory, or its checkpoint is unreadable."""


def _numbers(value: Any) -> Any:
    """The numeric part of a figure (a number, or nested dicts of numbers): what a model
    card's ``metrics`` holds (e.g. without the STS result's list of skipped sets)."""
    if isinstance(value, dict):
        return {k: _numbers(v) for k, v in value.items()
                if isinstance(v, dict) or (isinstance(v, (int, float)) and not isinstance(v, bool))}
    return value


#: Keys of a Keras loss config that are not hyper-parameters (the Keras object's name, its
#: reduction and dtype policy): left out of model cards.
KERAS_CONFIG_KEYS = ("name", "reduction", "dtype")


def loss_hyperparameters(loss: Any) -> dict[str, Any]:
    """``loss.get_config()`` without the Keras bookkeeping keys (:data:`KERAS_CONFIG_KEYS`)."""
    return {k: v for k, v in loss.get_config().items() if k not in KERAS_CONFIG_KEYS}


def card_title(recipe: dict[str, Any]) -> str:
    """The recipe's ``name``, or, for the default name (``"run"``), what was trained:
    ``"simclr + hard on digits"``, ``"SimCSE + nt_xent on wiki1m"``."""
    from keras_hardneg.run.recipe import RUN_PARAMS

    if recipe["name"] != RUN_PARAMS["name"].default:
        return recipe["name"]
    data = recipe["data"]
    what = data.get("dataset") or data.get("corpus") or data["name"]
    return f"{modality_of(recipe).method_name(recipe)} + {recipe['loss']['name']} on {what}"


def model_card(model: Any, recipe: dict[str, Any], results: dict[str, Any],
               description: str) -> Any:
    """The :class:`~keras_hardneg.export.ModelCard` of a trained run: the recipe's
    hyper-parameters, ``results``' figures (the modality's) and ``epochs_run``."""
    from keras_hardneg import export

    modality = modality_of(recipe)
    loss = model.contrastive_loss
    # The modality's figures: those the card has a field for (kNN / linear-probe accuracy)
    # go there, the others into its metrics.
    fields = {f.name for f in dataclasses.fields(export.ModelCard)}
    figures = {k: results[k] for k in modality.result_keys if results.get(k) is not None}
    card = export.ModelCard(
        name=card_title(recipe),
        description=f"{recipe['framework']['name']} encoder pre-trained with keras-hardneg",
        framework=recipe["framework"]["name"],
        loss=type(loss).__name__,
        hyperparameters={**loss_hyperparameters(loss), "batch_size": recipe["batch_size"],
                         "framework": recipe["framework"], "encoder": recipe["encoder"],
                         "sampler": recipe["sampler"], "optimizer": recipe["optimizer"],
                         "augmentation": recipe["augmentation"], "data": recipe["data"],
                         "seed": recipe["seed"]},
        data=description,
        epochs=results.get("epochs_run"),
        evaluation=modality.describe_evaluation(recipe),
        output_dim=int(model.encoder.output_shape[-1]),
        modality=modality.name,
        metrics={k: _numbers(v) for k, v in figures.items() if k not in fields},
        **{k: v for k, v in figures.items() if k in fields},
    )
    return card


def write_preset(model: Any, recipe: dict[str, Any], results: dict[str, Any],
                 description: str, preset_dir: str, *, x_train: Any = None,
                 run_dir: str | None = None, weights_dtype: str = "float32") -> str:
    """Writes ``model.encoder`` as a Keras preset (:func:`keras_hardneg.export.save_preset`:
    ``config.json`` + ``model.weights.h5`` + metadata + card; any backend, no TensorFlow)
    into ``preset_dir`` (a preset there is replaced); returns ``preset_dir``."""
    from keras_hardneg.export.preset import save_preset

    modality = modality_of(recipe)
    spec, assets = modality.preset_spec(model.encoder, x_train, run_dir)
    return save_preset(model.encoder, preset_dir, modality=modality.name, input_spec=spec,
                       assets=assets, weights_dtype=weights_dtype, overwrite=True,
                       model_card=model_card(model, recipe, results, description))


def export_trained_encoder(model: Any, recipe: dict[str, Any], results: dict[str, Any],
                           description: str, export_dir: str, *, x_train: Any = None,
                           run_dir: str | None = None) -> str:
    """Exports ``model.encoder`` as a SavedModel with a model card made from ``recipe``
    and ``results`` (the modality's figures, ``epochs_run``), its Keras preset in
    ``export_dir/preset/`` (:func:`write_preset`); returns ``export_dir`` (replaced if
    present). ``x_train`` (the training data: images ``[n, H, W, C]``, token ids
    ``[n, L]`` or a graph set) and ``run_dir`` give the modality what its export needs
    (a graph encoder's feature width, a text run's tokenizer)."""
    from keras_hardneg import export

    modality = modality_of(recipe)
    card = model_card(model, recipe, results, description)
    spec = modality.export_spec(model.encoder, x_train, run_dir)
    export.export_encoder(model.encoder, export_dir, model_card=card, overwrite=True, **spec)
    write_preset(model, recipe, results, description, os.path.join(export_dir, PRESET_DIR),
                 x_train=x_train, run_dir=run_dir)
    return export_dir


def restore_run(run_dir: str, *, with_data: bool = False) -> tuple:
    """``(model, recipe, results, data_description)`` of a run directory, the model
    holding the weights of the last committed checkpoint in ``backup/``; with
    ``with_data=True`` the training split ``(x, y)`` is appended (what
    :func:`export_trained_encoder` needs for graphs and text). A text run is rebuilt
    with the tokenizer saved in the run directory.

    Raises:
        RunDirectoryError: no ``recipe.json`` or no checkpoint, or an unreadable one.
    """
    from keras_hardneg.callbacks.backup import committed_weights

    run_dir = os.path.abspath(run_dir)
    recipe_path = os.path.join(run_dir, "recipe.json")
    candidates = committed_weights(os.path.join(run_dir, "backup"))
    if not os.path.isfile(recipe_path) or not candidates:
        raise RunDirectoryError(
            f"{run_dir!r} is not a keras-hardneg run directory (needs recipe.json and a "
            "checkpoint in backup/, written by `keras-hardneg train`).")
    recipe = load_recipe(recipe_path)
    modality_of(recipe).restore_run_files(recipe, run_dir)
    results_path = os.path.join(run_dir, "results.json")
    results = {}
    if os.path.isfile(results_path):
        with open(results_path) as f:
            results = json.load(f)
    train, _, description = load_data(recipe)
    model = build_model(recipe, x_train=train[0])
    first_error = None
    for weights in candidates:  # the latest checkpoint, then the one the backup kept before it
        try:
            model.load_weights(weights)
        except Exception as e:  # noqa: BLE001 -- a corrupt or foreign checkpoint
            first_error = first_error or f"cannot load weights {weights}: {e}"
            continue
        if weights != candidates[0]:
            warnings.warn(f"{first_error.splitlines()[0]}; using the checkpoint before it "
                          f"({weights}), one epoch earlier.", stacklevel=2)
        break
    else:
        raise RunDirectoryError(first_error)
    if with_data:
        return model, recipe, results, description, train
    return model, recipe, results, description


def is_run_directory(path: str) -> bool:
    """Whether ``path`` holds a run (``recipe.json`` and ``backup/``)."""
    return (os.path.isfile(os.path.join(path, "recipe.json"))
            and os.path.isdir(os.path.join(path, "backup")))


def evaluate_directory(path: str, *, recipe: Any = None, overrides: dict[str, Any] | None = None,
                       benchmark_dir: str | None = None, senteval: bool = False,
                       max_tokens: int | None = None
                       ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Evaluates the encoder of a run directory or of an exported encoder directory, for
    any modality: images (kNN / linear probe on the recipe's data), graphs (10-fold SVM
    accuracy on the recipe's TU dataset), sentences (STS and, with ``senteval``, SentEval
    on the sets under ``benchmark_dir``).

    The data come from ``recipe`` (a path or dict) with ``overrides``, else from the run's
    ``recipe.json`` (next to an exported ``encoder/`` too). A run directory is evaluated
    through its exported ``encoder/`` when present (needs TensorFlow), else rebuilt from
    its last checkpoint (any backend: a run trained under JAX). A Keras preset (a zoo
    entry's ``preset/``, or the entry folder) is loaded with
    :func:`~keras_hardneg.export.load_preset` (any backend), its recipe the entry's
    ``recipe.json``. Sentences are read whole by an encoder that takes any length, or cut
    at ``max_tokens`` (:func:`~keras_hardneg.modalities.text.evaluation_length`). Returns
    ``(figures, info)``: ``info`` has ``encoder`` (what was evaluated), ``modality``,
    ``data`` and ``recipe``.
    """
    path = os.path.abspath(path)
    if not os.path.exists(path):
        raise RunDirectoryError(f"{path!r}: no such run or exported encoder directory.")
    if not is_run_directory(path) and not os.path.isfile(os.path.join(path, "saved_model.pb")) \
            and _preset_folder(path) is not None:
        return _evaluate_preset(_preset_folder(path), recipe, overrides, benchmark_dir,
                                senteval, max_tokens)
    run_dir, export_dir, recipe = _locate(path, recipe)
    card = None
    if export_dir is not None:
        from keras_hardneg import export

        card = export.load_model_card(export_dir)
    card_modality = get_modality(card.modality) if card is not None else None
    if recipe is None and not overrides:
        if card_modality is None or not card_modality.benchmark_sets:
            raise RunDirectoryError(
                "no recipe.json next to the encoder: give the data (--dataset or --recipe).")
        _benchmark_dir(card_modality, benchmark_dir, None)
        # an encoder scored on benchmark sets needs only its assets and those sets
    loaded = load_recipe(recipe, overrides) if (recipe is not None or overrides) else None
    modality = modality_of(loaded) if loaded is not None else card_modality
    info = {"encoder": export_dir or run_dir, "modality": modality.name, "recipe": loaded}
    if modality.benchmark_sets:
        return _benchmark_figures(modality, loaded, run_dir, export_dir, card, info,
                                  benchmark_dir, senteval, max_tokens), info
    return _data_figures(modality, loaded, run_dir, export_dir, card, info), info


def _locate(path: str, recipe: Any) -> tuple[str | None, str | None, Any]:
    """``(run directory, exported encoder directory, recipe)`` of ``path`` (either may be
    None); the recipe, when not given, is the run's ``recipe.json`` or, for a zoo entry
    (``recipe.json`` beside ``encoder/``), the entry's."""
    run_dir = path if is_run_directory(path) else None
    export_dir = None
    if run_dir is not None and os.path.isfile(os.path.join(path, "encoder", "saved_model.pb")):
        export_dir = os.path.join(path, "encoder")
    elif run_dir is None:
        if not os.path.isfile(os.path.join(path, "saved_model.pb")):
            _explain_zoo_entry(path)
            raise RunDirectoryError(
                f"{path!r} is neither a run directory (recipe.json + backup/) nor an exported "
                "encoder (saved_model.pb).")
        export_dir = path
        parent = os.path.dirname(path)
        if is_run_directory(parent):
            run_dir = parent
        elif recipe is None and os.path.isfile(os.path.join(parent, "recipe.json")):
            recipe = os.path.join(parent, "recipe.json")  # a zoo entry: recipe + encoder/
    if recipe is None and run_dir is not None:
        recipe = os.path.join(run_dir, "recipe.json")
    return run_dir, export_dir, recipe


def _benchmark_figures(modality, loaded, run_dir, export_dir, card, info, benchmark_dir,
                       senteval, max_tokens) -> dict[str, Any]:
    """The figures of an encoder scored on its modality's benchmark sets (sentences: STS,
    SentEval): the SavedModel's, or the run's rebuilt from its last checkpoint."""
    bench = _benchmark_dir(modality, benchmark_dir, loaded)
    if export_dir is not None:
        from keras_hardneg import export

        if max_tokens is not None:
            raise RunDirectoryError(f"max_tokens: the SavedModel {export_dir!r} reads a "
                                    "fixed length; evaluate the run or its preset/.")
        embed = modality.benchmark_embedder(export.load_encoder(export_dir))
        info["data"] = card.data
    else:
        model, loaded, _, description, train = restore_run(run_dir, with_data=True)
        embed = modality.benchmark_embedder(model.encoder, x_train=train[0],
                                            max_tokens=max_tokens)
        info["data"] = description
    seed = loaded["seed"] if loaded is not None else 0
    return modality.evaluate_benchmark(embed, bench, senteval=senteval, seed=seed)


def _data_figures(modality, loaded, run_dir, export_dir, card, info) -> dict[str, Any]:
    """The modality's evaluation on the recipe's data (its input checked against the
    encoder's first): the SavedModel's, or the run's rebuilt from its last checkpoint."""
    train, test, description = load_data(loaded)
    info["data"] = description
    if export_dir is not None:
        from keras_hardneg import export

        encoder = export.load_encoder(export_dir)
        expected = tuple(card.input_shape or ()) if card is not None else ()
    else:
        encoder = restore_run(run_dir)[0].encoder
        expected = tuple(encoder.input_shape[1:])
    _check_input(modality, expected, train[0], info["encoder"])
    return modality.evaluate(encoder, loaded, train, test)


def _benchmark_dir(modality: Any, benchmark_dir: str | None, recipe: Any) -> str:
    """The folder of the benchmark sets ``modality``'s encoders are scored on: the one given,
    else the recipe's ``evaluation.benchmark_dir``; raises naming ``--benchmark-dir``."""
    bench = benchmark_dir or (recipe or {}).get("evaluation", {}).get("benchmark_dir")
    if not bench:
        raise RunDirectoryError(f"a {modality.name} encoder is evaluated on "
                                f"{modality.benchmark_sets}: give --benchmark-dir DIR "
                                "(SentEval's layout: STS/, SICK/, ...).")
    return bench


def _check_input(modality: Any, expected: tuple, x: Any, where: str) -> None:
    problem = modality.input_mismatch(expected, x, where)
    if problem:
        raise RunDirectoryError(problem)


def _preset_folder(path: str) -> str | None:
    """``path`` if it is a Keras preset, else its ``preset/`` if that is one, else None."""
    from keras_hardneg.export.preset import is_preset

    for candidate in (path, os.path.join(path, PRESET_DIR)):
        if is_preset(candidate):
            return candidate
    return None


def _evaluate_preset(preset: str, recipe: Any, overrides: dict[str, Any] | None,
                     benchmark_dir: str | None, senteval: bool, max_tokens: int | None
                     ) -> tuple[dict[str, Any], dict[str, Any]]:
    """:func:`evaluate_directory` of a Keras preset (a zoo entry's weights)."""
    from keras_hardneg.export.preset import CARD_FILE, load_preset, read_preset_metadata

    meta = read_preset_metadata(preset)
    entry_recipe = os.path.join(os.path.dirname(preset), "recipe.json")
    if recipe is None and os.path.isfile(entry_recipe):
        recipe = entry_recipe
    loaded = load_recipe(recipe, overrides) if (recipe is not None or overrides) else None
    modality = (modality_of(loaded) if loaded is not None
                else get_modality(meta.get("modality", DEFAULT_MODALITY)))
    encoder = load_preset(preset, trainable=False)
    card = {}
    if os.path.isfile(os.path.join(preset, CARD_FILE)):
        with open(os.path.join(preset, CARD_FILE)) as f:
            card = json.load(f)
    info = {"encoder": preset, "modality": modality.name, "recipe": loaded,
            "data": card.get("data")}
    if modality.benchmark_sets:
        bench = _benchmark_dir(modality, benchmark_dir, loaded)
        try:
            embed = modality.benchmark_embedder(encoder, preset=meta, max_tokens=max_tokens)
        except RecipeError as e:  # e.g. no tokenizer in the preset
            raise RunDirectoryError(str(e)) from None
        seed = loaded["seed"] if loaded is not None else 0
        return modality.evaluate_benchmark(embed, bench, senteval=senteval, seed=seed), info
    if loaded is None:
        raise RunDirectoryError(f"no recipe.json beside the preset {preset!r}: give the data "
                                "(--dataset or --recipe).")
    train, test, description = load_data(loaded)
    info["data"] = description
    _check_input(modality, tuple(meta.get("input", {}).get("input_shape") or ()), train[0],
                 preset)
    return modality.evaluate(encoder, loaded, train, test), info


def _explain_zoo_entry(path: str) -> None:
    """A model-zoo entry (``recipe.json`` + ``encoder/``, or the recipe alone) given where an
    encoder is expected: say what to pass instead."""
    if not os.path.isfile(os.path.join(path, "recipe.json")):
        return
    encoder = os.path.join(path, "encoder")
    if os.path.isfile(os.path.join(encoder, "saved_model.pb")):
        raise RunDirectoryError(f"{path!r} is a model zoo entry: pass its encoder, {encoder!r}.")
    raise RunDirectoryError(
        f"{path!r} holds a recipe but no encoder: this entry is not trained (no encoder/). "
        f"Train it with `keras-hardneg train --recipe {os.path.join(path, 'recipe.json')}`, "
        "then evaluate the run directory.")


def preset_from_export(export_dir: str, preset_dir: str | None = None, *,
                       recipe: Any = None, weights_dtype: str = "float32",
                       atol: float = 1e-5) -> str:
    """Converts a SavedModel export written by this package (a run's ``encoder/``, a zoo
    entry's, ``keras-hardneg export``'s) into a Keras preset: the encoder is rebuilt from
    ``recipe`` (default: the ``recipe.json`` beside ``export_dir``) for the card's input,
    every variable is copied by path from the SavedModel, and the rebuilt encoder's
    features are checked against the SavedModel's on a fixed input (max |diff| <= ``atol``)
    before :func:`keras_hardneg.export.save_preset` writes ``preset_dir`` (default
    ``export_dir/preset``; replaced if it is a preset). Needs the TensorFlow backend.

    Raises:
        RunDirectoryError: no recipe, or the SavedModel's variables do not match the
            rebuilt encoder (names the first mismatch), or the features differ.
    """
    import numpy as np

    from keras_hardneg import export
    from keras_hardneg.export.preset import example_input, save_preset
    from keras_hardneg.run.build import build_encoder

    export_dir = os.path.abspath(export_dir)
    if recipe is None:
        recipe = os.path.join(os.path.dirname(export_dir), "recipe.json")
        if not os.path.isfile(recipe):
            raise RunDirectoryError(f"no recipe.json beside {export_dir!r}: pass `recipe`.")
    recipe = load_recipe(recipe)
    loaded = export.load_encoder(export_dir)
    card = export.load_model_card(export_dir)
    modality = card.modality
    rebuild = get_modality(modality).rebuild_spec(card, export_dir)
    spec, shape = rebuild["input_spec"], rebuild["input_shape"]
    assets, context = rebuild["assets"], rebuild["context"]
    probe = example_input(modality, {**spec, **context})
    encoder = build_encoder(recipe, shape, **context)
    if not encoder.built:
        encoder(probe)
    import tensorflow as tf  # the TensorFlow backend is in use (load_encoder checked)

    # Dropout's random-generator states are not learned: only the encoder's weights move.
    saved = {v.name.rsplit(":", 1)[0]: v for v in tf.saved_model.load(export_dir).variables
             if "seed_generator" not in v.name}
    ours = {v.path: v for v in encoder.weights}
    if set(saved) != set(ours):
        missing = sorted(set(ours) - set(saved))[:3]
        extra = sorted(set(saved) - set(ours))[:3]
        raise RunDirectoryError(f"{export_dir}: the SavedModel's variables do not match the "
                                f"encoder the recipe builds (missing {missing}, extra {extra}).")
    for path, v in ours.items():
        v.assign(saved[path].numpy())
    want = np.asarray(loaded(probe, training=False))
    got = np.asarray(encoder(probe, training=False))
    diff = float(np.abs(want - got).max())
    if not diff <= atol:
        raise RunDirectoryError(f"{export_dir}: the rebuilt encoder's features differ from the "
                                f"SavedModel's by {diff:.3g} (> {atol}); no preset written.")
    return save_preset(encoder, preset_dir or os.path.join(export_dir, PRESET_DIR),
                       modality=modality, input_spec=spec, assets=assets,
                       weights_dtype=weights_dtype, overwrite=True, model_card=card)
