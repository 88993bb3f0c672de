"""The frameworks the distribution checks train (``distributed_check.py`` under TF's
MirroredStrategy, ``jax_data_parallel_check.py`` under JAX's DataParallel), defined once.
No TensorFlow import: the JAX check imports this module."""

import keras

import keras_hardneg as khn


def build(kind, encoder):
    """A compiled ``kind`` ("simclr", "moco_v2", "moco_v2_symmetric", "moco_v3") on
    ``encoder``: tiny heads, SGD."""
    if kind == "simclr":
        model = khn.models.SimCLR(encoder, projection_dims=(16, 8))
        loss = khn.losses.HardNegativeContrastiveLoss(temperature=0.5, tau_plus=0.1, beta=1.0)
    elif kind == "moco_v2":
        model = khn.models.MoCo(encoder, projection_dims=(16, 8), queue_size=16, momentum=0.9,
                                version="v2")
        loss = khn.losses.NTXentLoss(temperature=0.2)
    elif kind == "moco_v2_symmetric":  # 2B keys a step: a queue of 4B wraps as above
        model = khn.models.MoCo(encoder, projection_dims=(16, 8), queue_size=32, momentum=0.9,
                                version="v2", symmetric=True)
        loss = khn.losses.NTXentLoss(temperature=0.2)
    else:
        model = khn.models.MoCo(encoder, projection_dims=(16, 8), momentum=0.9, version="v3",
                                predictor_dims=(16, 8))
        loss = khn.losses.DebiasedContrastiveLoss(temperature=0.2, tau_plus=0.1)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss=loss)
    return model
