"""Writes models/README.md (the zoo index) and a model card for every entry not trained here.

Run from the repository root after training: ``python models/make_index.py``. Accuracies
come only from each entry's ``results.json`` written by ``keras-hardneg train``.
"""

import json
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
#: Keys of a Keras loss config that are not hyper-parameters (older cards carry them).
KERAS_CONFIG_KEYS = ("name", "reduction", "dtype")
#: Hyper-parameters a card shows from the trained recipe (what was trained), not from the
#: card written at export (the r18w8-cpu cards said Adam weight_decay 1e-06, which the Adam
#: of that version ignored; their recipes say null).
RECIPE_KEYS = ("batch_size", "framework", "encoder", "sampler", "optimizer", "augmentation",
               "seed")


def plain_path(text):
    """``text`` with absolute paths cut to their last two parts (no machine's folders)."""
    return re.sub(r"(?<![\w.])/(?:[^/\s]+/)+([^/\s]+/[^/\s]+)", r"\1", text)


def plain_card(card, recipe):
    """A zoo card as users read it: hyper-parameters without Keras config noise and, where
    the recipe has them, the trained recipe's values; no absolute paths."""
    hp = {k: v for k, v in card.hyperparameters.items() if k not in KERAS_CONFIG_KEYS}
    for key in RECIPE_KEYS:
        if key in hp and key in recipe:
            hp[key] = recipe[key]
    card.hyperparameters = json.loads(plain_path(json.dumps(hp)))
    if card.data:
        card.data = plain_path(card.data)
    return card


def describe(recipe):
    loss = recipe["loss"]
    params = ", ".join(f"{k}={v}" for k, v in loss.items() if k != "name")
    enc = recipe["encoder"]
    data = recipe["data"]
    if data["name"] == "tu":
        where = "TU " + os.path.basename(data["folder"])
    elif data["name"] == "text_file":
        where = os.path.basename(data["path"])
    else:
        where = data.get("dataset") or "CIFAR-10 JPEG"
    if data.get("limit_per_class"):
        where += f" ({data['limit_per_class']}/class)"
    encoder = (f"{enc['name']} ({os.path.basename(os.path.dirname(enc['preset']))})"
               if enc["name"] == "pretrained_bert" else f"{enc['name']} w{enc.get('width', 64)}")
    return (recipe["framework"]["name"], f"{loss['name']} ({params})", encoder,
            recipe["sampler"]["name"], where, recipe["epochs"])


def figures(res):
    """The figures of a trained entry, whatever its modality."""
    if "svm_accuracy" in res:
        return f"SVM {res['svm_accuracy']:.3f} ± {res['svm_accuracy_std']:.3f} (10-fold)"
    if isinstance(res.get("sts"), dict):
        out = f"STS avg {res['sts']['avg']:.1f}"
        if isinstance(res.get("senteval"), dict):
            out += f", SentEval avg {res['senteval']['avg']:.1f}"
        return out
    if "knn_accuracy" in res:
        probe = (f", probe {res['linear_probe_accuracy']:.3f}"
                 if "linear_probe_accuracy" in res else "")
        return f"kNN {res['knn_accuracy']:.3f}{probe}"
    return "-"


def _card_markdown(name, recipe):
    """The entry's measured card: from ``preset/model_card.json`` (the Keras preset), else
    from ``encoder/model_card.md`` (the SavedModel); ``None`` when neither exists."""
    preset_card = os.path.join(HERE, name, "preset", "model_card.json")
    if os.path.isfile(preset_card):
        from keras_hardneg.export import ModelCard

        card = ModelCard.from_dict(json.load(open(preset_card)))
        return plain_card(card, recipe).to_markdown()
    encoder_card = os.path.join(HERE, name, "encoder", "model_card.md")
    return open(encoder_card).read() if os.path.isfile(encoder_card) else None


def main():
    rows = []
    for name in sorted(os.listdir(HERE)):
        recipe_path = os.path.join(HERE, name, "recipe.json")
        if not os.path.isfile(recipe_path):
            continue
        recipe = json.load(open(recipe_path))
        trained_path = os.path.join(HERE, name, "trained_recipe.json")
        if os.path.isfile(trained_path):  # what was trained, where it differs from recipe.json
            recipe = json.load(open(trained_path))
        results_path = os.path.join(HERE, name, "results.json")
        trained = os.path.isfile(results_path)
        res = json.load(open(results_path)) if trained else {}
        fw, loss, enc, sampler, data, epochs = describe(recipe)
        gpu = "gpu" in str(res.get("hardware", "")).lower()
        if trained:
            planned = res.get("epochs_planned", epochs)
            epochs = (res.get("epochs_run", epochs) if res.get("epochs_run") == planned
                      else f"{res.get('epochs_run')} of {planned}")
        status = ("recipe only" if not trained else
                  f"weights (GPU: {res['hardware'].split(';')[0].split(' x ')[-1].split(' (')[0]})" if gpu
                  else "weights (trained here, CPU)")
        rows.append(f"| `{name}` | {fw} | {loss} | {enc} | {sampler} | {data} | {epochs} | "
                    f"{figures(res) if trained else '-'} | {status} |")
        card = _card_markdown(name, recipe) if trained else None
        if card is not None:
            how = (f"Load it: `keras_hardneg.zoo.load({name!r})` (a trainable keras.Model under "
                   f"TensorFlow or JAX); TF Hub SavedModel: `keras-hardneg zoo export {name} "
                   "DIR`.")
            if res.get("reproduce_command"):
                how += (f" Made here with `{res['reproduce_command']}` (training: "
                        f"`{res['train_command']}`; scoring: "
                        + "; ".join(f"`{c}`" for c in res.get("evaluate_commands", []))
                        + ").")
            elif res.get("import_command"):
                how += (f" Trained on the GPU with `{(res.get('gpu_commands') or ['?'])[0]}` "
                        f"and imported with `{res['import_command']}`"
                        + (f" (figures by `{res['figures_command']}`)"
                           if res.get("figures_command") else "") + ".")
            else:
                how += (f" Trained here with `keras-hardneg train --recipe "
                        f"models/{name}/recipe.json --output models/{name}`; reproduce the "
                        f"accuracies with `keras-hardneg evaluate models/{name}/encoder`.")
            with open(os.path.join(HERE, name, "model_card.md"), "w") as f:
                f.write(card.rstrip() + "\n\n" + how + "\n")
        if not trained:
            card = [f"# {name}", "",
                    "Status: **recipe only** -- not trained on this project's CPU machines; no "
                    "accuracy is claimed.", "",
                    f"- Framework: {fw}", f"- Loss: {loss}", f"- Encoder: {enc}",
                    f"- Sampler: {sampler}", f"- Data: {data}", f"- Epochs: {epochs}",
                    f"- Optimizer: {recipe['optimizer']}", f"- Batch size: {recipe['batch_size']}",
                    "", "Settings follow the papers (see models/make_recipes.py for the sources).",
                    "Train it where the data exists:", "",
                    f"    keras-hardneg train --recipe models/{name}/recipe.json --output models/{name}",
                    "", "That writes the exported encoder and its measured model card into "
                    f"models/{name}/encoder/."]
            if recipe["data"]["name"] == "tfds" and recipe["data"].get("dataset") == "imagenet2012":
                card += ["", "Note: `keras_hardneg.run.load_data` materialises tfds data as arrays; that "
                         "fits CIFAR/STL-sized data but not ImageNet, whose streaming input path "
                         "is not implemented yet."]
            with open(os.path.join(HERE, name, "model_card.md"), "w") as f:
                f.write("\n".join(card) + "\n")
    header = [
        "# The keras-hardneg model zoo", "",
        "One directory per entry: `recipe.json` (framework, encoder, loss, sampler, optimizer,",
        "schedule, data, epochs) and a model card. Entries with weights also hold `preset/` (the",
        "Keras preset: `config.json` + `model.weights.h5`), `results.json` and `history.json`;",
        "those trained on the CPU here also keep `encoder/` (a TF2 SavedModel).",
        "",
        "```python",
        "import keras_hardneg as khn          # KERAS_BACKEND=tensorflow or jax",
        "khn.zoo.list()                       # the entries with weights",
        "encoder = khn.zoo.load(NAME)         # a trainable keras.Model: images [B, 32, 32, 3] in [0, 1] -> [B, F]",
        "```",
        "",
        "`keras-hardneg zoo list | show NAME | export NAME DIR` does the same from the shell",
        "(`export` writes the TF Hub SavedModel; `keras.layers.TFSMLayer` on it is for inference",
        "only). Figures are measured on frozen features: images, weighted kNN (k=200, t=0.1) and",
        "a logistic-regression linear probe, 50k train -> 10k test; graphs, 10-fold SVM accuracy",
        "(mean ± std over folds); sentences, STS Spearman x 100 and SentEval accuracy (figures",
        "made before the English STS files arrived used a Portuguese translation: void, see",
        "docs/benchmarks.md). \"N of 200\" epochs: the run stopped before its schedule ended.",
        "A text entry takes token ids from the tokenizer in its `preset/assets/tokenizer.json`",
        "(`keras_hardneg.data.load_tokenizer`); one built on a pretrained BERT",
        "(`simcse-minilm-ntxent-wiki`) needs the `[pretrained]` extra (keras-hub).", "",
        "Recipes are generated by `python models/make_recipes.py`; this index by",
        "`python models/make_index.py`.", "",
        "| entry | framework | loss | encoder | sampler | data | epochs | figures | status |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    with open(os.path.join(HERE, "README.md"), "w") as f:
        f.write("\n".join(header + rows) + "\n")
    print(f"indexed {len(rows)} entries")


if __name__ == "__main__":
    main()
