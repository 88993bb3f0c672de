"""The recipe a command's flags describe: ``--recipe FILE`` with the keys the flags set on
top (data, ``--preset``'s fine-tuning keys, the components and their keys)."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from keras_hardneg.cli.errors import CliError
from keras_hardneg.cli.flags import COMPONENT_FLAGS, RUN_FLAGS, SECTION_FLAGS


def data_overrides(args: argparse.Namespace) -> dict[str, Any]:
    from keras_hardneg.data import dataset_spec

    data_dir = getattr(args, "data_dir", None)
    if data_dir is not None:
        data_dir = os.path.abspath(os.path.expanduser(data_dir))
    if args.dataset:
        try:
            spec = dataset_spec(args.dataset, image_size=args.image_size,
                                limit_per_class=args.limit_per_class)
        except ValueError as e:
            if "'data." in str(e):
                raise
            raise CliError(f"--dataset {args.dataset!r}: {e}") from None
        if data_dir is not None:
            spec = _with_data_dir(spec, data_dir)
        return {"data": spec}
    data = {k: v for k, v in (("image_size", args.image_size),
                              ("limit_per_class", args.limit_per_class),
                              ("data_dir", data_dir)) if v is not None}
    return {"data": data} if data else {}


def _with_data_dir(spec: dict[str, Any], data_dir: str) -> dict[str, Any]:
    """``--data-dir``: the cache (or tfds data folder) of data fetched by name."""
    from keras_hardneg.registry import DATASETS

    if "data_dir" not in DATASETS.get(spec["name"]).params:
        raise CliError(f"--data-dir applies to data fetched by name (cifar10, cifar100, "
                       f"tfds:NAME, tu:NAME, beir:NAME, text:NAME); --dataset gives "
                       f"{spec['name']!r}.")
    return {**spec, "data_dir": data_dir}


def recipe_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The recipe keys set by the flags."""
    given: dict[str, Any] = data_overrides(args)
    if getattr(args, "preset", None):
        given = _with_preset(given, args)
    if getattr(args, "benchmark_dir", None):
        if not os.path.isdir(args.benchmark_dir):
            raise CliError(f"--benchmark-dir {args.benchmark_dir!r}: no such folder.")
        given["evaluation"] = {"benchmark_dir": os.path.abspath(args.benchmark_dir)}
    for key in RUN_FLAGS:
        if getattr(args, key) is not None:
            given[key] = getattr(args, key)
    for section in COMPONENT_FLAGS:
        if getattr(args, section) is not None:
            given[section] = {"name": getattr(args, section)}
    if getattr(args, "preset", None):  # the loss's fine-tuning keys (t 0.05, tau_plus 0)
        _preset_loss_defaults(given, getattr(args, "recipe", None))
    for section, key in SECTION_FLAGS:
        if getattr(args, key) is not None:
            given.setdefault(section, {})[key] = getattr(args, key)
    return given


def preset_path(flag_value: str) -> str:
    from keras_hardneg.encoders.pretrained_text import check_preset

    try:
        check_preset(flag_value)
    except ValueError as e:
        raise CliError(f"--preset {flag_value!r}: {e}") from None
    return os.path.abspath(flag_value) if os.path.isdir(flag_value) else flag_value


def _data_name(given: dict[str, Any], recipe_path: str | None) -> str | None:
    """The dataset a command trains on: ``--dataset``'s, else the ``--recipe`` file's."""
    name = (given.get("data") or {}).get("name")
    if name is None and recipe_path:
        try:
            with open(recipe_path) as f:
                data = json.load(f).get("data")
        except (OSError, ValueError, AttributeError):
            return None  # load_recipe reports what is wrong with the file
        name = data if isinstance(data, str) else (
            data.get("name") if isinstance(data, dict) else None)
    return name


def _with_preset(given: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """``--preset``: the pretrained encoder, its tokenizer and the fine-tuning keys of the
    data's modality (``Modality.preset_keys``: SimCSE's for sentences)."""
    from keras_hardneg.modalities import get_modality, modality_of
    from keras_hardneg.registry import DATASETS, DEFAULT_MODALITY

    name = _data_name(given, getattr(args, "recipe", None))
    modality = (modality_of({"data": {"name": name}}) if name in DATASETS
                else get_modality(DEFAULT_MODALITY))
    keys = modality.preset_keys(preset_path(args.preset))
    keys.pop("loss", None)  # per loss, below the recipe's and the flags' keys
    keys["data"] = {**given.get("data", {}), **keys["data"]}
    return {**given, **keys}


def _preset_loss_defaults(given: dict[str, Any], recipe_path: str | None) -> None:
    """``--preset``: the fine-tuning keys of the run's loss (``finetune_loss``: SimCSE's t
    0.05, ``tau_plus`` 0 for a loss with a debiasing clamp, which otherwise holds a
    pretrained start at its floor), for the keys neither a flag nor ``--recipe`` gives."""
    from keras_hardneg.encoders.pretrained_text import finetune_loss
    from keras_hardneg.registry import LOSSES

    file_loss: Any = {}
    if recipe_path:
        try:
            with open(recipe_path) as f:
                file_loss = json.load(f).get("loss") or {}
        except (OSError, ValueError, AttributeError):
            file_loss = {}  # load_recipe reports what is wrong with the file
    if isinstance(file_loss, str):
        file_loss = {"name": file_loss}
    if not isinstance(file_loss, dict):
        file_loss = {}
    loss = given.setdefault("loss", {})
    name = loss.get("name") or file_loss.get("name") or "nt_xent"
    if name not in LOSSES:
        return  # load_recipe names the allowed losses
    other = file_loss.get("name")
    if other is not None and (other not in LOSSES
                              or LOSSES.canonical(other) != LOSSES.canonical(name)):
        file_loss = {}  # another loss's keys: dropped with its name
    for key, value in finetune_loss(name).items():
        if key not in file_loss:
            loss.setdefault(key, value)


def recipe_from_args(args: argparse.Namespace) -> dict[str, Any]:
    from keras_hardneg.run import load_recipe

    if args.recipe and not os.path.isfile(args.recipe):
        raise CliError(f"--recipe {args.recipe!r}: file not found.")
    return load_recipe(args.recipe, overrides=recipe_overrides(args))
