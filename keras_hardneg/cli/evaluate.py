"""``keras-hardneg evaluate``: the figures of an exported encoder, a run, a zoo entry or a
pretrained text checkpoint."""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from keras_hardneg.cli.errors import CliError
from keras_hardneg.cli.flags import number, positive_int
from keras_hardneg.cli.output import figure_rows, print_summary
from keras_hardneg.cli.overrides import data_overrides, preset_path


def add_parser(sub: Any) -> None:
    """Adds ``evaluate`` to the subcommands ``sub``."""
    from keras_hardneg.registry import EVALUATIONS

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
    p.add_argument("--max-tokens", type=number(int, "--max-tokens"),
                   help="text, an encoder that reads any length (a pretrained BERT): cut "
                        "sentences at this many token ids (default: whole sentences, up "
                        "to 128)")
    p.add_argument("--image-size", type=number(int, "--image-size"),
                   help="resize the images to this side (default: the run's, else the "
                        "data's own size)")
    p.add_argument("--limit-per-class", type=number(int, "--limit-per-class"),
                   help="image folders: at most this many images per class (default: the "
                        "run's, else all)")
    p.add_argument("--k", type=positive_int,
                   help=f"{knn['k'].help} (default: the run's, else {knn['k'].default})")
    p.add_argument("--temperature", type=number(float, "--temperature"),
                   help=f"{knn['temperature'].help} (default: the run's, else "
                        f"{knn['temperature'].default})")
    p.add_argument("--no-linear-probe", action="store_true",
                   help="images: kNN only, skip the logistic-regression probe")
    p.add_argument("--seed", type=number(int, "--seed"),
                   help="seed of the data split and the probe (default: the run's, else 0)")
    p.add_argument("--json", action="store_true",
                   help="print only the result, as one JSON document (stdout parses as JSON)")
    p.set_defaults(func=cmd_evaluate)


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
    overrides = data_overrides(args)
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
            ("data", info.get("data"))] + figure_rows(result, info.get("recipe"), modality)
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
        print_summary("evaluation", rows)
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
    preset = preset_path(args.preset)
    start = time.perf_counter()
    tokenizer = pretrained_tokenizer(preset)
    encoder = pretrained_text(input_shape=(None,), preset=preset,
                              vocab_size=tokenizer.vocab_size, pooling=args.pooling)
    result = evaluate_sentences(
        sentence_embedder(encoder, tokenizer, evaluation_length(encoder, 0, args.max_tokens)),
        os.path.abspath(args.benchmark_dir), senteval=args.senteval,
        seed=0 if args.seed is None else args.seed)
    rows = [("encoder", f"{preset} (pretrained, {args.pooling} pooling, zero-shot)"),
            ("modality", TextModality.name)] + figure_rows(result, None, TextModality())
    rows.append(("time", f"{time.perf_counter() - start:.1f} s"))
    return _print_evaluation(rows, result, dict(rows[:2]), args.json)
