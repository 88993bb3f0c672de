import keras
import numpy as np

import keras_hardneg as khn

LOSSES = {
    "nt_xent": lambda: khn.losses.NTXentLoss(temperature=0.5),
    "debiased": lambda: khn.losses.DebiasedContrastiveLoss(temperature=0.5, tau_plus=0.1),
    "hard": lambda: khn.losses.HardNegativeContrastiveLoss(temperature=0.5, tau_plus=0.1, beta=1.0),
    "ring": lambda: khn.losses.RingContrastiveLoss(temperature=0.5, lower_percentile=5,
                                                   upper_percentile=60),
    "unremix": lambda: khn.losses.UnReMixContrastiveLoss(temperature=0.5, beta=1.0),
}


def tiny_encoder():
    return khn.encoders.small_convnet(input_shape=(8, 8, 3), width=4)


def views(n=16, seed=0, labels=False):
    rng = np.random.default_rng(seed)
    v1 = rng.uniform(size=(n, 8, 8, 3)).astype("float32")
    v2 = np.clip(v1 + 0.1 * rng.normal(size=v1.shape), 0, 1).astype("float32")
    x = {"view1": v1, "view2": v2}
    if labels:
        return x, rng.integers(0, 3, n)
    return x


def weights_of(model):
    return [np.array(w) for w in model.weights]


def sgd():
    return keras.optimizers.SGD(0.05)
