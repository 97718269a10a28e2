#!/usr/bin/env bash
# sojourn-engine sim vs simpy (PyPI) on the same M/G/1 model, one core each; writes bench/out/sim.json.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -q -p sojourn-engine
.venv/bin/python -c "import simpy" 2>/dev/null || .venv/bin/pip install -q -e 'python[bench]'
exec .venv/bin/python bench/sim/compare.py "$@"
