#!/usr/bin/env bash
# Load generator benchmark: `sojourn-engine load` vs wrk (capacity, keep-alive) and vs wrk2
# (open-loop accuracy) against nginx on loopback, 1 KiB file, at equal threads; plain by default.
# Usage: bench/load/run.sh [--seconds S] [--rounds N] [--threads 1,2] [--tuned]
# wrk2 is not packaged: build it beside the project (never committed), e.g.
#   git clone https://github.com/giltene/wrk2 /tmp/wrk2 && make -C /tmp/wrk2
# and point WRK2 at it (default /tmp/wrk2/wrk); without it the wrk2 rows are skipped.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec .venv/bin/python bench/load/bench.py "$@"
