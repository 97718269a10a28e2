"""Notebook entry point to stored results (docs/analysis.md "Notebooks")::

    import sojourn.results
    exp = sojourn.results.open("results/demo")
    exp.records()      # one row per request: run, variant, sweep_value, rep, ...
    exp.table()        # one row per run, means with 90% confidence intervals
"""

from sojourn.analysis.results import Experiment, Repetition, format_version, open_experiment

open = open_experiment  # noqa: A001 - sojourn.results.open(path), as the docs show

__all__ = ["Experiment", "Repetition", "format_version", "open"]
