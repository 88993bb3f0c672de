"""What a run directory holds, and publishing its encoder.

A run directory has ``recipe.json``, ``backup/`` (resume state), ``history.json``,
``results.json`` and ``encoder/`` (the exported SavedModel with its model card).
:func:`export_trained_encoder` writes ``encoder/`` with a card derived from the recipe;
:func:`restore_run` rebuilds a run's model from its recipe and last checkpoint.
"""

from __future__ import annotations

import json
import os
from typing import Any

from keras_hardneg.run.build import build_model, load_data
from keras_hardneg.registry import MODALITIES
from keras_hardneg.run.modality import TOKENIZER_FILE, modality_of
from keras_hardneg.run.recipe import RecipeError, load_recipe

__all__ = ["RunDirectoryError", "export_trained_encoder", "restore_run", "is_run_directory",
           "evaluate_directory"]


class RunDirectoryError(RecipeError):
    """A folder is not a (complete) keras-hardneg run directory, or its checkpoint is unreadable."""


def _numbers(value: Any) -> Any:
    """The numeric part of a figure (a number, or nested dicts of numbers): what a model
    card's ``metrics`` holds (e.g. without the STS result's list of skipped sets)."""
    if isinstance(value, dict):
        return {k: _numbers(v) for k, v in value.items()
                if isinstance(v, dict) or (isinstance(v, (int, float)) and not isinstance(v, bool))}
    return value


def export_trained_encoder(model: Any, recipe: dict[str, Any], results: dict[str, Any],
                           description: str, export_dir: str, *, x_train: Any = None,
                           run_dir: str | None = None) -> str:
    """Exports ``model.encoder`` as a SavedModel with a model card made from ``recipe``
    and ``results`` (the modality's figures, ``epochs_run``); returns ``export_dir``
    (replaced if present). ``x_train`` (the training data) and ``run_dir`` give the
    modality what its export needs (a graph encoder's feature width, a text run's
    tokenizer)."""
    from keras_hardneg import export

    modality = modality_of(recipe)
    loss = model.contrastive_loss
    metrics = {k: _numbers(results[k]) for k in modality.result_keys
               if results.get(k) is not None}
    card = export.ModelCard(
        name=recipe["name"],
        description=f"{recipe['framework']['name']} encoder pre-trained with keras-hardneg",
        framework=recipe["framework"]["name"],
        loss=type(loss).__name__,
        hyperparameters={**loss.get_config(), "batch_size": recipe["batch_size"],
                         "framework": recipe["framework"], "encoder": recipe["encoder"],
                         "sampler": recipe["sampler"], "optimizer": recipe["optimizer"],
                         "augmentation": recipe["augmentation"], "data": recipe["data"],
                         "seed": recipe["seed"]},
        data=description,
        epochs=results.get("epochs_run"),
        knn_accuracy=results.get("knn_accuracy"),
        linear_probe_accuracy=results.get("linear_probe_accuracy"),
        evaluation=modality.describe_evaluation(recipe),
        output_dim=int(model.encoder.output_shape[-1]),
        **({} if modality.name == "image" else {"modality": modality.name, "metrics": metrics}),
    )
    spec = modality.export_spec(model.encoder, x_train, run_dir)
    export.export_encoder(model.encoder, export_dir, model_card=card, overwrite=True, **spec)
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
    from keras_hardneg.callbacks.backup import latest_weights

    run_dir = os.path.abspath(run_dir)
    recipe_path = os.path.join(run_dir, "recipe.json")
    weights = latest_weights(os.path.join(run_dir, "backup"))
    if not os.path.isfile(recipe_path) or weights is None:
        raise RunDirectoryError(
            f"{run_dir!r} is not a keras-hardneg run directory (needs recipe.json and a "
            "checkpoint in backup/, written by `keras-hardneg train`).")
    recipe = load_recipe(recipe_path)
    tokenizer = os.path.join(run_dir, TOKENIZER_FILE)
    if modality_of(recipe).name == "text" and os.path.isfile(tokenizer):
        recipe["data"]["tokenizer"] = tokenizer
    results_path = os.path.join(run_dir, "results.json")
    results = {}
    if os.path.isfile(results_path):
        with open(results_path) as f:
            results = json.load(f)
    train, _, description = load_data(recipe)
    model = build_model(recipe, x_train=train[0])
    try:
        model.load_weights(weights)
    except Exception as e:  # a corrupt or foreign checkpoint
        raise RunDirectoryError(f"cannot load weights {weights}: {e}") from None
    if with_data:
        return model, recipe, results, description, train
    return model, recipe, results, description


def is_run_directory(path: str) -> bool:
    """Whether ``path`` holds a run (``recipe.json`` and ``backup/``)."""
    return (os.path.isfile(os.path.join(path, "recipe.json"))
            and os.path.isdir(os.path.join(path, "backup")))


def evaluate_directory(path: str, *, recipe: Any = None, overrides: dict[str, Any] | None = None,
                       benchmark_dir: str | None = None, senteval: bool = False
                       ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Evaluates the encoder of a run directory or of an exported encoder directory, for
    any modality: images (kNN / linear probe on the recipe's data), graphs (10-fold SVM
    accuracy on the recipe's TU dataset), sentences (STS and, with ``senteval``, SentEval
    on the sets under ``benchmark_dir``).

    The data come from ``recipe`` (a path or dict) with ``overrides``, else from the run's
    ``recipe.json`` (next to an exported ``encoder/`` too). A run directory is evaluated
    through its exported ``encoder/`` when present (needs TensorFlow), else rebuilt from
    its last checkpoint (any backend: a run trained under JAX). Returns ``(figures,
    info)``: ``info`` has ``encoder`` (what was evaluated), ``modality``, ``data`` and
    ``recipe``.
    """
    from keras_hardneg.run.modality import evaluate_sentences, sentence_embedder

    path = os.path.abspath(path)
    if not os.path.exists(path):
        raise RunDirectoryError(f"{path!r}: no such run or exported encoder directory.")
    run_dir = path if is_run_directory(path) else None
    export_dir = None
    if run_dir is not None and os.path.isfile(os.path.join(path, "encoder", "saved_model.pb")):
        export_dir = os.path.join(path, "encoder")
    elif run_dir is None:
        if not os.path.isfile(os.path.join(path, "saved_model.pb")):
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
    card = None
    if export_dir is not None:
        from keras_hardneg import export

        card = export.load_model_card(export_dir)
    text_card = card is not None and getattr(card, "modality", "image") == "text"
    if recipe is None and not overrides:
        if text_card and not benchmark_dir:
            raise RunDirectoryError("a text encoder is evaluated on STS/SentEval sets: give "
                                    "--benchmark-dir DIR (the layout of shared/data/text).")
        if not text_card:
            raise RunDirectoryError(
                "no recipe.json next to the encoder: give the data (--dataset or --recipe).")
        # a text encoder needs only its tokenizer (an asset) and the benchmark sets
    loaded = load_recipe(recipe, overrides) if (recipe is not None or overrides) else None
    modality = (modality_of(loaded) if loaded is not None
                else MODALITIES.get(card.modality).factory())
    info = {"encoder": export_dir or run_dir, "modality": modality.name, "recipe": loaded}

    if modality.name == "text":
        bench = benchmark_dir or (loaded or {}).get("evaluation", {}).get("benchmark_dir")
        if not bench:
            raise RunDirectoryError("a text encoder is evaluated on STS/SentEval sets: give "
                                    "--benchmark-dir DIR (the layout of shared/data/text).")
        if export_dir is not None:
            encoder = export.load_encoder(export_dir)
            embed = encoder.embed_sentences
            info["data"] = card.data
        else:
            model, loaded, _, description, train = restore_run(run_dir, with_data=True)
            embed = sentence_embedder(model.encoder, train[0].tokenizer,
                                      modality.input_shape(train[0])[0])
            info["data"] = description
        seed = loaded["seed"] if loaded is not None else 0
        return evaluate_sentences(embed, bench, senteval=senteval, seed=seed), info

    train, test, description = load_data(loaded)
    info["data"] = description
    if export_dir is not None:
        encoder = export.load_encoder(export_dir)
    else:
        encoder = restore_run(run_dir)[0].encoder
    return modality.evaluate(encoder, loaded, train, test), info
