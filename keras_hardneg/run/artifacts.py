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
from keras_hardneg.run.recipe import RecipeError, load_recipe

__all__ = ["RunDirectoryError", "export_trained_encoder", "restore_run"]


class RunDirectoryError(RecipeError):
    """A folder is not a (complete) keras-hardneg run directory, or its checkpoint is unreadable."""


def export_trained_encoder(model: Any, recipe: dict[str, Any], results: dict[str, Any],
                           description: str, export_dir: str) -> str:
    """Exports ``model.encoder`` as a SavedModel with a model card made from ``recipe``
    and ``results`` (``knn_accuracy``, ``linear_probe_accuracy``, ``epochs_run``);
    returns ``export_dir`` (replaced if present)."""
    from keras_hardneg import export

    loss = model.contrastive_loss
    ev = recipe["evaluation"]
    card = export.ModelCard(
        name=recipe["name"],
        description=f"{recipe['framework']['name']} encoder pre-trained with keras-hardneg",
        framework=recipe["framework"]["name"],
        loss=type(loss).__name__,
        hyperparameters={**loss.get_config(), "batch_size": recipe["batch_size"],
                         "framework": recipe["framework"], "encoder": recipe["encoder"],
                         "sampler": recipe["sampler"], "optimizer": recipe["optimizer"],
                         "seed": recipe["seed"]},
        data=description,
        epochs=results.get("epochs_run"),
        knn_accuracy=results.get("knn_accuracy"),
        linear_probe_accuracy=results.get("linear_probe_accuracy"),
        evaluation=(f"weighted kNN (k={ev['knn_k']}, t={ev['knn_temperature']})"
                    + (" and logistic-regression linear probe" if ev["linear_probe"] else "")
                    + " on frozen features, train split -> test split"),
        input_shape=tuple(model.encoder.input_shape[1:]),
        output_dim=int(model.encoder.output_shape[-1]),
    )
    export.export_encoder(model.encoder, export_dir, model_card=card, overwrite=True)
    return export_dir


def restore_run(run_dir: str) -> tuple[Any, dict[str, Any], dict[str, Any], str]:
    """``(model, recipe, results, data_description)`` of a run directory, the model
    holding the weights of the last committed checkpoint in ``backup/``.

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
    results_path = os.path.join(run_dir, "results.json")
    results = {}
    if os.path.isfile(results_path):
        with open(results_path) as f:
            results = json.load(f)
    train, _, description = load_data(recipe)
    model = build_model(recipe, train[0].shape[1:], num_examples=len(train[0]))
    try:
        model.load_weights(weights)
    except Exception as e:  # a corrupt or foreign checkpoint
        raise RunDirectoryError(f"cannot load weights {weights}: {e}") from None
    return model, recipe, results, description
