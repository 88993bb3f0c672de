"""The false-negative rate of in-batch SimCLR negatives, from the batch's labels.

A re-export: the one implementation is
:func:`keras_hardneg.losses.false_negatives.false_negative_rate`. With a batch's labels only,
it is the fraction of a SimCLR anchor's ``2B - 2`` negatives that share its class,
``r_i = #{j != i : y_j == y_i} / (B - 1)`` (the same for both views of ``i``; labels ``< 0``
are unknown and not counted), and with ``reduction="mean"`` the fraction of ordered pairs of
distinct examples that share a class (0 for a batch of one example).
"""

from keras_hardneg.losses.false_negatives import false_negative_rate

__all__ = ["false_negative_rate"]
