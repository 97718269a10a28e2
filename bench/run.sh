#!/usr/bin/env bash
# Runs every benchmark of sojourn and writes their figures under bench/out/.
# Each area's script compares sojourn with a real peer side by side in one run
# and prints ratios; docs/benchmarks.md records the figures and how to read them.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bench/out
# One line per benchmark script (each is runnable on its own too):
bench/workloads/run.sh
bench/load/run.sh
bench/wan/run.sh            # WAN emulator: forwarding rate vs kernel forwarding, delay error at 100 ms RTT
bench/counters/run.sh       # testbed counters: socket census by sock_diag vs /proc/net/tcp and ss, established and TIME_WAIT sockets
bench/sim/run.sh            # simulator: jobs/s of SRPT and PS vs the same M/G/1 in simpy
bench/server/run.sh         # web server: wrk req/s of sojourn fair/srpt vs nginx (1/10/100 KiB), memory per idle connection
bench/server/callgrind.sh   # web server: user-space instructions per request, srpt vs fair (valgrind callgrind)
