#!/usr/bin/env bash
# Solo against 2, 3 and 4 concurrent testbeds on the paper-scale baseline
# (experiments/000/concurrency.toml, ~5 minutes a repetition; about 65 minutes in all),
# then compare.py: each count's means against the solo repetitions' 90% intervals, and
# the fidelity guard's verdicts. Runs resume (complete repetitions are kept).
#   bench/concurrency/run.sh [COUNTS...]      default: 1 4 3 2
# A count given again runs again into a results root of its own: `1 2 1` is solo, 2 at
# once, solo again (A-B-A), and compare.py pools the solo sets, so the drift of the machine
# between batches widens the solo interval instead of deciding the verdict.
set -euo pipefail
cd "$(dirname "$0")/../.."
SOJOURN=.venv/bin/sojourn
SPEC=${SPEC:-experiments/000/concurrency.toml}
OUT=${OUT:-results/concurrency}
counts=("${@:-1 4 3 2}")
declare -A seen=()
for count in ${counts[@]}; do
  seen[$count]=$(( ${seen[$count]:-0} + 1 ))
  root="$OUT/$count"
  [ "${seen[$count]}" -gt 1 ] && root="$OUT/$count-again${seen[$count]}"
  echo "== $count testbed(s) at once -> $root"
  $SOJOURN run "$SPEC" --results "$root" --concurrency "$count" --prefix "sjc$count" --no-report || true
done
.venv/bin/python bench/concurrency/compare.py "$OUT"
