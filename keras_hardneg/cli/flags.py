"""The recipe flags shared by the commands: their parsers, their help and choices read from
the registries, and which recipe key each flag sets (to name it in errors)."""

from __future__ import annotations

import argparse
import json
from typing import Any


def number(kind: type, flag: str):
    def parse(text: str):
        try:
            return kind(text)
        except ValueError:
            what = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
    parse.__name__ = flag
    return parse


def distribution(text: str) -> Any:
    """``--distribution``: a registered name, or a JSON object with ``name``."""
    if not text.lstrip().startswith("{"):
        return text
    try:
        return json.loads(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"must be a name or a JSON object ({e})") from None


def positive_int(text: str) -> int:
    value = number(int, "int")(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {value}")
    return value


# (section, key, applies-to help) of the component keys the CLI exposes as flags.
SECTION_FLAGS = [
    ("loss", "temperature"), ("loss", "tau_plus"), ("loss", "beta"),
    ("loss", "lower_percentile"), ("loss", "upper_percentile"),
    ("encoder", "width"), ("optimizer", "learning_rate"), ("optimizer", "weight_decay"),
    ("framework", "queue_size"),
]


RUN_FLAGS = ["epochs", "batch_size", "seed", "precision", "name"]


COMPONENT_FLAGS = ["framework", "encoder", "loss", "sampler", "optimizer"]


def flag_name(key: str) -> str:
    return "--" + key.replace("_", "-")


def _section_param(section: str, key: str):
    from keras_hardneg.run import SECTIONS

    registry = SECTIONS[section]
    users = [n for n in registry.names() if key in registry.get(n).params]
    return registry.get(users[0]).params[key], users


def _by_value(pairs: list[tuple[str, Any]]) -> str:
    """``"a: X; b, c: Y"`` from ``[(name, value), ...]``, names grouped by equal values."""
    groups: dict[str, list[str]] = {}
    for name, value in pairs:
        groups.setdefault(str(value), []).append(name)
    if len(groups) == 1:
        return next(iter(groups))
    return "; ".join(f"{', '.join(names)}: {value}" for value, names in groups.items())


def _section_help(section: str, key: str) -> str:
    """Help of a component key's flag: what it is for each component that takes it (their
    texts differ, e.g. --width for a GIN and a ResNet) and their defaults."""
    from keras_hardneg.run import SECTIONS

    registry = SECTIONS[section]
    users = [n for n in registry.names() if key in registry.get(n).params]
    params = [(n, registry.get(n).params[key]) for n in users]
    what = _by_value([(n, p.help) for n, p in params])
    default = _by_value([(n, "none" if p.default is None else p.default) for n, p in params])
    return (f"{what} ({section}: {', '.join(users)}; default: the recipe's, else the "
            f"{section}'s: {default})")


def recipe_key_flags() -> dict[str, str]:
    """recipe key -> the flag that sets it (to name both in errors)."""
    keys = {f"{section}.{key}": flag_name(key) for section, key in SECTION_FLAGS}
    keys.update({key: flag_name(key) for key in RUN_FLAGS})
    keys.update({f"{section}.name": flag_name(section) for section in COMPONENT_FLAGS})
    keys.update({"data.image_size": "--image-size", "data.limit_per_class": "--limit-per-class",
                 "data.data_dir": "--data-dir"})
    return keys


def add_model_flags(p: argparse.ArgumentParser) -> None:
    from keras_hardneg.run import DEFAULT_RECIPE, RUN_PARAMS, SECTIONS

    g = p.add_argument_group("what to train (override the recipe)")
    g.add_argument("--recipe", help="JSON recipe file (e.g. one from models/); flags below "
                                    "override it")
    g.add_argument("--dataset", help="by name: 'digits' (embedded, default), 'cifar10', "
                                     "'cifar100' (fetched once), 'tu:NAME' (a TU graph set "
                                     "fetched once, e.g. tu:MUTAG; graph recipe: GraphCL), "
                                     "'text:NAME' (sentences fetched once, e.g. text:wiki1m; "
                                     "text recipe: SimCSE), 'beir:NAME' (a BEIR retrieval "
                                     "set fetched once, e.g. beir:scifact), 'tfds:NAME' "
                                     "(TensorFlow Datasets); or a path: an image folder "
                                     "(class subfolders, or train/ and test/ inside; a flat "
                                     "folder of unlabeled images trains without evaluation), "
                                     "a TU graph folder, a BEIR folder (corpus.jsonl, "
                                     "queries.jsonl, qrels/), or a .txt file of sentences")
    g.add_argument("--data-dir", help="where data fetched by name is cached (cifar10, "
                                      "tu:NAME, beir:NAME, text:NAME; default "
                                      "~/.keras/datasets) or "
                                      "prepared (tfds:NAME; default $TFDS_DATA_DIR, else "
                                      "~/tensorflow_datasets): a folder holding it already "
                                      "needs no network")
    g.add_argument("--benchmark-dir", help="text: evaluate on the STS sets under this folder "
                                           "at the end (SentEval's layout: STS/, SICK/, ...; "
                                           "SimCSE's senteval.tar holds it)")
    g.add_argument("--preset", help="text: fine-tune this pretrained BERT-family checkpoint "
                                    "(a Hugging Face-format folder, or a keras-hub preset) "
                                    "with unsupervised SimCSE (t 0.05, lr 3e-5, batch 64 unless "
                                    "given); its tokenizer is the data's")
    g.add_argument("--image-size", type=number(int, "--image-size"),
                   help="resize images to this side (>= 8; default: the recipe's, else the "
                        "data's own size, 32 for image folders)")
    g.add_argument("--limit-per-class", type=number(int, "--limit-per-class"),
                   help="image folders: use at most this many images per class (default: "
                        "all)")
    for section in COMPONENT_FLAGS:
        g.add_argument(flag_name(section), choices=SECTIONS[section].names(),
                       help=f"the {SECTIONS[section].kind} (default: the recipe's, else "
                            f"{DEFAULT_RECIPE[section]['name']})")
    for section, key in SECTION_FLAGS:
        param, users = _section_param(section, key)
        g.add_argument(flag_name(key), dest=key, type=number(param.kind, flag_name(key)),
                       help=_section_help(section, key))
    for key in RUN_FLAGS:
        param = RUN_PARAMS[key]
        kind = param.kind if param.kind in (int, float) else str
        text = param.help.split(" (default")[0]
        g.add_argument(flag_name(key), dest=key, choices=param.choices,
                       type=None if param.choices else number(kind, flag_name(key))
                       if kind is not str else str,
                       help=f"{text} (default: the recipe's, else {param.default!r})")


def with_flag(message: str, args: argparse.Namespace | None = None) -> str:
    """Prefixes a recipe error with where the key it names was set: the flag, when the user
    gave it (``args``), else ``--recipe FILE`` when the recipe file holds the key; a value
    from the default recipe (or ``args`` None) leaves the message as it is."""
    for key, flag in recipe_key_flags().items():
        if f"'{key}'" not in message:
            continue
        if args is not None and getattr(args, flag[2:].replace("-", "_"), None) is not None:
            return f"{flag}: {message}"
        recipe = getattr(args, "recipe", None)
        if recipe and _recipe_file_sets(recipe, key):
            return f"--recipe {recipe}: {message}"
        return message
    return message


def _recipe_file_sets(path: str, key: str) -> bool:
    """Whether the JSON recipe at ``path`` gives ``key`` (``"epochs"``, ``"loss.beta"``)."""
    try:
        with open(path) as f:
            node: Any = json.load(f)
    except (OSError, ValueError):
        return False
    for part in key.split("."):
        if isinstance(node, str) and part == "name":  # ``"loss": "hard"``: the name
            return True
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True
