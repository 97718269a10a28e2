#!/usr/bin/env bash
# Generate + shape (W1, 10 Mbit/s) + write a 4.5-million-request WC98-like trace, the size
# of the World Cup day in 000 §2.1; report wall time and peak memory (/usr/bin/time -v).
# Targets (issue 4): under 30 s and under 2 GB. Usage: bench/workloads/run.sh [--requests N]
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p bench/out/workloads
PY=${PY:-.venv/bin/python}
/usr/bin/time -v "$PY" bench/workloads/gen_shape.py "$@" 2> bench/out/workloads/time.txt | tee bench/out/workloads/result.json
wall=$(grep 'Elapsed (wall clock)' bench/out/workloads/time.txt | awk '{print $NF}')
rss_kb=$(grep 'Maximum resident set size' bench/out/workloads/time.txt | awk '{print $NF}')
echo "workloads: wall ${wall} (target < 0:30), peak RSS $((rss_kb / 1024)) MiB (target < 2048 MiB)"
rm -f bench/out/workloads/trace.csv
