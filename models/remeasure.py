"""Re-measures the zoo entries trained here and rewrites their cards and results.json.

Run from the repository root when the evaluation path changes (e.g. the image decoder):
``python models/remeasure.py --reason "..."``. For each entry with an ``encoder/``, it
evaluates the exported encoder on its recipe's data exactly as ``keras-hardneg evaluate``
does, writes the new accuracies into ``encoder/model_card.{json,md}`` and ``results.json``,
and keeps the previous values in the card's ``metrics`` (suffixed with ``--tag``) so no
measured number is lost. Then run ``python models/make_index.py``.
"""

import argparse
import glob
import json
import os

from keras_hardneg import export, run

HERE = os.path.dirname(os.path.abspath(__file__))


def remeasure(entry_dir, reason, tag):
    encoder_dir = os.path.join(entry_dir, "encoder")
    trained = os.path.join(entry_dir, "trained_recipe.json")  # the data it was scored on
    recipe = run.load_recipe(trained if os.path.isfile(trained) else
                             os.path.join(entry_dir, "recipe.json"))
    train, test, _ = run.load_data(recipe)
    ev = recipe["evaluation"]
    new = run.evaluate_encoder(export.load_encoder(encoder_dir), train, test, k=ev["knn_k"],
                               temperature=ev["knn_temperature"],
                               linear_probe=ev["linear_probe"])
    card = export.load_model_card(encoder_dir)
    metrics = dict(card.metrics)
    for key in ("knn_accuracy", "linear_probe_accuracy"):
        old = getattr(card, key)
        if old is not None and key in new:
            metrics[f"{key}_{tag}"] = old
            setattr(card, key, new[key])
    card.metrics = metrics
    card.evaluation = f"{card.evaluation.split(' [re-measured')[0]} [re-measured: {reason}]"
    with open(os.path.join(encoder_dir, "model_card.json"), "w") as f:
        f.write(card.to_json() + "\n")
    with open(os.path.join(encoder_dir, "model_card.md"), "w") as f:
        f.write(card.to_markdown())
    results_path = os.path.join(entry_dir, "results.json")
    with open(results_path) as f:
        results = json.load(f)
    for key, value in new.items():
        results[f"{key}_{tag}"] = results.get(key)
        results[key] = value
    results["remeasured"] = reason
    with open(results_path, "w") as f:
        json.dump(results, f, indent=1)
    return new


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reason", required=True, help="why the numbers changed (goes in the card)")
    p.add_argument("--tag", required=True, help="suffix of the kept previous values, e.g. "
                                                "'wave1_tf_decoder'")
    args = p.parse_args()
    for card in sorted(glob.glob(os.path.join(HERE, "*", "encoder", "model_card.json"))):
        entry = os.path.dirname(os.path.dirname(card))
        print(os.path.basename(entry), remeasure(entry, args.reason, args.tag))


if __name__ == "__main__":
    main()
