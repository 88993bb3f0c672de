"""What a run shows: progress lines and ``history.png``, the probe, and ``report.html``.

* :mod:`~keras_hardneg.run.report.progress`: short progress lines, the clamp warning,
  ``history.png``;
* :mod:`~keras_hardneg.run.report.probe`: the report's probe batch and its per-epoch record
  (``probe.json``);
* :mod:`~keras_hardneg.run.report.page`: draws and writes ``report.html`` (drawing and HTML
  only);
* :mod:`~keras_hardneg.run.report.run_report`: gathers what a run or a zoo entry holds and
  writes its page.

The package imports none of them: each is imported where it is used.
"""
