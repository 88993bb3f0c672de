"""A small hard-negative (beta, tau_plus) search on CIFAR-10 JPEGs, then a noise check.

1. ``run_search`` on a class-balanced subset of ``../shared/data/cifar10-jpg/train``
   (random search over beta in [0, 2], tau_plus in [0, 0.2]; SimCLR, small_convnet).
2. The best and the worst configuration are trained again with other training
   seeds (same validation split) to see whether their gap is larger than
   seed-to-seed noise.

Run from the repository root::

    python benchmarks/tuning/cifar10_search.py --trials 8 --epochs 4 --limit-per-class 400 \\
        --output benchmarks/tuning/cifar10-out

Writes ``OUTPUT/results.json``, ``OUTPUT/objective_beta_tau.png`` and
``OUTPUT/reseed.json`` (the noise check). Resumable: run it again after an
interruption and finished trials are kept.
"""

import argparse
import json
import os
import time

DEFAULT_DATA = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data",
                            "cifar10-jpg", "train")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=os.path.normpath(DEFAULT_DATA))
    p.add_argument("--trials", type=int, default=8)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--limit-per-class", type=int, default=400)
    p.add_argument("--width", type=int, default=16)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--tuner", default="random")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--reseeds", type=int, nargs="*", default=[1, 2],
                   help="training seeds for re-running the best and worst trial")
    p.add_argument("--output", default="benchmarks/tuning/cifar10-out")
    args = p.parse_args(argv)

    import keras_tuner

    from keras_hardneg import run as runlib, tuning
    from keras_hardneg._io import atomic_write_json
    from keras_hardneg.run import load_recipe

    recipe = {"encoder": {"name": "small_convnet", "width": args.width},
              "projection_dims": [128, 64],
              "loss": {"name": "hard", "temperature": 0.5},
              "evaluation": {"knn_k": 200, "knn_temperature": 0.1}}
    start = time.perf_counter()
    trials = tuning.run_search(args.data, trials=args.trials, epochs=args.epochs,
                               tuner=args.tuner, output=args.output, seed=args.seed,
                               batch_size=args.batch_size, recipe=recipe,
                               limit_per_class=args.limit_per_class, image_size=32)
    print(f"search: {time.perf_counter() - start:.0f} s")

    done = tuning.rank([t for t in trials if t["status"] == "COMPLETED"])
    if len(done) < 2 or not args.reseeds:
        return
    # ---------------------------------------------------------- noise check
    with open(os.path.join(args.output, "search.json")) as f:
        base = load_recipe(json.load(f)["recipe"])
    train, _, _ = runlib.load_data(base)
    out_path = os.path.join(args.output, "reseed.json")
    rows = json.load(open(out_path)) if os.path.isfile(out_path) else []
    have = {(r["trial_id"], r["seed"]) for r in rows}
    for label, t in (("best", done[0]), ("worst", done[-1])):
        for seed in args.reseeds:
            if (t["trial_id"], seed) in have:
                continue
            hm = tuning.ContrastiveHyperModel(
                base, train, search_space={"beta": t["beta"], "tau_plus": t["tau_plus"]},
                epochs=args.epochs, seed=seed, validation_seed=args.seed, trial_seeds="shared")
            hp = keras_tuner.HyperParameters()
            model = hm.build(hp)
            metrics = hm.fit(hp, model)
            rows.append({"which": label, "trial_id": t["trial_id"], "beta": t["beta"],
                         "tau_plus": t["tau_plus"], "seed": seed,
                         "search_objective": t["objective"], **metrics})
            print(rows[-1])
            atomic_write_json(out_path, rows, indent=1, default=str)
    for label in ("best", "worst"):
        vals = [r["knn_accuracy"] for r in rows if r["which"] == label]
        t = next(r for r in rows if r["which"] == label)
        print(f"{label}: trial {t['trial_id']} beta={t['beta']:.3f} tau_plus={t['tau_plus']:.3f} "
              f"search {t['search_objective']:.4f}; re-seeded {', '.join(f'{v:.4f}' for v in vals)}")


if __name__ == "__main__":
    main()
