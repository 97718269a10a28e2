#!/usr/bin/env bash
# Creates .venv and installs the sojourn Python package (editable) with its
# dependencies, test tools and Ray (for `sojourn run --ray` and its test). Re-run whenever python/pyproject.toml changes.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip
.venv/bin/pip install -q -e 'python[test,ray]'
touch .venv/.installed
