"""``keras-hardneg tune``: a Keras Tuner search over the loss's hyper-parameters."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from keras_hardneg.cli.flags import number, positive_int
from keras_hardneg.cli.output import output_folder, print_summary


def add_parser(sub: Any) -> None:
    """Adds ``tune`` to the subcommands ``sub``."""
    from keras_hardneg.run import SECTIONS
    from keras_hardneg.tuning import OBJECTIVES, TUNERS

    p = sub.add_parser("tune", help="Keras Tuner search over the loss's hyper-parameters",
                       description="Search the loss's hyper-parameters (beta and tau_plus for "
                                   "the hard loss) for the best kNN accuracy on a validation "
                                   "split; writes OUTPUT/results.json and a plot.")
    p.add_argument("--dataset", default="digits",
                   help="'digits' (default), 'tfds:NAME' or an image folder")
    p.add_argument("--limit-per-class", type=positive_int,
                   help="image folders: at most this many images per class (default: all)")
    p.add_argument("--trials", type=positive_int, default=8, help="number of trials (default 8)")
    p.add_argument("--epochs", type=positive_int, default=3, help="epochs per trial (default 3)")
    p.add_argument("--tuner", choices=TUNERS, default=TUNERS[0],
                   help=f"Keras Tuner search algorithm (default {TUNERS[0]})")
    p.add_argument("--objective", choices=list(OBJECTIVES), default=next(iter(OBJECTIVES)),
                   help="validation accuracy to maximise: weighted kNN or the linear probe "
                        f"(default {next(iter(OBJECTIVES))})")
    p.add_argument("--loss", choices=SECTIONS["loss"].names(),
                   help="loss whose hyper-parameters are searched (default: the recipe's)")
    p.add_argument("--framework", choices=SECTIONS["framework"].names(),
                   help="default: the recipe's")
    p.add_argument("--batch-size", type=positive_int,
                   help="batch size of every trial (default: the recipe's, 128)")
    p.add_argument("--seed", type=number(int, "--seed"), default=0,
                   help="seed of the split and the trials (default 0)")
    p.add_argument("--output", required=True,
                   help="directory for results.json, the plot and the tuner state")
    p.add_argument("--no-resume", action="store_true",
                   help="start a new search even if OUTPUT has one")
    p.set_defaults(func=cmd_tune)


def cmd_tune(args: argparse.Namespace) -> int:
    from keras_hardneg import tuning
    from keras_hardneg.tuning import records

    output_folder(args.output)
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
    print_summary("tuning done", rows)
    if best is not None and command:
        print(f"  (trials ran {args.epochs} epochs each; add --epochs N for the full run)")
    return 0
