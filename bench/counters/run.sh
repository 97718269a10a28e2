#!/usr/bin/env bash
# Counters' socket census: sock_diag dump vs /proc/net/tcp and ss(8) on the same
# sockets: established ones, with more in another namespace, and TIME_WAIT ones as
# an overloaded server leaves them. Needs root. Writes bench/out/counters.json.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec .venv/bin/python bench/counters/bench_counters.py "$@"
