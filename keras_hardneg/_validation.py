"""Interval checks shared by every validator of the package (loss hyper-parameters, recipe
keys, tuning search spaces), so a range reads the same in every error message."""

__all__ = ["describe_interval", "outside_interval"]


def outside_interval(value, low=None, high=None, low_inclusive=True, high_inclusive=True):
    """True when ``value`` lies outside the interval (``None`` bounds are open-ended)."""
    return bool((low is not None and (value < low if low_inclusive else value <= low)) or
                (high is not None and (value > high if high_inclusive else value >= high)))


def describe_interval(low=None, high=None, low_inclusive=True, high_inclusive=True):
    """The interval in words: ``'in [0, 1)'``, ``'>= 2'``, ``'< 1'`` or ``'any number'``.

    >>> describe_interval(0, 1, high_inclusive=False), describe_interval(low=2)
    ('in [0, 1)', '>= 2')
    """
    if low is not None and high is not None:
        return (f"in {'[' if low_inclusive else '('}{low:g}, "
                f"{high:g}{']' if high_inclusive else ')'}")
    if low is not None:
        return f"{'>=' if low_inclusive else '>'} {low:g}"
    if high is not None:
        return f"{'<=' if high_inclusive else '<'} {high:g}"
    return "any number"
