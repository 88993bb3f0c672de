"""Writes models/README.md, the package's zoo index (keras_hardneg/zoo_index.json: each
entry's modality, input, figures and files with sizes and SHA-256s) and a model card for
every entry not trained here.

Run from the repository root after training or changing an entry: ``python
models/make_index.py`` (tests/test_zoo_store.py checks that the shipped index agrees with
models/). Accuracies come only from each entry's ``results.json`` written by
``keras-hardneg train``.
"""

import json
import os
import re

from keras_hardneg import zoo_figures as zf
from keras_hardneg.zoo_store import build_index, figures_text, write_index

HERE = os.path.dirname(os.path.abspath(__file__))
#: The zoo index shipped inside the package (package data): what `khn.zoo` fetches and checks.
INDEX = os.path.join(HERE, os.pardir, "keras_hardneg", "zoo_index.json")
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
        where = "TU " + (data.get("dataset") or os.path.basename(data["folder"]))
    elif data["name"] == "text_file":
        where = (os.path.basename(data["path"]) if data.get("path") else
                 f"{data['corpus']}" + (f" (first {data['limit']:,})" if data.get("limit")
                                        else ""))
    elif data["name"] == "image_folder":
        where = "CIFAR-10 JPEG"  # the folder the CPU entries were trained on
    elif data["name"] == "beir":
        where = f"BEIR {os.path.basename(str(data.get('path') or 'folder'))}"
    elif data["name"] in ("cifar10", "cifar100"):
        where = {"cifar10": "CIFAR-10", "cifar100": "CIFAR-100"}[data["name"]]
    else:
        where = data.get("dataset") or data["name"]
    if data.get("limit_per_class"):
        where += f" ({data['limit_per_class']}/class)"
    encoder = (f"{enc['name']} ({os.path.basename(os.path.dirname(enc['preset']))})"
               if enc["name"] == "pretrained_bert" else f"{enc['name']} w{enc.get('width', 64)}")
    return (recipe["framework"]["name"], f"{loss['name']} ({params})", encoder,
            recipe["sampler"]["name"], where, recipe["epochs"])


def figures(res):
    """The figures of a trained entry, whatever its modality (the index's ``figures``)."""
    return figures_text(res)


def _refresh_input_contract(preset_dir):
    """An image preset's card says the input contract its config gives
    (:func:`keras_hardneg.export.preset.image_contract`): cards written before
    ``ImageNormalization(input_range=...)`` said "float32 in [0, 1]" while the preset's
    encoder (``input_range="auto"``) also takes 0-255 pixels. Rewrites only that field."""
    from keras_hardneg.export.preset import image_contract

    contract = image_contract(preset_dir)
    path = os.path.join(preset_dir, "model_card.json")
    raw = open(path).read()
    card = json.loads(raw)
    if contract is not None and card.get("preprocessing") != contract:
        card["preprocessing"] = contract
        with open(path, "w") as f:                # the layout the card was written in
            f.write(json.dumps(card, indent=1) + ("\n" if raw.endswith("\n") else ""))


def _card_markdown(name, recipe, root=HERE):
    """The entry's measured card: from ``preset/model_card.json`` (the Keras preset), else
    from ``encoder/model_card.md`` (the SavedModel); ``None`` when neither exists."""
    preset_card = os.path.join(root, name, "preset", "model_card.json")
    if os.path.isfile(preset_card):
        from keras_hardneg.export import ModelCard

        _refresh_input_contract(os.path.join(root, name, "preset"))
        card = ModelCard.from_dict(json.load(open(preset_card)))
        return plain_card(card, recipe).to_markdown()
    encoder_card = os.path.join(root, name, "encoder", "model_card.md")
    return open(encoder_card).read() if os.path.isfile(encoder_card) else None


def published_section(res):
    """Figures published elsewhere that the card shows beside its own (``results.json``'s
    ``published``: ``[{"what", "source", metric: value}]``; not run here); [] without."""
    rows = res.get("published") or []
    if not rows:
        return []
    lines = ["", "Published figures on the same test set (not run here):", ""]
    for row in rows:
        figures = ", ".join(f"{zf.METRICS[k][0].split(' (')[0]} {v:.3f}" for k, v in row.items()
                            if k in zf.METRICS)
        lines.append(f"- {row['what']}: {figures} ({row['source']})")
    return lines


def write_trained_card(name, recipe, res, records, root=HERE):
    """Writes ``root/name/model_card.md`` of an entry with figures: its preset's card, its
    figures over seeds (:func:`seeds_section`, from the index ``records``), published
    figures beside them and how it was made; returns the text (``None``: no card)."""
    card = _card_markdown(name, recipe, root)
    if card is None:
        return None
    how = (f"Load it: `keras_hardneg.zoo.load({name!r})` (a trainable keras.Model under "
           f"TensorFlow or JAX); TF Hub SavedModel: `keras-hardneg zoo export {name} "
           "DIR`.")
    if res.get("reproduce_command"):
        scoring = "; ".join(f"`{c}`" for c in res.get("evaluate_commands", []))
        how += (f" Made here with `{res['reproduce_command']}` (training: "
                f"`{res['train_command']}`; scoring: "
                + (scoring or "the training run's own final evaluation") + ").")
    elif res.get("import_command"):
        how += (f" Trained on the GPU with `{(res.get('gpu_commands') or ['?'])[0]}` "
                f"and imported with `{res['import_command']}`"
                + (f" (figures by `{res['figures_command']}`)"
                   if res.get("figures_command") else "") + ".")
    else:
        how += (f" Trained here with `keras-hardneg train --recipe "
                f"models/{name}/recipe.json --output models/{name}`; reproduce the "
                f"accuracies with `keras-hardneg evaluate models/{name}/encoder`.")
    extra = seeds_section(name, records) + published_section(res)
    text = card.rstrip() + "".join("\n" + line for line in extra) + "\n\n" + how + "\n"
    with open(os.path.join(root, name, "model_card.md"), "w") as f:
        f.write(text)
    return text


def _with_name(records, name):
    return {**records[name], "name": name}


def seeds_section(name, records):
    """The card's figures over seeds beside the NT-Xent twin and before training
    (:func:`keras_hardneg.zoo_figures.compare_records`, as ``zoo compare`` prints them);
    [] for an entry trained at one seed without twin or baseline."""
    record = records[name]
    metrics = record.get("metrics") or {}
    several = any(m["n"] > 1 for m in metrics.values())
    if not (several or record.get("baseline")):
        return []
    twin = (record.get("twin") or {}).get("name")
    label = zf.twin_label((record.get("twin") or {}).get("what"))
    lines = ["", "## Figures over seeds" + (f", beside the {label}" if twin else ""), ""]
    seeds = sorted({s for m in metrics.values() for s in m["per_seed"]})
    lines.append(f"Pre-trained at seeds {', '.join(seeds)}: each figure is the mean ± std over "
                 f"the seeds (n); the weights are seed {record['weights_seed']}'s.")
    if twin:
        table = zf.compare_records(_with_name(records, name), _with_name(records, twin))
        lines += ["", f"| | `{name}` | {label} `{twin}` | difference |", "|---|---|---|---|"]
    else:
        table = zf.compare_records(_with_name(records, name), _with_name(records, name))
        lines += ["", f"| | `{name}` |", "|---|---|"]
    for label, va, vb, note in table["metrics"]:
        label = label.strip()
        if label == f"seed {record['weights_seed']}":
            label += " (the weights)"
        lines.append(f"| {label} | {va} | {vb} | {note} |" if twin else f"| {label} | {va} |")
    for label, va, vb, _ in table["baseline"]:
        lines.append(f"| {label} | {va} | {vb} | |" if twin else f"| {label} | {va} |")
    if record.get("baseline"):
        lines += ["", f"Before training: {record['baseline']['what']}."]
    if twin:
        t = record["twin"]
        lines += ["", f"Against its twin, {zf.METRICS[t['metric']][0]}: "
                  f"{zf.verdict(t['metric'], t)}" + (
                      " -- the seeds alone move the figure that much: no difference is shown."
                      if t["inside_spread"] else "" if t["inside_spread"] is None else
                      " -- larger than either entry's seed-to-seed spread.")]
    for other in record.get("twinned_by") or []:
        t = records[other]["twin"]
        lines.append(f"- `{other}` against this entry: {zf.verdict(t['metric'], t)}")
    if record.get("twinned_by"):
        lines.insert(-len(record["twinned_by"]), "")
        lines.insert(-len(record["twinned_by"]), "Its twins (`keras-hardneg zoo compare A B`):")
    return lines


#: The README's zoo table (its header line): make_index rewrites its rows from the index
#: (tests/test_readme.py checks that they name the index's entries with their figures).
README_TABLE = "| entry | input -> features | figures | trained on |"


#: What an entry of each modality takes, as the README's table names it (images with
#: their size, from the entry's input).
README_INPUTS = {"image": "images", "graph": "graphs", "text": "sentences",
                 "retrieval": "queries and documents"}


def _readme_input(record):
    spec, modality = record.get("input") or {}, record.get("modality")
    what = README_INPUTS.get(modality, modality)
    if spec.get("input_shape") and modality == "image":
        h, w = spec["input_shape"][:2]
        what += f" {h}x{w}"
    return f"{what} -> {record.get('output_dim')}"


def update_readme_table(index, path=os.path.join(HERE, os.pardir, "README.md")):
    """Rewrites the rows of the README's zoo table from ``index`` (every entry with
    weights, its figures and where it was trained); the rest of the README is untouched."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if README_TABLE not in lines:
        return
    start = lines.index(README_TABLE) + 2  # header, separator
    end = start
    while end < len(lines) and lines[end].startswith("| `"):
        end += 1
    rows = [f"| `{name}` | {_readme_input(r)} | {r['figures']} | {r['trained_on']} |"
            for name, r in sorted(index["entries"].items()) if r["status"] == "weights"]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines[:start] + rows + lines[end:]))


def _megabytes(record):
    return f"{sum(f['size'] for f in record['files'].values()) / 1e6:.1f} MB"


def main():
    index = build_index(HERE)  # the entries' status; written after the cards below
    rows, recipe_rows = [], []
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
        record = index["entries"][name]
        if record["status"] == "weights":
            where = record["trained_on"] if gpu else "CPU, here"
            rows.append(f"| `{name}` | {fw} | {loss} | {enc} | {sampler} | {data} | {epochs} | "
                        f"{figures(res)} | {where} | {_megabytes(record)} |")
        else:
            recipe_rows.append(f"| `{name}` | {fw} | {loss} | {enc} | {sampler} | {data} | "
                               f"{epochs} | {record['why_no_weights']} |")
        if trained:
            write_trained_card(name, recipe, res, index["entries"])
        if not trained:
            card = [f"# {name}", "",
                    "Status: **recipe only** -- not trained yet; no accuracy is claimed.", "",
                    f"- Framework: {fw}", f"- Loss: {loss}", f"- Encoder: {enc}",
                    f"- Sampler: {sampler}", f"- Data: {data}", f"- Epochs: {epochs}",
                    f"- Optimizer: {recipe['optimizer']}", f"- Batch size: {recipe['batch_size']}",
                    "", "Settings follow the papers (see models/make_recipes.py for the sources).",
                    "Train it (its data is named, fetched once into ~/.keras/datasets):", "",
                    f"    keras-hardneg train --recipe models/{name}/recipe.json --output models/{name}",
                    "", "That writes the exported encoder and its measured model card into "
                    f"models/{name}/encoder/. Without network, point it at a local copy: "
                    "`--dataset PATH` (an image folder, a TU folder or a sentence file), or "
                    "`--data-dir DIR` (a cache or tfds data folder holding it)."]
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
        "encoder = khn.zoo.load(NAME)         # a trainable keras.Model: images [B, 32, 32, 3], [0, 1] or 0-255 -> [B, F]",
        "```",
        "",
        "`keras-hardneg zoo list | show NAME | export NAME DIR` does the same from the shell",
        "(`export` writes the TF Hub SavedModel; `keras.layers.TFSMLayer` on it is for inference",
        "only). Figures are measured on frozen features: images, weighted kNN (k=200, t=0.1) and",
        "a logistic-regression linear probe, 50k train -> 10k test; graphs, 10-fold SVM accuracy",
        "(mean ± std over folds); sentences, STS Spearman x 100 and SentEval accuracy (figures",
        "made before the English STS files arrived used a Portuguese translation: void, see",
        "docs/benchmarks/sentences.md). \"N of 200\" epochs: the run stopped before its schedule ended.",
        "A text entry takes token ids from the tokenizer in its `preset/assets/tokenizer.json`",
        "(`keras_hardneg.data.load_tokenizer`); one built on a pretrained BERT",
        "(`simcse-minilm-ntxent-wiki`) needs the `[pretrained]` extra (keras-hub).", "",
        "Without a clone (`pip install keras-hardneg`, a wheel, `pip install git+...`) the",
        "package holds this index (`keras_hardneg/zoo_index.json`: each entry's input,",
        "figures and files with their SHA-256s) but not the weights. Point `KERAS_HARDNEG_ZOO`",
        "(or `zoo=`) at a host of this folder -- a URL (`https://HOST/models`, or",
        "`file:///path/to/models`) or a folder -- and `khn.zoo.load(NAME)` fetches the entry",
        "once into `~/.keras/keras_hardneg/zoo/NAME/` (`$KERAS_HOME` respected), each file",
        "checked against the index, and loads it from there afterwards, offline too.",
        "`keras-hardneg zoo list` says which entries are here, cached or to fetch;",
        "`keras-hardneg zoo publish NAME DIR` writes the folder a maintainer uploads to host one.",
        "",
        "Recipes are generated by `python models/make_recipes.py`; this page and the package's",
        "index by `python models/make_index.py`.", "",
        "## Entries with weights", "",
        "Size: what a fetch brings (the preset, the recipe, the figures and the card).", "",
        "| entry | framework | loss | encoder | sampler | data | epochs | figures | trained on "
        "| size |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    recipes = [
        "", "## Recipes without weights", "",
        "Each trains with `keras-hardneg train --recipe models/ENTRY/recipe.json --output",
        "models/ENTRY` on any machine: recipes name their data (CIFAR-10/100 as",
        "`keras.datasets` gets them, TU sets from the TU host, SimCSE's Wikipedia sentences,",
        "tfds datasets through tfds), fetched once into `~/.keras/datasets`; without network",
        "`--dataset PATH` points one at a local copy. Why no weights: \"needs a GPU\" (a",
        "width-64 ResNet-18 for 100+ epochs or a ResNet-50), \"data: a manual download\"",
        "(ImageNet, which tfds cannot fetch itself), \"not trained yet\" (sized for a CPU).", "",
        "| entry | framework | loss | encoder | sampler | data | epochs | why no weights |",
        "|---|---|---|---|---|---|---|---|",
    ]
    with open(os.path.join(HERE, "README.md"), "w") as f:
        f.write("\n".join(header + rows + zf.twins_markdown(index["entries"]) + recipes
                          + recipe_rows) + "\n")
    # Hashed after the cards above are written (a card rewritten here is one of the files).
    write_index(build_index(HERE), INDEX)
    update_readme_table(build_index(HERE))
    print(f"indexed {len(rows) + len(recipe_rows)} entries ({len(rows)} with weights) in "
          f"models/README.md and {os.path.normpath(INDEX)}")


if __name__ == "__main__":
    main()
