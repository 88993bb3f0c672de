"""The loss family's hyper-parameters as config keys (type, range, help), shared by the
registrations of the losses that take them. Defaults are read from the loss classes."""

from keras_hardneg.registry import Param

__all__ = ["TEMPERATURE", "TAU_PLUS", "BETA", "LOWER_PERCENTILE", "UPPER_PERCENTILE", "WEIGHTS"]

TEMPERATURE = Param(float, low=0.0, low_inclusive=False, tunable=True,
                    help="temperature t > 0 of the logits cos / t")
TAU_PLUS = Param(float, low=0.0, high=1.0, high_inclusive=False, tunable=True,
                 help="class prior tau_plus in [0, 1): probability that a negative is a positive")
BETA = Param(float, low=0.0, tunable=True, help="hardness concentration beta >= 0")
LOWER_PERCENTILE = Param(float, low=0.0, high=100.0, high_inclusive=False, tunable=True,
                         help="Ring: lower percentile of the negatives' similarity band, in [0, 100)")
UPPER_PERCENTILE = Param(float, low=0.0, high=100.0, low_inclusive=False, tunable=True,
                         help="Ring: upper percentile of the band, in (0, 100]")
WEIGHTS = Param(list, low=0.0, help="UnReMix: weights of (uncertainty, similarity, "
                                    "representativeness), three numbers >= 0, not all 0")
