"""Every loss x {mixed_float16, mixed_bfloat16}: train N steps, check nothing goes non-finite.

    python -m tests.reliability.mixed_precision_matrix [--steps 200] [--output result.json]

The test suite (test_numerics.py) runs a reduced matrix through :func:`train_steps`; the full
one (all losses, 200 steps each) is run by hand and recorded in docs/reliability.md.
"""

import argparse
import json
import sys
import time

import keras
import numpy as np

import keras_hardneg as khn

LOSSES = {
    "nt_xent": lambda: khn.losses.NTXentLoss(temperature=0.1),
    "debiased": lambda: khn.losses.DebiasedContrastiveLoss(temperature=0.1, tau_plus=0.1),
    "hard": lambda: khn.losses.HardNegativeContrastiveLoss(temperature=0.1, tau_plus=0.1,
                                                           beta=1.0),
    "ring": lambda: khn.losses.RingContrastiveLoss(temperature=0.1, lower_percentile=5,
                                                   upper_percentile=60),
    "unremix": lambda: khn.losses.UnReMixContrastiveLoss(temperature=0.1, beta=1.0),
}
POLICIES = ("mixed_float16", "mixed_bfloat16")


def train_steps(loss_name, policy, steps, batch=16, seed=0):
    """Trains a tiny SimCLR ``steps`` steps under ``policy``; returns a summary dict."""
    keras.config.set_dtype_policy(policy)
    try:
        keras.utils.set_random_seed(seed)
        enc = khn.encoders.small_convnet(input_shape=(8, 8, 3), width=4)
        model = khn.models.SimCLR(enc, projection_dims=(16, 8))
        model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=LOSSES[loss_name]())
        rng = np.random.default_rng(seed)
        v1 = rng.uniform(size=(steps * batch, 8, 8, 3)).astype("float32")
        v2 = np.clip(v1 + 0.1 * rng.normal(size=v1.shape), 0, 1).astype("float32")
        losses = []

        class Record(keras.callbacks.Callback):
            def on_train_batch_end(self, b, logs=None):
                losses.append(float(logs["loss"]))

        t0 = time.perf_counter()
        hist = model.fit({"view1": v1, "view2": v2}, batch_size=batch, epochs=1, shuffle=False,
                         verbose=0, callbacks=[Record()])
        weights_finite = all(np.all(np.isfinite(np.asarray(w, dtype="float32")))
                             for w in model.get_weights())
        return {"loss": loss_name, "policy": policy, "steps": len(losses),
                "nonfinite_steps": float(hist.history["nonfinite_steps"][-1]),
                "losses_finite": bool(np.all(np.isfinite(losses))),
                "weights_finite": bool(weights_finite),
                "first_loss": losses[0], "last_loss": losses[-1],
                "seconds": time.perf_counter() - t0}
    finally:
        keras.config.set_dtype_policy("float32")


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--output")
    a = p.parse_args(argv)
    rows = []
    for policy in POLICIES:
        for name in LOSSES:
            r = train_steps(name, policy, a.steps)
            rows.append(r)
            print(json.dumps(r), flush=True)
    ok = all(r["losses_finite"] and r["weights_finite"] and r["nonfinite_steps"] == 0
             and r["steps"] == a.steps for r in rows)
    if a.output:
        with open(a.output, "w") as f:
            json.dump({"ok": ok, "rows": rows}, f, indent=1)
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
