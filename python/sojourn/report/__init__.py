"""Figures and the self-contained HTML report, built only from saved result files."""
