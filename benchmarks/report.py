"""Plots and tables from benchmarks/results/quality/*.json (called by run_all.py)."""


def write(quality_dir, quick=False):
    print(f"[report] (placeholder) {quality_dir}")
