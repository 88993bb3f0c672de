"""The order the README's command runs files in (``tests/conftest.py``): longest first, and
pytest-xdist may not reorder them by their number of tests."""

import types

from tests import conftest


def test_xdist_keeps_the_collected_order_of_files():
    config = types.SimpleNamespace(option=types.SimpleNamespace(loadscopereorder=True))
    conftest._keep_longest_first(config)
    assert config.option.loadscopereorder is False


def test_without_xdist_the_option_is_left_alone():
    config = types.SimpleNamespace(option=types.SimpleNamespace())
    conftest._keep_longest_first(config)
    assert not hasattr(config.option, "loadscopereorder")
