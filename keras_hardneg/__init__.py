"""keras-hardneg: self-supervised contrastive learning with principled negatives for Keras 3."""

__version__ = "0.1.0"
