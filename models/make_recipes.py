"""Writes the zoo's recipes (models/<entry>/recipe.json) from the papers' settings.

Run from the repository root: ``python models/make_recipes.py``. Each entry is then
trained with ``keras-hardneg train --recipe models/<entry>/recipe.json --output models/<entry>``
on any machine; the entries marked "trained here" in models/README.md were.

Recipes name their data portably (docs/notes/recipe_data.md): a dataset by name, fetched
once into the cache (``cifar10``, ``cifar100``: Keras's copies; ``tu`` with ``dataset``:
the TU host; ``text_file`` with ``corpus``: SimCSE's Wikipedia sentences; ``tfds``: tfds
fetches and prepares), never a path of one machine. Local copies are the user's override
(``--dataset PATH``, or ``data.data_dir`` for the cache).

Each entry states only what the papers set; :func:`keras_hardneg.run.load_recipe` checks it
against the registries and completes it with the components' defaults, so every written
recipe is complete and explicit (and a name or key the library does not know fails here).
"""

import os

from keras_hardneg.run import load_recipe, save_recipe

HERE = os.path.dirname(os.path.abspath(__file__))

# Robinson et al. (HCL) App. D.1: Adam 1e-3, weight decay 1e-6, t = 0.5, batch 256.
HCL_OPT = {"name": "adam", "learning_rate": 1e-3, "weight_decay": 1e-6}
LOSSES = {
    "ntxent": {"name": "nt_xent", "temperature": 0.5},
    "debiased": {"name": "debiased", "temperature": 0.5, "tau_plus": 0.1},
    "hard": {"name": "hard", "temperature": 0.5, "tau_plus": 0.1, "beta": 1.0},
    "ring": {"name": "ring", "temperature": 0.5, "lower_percentile": 5.0, "upper_percentile": 50.0},
    "unremix": {"name": "unremix", "temperature": 0.5, "tau_plus": 0.0, "beta": 1.0},
}
# Yang et al. (BatchSampler) App. E, CIFAR-10: M = 500, K = 100, t = 100, alpha 0.2 -> 0.05.
BATCHSAMPLER = {"name": "batchsampler", "num_candidates": 500, "num_neighbors": 100,
                "refresh_every": 100, "restart_prob": [0.2, 0.05]}

# lightly's SimCLR CIFAR-10 benchmark (lightly 1.6, docs/source/getting_started/benchmarks):
# ResNet-18 (CIFAR stem), batch 512, SGD lr 0.06 * 512 / 128 with momentum 0.9 and weight
# decay 5e-4 added to the gradient (torch.optim.SGD: "sgd_l2"), cosine to 0 without warm-up,
# head 512-512-128 with BN on both layers ("simclr_v1_bn"), NT-Xent t 0.5, crop 0.08-1,
# colour jitter 0.4/0.4/0.4/0.1 multiplicative (p 0.8), grayscale 0.2, no blur, 200 epochs.
# The GPU zoo's CIFAR-10 SimCLR entries take it, with torch's and torchvision's remaining
# choices as keys (the parity benchmark's `all_lightly`): Kaiming fan-out convolutions,
# torch's Linear initialisation, each view its own batch-norm batch, stride-2 convolutions
# padded on both sides, torchvision's colour jitter (ops in turn, contrast around the grey
# mean), crop boxes of whole pixels, the cosine stepped per epoch. At full scale on one H200
# (benchmarks/results/gpu/h200-2026-11-27-parity) they beat the earlier keys at all 11 paired
# checkpoints of two seeds (+0.5 to +2.5 kNN points; 0.7501 vs 0.7353 after 80 epochs) and
# track lightly's own run (docs/benchmarks/parity.md, "Recipe parity at full scale").
LIGHTLY_SIMCLR_CIFAR10 = {
    "encoder": {"name": "resnet18_cifar", "width": 64, "conv_init": "he_normal_fan_out",
                "padding": "symmetric"},
    "optimizer": {"name": "sgd_l2", "learning_rate": 0.24, "momentum": 0.9,
                  "weight_decay": 5e-4},
    "schedule": {"name": "warmup_cosine", "warmup_epochs": 0, "per_epoch": True},
    "augmentation": {"name": "simclr", "version": "v2", "strength": 1.0,
                     "crop_scale": [0.08, 1.0], "exact_color_jitter": True,
                     "contrast_mean": "gray", "crop_boxes": "integer"},
    "batch_size": 512,
    "epochs": 200,
    "evaluation": {"monitor_every": 10},
}

DATASETS = {
    "cifar10": ({"name": "cifar10", "image_size": 32}, 32),
    "cifar100": ({"name": "cifar100", "image_size": 32}, 32),
    "stl10": ({"name": "tfds", "dataset": "stl10", "train_split": "train", "test_split": "test"}, 96),
}


def full_recipe(name, framework, loss, dataset, sampler=None, tau_plus=None):
    data, size = DATASETS[dataset]
    loss = dict(loss)
    if tau_plus is not None and "tau_plus" in loss:
        loss["tau_plus"] = tau_plus
    recipe = {
        "name": name,
        "framework": {"name": framework},
        "encoder": {"name": "resnet18_cifar", "width": 64} if size == 32 else
                   {"name": "resnet50", "width": 64},
        "projection_dims": [512, 128],
        "loss": loss,
        "sampler": sampler or {"name": "uniform"},
        "optimizer": HCL_OPT,
        "schedule": {"name": "warmup_cosine", "warmup_epochs": 10},
        "augmentation": {"name": "simclr", "version": "v1", "strength": 0.5,
                         "crop_scale": [0.08, 1.0]},
        "data": data,
        "batch_size": 256,
        "epochs": 400,
        "seed": 0,
        "precision": "mixed_bfloat16",
    }
    if framework.startswith("moco"):
        # MoCo v2 (Chen et al. 2020): SGD 0.03 (batch 256), weight decay 1e-4, m = 0.999,
        # K = 65536, t = 0.2;
        # Ring's released MoCo setting: t = 0.07, band 1-10, upper annealed 100 -> 10.
        recipe["optimizer"] = {"name": "sgd", "learning_rate": 0.06, "momentum": 0.9,
                               "weight_decay": 1e-4}
        recipe["framework"].update(queue_size=4096, momentum=0.99)
        recipe["projection_dims"] = [2048, 128]
        if loss["name"] == "ring":
            recipe["loss"] = {"name": "ring", "temperature": 0.07, "lower_percentile": 1.0,
                              "upper_percentile": 10.0}
            recipe["annealing"] = {"ring_start": 100.0, "ring_end": 10.0}
        else:
            recipe["loss"]["temperature"] = 0.2
    return recipe


def entries():
    out = {}
    for dataset in ("cifar10", "cifar100", "stl10"):
        # Robinson et al.: tau_plus 0.1 (CIFAR-10, STL-10), 0.05 (CIFAR-100).
        tau = 0.05 if dataset == "cifar100" else None
        for key, loss in LOSSES.items():
            name = f"simclr-{key}-{dataset}"
            out[name] = full_recipe(name, "simclr", loss, dataset, tau_plus=tau)
        for key in ("ntxent", "ring", "hard"):
            name = f"moco_v2-{key}-{dataset}"
            out[name] = full_recipe(name, "moco_v2", LOSSES[key], dataset, tau_plus=tau)
    for key in ("ntxent", "hard", "debiased"):
        name = f"simclr-{key}-batchsampler-cifar10"
        out[name] = full_recipe(name, "simclr", LOSSES[key], "cifar10", sampler=BATCHSAMPLER)
    for name, r in out.items():
        if name.startswith("simclr-") and name.endswith("-cifar10"):
            r.update(LIGHTLY_SIMCLR_CIFAR10)
            r["framework"] = {"name": "simclr", "head_version": "simclr_v1_bn",
                              "head_init": "torch_linear", "batch_norm_views": "per_view"}
    # ImageNet, MoCo v2 (paper settings, ResNet-50, 224 px): needs prepared tfds imagenet2012.
    for key in ("ntxent", "ring"):
        name = f"moco_v2-{key}-imagenet"
        r = full_recipe(name, "moco_v2", LOSSES[key], "cifar10")
        r.update(encoder={"name": "resnet50", "width": 64}, epochs=200,
                 data={"name": "tfds", "dataset": "imagenet2012", "image_size": 224,
                       "train_split": "train", "test_split": "validation"},
                 framework={"name": "moco_v2", "queue_size": 65536, "momentum": 0.999},
                 augmentation={"name": "simclr", "version": "v2", "strength": 1.0,
                               "crop_scale": [0.2, 1.0]})
        r["optimizer"] = {"name": "sgd", "learning_rate": 0.03, "momentum": 0.9,
                          "weight_decay": 1e-4}
        out[name] = r
    # Trained here with a CPU budget (see models/README.md), when Adam's weight_decay was
    # silently ignored: their recipes say what was trained. They read a JPEG copy of
    # CIFAR-10 (trained_recipe.json); the recipe names CIFAR-10 itself (the same images,
    # without the JPEG round trip; the first 1,000 of each class in the archive's order).
    for key in ("ntxent", "hard"):
        name = f"simclr-{key}-cifar10-r18w8-cpu"
        r = full_recipe(name, "simclr", LOSSES[key], "cifar10")
        r.update(encoder={"name": "resnet18_cifar", "width": 8}, projection_dims=[128, 64],
                 optimizer={"name": "adam", "learning_rate": 1e-3},
                 epochs=12, precision="float32",
                 schedule={"name": "warmup_cosine", "warmup_epochs": 1},
                 data={**DATASETS["cifar10"][0], "limit_per_class": 1000})
        out[name] = r
    return out


TU_SETS = {"MUTAG": "mutag", "PTC_MR": "ptc_mr", "PROTEINS": "proteins", "ENZYMES": "enzymes",
           "NCI1": "nci1", "IMDB-BINARY": "imdb_binary", "IMDB-MULTI": "imdb_multi"}


def graph_entries():
    """GraphCL (You et al. 2020) on each TU dataset: the default graph recipe (GIN 3 x 32,
    node dropping / subgraph views, Adam 0.01, batch 128, 20 epochs, t = 0.2), NT-Xent and
    HCL's hard negatives (beta 1, tau_plus 0.1, as BatchSampler's Table 3)."""
    out = {}
    for folder, short in TU_SETS.items():
        for key, loss in (("ntxent", {"name": "nt_xent", "temperature": 0.2}),
                          ("hard", {"name": "hard", "temperature": 0.2, "tau_plus": 0.1,
                                    "beta": 1.0})):
            name = f"graphcl-{key}-{short}"
            out[name] = {"name": name, "loss": loss,
                         "data": {"name": "tu", "dataset": folder}}
    # A third entry per set (issue 51): the grid's best cell among debiased and BatchSampler
    # batches where it is ahead of both entries above (docs/benchmarks.md, "GraphCL: losses x
    # batches", 5 seeds; on ENZYMES and IMDB-MULTI none is), with the grid's settings.
    for folder, (key, sampler) in GRAPH_EXTRAS.items():
        short = TU_SETS[folder]
        name = f"graphcl-{key}{'-batchsampler' if sampler else ''}-{short}"
        loss = {"ntxent": {"name": "nt_xent", "temperature": 0.2},
                "debiased": {"name": "debiased", "temperature": 0.2, "tau_plus": 0.1},
                "hard": {"name": "hard", "temperature": 0.2, "tau_plus": 0.1, "beta": 1.0}}[key]
        out[name] = {"name": name, "loss": loss,
                     "data": dict(out[f"graphcl-ntxent-{short}"]["data"])}
        if sampler:
            out[name]["sampler"] = sampler
    return out


def _graph_batchsampler(refresh_every):
    """The graph grid's BatchSampler (benchmarks/graphs/tu_grid.py): M 1000, K 100 (capped
    by the dataset size), the graph rebuilt every ``N // 128`` steps (once an epoch)."""
    return {"name": "batchsampler", "num_candidates": 1000, "num_neighbors": 100,
            "refresh_every": refresh_every}


#: TU set -> (loss key, sampler or None) of its third entry (see graph_entries).
GRAPH_EXTRAS = {"MUTAG": ("ntxent", _graph_batchsampler(1)),
                "PTC_MR": ("debiased", None),
                "PROTEINS": ("debiased", _graph_batchsampler(8)),
                "NCI1": ("hard", _graph_batchsampler(32)),
                "IMDB-BINARY": ("ntxent", _graph_batchsampler(7))}


#: The first 11,914 sentences of SimCSE's wiki1m_for_simcse.txt (the corpus the text
#: entries were trained on), fetched once by name; STS/SentEval sets are the user's folder
#: (``--benchmark-dir``, SentEval's layout: SimCSE's senteval.tar holds it).
WIKI_PREFIX = {"name": "text_file", "corpus": "wiki1m", "limit": 11914}


def text_entries():
    """Unsupervised SimCSE (Gao et al. 2021) on the 11,914-sentence Wikipedia prefix: the
    default text recipe (a 2-block Transformer of width 128 from scratch, dropout views,
    t = 0.05, one epoch as SimCSE), NT-Xent and hard negatives; evaluated on the STS sets.
    The hard entry has tau_plus 0 (HCL's reweighting, beta 1, without its debiasing), as
    ``--preset`` fine-tuning gets: at t 0.05 its former tau_plus 0.1 held every anchor at
    the debiasing clamp from the first step even from scratch (session 12: 20 steps of this
    recipe on 1,280 wiki sentences logged clamp_fraction 1.0 and loss 5e-15; with tau_plus
    0 the same 20 steps logged clamp_fraction 0 and loss 0.033; issue 33)."""
    out = {}
    for key, loss in (("ntxent", {"name": "nt_xent", "temperature": 0.05}),
                      ("hard", {"name": "hard", "temperature": 0.05, "tau_plus": 0.0,
                                "beta": 1.0})):
        name = f"simcse-{key}-wiki"
        out[name] = {"name": name, "loss": loss, "epochs": 1, "data": dict(WIKI_PREFIX),
                     "evaluation": {"senteval": True}}
    # Quick-thought views (Logeswaran & Lee 2018; HCL's and UnReMix's sentence setting):
    # sentence i and i + 1 of the corpus as the positive pair; the best sentence run of
    # docs/benchmarks/sentences.md (the ReZero encoder, NT-Xent, uniform batches).
    name = "quickthought-ntxent-wiki"
    out[name] = {"name": name, "loss": {"name": "nt_xent", "temperature": 0.05}, "epochs": 1,
                 "augmentation": {"name": "quick_thought"},
                 "data": {**WIKI_PREFIX, "pairs": "adjacent"},
                 "evaluation": {"senteval": True}}
    return out


def complete_entries():
    """``{entry: complete recipe}``: each entry checked and completed by the registries."""
    everything = {**entries(), **graph_entries(), **text_entries()}
    return {name: _load_relative(recipe) for name, recipe in everything.items()}


def _load_relative(recipe):
    """Checks and completes an entry (it names no path: nothing to resolve)."""
    return load_recipe(recipe)


def keep_trained_recipe(folder, recipe):
    """An entry with weights keeps the recipe it was trained with: before its recipe.json
    changes, the old one is kept as trained_recipe.json (unless there is one already)."""
    import json

    path, trained = (os.path.join(folder, "recipe.json"),
                     os.path.join(folder, "trained_recipe.json"))
    if not os.path.isdir(os.path.join(folder, "preset")) or os.path.isfile(trained) \
            or not os.path.isfile(path):
        return
    with open(path) as f:
        old = json.load(f)
    if old != json.loads(json.dumps(recipe)):
        os.replace(path, trained)


if __name__ == "__main__":
    recipes = complete_entries()
    for name, recipe in recipes.items():
        os.makedirs(os.path.join(HERE, name), exist_ok=True)
        keep_trained_recipe(os.path.join(HERE, name), recipe)
        save_recipe(recipe, os.path.join(HERE, name, "recipe.json"))
    print(f"wrote {len(recipes)} recipes")
