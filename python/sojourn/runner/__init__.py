"""Experiment specs and `sojourn run`."""
