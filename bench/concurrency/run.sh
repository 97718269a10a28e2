#!/usr/bin/env bash
# Solo against 2, 3 and 4 concurrent testbeds on the paper-scale baseline
# (experiments/000/concurrency.toml, ~5 minutes a repetition; about 65 minutes in all),
# then compare.py: each count's means against the solo repetitions' 90% intervals, and
# the fidelity guard's verdicts. Runs resume (complete repetitions are kept).
#   bench/concurrency/run.sh [COUNTS...]      default: 1 4 3 2
set -euo pipefail
cd "$(dirname "$0")/../.."
SOJOURN=.venv/bin/sojourn
SPEC=${SPEC:-experiments/000/concurrency.toml}
OUT=${OUT:-results/concurrency}
counts=("${@:-1 4 3 2}")
for count in ${counts[@]}; do
  echo "== $count testbed(s) at once"
  $SOJOURN run "$SPEC" --results "$OUT/$count" --concurrency "$count" --prefix "sjc$count" --no-report || true
done
.venv/bin/python bench/concurrency/compare.py "$OUT"
