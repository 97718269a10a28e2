#!/usr/bin/env bash
# Generate + shape (W1, 10 Mbit/s) + write a 4.5-million-request WC98-like trace, the size
# of the World Cup day in 000 §2.1; report wall time and peak memory (/usr/bin/time -v).
# Targets (issue 4): under 30 s and under 2 GB. Usage: bench/workloads/run.sh [--requests N]
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p bench/out/workloads
PY=${PY:-.venv/bin/python}
if [ -x /usr/bin/time ]; then
  /usr/bin/time -v "$PY" bench/workloads/gen_shape.py "$@" 2> bench/out/workloads/time.txt | tee bench/out/workloads/result.json
  wall=$(grep 'Elapsed (wall clock)' bench/out/workloads/time.txt | awk '{print $NF}')
  rss_kb=$(grep 'Maximum resident set size' bench/out/workloads/time.txt | awk '{print $NF}')
  echo "workloads: wall ${wall} (target < 0:30), peak RSS $((rss_kb / 1024)) MiB (target < 2048 MiB)"
else
  # Without GNU time (Debian package `time`), the script's own total_s and peak_rss_mib
  # (getrusage) are the figures; they leave out interpreter start-up.
  echo "workloads: /usr/bin/time not found (apt-get install time); figures from the script:" >&2
  "$PY" bench/workloads/gen_shape.py "$@" | tee bench/out/workloads/result.json
fi
rm -f bench/out/workloads/trace.csv
