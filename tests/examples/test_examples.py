"""The examples/ folder and the list of its scripts that the heavy tier runs agree.

Every example's ``--smoke`` run (each script top to bottom at its smallest settings: its
``RESULT`` line, its plot, no ``shuffle=True`` warning from ``fit``) is in the heavy tier's
tests/test_anywhere.py, from a wheel outside the clone with the data served by a loopback
server; it used to run here a second time, from the clone (docs/notes/suite_time.md).
``_runner.py`` (one process runs a list of example scripts and records each) serves it.
"""

import os

from tests.test_anywhere import EXAMPLES, PLOTS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_every_example_is_run_and_every_plot_is_an_examples():
    scripts = sorted(f[:-3] for f in os.listdir(os.path.join(ROOT, "examples"))
                     if f.endswith(".py"))
    assert EXAMPLES == scripts and len(scripts) >= 10
    assert set(PLOTS) <= set(EXAMPLES)
