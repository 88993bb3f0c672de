"""The ``keras-hardneg`` command line: ``train``, ``evaluate``, ``report``, ``export``,
``tune``, ``zoo``.

Every subcommand has ``--help``; the choices and help of the component flags come from
the registries. Errors in the user's input (a missing file, a bad recipe key, an
out-of-range flag) print one line naming the flag and the recipe key and exit with
status 2; no traceback (set ``KERAS_HARDNEG_DEBUG=1`` to see one). The CLI uses only
public functions of the package.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Sequence

__all__ = ["main", "build_parser", "CliError"]

EXIT_USAGE = 2


class CliError(Exception):
    """A user-facing error: printed as one line, exit status 2."""


# ----------------------------------------------------------------------- flags
def _number(kind: type, flag: str):
    def parse(text: str):
        try:
            return kind(text)
        except ValueError:
            what = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
    parse.__name__ = flag
    return parse


def _distribution(text: str) -> Any:
    """``--distribution``: a registered name, or a JSON object with ``name``."""
    if not text.lstrip().startswith("{"):
        return text
    try:
        return json.loads(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"must be a name or a JSON object ({e})") from None


def _positive_int(text: str) -> int:
    value = _number(int, "int")(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {value}")
    return value


# (section, key, applies-to help) of the component keys the CLI exposes as flags.
_SECTION_FLAGS = [
    ("loss", "temperature"), ("loss", "tau_plus"), ("loss", "beta"),
    ("loss", "lower_percentile"), ("loss", "upper_percentile"),
    ("encoder", "width"), ("optimizer", "learning_rate"), ("optimizer", "weight_decay"),
    ("framework", "queue_size"),
]
_RUN_FLAGS = ["epochs", "batch_size", "seed", "precision", "name"]
_COMPONENT_FLAGS = ["framework", "encoder", "loss", "sampler", "optimizer"]


def _flag(key: str) -> str:
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


def _recipe_key_flags() -> dict[str, str]:
    """recipe key -> the flag that sets it (to name both in errors)."""
    keys = {f"{section}.{key}": _flag(key) for section, key in _SECTION_FLAGS}
    keys.update({key: _flag(key) for key in _RUN_FLAGS})
    keys.update({f"{section}.name": _flag(section) for section in _COMPONENT_FLAGS})
    keys.update({"data.image_size": "--image-size", "data.limit_per_class": "--limit-per-class",
                 "data.data_dir": "--data-dir"})
    return keys


def _add_model_flags(p: argparse.ArgumentParser) -> None:
    from keras_hardneg.run import DEFAULT_RECIPE, RUN_PARAMS, SECTIONS

    g = p.add_argument_group("what to train (override the recipe)")
    g.add_argument("--recipe", help="JSON recipe file (e.g. one from models/); flags below "
                                    "override it")
    g.add_argument("--dataset", help="'digits' (embedded, default), 'tfds:NAME', an image "
                                     "folder (class subfolders, or train/ and test/ inside; a "
                                     "flat folder of unlabeled images trains without "
                                     "evaluation), a "
                                     "TU graph folder (graph recipe: GraphCL), or a .txt file of "
                                     "sentences (text recipe: SimCSE)")
    g.add_argument("--data-dir", help="where data fetched by name is cached (cifar10, "
                                      "tu:NAME, text:NAME; default ~/.keras/datasets) or "
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
    g.add_argument("--image-size", type=_number(int, "--image-size"),
                   help="resize images to this side (>= 8; default: the recipe's, else the "
                        "data's own size, 32 for image folders)")
    g.add_argument("--limit-per-class", type=_number(int, "--limit-per-class"),
                   help="image folders: use at most this many images per class (default: "
                        "all)")
    for section in _COMPONENT_FLAGS:
        g.add_argument(_flag(section), choices=SECTIONS[section].names(),
                       help=f"the {SECTIONS[section].kind} (default: the recipe's, else "
                            f"{DEFAULT_RECIPE[section]['name']})")
    for section, key in _SECTION_FLAGS:
        param, users = _section_param(section, key)
        g.add_argument(_flag(key), dest=key, type=_number(param.kind, _flag(key)),
                       help=_section_help(section, key))
    for key in _RUN_FLAGS:
        param = RUN_PARAMS[key]
        kind = param.kind if param.kind in (int, float) else str
        text = param.help.split(" (default")[0]
        g.add_argument(_flag(key), dest=key, choices=param.choices,
                       type=None if param.choices else _number(kind, _flag(key))
                       if kind is not str else str,
                       help=f"{text} (default: the recipe's, else {param.default!r})")


def _data_overrides(args: argparse.Namespace) -> dict[str, Any]:
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
                       f"tfds:NAME, tu:NAME, text:NAME); --dataset gives {spec['name']!r}.")
    return {**spec, "data_dir": data_dir}


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The recipe keys set by the flags."""
    given: dict[str, Any] = _data_overrides(args)
    if getattr(args, "preset", None):
        given = _with_preset(given, args)
    if getattr(args, "benchmark_dir", None):
        if not os.path.isdir(args.benchmark_dir):
            raise CliError(f"--benchmark-dir {args.benchmark_dir!r}: no such folder.")
        given["evaluation"] = {"benchmark_dir": os.path.abspath(args.benchmark_dir)}
    for key in _RUN_FLAGS:
        if getattr(args, key) is not None:
            given[key] = getattr(args, key)
    for section in _COMPONENT_FLAGS:
        if getattr(args, section) is not None:
            given[section] = {"name": getattr(args, section)}
    if getattr(args, "preset", None):  # the loss's fine-tuning keys (t 0.05, tau_plus 0)
        _preset_loss_defaults(given, getattr(args, "recipe", None))
    for section, key in _SECTION_FLAGS:
        if getattr(args, key) is not None:
            given.setdefault(section, {})[key] = getattr(args, key)
    return given


def _preset_path(flag_value: str) -> str:
    from keras_hardneg.encoders.pretrained_text import check_preset

    try:
        check_preset(flag_value)
    except ValueError as e:
        raise CliError(f"--preset {flag_value!r}: {e}") from None
    return os.path.abspath(flag_value) if os.path.isdir(flag_value) else flag_value


def _with_preset(given: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """``--preset``: the pretrained encoder, its tokenizer and SimCSE's fine-tuning keys."""
    from keras_hardneg.encoders.pretrained_text import finetune_recipe

    keys = finetune_recipe(_preset_path(args.preset))
    keys.pop("loss")  # per loss, below the recipe's and the flags' keys: _preset_loss_defaults
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


def _recipe_from_args(args: argparse.Namespace) -> dict[str, Any]:
    from keras_hardneg.run import load_recipe

    if args.recipe and not os.path.isfile(args.recipe):
        raise CliError(f"--recipe {args.recipe!r}: file not found.")
    return load_recipe(args.recipe, overrides=_overrides(args))


def _print_summary(title: str, rows: list[tuple[str, Any]]) -> None:
    width = max(len(k) for k, _ in rows)
    print(f"\n== {title} ==")
    for key, value in rows:
        print(f"  {key.ljust(width)}  {value}")


# -------------------------------------------------------------------- commands
def cmd_train(args: argparse.Namespace) -> int:
    from keras_hardneg import run
    from keras_hardneg.modalities import modality_of

    recipe = _recipe_from_args(args)
    output = _output_folder(args.output or os.path.join("runs", recipe["name"]), create=False)
    print(f"keras-hardneg train: {recipe['framework']['name']} + {recipe['loss']['name']} on "
          f"{recipe['data']['name']}{_image_size_note(recipe)}, {recipe['epochs']} epochs -> "
          f"{output}", flush=True)
    from keras_hardneg.callbacks import BackupError

    try:
        verbose = args.verbose if args.verbose is not None else (  # no \r in log files
            1 if sys.stdout.isatty() else 2)
        result = run.train(recipe, output, resume=not args.no_resume, verbose=verbose,
                           export=not args.no_export, distribution=args.distribution,
                           report=not args.no_report)
    except (BackupError, run.RecipeError) as e:  # the API's words -> the flags
        raise CliError(str(e).replace("resume=False", "--no-resume")
                       .replace("choose another output folder", "another --output")
                       .replace("give another output folder", "give another --output")) from None
    if "worker" in result:  # a multi-worker run's other workers: the chief reports
        print(f"keras-hardneg train: worker {result['worker']} done ({result['epochs_run']} "
              f"epochs); the chief wrote {output}")
        return 0
    modality = modality_of(recipe)
    speed = result.get(modality.throughput_key)
    rows = [
        ("data", result["data"]),
        ("epochs run", result["epochs_run"]),
        ("wall time", f"{result['seconds']:.1f} s"),
        (modality.throughput_label, f"{speed:.1f}"
         if speed else "n/a (nothing left to train: the run was complete)"),
    ] + _figure_rows(result, recipe, modality)
    missing = modality.missing_evaluation(recipe)
    if isinstance(result.get("evaluation"), str):  # unlabeled images: evaluation off
        rows.append(("evaluation", result["evaluation"]))
    elif missing:
        rows.append(("evaluation", missing))
    from keras_hardneg.run.report.progress import clamp_warning

    warning = clamp_warning(result.get("history") or {})
    if warning:
        rows.append(("warning", warning))
    rows += [(label, os.path.join(output, name)) for label, name in (
        ("run directory", ""), ("recipe", "recipe.json"), ("history", "history.json"),
        ("history plot", "history.png"), ("results", "results.json"),
        ("run report", "report.html"),
        ("resume state", "backup")) if name not in ("history.png", "report.html")
        or os.path.isfile(os.path.join(output, name))]
    if result.get("export_dir"):
        rows += [("exported encoder", result["export_dir"]),
                 ("model card", os.path.join(result["export_dir"], "model_card.md"))]
    _print_summary("done", rows)
    return 0


def _image_size_note(recipe: dict[str, Any]) -> str:
    """``" (images resized to 32x32)"`` for data that takes ``image_size`` (images); ""
    for graphs and text."""
    from keras_hardneg.registry import DATASETS

    data = recipe["data"]
    if "image_size" not in DATASETS.get(data["name"]).params:
        return ""
    size = data.get("image_size")
    if size:
        return f" (images resized to {size}x{size})"
    return " (images at their own size)"


def _output_folder(path: str, flag: str = "--output", create: bool = True) -> str:
    """``path`` made absolute, checked writable (a file or a read-only place: one line);
    ``create=False`` leaves a missing folder to the command (``train`` makes it)."""
    from keras_hardneg.run.resume import OutputDirError, check_output_dir

    try:
        return check_output_dir(path, flag, create=create)
    except OutputDirError as e:
        raise CliError(str(e)) from None


def _figure_rows(result: dict[str, Any], recipe: dict[str, Any] | None,
                 modality: Any = None) -> list:
    """Summary rows of a modality's figures (its own names: ``Modality.summary_rows``);
    the modality is ``modality``, else the recipe's, else the one ``result`` names."""
    from keras_hardneg.modalities import modality_of, modality_of_results

    if modality is None:
        modality = (modality_of(recipe) if recipe and "data" in recipe
                    else modality_of_results(result))
    return modality.summary_rows(result, recipe)


def _seed_rows(name: str, results: dict[str, Any], recipe: dict[str, Any] | None) -> list:
    """``zoo show``: the figures over seeds, the baseline and the twin named by
    ``results.json`` (entries trained at several seeds)."""
    from keras_hardneg import zoo_figures as zf

    fields = zf.index_fields(results, recipe)
    rows = []
    if (results.get("seeds") or {}).get("per_seed"):
        rows.append(("over seeds", "; ".join(
            f"{zf.METRICS[k][0]} {zf.format_summary(k, v)}" for k, v in
            fields["metrics"].items()) + f" (weights: seed {fields['weights_seed']})"))
    if fields["baseline"]:
        rows.append(("before training", "; ".join(
            f"{zf.METRICS[k][0]} {zf.format_summary(k, v)}"
            for k, v in fields["baseline"]["metrics"].items())
            + f" ({fields['baseline']['what']})"))
    if fields["twin_name"]:
        rows.append(("NT-Xent twin", f"{fields['twin_name']} (keras-hardneg zoo compare "
                                     f"{name} {fields['twin_name']})"))
    return rows


def _print_comparison(table: dict[str, Any]) -> None:
    """``zoo compare A B``: the two entries' rows in columns."""
    a, b = table["names"]
    rows = [("", a, b, "")] + table["setting"] + table["metrics"]
    notes = []
    for label, va, vb, what in table["baseline"]:
        rows.append((label, va, vb, ""))
        if what and what not in notes:
            notes.append(what)
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    w2 = max(len(r[2]) for r in rows)
    for label, va, vb, note in rows:
        print(f"{label:{w0}s}  {va:{w1}s}  {vb:{w2}s}  {note}".rstrip())
    for note in notes:
        print(f"before training: {note}")


def cmd_evaluate(args: argparse.Namespace) -> int:
    from keras_hardneg import run
    from keras_hardneg.registry import EVALUATIONS

    knn = {k: v for k, v in (("k", args.k), ("temperature", args.temperature)) if v is not None}
    try:
        EVALUATIONS.check("knn", knn)
    except ValueError as e:
        flag = "--temperature" if "'temperature'" in str(e) else "--k"
        raise CliError(f"{flag}: {e}") from None
    if args.preset:
        return _evaluate_preset(args)
    if args.encoder is None:
        raise CliError("give an encoder (a run or SavedModel directory) or --preset DIR.")
    path = os.path.abspath(args.encoder)
    if not os.path.exists(path):
        path = _zoo_entry_folder(args.encoder)
    if args.recipe and not os.path.isfile(args.recipe):
        raise CliError(f"--recipe {args.recipe!r}: file not found.")
    if args.benchmark_dir and not os.path.isdir(args.benchmark_dir):
        raise CliError(f"--benchmark-dir {args.benchmark_dir!r}: no such folder.")
    overrides = _data_overrides(args)
    if args.seed is not None:
        overrides["seed"] = args.seed
    evaluation = {key: value for key, value in (
        ("knn_k", args.k), ("knn_temperature", args.temperature),
        ("linear_probe", False if args.no_linear_probe else None)) if value is not None}
    if evaluation:
        overrides["evaluation"] = evaluation
    recipe = args.recipe
    if recipe is None and args.dataset:
        recipe = {}  # the data's own default recipe: not the run's
    start = time.perf_counter()
    try:
        result, info = run.evaluate_directory(
            path, recipe=recipe, overrides=overrides or None,
            benchmark_dir=args.benchmark_dir, senteval=args.senteval,
            max_tokens=args.max_tokens)
    except run.RunDirectoryError as e:
        raise CliError(str(e)) from None
    from keras_hardneg.modalities import get_modality

    modality = get_modality(info["modality"])
    rows = [("encoder", info["encoder"]), ("modality", info["modality"]),
            ("data", info.get("data"))] + _figure_rows(result, info.get("recipe"), modality)
    card_path = os.path.join(info["encoder"], "model_card.json")
    if os.path.isfile(card_path):
        with open(card_path) as f:
            card = json.load(f)
        for figure in modality.figures:  # the figures the card records beside its own
            if figure.key in result and isinstance(card.get(figure.key), (int, float)):
                rows.append((f"model card {figure.short or figure.label}",
                             f"{card[figure.key]:.4f}"))
    rows.append(("time", f"{time.perf_counter() - start:.1f} s"))
    return _print_evaluation(rows, result, dict(rows[:3]), args.json)


def _print_evaluation(rows: list, result: dict[str, Any], about: dict[str, Any],
                      as_json: bool) -> int:
    """The evaluation's summary block, or with ``--json`` only one JSON document on
    stdout: the figures plus what was evaluated (``about``: encoder, modality, data; a
    figure's key wins)."""
    if as_json:
        print(json.dumps({**about, **result}), flush=True)
    else:
        _print_summary("evaluation", rows)
    return 0


def _zoo_entry_folder(name: str) -> str:
    """``evaluate NAME``: the folder of zoo entry ``NAME`` (fetched when a zoo URL is set)."""
    from keras_hardneg import zoo

    try:
        known = zoo.entries()
    except zoo.ZooError:
        known = {}
    if name not in known:
        raise CliError(f"encoder {name!r}: no such SavedModel or run directory, and not a zoo "
                       "entry (`keras-hardneg zoo list`).")
    try:
        return zoo.entry_folder(name)
    except zoo.ZooError as e:
        raise CliError(str(e)) from None


def _evaluate_preset(args: argparse.Namespace) -> int:
    """``evaluate --preset DIR``: the pretrained encoder as it is (zero-shot) on STS."""
    from keras_hardneg.data import pretrained_tokenizer
    from keras_hardneg.encoders import pretrained_text
    from keras_hardneg.modalities.text import (TextModality, evaluate_sentences,
                                               evaluation_length, sentence_embedder)

    if args.encoder is not None:
        raise CliError(f"--preset: give either an encoder ({args.encoder!r}) or --preset, "
                       "not both.")
    if not args.benchmark_dir or not os.path.isdir(args.benchmark_dir):
        raise CliError(f"--benchmark-dir {args.benchmark_dir!r}: a pretrained text encoder is "
                       "scored on the STS sets: give their folder (SentEval's layout: "
                       "STS/, SICK/, ...; SimCSE's senteval.tar holds it).")
    preset = _preset_path(args.preset)
    start = time.perf_counter()
    tokenizer = pretrained_tokenizer(preset)
    encoder = pretrained_text(input_shape=(None,), preset=preset,
                              vocab_size=tokenizer.vocab_size, pooling=args.pooling)
    result = evaluate_sentences(
        sentence_embedder(encoder, tokenizer, evaluation_length(encoder, 0, args.max_tokens)),
        os.path.abspath(args.benchmark_dir), senteval=args.senteval,
        seed=0 if args.seed is None else args.seed)
    rows = [("encoder", f"{preset} (pretrained, {args.pooling} pooling, zero-shot)"),
            ("modality", TextModality.name)] + _figure_rows(result, None, TextModality())
    rows.append(("time", f"{time.perf_counter() - start:.1f} s"))
    return _print_evaluation(rows, result, dict(rows[:2]), args.json)


def cmd_report(args: argparse.Namespace) -> int:
    from keras_hardneg import run
    from keras_hardneg.run.report.run_report import report_target

    if args.recipe and not os.path.isfile(args.recipe):
        raise CliError(f"--recipe {args.recipe!r}: file not found.")
    overrides = _data_overrides(args)
    if args.recipe:
        with open(args.recipe) as f:
            given = json.load(f)
        overrides = {**({"data": given["data"]} if "data" in given else {}), **overrides}
    output = os.path.abspath(args.output) if args.output else None
    if output is not None:
        _output_folder(os.path.dirname(output), "--output's folder")
    start = time.perf_counter()
    try:
        out = report_target(args.target, overrides=overrides or None, output=output)
    except (run.RunDirectoryError, FileExistsError) as e:
        raise CliError(str(e)) from None
    _print_summary("report", [
        (out["kind"], args.target), ("report", out["path"]),
        ("size", f"{out['bytes'] / 1024:.0f} KB (one self-contained file: open it in a "
                 "browser)"),
        ("time", f"{time.perf_counter() - start:.1f} s")])
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from keras_hardneg import run

    from keras_hardneg.export.write import check_replaceable

    output = os.path.abspath(args.output or os.path.join(args.run_dir, "encoder"))
    if os.path.lexists(output) and not args.overwrite:
        raise CliError(f"--output {output!r} exists; pass --overwrite to replace it.")
    if os.path.lexists(output):
        try:
            check_replaceable(output)
        except FileExistsError as e:
            raise CliError(f"--output: {e}") from None
    _output_folder(os.path.dirname(output), "--output's folder")
    model, recipe, results, description, train = run.restore_run(args.run_dir, with_data=True)
    results.setdefault("epochs_run", None)
    run.export_trained_encoder(model, recipe, results, description, output, x_train=train[0],
                               run_dir=os.path.abspath(args.run_dir))
    _print_summary("exported", [("encoder", output),
                                ("model card", os.path.join(output, "model_card.md"))])
    return 0


def cmd_tune(args: argparse.Namespace) -> int:
    from keras_hardneg import tuning
    from keras_hardneg.tuning import records

    _output_folder(args.output)
    kwargs = dict(dataset=args.dataset, trials=args.trials, epochs=args.epochs, tuner=args.tuner,
                  output=args.output, loss=args.loss, framework=args.framework,
                  objective=args.objective, seed=args.seed, resume=not args.no_resume)
    if args.batch_size is not None:
        kwargs["batch_size"] = args.batch_size
    if args.limit_per_class is not None:
        kwargs["limit_per_class"] = args.limit_per_class
    trials = tuning.run_search(**kwargs)
    rows = [("trials", len(trials))]
    best = records.best(trials)
    if best is not None:  # numbered from 1, as Keras Tuner prints them
        with open(os.path.join(args.output, "search.json")) as f:
            values, command = records.train_command(best, json.load(f))
        rows += [("best trial", f"#{records.trial_number(best['trial_id'])}: "
                                f"{best['objective_name']} {best['objective']:.4f}"),
                 ("best values", values),
                 ("train with", command or "the knobs have no flags: set them in a recipe "
                                           "(--recipe)")]
    rows.append(("results", os.path.join(args.output, "results.json")))
    _print_summary("tuning done", rows)
    if best is not None and command:
        print(f"  (trials ran {args.epochs} epochs each; add --epochs N for the full run)")
    return 0


# ---------------------------------------------------------------------- parser
def _print_zoo_list(zoo: Any, recipes: bool) -> None:
    """``zoo list``: the entries with weights, where each is (here, cached, to fetch); with
    ``recipes`` the recipe-only entries in a second table."""
    from keras_hardneg import zoo_store

    kind, where = zoo.zoo_source()
    rows = zoo.catalog()
    weights = [r for r in rows if r["status"] == "weights"]
    place = {"local": "here", "cached": "cached", "fetch": "fetch", "unavailable": "not here",
             "damaged": "damaged"}
    print(f"{'entry':38s} {'modality':8s} {'features':>8s} {'parameters':>11s} {'weights':7s} "
          f"{'size':>8s}  where")
    for r in weights:
        print(f"{r['name']:38s} {r['modality']:8s} {r['output_dim'] or '-':>8} "
              f"{r['parameter_count'] or 0:>11,} {r['weights_dtype'] or '-':7s} "
              f"{r['size'] / 1e6:>5.1f} MB  {place.get(r['where'], r['where'])}")
    if not weights:
        print("(no entry with weights)")
    print()
    seen = {r["where"] for r in weights}
    if kind == "folder":
        print(f"here: the zoo folder {where}")
    if "cached" in seen:  # a legend only for what the table shows
        print(f"cached: in {zoo_store.cache_root()} (verified; no request)")
    if "fetch" in seen:
        print(f"fetch: from {where} at the first zoo.load, each file checked against the "
              "index shipped with keras-hardneg")
    if "damaged" in seen:
        print("damaged: files differ from the index (the zoo folder's, or the cached copy: "
              + (f"fetched again at the next zoo.load)" if kind == "url" else
                 f"set {zoo.ZOO_ENV} to fetch it again, or delete it)"))
    if "unavailable" in seen:
        print(f"not here: set {zoo.ZOO_ENV} to a URL or folder of the zoo (a copy of the "
              "repository's models/, or what `keras-hardneg zoo publish` writes) to fetch")
    recipe_rows = [r for r in rows if r["status"] != "weights"]
    if recipes:
        print(f"\nRecipes without weights ({len(recipe_rows)}; train one from a clone with "
              "keras-hardneg train --recipe models/ENTRY/recipe.json --output RUN):")
        print(f"{'entry':38s} {'modality':8s} why no weights")
        for r in recipe_rows:
            print(f"{r['name']:38s} {r['modality']:8s} {r.get('why_no_weights', '-')}")
    elif recipe_rows:
        print(f"({len(recipe_rows)} recipe-only entries: zoo list --all)")
    _print_twins(weights)


def _print_twins(rows: list[dict[str, Any]]) -> None:
    """``zoo list``: each entry with an NT-Xent twin beside it, the headline figure over
    seeds and the difference, saying whether it is inside the seeds' spread."""
    from keras_hardneg import zoo_figures as zf

    twins = [r for r in rows if r.get("twin")]
    if not twins:
        return
    by_name = {r["name"]: r for r in rows}
    print("\nTwins (mean ± std over seeds (n); the difference is inside the spread when the "
          "seeds of either entry vary as much; `zoo compare A B` for the rest):")
    print(f"  {'entry':40s} {'figure':>17s}   {'NT-Xent twin':32s} {'twin':>17s}   difference")
    for r in twins:
        t = r["twin"]
        metric = t["metric"]
        print(f"- {r['name']:40s} {zf.format_summary(metric, r['metrics'][metric]):>17s}   "
              f"{t['name']:32s} "
              f"{zf.format_summary(metric, by_name[t['name']]['metrics'].get(metric)):>17s}   "
              f"{zf.verdict(metric, t)}")


def cmd_zoo(args: argparse.Namespace) -> int:
    from keras_hardneg import zoo

    try:
        if args.action == "list":
            if args.json:
                print(json.dumps(zoo.catalog() if args.all else zoo.list()))
            else:
                _print_zoo_list(zoo, args.all)
            return 0
        if not args.name:
            raise CliError(f"zoo {args.action}: give NAME (one of `keras-hardneg zoo list`).")
        if args.action == "compare":
            if not args.directory:
                raise CliError("zoo compare: give two entries, A B (e.g. graphcl-hard-mutag "
                               "graphcl-ntxent-mutag).")
            table = zoo.compare(args.name, args.directory)
            if args.json:
                print(json.dumps(table))
            else:
                _print_comparison(table)
            return 0
        if args.action == "show":
            info = zoo.show(args.name)
            if args.json:
                print(json.dumps(info, default=str))
                return 0
            meta, results = info["preset"], info["results"] or {}
            from keras_hardneg import zoo_store
            from keras_hardneg.export.preset import image_contract, uses_keras_hub

            if info["path"]:
                rows = [("path", info["path"])]
            else:  # shown from the index: nothing fetched
                rows = [("where", {"fetch": f"not fetched yet ({info['size'] / 1e6:.1f} MB "
                                            "at the first zoo.load)",
                                   "unavailable": f"not here (set {zoo.ZOO_ENV} to fetch "
                                                  "it)",
                                   "damaged": "cached copy damaged"}.get(info["where"],
                                                                         info["where"]))]
            rows += [("modality", meta["modality"]), ("input", meta["input"])]
            contract = image_contract(meta["path"]) if meta.get("path") else None
            if contract:
                rows.append(("images", contract))
            hub = (uses_keras_hub(meta["path"]) if meta.get("path") else
                   "keras_hub" in meta.get("needs", []))
            if hub:
                rows.append(("needs", "keras-hub (the [pretrained] extra); keras-hub imports "
                                      "TensorFlow when it is installed, also under JAX"))
            rows += [("features", meta["output_dim"]),
                    ("parameters", f"{meta['parameter_count']:,}"),
                    ("weights", meta["weights_dtype"])]
            from keras_hardneg.modalities import get_modality

            modality = get_modality(meta["modality"])
            figure_rows = _figure_rows(results, info.get("recipe"), modality)
            rows += figure_rows or [("figures", info.get("figures") or zoo_store.figures_text(
                results, meta["modality"]))]
            rows += _seed_rows(args.name, results, info.get("recipe"))
            if results.get("epochs_run") is not None:
                rows.append(("epochs run", results["epochs_run"]))
            rows.append(("load", f"keras_hardneg.zoo.load({args.name!r})"))
            _print_summary(args.name, rows)
            return 0
        if not args.directory:
            raise CliError(f"zoo {args.action}: give NAME DIR (the folder to write).")
        if args.action == "publish":
            out = zoo.publish(args.name, args.directory, overwrite=args.overwrite)
            files = sorted(os.path.relpath(os.path.join(r, f), out)
                           for r, _, fs in os.walk(out) for f in fs)
            _print_summary("published", [
                ("entry folder", out), ("files", ", ".join(files)),
                ("host it", f"upload the content of {os.path.dirname(out)} to a static host; "
                            f"then {zoo.ZOO_ENV}=URL fetches {args.name} from URL/{args.name}/"),
                ("index record", f"{os.path.join(out, 'zoo_record.json')} (an entry new to "
                                 "the zoo also needs it in keras_hardneg/zoo_index.json)")])
            return 0
        if os.path.lexists(args.directory) and not args.overwrite:
            raise CliError(f"zoo export: {os.path.abspath(args.directory)} already exists; "
                           "pass --overwrite to replace it (an export of keras-hardneg only).")
        out = zoo.export(args.name, args.directory, overwrite=args.overwrite)
    except (zoo.ZooError, zoo.PresetError, FileExistsError) as e:
        raise CliError(str(e)) from None
    _print_summary("exported", [("SavedModel (TF Hub)", out),
                                ("Keras preset", os.path.join(out, "preset"))])
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The ``keras-hardneg`` argument parser (component choices from the registries)."""
    from keras_hardneg.registry import EVALUATIONS
    from keras_hardneg.run import SECTIONS
    from keras_hardneg.tuning import OBJECTIVES, TUNERS

    parser = argparse.ArgumentParser(
        prog="keras-hardneg",
        description="Self-supervised contrastive pre-training with principled negatives "
                    "(Keras 3).")
    from keras_hardneg import __version__

    parser.add_argument("--version", action="version", version=f"keras-hardneg {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("train", help="pre-train an encoder, evaluate it and export it",
                       description="Pre-train with a recipe and/or flags. With no arguments: "
                                   "SimCLR with hard negatives on the embedded digits dataset "
                                   "(no download).")
    _add_model_flags(p)
    p.add_argument("--output", help="run directory (default runs/NAME); rerunning resumes it")
    p.add_argument("--no-resume", action="store_true",
                   help="start over even if OUTPUT has a backup")
    p.add_argument("--no-export", action="store_true", help="do not write the SavedModel")
    p.add_argument("--no-report", action="store_true",
                   help="do not score the negatives probe each epoch nor write report.html "
                        "(`keras-hardneg report OUTPUT` writes a page later, without the "
                        "per-epoch probe)")
    p.add_argument("--verbose", type=int, choices=[0, 1, 2], default=None,
                   help="1: a progress bar per epoch, 2: one line per epoch, 0: silent "
                        "(default: 1 on a terminal, 2 when the output goes to a file or "
                        "pipe); lines show the loss and the kNN monitor, every metric is "
                        "in history.json")
    p.add_argument("--distribution", type=_distribution, default=None,
                   metavar="NAME_OR_JSON",
                   help="spread the run over processes: a registered distribution "
                        "(tf_multi_worker reads TF_CONFIG) or a JSON object, e.g. "
                        "'{\"name\": \"tf_multi_worker\", \"workers\": \"h1:port,h2:port\", "
                        "\"task_index\": 0}'; run the same command in every worker, "
                        "same --output (a shared directory)")
    p.set_defaults(func=cmd_train)

    knn = EVALUATIONS.get("knn").params
    p = sub.add_parser("evaluate", help="evaluate an exported encoder or a run (any modality)",
                       description=f"Images: weighted kNN (k={knn['k'].default}, "
                                   f"t={knn['temperature'].default}) and a logistic-regression "
                                   "probe on frozen features (train split -> test split). "
                                   "Graphs: 10-fold SVM accuracy on frozen graph embeddings. "
                                   "Sentences: STS Spearman (and SentEval with --senteval) on "
                                   "the sets under --benchmark-dir. With --json the last stdout "
                                   "line is the result as one JSON object.")
    p.add_argument("encoder", nargs="?", help="SavedModel directory written by export/train, "
                                              "a run directory, or a zoo entry's name (or "
                                              "--preset instead)")
    p.add_argument("--preset", help="text: score this pretrained BERT-family checkpoint as it "
                                    "is (zero-shot; a Hugging Face-format folder or a keras-hub "
                                    "preset) on the sets under --benchmark-dir")
    p.add_argument("--pooling", choices=["mean", "cls"], default="mean",
                   help="with --preset: mean over tokens (default) or the [CLS] position")
    p.add_argument("--recipe", help="take the data from this recipe (default: recipe.json of "
                                    "the run)")
    p.add_argument("--dataset", help="'digits', 'tfds:NAME', an image folder or a TU graph "
                                     "folder (default: the run's data)")
    p.add_argument("--data-dir", help="where data fetched by name is cached or prepared "
                                      "(as for train)")
    p.add_argument("--benchmark-dir", help="text: folder of the STS/SentEval sets (SentEval's "
                                           "layout: STS/, SICK/, ...)")
    p.add_argument("--senteval", action="store_true",
                   help="text: also run SentEval (MR, CR, SUBJ, MPQA, TREC, MRPC)")
    p.add_argument("--max-tokens", type=_number(int, "--max-tokens"),
                   help="text, an encoder that reads any length (a pretrained BERT): cut "
                        "sentences at this many token ids (default: whole sentences, up "
                        "to 128)")
    p.add_argument("--image-size", type=_number(int, "--image-size"),
                   help="resize the images to this side (default: the run's, else the "
                        "data's own size)")
    p.add_argument("--limit-per-class", type=_number(int, "--limit-per-class"),
                   help="image folders: at most this many images per class (default: the "
                        "run's, else all)")
    p.add_argument("--k", type=_positive_int,
                   help=f"{knn['k'].help} (default: the run's, else {knn['k'].default})")
    p.add_argument("--temperature", type=_number(float, "--temperature"),
                   help=f"{knn['temperature'].help} (default: the run's, else "
                        f"{knn['temperature'].default})")
    p.add_argument("--no-linear-probe", action="store_true",
                   help="images: kNN only, skip the logistic-regression probe")
    p.add_argument("--seed", type=_number(int, "--seed"),
                   help="seed of the data split and the probe (default: the run's, else 0)")
    p.add_argument("--json", action="store_true",
                   help="print only the result, as one JSON document (stdout parses as JSON)")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("report", help="write report.html: what a run's negatives did, as a "
                                      "page to open in a browser",
                       description="Write the run report of a run directory (RUN/report.html; "
                                   "`train` writes it too) or of a zoo entry (a folder or an "
                                   "entry name, with the data given: --dataset; written to "
                                   "ENTRY-report.html here unless --output). One "
                                   "self-contained HTML file: the recipe, the figures beside "
                                   "the starting encoder's, the curves per epoch, what the "
                                   "negatives did (similarity histograms, the loss's weight "
                                   "of each negative, effective number of negatives, "
                                   "same-class negatives) and the modality's own views "
                                   "(nearest neighbours, 2-D map, nearest sentences).")
    p.add_argument("target", help="a run directory, a zoo entry folder or a zoo entry name")
    p.add_argument("--dataset", help="the data: 'digits', 'tfds:NAME', an image folder, a TU "
                                     "graph folder or a text file (default: the run's; a zoo "
                                     "entry's recipe names data of its own machine)")
    p.add_argument("--recipe", help="take the data section from this recipe")
    p.add_argument("--image-size", type=_number(int, "--image-size"),
                   help="resize the images to this side (default: the recipe's)")
    p.add_argument("--limit-per-class", type=_number(int, "--limit-per-class"),
                   help="image folders: at most this many images per class")
    p.add_argument("--output", help="the page to write (default: RUN/report.html, or "
                                    "./ENTRY-report.html for a zoo entry)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("export", help="export the encoder of a training run as a SavedModel",
                       description="Rebuild a run from RUN_DIR/recipe.json and its last "
                                   "checkpoint and write a reusable TF2 SavedModel (TF Hub "
                                   "format) + model card.")
    p.add_argument("run_dir", help="directory written by `keras-hardneg train`")
    p.add_argument("--output", help="SavedModel directory to write (atomically; default "
                                    "RUN_DIR/encoder)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace OUTPUT if it is an encoder exported by keras-hardneg (any "
                        "other folder is refused)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("zoo", help="pretrained encoders: list, show, export, publish",
                       description="The model zoo: $KERAS_HARDNEG_ZOO (a folder or a URL; an "
                                   "entry from a URL is fetched once into "
                                   "~/.keras/keras_hardneg/zoo, checked against the index "
                                   "shipped with the package), else models/ of a clone, else "
                                   "that cache. `zoo list` names the entries with weights and "
                                   "where each is (--all: the recipes too), `zoo show NAME` "
                                   "what one is, `zoo compare A B` two entries' figures "
                                   "side by side (over seeds, with the difference), "
                                   "`zoo export NAME DIR` writes its TF Hub "
                                   "SavedModel (TensorFlow backend), `zoo publish NAME DIR` "
                                   "the folder to upload to host it. In Python: "
                                   "keras_hardneg.zoo.load(NAME) gives a trainable "
                                   "keras.Model under TensorFlow or JAX.")
    p.add_argument("action", choices=("list", "show", "compare", "export", "publish"),
                   help="list the entries, show NAME, compare A B, export NAME DIR, or "
                        "publish NAME DIR")
    p.add_argument("name", nargs="?", help="entry name (show, export, publish; compare: A)")
    p.add_argument("directory", nargs="?",
                   help="folder to write: the SavedModel (export), the hosting folder "
                        "(publish); compare: the second entry B")
    p.add_argument("--overwrite", action="store_true",
                   help="export/publish: replace what keras-hardneg wrote there before "
                        "(default: refuse; other files are never replaced)")
    p.add_argument("--all", action="store_true",
                   help="list: the recipe-only entries too, in a second table")
    p.add_argument("--json", action="store_true", help="list/show/compare: print JSON")
    p.set_defaults(func=cmd_zoo)

    p = sub.add_parser("tune", help="Keras Tuner search over the loss's hyper-parameters",
                       description="Search the loss's hyper-parameters (beta and tau_plus for "
                                   "the hard loss) for the best kNN accuracy on a validation "
                                   "split; writes OUTPUT/results.json and a plot.")
    p.add_argument("--dataset", default="digits",
                   help="'digits' (default), 'tfds:NAME' or an image folder")
    p.add_argument("--limit-per-class", type=_positive_int,
                   help="image folders: at most this many images per class (default: all)")
    p.add_argument("--trials", type=_positive_int, default=8, help="number of trials (default 8)")
    p.add_argument("--epochs", type=_positive_int, default=3, help="epochs per trial (default 3)")
    p.add_argument("--tuner", choices=TUNERS, default=TUNERS[0],
                   help=f"Keras Tuner search algorithm (default {TUNERS[0]})")
    p.add_argument("--objective", choices=list(OBJECTIVES), default=next(iter(OBJECTIVES)),
                   help="validation accuracy to maximise: weighted kNN or the linear probe "
                        f"(default {next(iter(OBJECTIVES))})")
    p.add_argument("--loss", choices=SECTIONS["loss"].names(),
                   help="loss whose hyper-parameters are searched (default: the recipe's)")
    p.add_argument("--framework", choices=SECTIONS["framework"].names(),
                   help="default: the recipe's")
    p.add_argument("--batch-size", type=_positive_int,
                   help="batch size of every trial (default: the recipe's, 128)")
    p.add_argument("--seed", type=_number(int, "--seed"), default=0,
                   help="seed of the split and the trials (default 0)")
    p.add_argument("--output", required=True,
                   help="directory for results.json, the plot and the tuner state")
    p.add_argument("--no-resume", action="store_true",
                   help="start a new search even if OUTPUT has one")
    p.set_defaults(func=cmd_tune)
    return parser


def _with_flag(message: str) -> str:
    """Prefixes a recipe error with the flag that sets the key it names."""
    for key, flag in _recipe_key_flags().items():
        if f"'{key}'" in message:
            return f"{flag}: {message}"
    return message


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit status (2 for bad input)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    from keras_hardneg.data import TensorFlowBackendRequiredError, TensorFlowRequiredError

    try:
        return args.func(args)
    except (CliError, FileNotFoundError, ValueError, TensorFlowRequiredError,
            TensorFlowBackendRequiredError) as e:
        if os.environ.get("KERAS_HARDNEG_DEBUG"):
            raise
        print(f"keras-hardneg {args.command}: error: {_with_flag(str(e))}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        if sys.stdout.isatty():  # end the progress bar's line: the message gets its own
            print(flush=True)
        print(f"keras-hardneg {args.command}: interrupted; rerun the same command to resume.",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
