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


def _order(monkeypatch, heavy):
    if heavy:
        monkeypatch.setenv(conftest.HEAVY_ENV, "1")
    else:
        monkeypatch.delenv(conftest.HEAVY_ENV, raising=False)
    paths = ["tests/test_zoo_fetch_processes.py", "tests/run/test_run_report.py",
             conftest.backend_run.TEST_ID.split("::")[0], "tests/test_anywhere.py"]
    items = [types.SimpleNamespace(nodeid=p + "::t", get_closest_marker=lambda name: None,
                                   add_marker=lambda mark: None) for p in paths]
    conftest.pytest_collection_modifyitems(None, None, items)
    return [item.nodeid.split("::")[0] for item in items]


def test_the_heavy_tier_starts_with_its_longest_file(monkeypatch):
    # the new-user run (~460 s) last made one worker end 300 s after the other
    order = _order(monkeypatch, heavy=True)
    assert order[0] == "tests/test_anywhere.py"
    assert order.index("tests/run/test_run_report.py") < order.index(
        "tests/test_zoo_fetch_processes.py")


def test_the_default_run_keeps_its_own_order(monkeypatch):
    order = _order(monkeypatch, heavy=False)
    assert order[0] == "tests/run/test_run_report.py"
    assert order[-1] == conftest.backend_run.TEST_ID.split("::")[0]
