"""Argument checks shared by the data loaders; each raises ``ValueError`` naming the parameter."""

import numbers

__all__ = ["check_batch_size", "check_image_size", "check_choice", "check_positive_int"]


def check_positive_int(name, value, allow_none=False):
    """Returns ``int(value)`` if it is an integer ``>= 1`` (or ``None`` when allowed)."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"`{name}` must be an integer >= 1; got {value!r}.")
    return int(value)


def check_batch_size(batch_size):
    """``batch_size`` must be an integer ``>= 1``."""
    return check_positive_int("batch_size", batch_size)


def check_image_size(image_size, allow_none=False):
    """Normalises ``image_size`` to a ``(height, width)`` tuple of positive ints.

    Accepts an int ``s`` (meaning ``(s, s)``) or a pair. ``None`` is returned
    unchanged when ``allow_none`` is true.
    """
    if image_size is None:
        if allow_none:
            return None
        raise ValueError("`image_size` must be an int or a (height, width) pair; got None.")
    if isinstance(image_size, numbers.Integral) and not isinstance(image_size, bool):
        image_size = (image_size, image_size)
    try:
        size = tuple(image_size)
    except TypeError:
        size = None
    if (
        size is None
        or len(size) != 2
        or any(isinstance(s, bool) or not isinstance(s, numbers.Integral) or s < 1 for s in size)
    ):
        raise ValueError(
            "`image_size` must be a positive int or a (height, width) pair of positive ints; "
            f"got {image_size!r}."
        )
    return int(size[0]), int(size[1])


def check_choice(name, value, choices):
    """``value`` must be one of ``choices``."""
    if value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise ValueError(f"`{name}` must be one of {allowed}; got {value!r}.")
    return value
