#!/usr/bin/env bash
# WAN emulator benchmark: forwarding rate vs kernel forwarding (iperf3), and
# delay error at 100 ms RTT under load. Needs root. Writes bench/out/wan.json.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec .venv/bin/python bench/wan/bench_wan.py "$@"
