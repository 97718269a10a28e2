#!/usr/bin/env bash
# Import speed and peak memory of `sojourn trace import clf` on synthetic 1- and 4-million-
# line Common Log Format files (made once in bench/out/import/), beside a plain read of the
# same bytes with pyarrow's CSV reader; prints a table (bench/out/import/result.json).
# Targets (issue 31): at least 1 million lines/s; peak memory that does not grow with the
# log. Needs GNU time (Debian package `time`). Usage: bench/import/run.sh [--lines N ...]
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v /usr/bin/time >/dev/null || { echo "bench/import: /usr/bin/time missing (apt-get install time)" >&2; exit 1; }
PY=${PY:-.venv/bin/python}
"$PY" bench/import/measure.py "$@"
