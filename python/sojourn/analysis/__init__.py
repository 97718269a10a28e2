"""Metrics over per-request records (see docs/formats.md)."""
