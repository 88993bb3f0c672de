"""Writes models/README.md (the zoo index) and a model card for every entry not trained here.

Run from the repository root after training: ``python models/make_index.py``. Accuracies
come only from each entry's ``results.json`` written by ``keras-hardneg train``.
"""

import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


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
    return (recipe["framework"]["name"], f"{loss['name']} ({params})",
            f"{enc['name']} w{enc.get('width', 64)}", recipe["sampler"]["name"], where,
            recipe["epochs"])


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


def main():
    rows = []
    for name in sorted(os.listdir(HERE)):
        recipe_path = os.path.join(HERE, name, "recipe.json")
        if not os.path.isfile(recipe_path):
            continue
        recipe = json.load(open(recipe_path))
        results_path = os.path.join(HERE, name, "results.json")
        trained = os.path.isfile(results_path)
        res = json.load(open(results_path)) if trained else {}
        fw, loss, enc, sampler, data, epochs = describe(recipe)
        status = "trained here" if trained else "recipe only"
        rows.append(f"| `{name}` | {fw} | {loss} | {enc} | {sampler} | {data} | {epochs} | "
                    f"{figures(res) if trained else '-'} | {status} |")
        encoder_card = os.path.join(HERE, name, "encoder", "model_card.md")
        if trained and os.path.isfile(encoder_card):
            card = open(encoder_card).read()
            with open(os.path.join(HERE, name, "model_card.md"), "w") as f:
                f.write(card.rstrip() + "\n\nTrained here with `keras-hardneg train --recipe "
                        f"models/{name}/recipe.json --output models/{name}`; reproduce the "
                        f"accuracies with `keras-hardneg evaluate models/{name}/encoder`.\n")
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
        "schedule, data, epochs) and a model card. Entries trained here also hold `results.json`,",
        "`history.json` and `encoder/` (a reusable TF2 SavedModel with `model_card.md/json`).",
        "Figures are measured by the training run on frozen features: images, weighted kNN",
        "(k=200, t=0.1) and a logistic-regression linear probe on the test split; graphs, 10-fold",
        "SVM accuracy (mean ± std over folds); sentences, STS Spearman x 100 (the shared STS",
        "files are a Portuguese translation: see docs/benchmarks.md) and SentEval accuracy.",
        "Reproduce them with `keras-hardneg evaluate models/<entry>/encoder` (text: add",
        "`--benchmark-dir ../shared/data/text`).", "",
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
