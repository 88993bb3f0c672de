"""The heavy tier (``tests/conftest.py``): tests marked ``heavy`` are skipped, naming
``KHN_HEAVY_TESTS``, unless it is 1; other tests are untouched either way."""

import pytest

from tests import conftest


class FakeItem:
    def __init__(self, heavy):
        self.markers = [pytest.mark.heavy.mark] if heavy else []

    def get_closest_marker(self, name):
        return next((m for m in self.markers if m.name == name), None)

    def add_marker(self, marker):
        self.markers.append(marker.mark)


def _skips(item):
    return [m for m in item.markers if m.name == "skip"]


def test_heavy_items_are_skipped_naming_the_variable(monkeypatch):
    monkeypatch.delenv(conftest.HEAVY_ENV, raising=False)
    heavy, light = FakeItem(True), FakeItem(False)
    conftest._skip_heavy([heavy, light])
    (skip,) = _skips(heavy)
    assert "KHN_HEAVY_TESTS=1" in skip.kwargs["reason"]
    assert not _skips(light)


@pytest.mark.parametrize("value, skipped", [("1", False), ("0", True), ("yes", True)])
def test_only_the_value_1_runs_the_tier(monkeypatch, value, skipped):
    monkeypatch.setenv(conftest.HEAVY_ENV, value)
    item = FakeItem(True)
    conftest._skip_heavy([item])
    assert bool(_skips(item)) == skipped


def test_the_suite_marks_its_heavy_tests(request):
    # Registered (setup.cfg): `pytest -m heavy` selects the tier without an unknown-mark
    # warning, and `--markers` lists what it is.
    assert any(line.startswith("heavy:") for line in request.config.getini("markers"))
