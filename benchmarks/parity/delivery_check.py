"""Recipe parity (issue 32): does it matter to a training step whether its views are drawn
inside the step or fed in? One ``fit`` step of the ``all_lightly`` model on a batch of raw
images (the views drawn by the model's own layer in the step) against the same model from
the same initial weights fed those very views (drawn eagerly beforehand from the same
generator state) as ``{"view1", "view2"}``, and fed views with labels against without.
Prints the largest difference over every weight (batch-norm statistics and the step's
health record included); 0.0 means the delivery changes nothing in the step::

    python benchmarks/parity/delivery_check.py [--data PACK.npz] [--batch-size 32]
"""

import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(ROOT, "benchmarks", "results", "tmp", "parity", "cifar10_10k_2k.npz")


def largest_difference(a, b) -> float:
    return max(float(np.max(np.abs(np.asarray(u.value) - np.asarray(w.value))))
               for u, w in zip(a.weights, b.weights))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=DATA)
    p.add_argument("--variant", default="all_lightly")
    p.add_argument("--batch-size", type=int, default=32)
    args = p.parse_args()
    sys.path.insert(0, HERE)
    sys.path.insert(0, ROOT)
    import keras

    from keras_hardneg.run import build_model, load_recipe
    from keras_side import recipe_for

    recipe = load_recipe(recipe_for(args.variant, 0, 30))
    recipe["batch_size"] = args.batch_size
    with np.load(args.data) as f:
        x = f["x_train"][:args.batch_size].astype("float32") / 255.0
        y = f["y_train"][:args.batch_size]

    def model():
        keras.utils.set_random_seed(0)
        return build_model(recipe, input_shape=x.shape[1:], num_examples=len(x))

    in_step, fed, fed_labels = model(), model(), model()
    init = largest_difference(in_step, fed)
    state = next(v for v in in_step.variables if "seed_generator_state" in v.path)
    start = np.asarray(state.value).copy()
    v1, v2 = (np.asarray(v) for v in in_step.view_maker(x, training=True))
    state.assign(start)  # the step draws these same views again
    fit = dict(batch_size=args.batch_size, epochs=1, shuffle=False, verbose=0)
    in_step.fit(x, y, **fit)
    fed.fit({"view1": v1, "view2": v2}, **fit)
    fed_labels.fit({"view1": v1, "view2": v2}, y, **fit)
    print(json.dumps({"variant": args.variant, "batch_size": args.batch_size,
                      "initial_weights": init,
                      "in_step_vs_fed": largest_difference(in_step, fed),
                      "fed_with_labels_vs_without": largest_difference(fed_labels, fed)}))


if __name__ == "__main__":
    main()
