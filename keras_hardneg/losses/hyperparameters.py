"""The loss family's hyper-parameters as config keys (type, range, help), shared by the
registrations of the losses that take them and by their constructors' checks
(:func:`keras_hardneg.losses.base.check_param`): each range is stated here only. Defaults are
read from the loss classes. :data:`ANNEALING` are the recipe keys of the schedules that change
a hyper-parameter between epochs; a loss class says which it has (its ``annealing``)."""

import dataclasses

from keras_hardneg.registry import Param

__all__ = ["TEMPERATURE", "TAU_PLUS", "BETA", "LOWER_PERCENTILE", "UPPER_PERCENTILE", "WEIGHTS",
           "ANNEALING"]

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

#: ``annealing`` recipe keys -> their :class:`Param` (each on when given; a loss class's
#: ``annealing`` maps the keys it has to the hyper-parameter they change).
ANNEALING = {
    "beta_changes": Param(int, default=None, low=1,
                          help="BetaAnnealing: number of steps of beta down to 0"),
    "ring_start": dataclasses.replace(UPPER_PERCENTILE, default=None, tunable=False,
                                      help="RingAnnealing: upper percentile at the first epoch"),
    "ring_end": dataclasses.replace(UPPER_PERCENTILE, default=None, tunable=False,
                                    help="RingAnnealing: upper percentile at the last epoch"),
}
