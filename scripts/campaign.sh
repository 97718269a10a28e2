#!/usr/bin/env bash
# Runs campaign commands one after the other within one time budget, so a sitting's machine
# time goes to experiments back to back: each command gets `--stop-after` the minutes left
# (no repetition starts after the deadline; the one running ends whole, and what finished is
# published by the command itself). Every command must take --stop-after: `sojourn
# reproduce ...` and `python -m sojourn.overload run ...` do. Run it from the repository root.
#
#   scripts/campaign.sh 150 "sojourn reproduce 000 --only workloads" \
#       "python -m sojourn.overload run overload-control-dwfs-transient"
#
# A command that fails is reported and the next one starts; the exit status is the first
# failure's. A command stopped by its deadline (exit 75, EX_TEMPFAIL) is no failure, nor is one
# that left repetitions invalid after their redos (exit 3: the fidelity guard found the machine
# disturbed them; the next campaign redoes them): the campaign then exits 3.
set -uo pipefail

if [ $# -lt 2 ] || ! [[ $1 =~ ^[0-9]+$ ]]; then
  echo "usage: scripts/campaign.sh MINUTES COMMAND [COMMAND ...]" >&2
  exit 2
fi
deadline=$(( $(date +%s) + $1 * 60 ))
shift
export PATH="$PWD/.venv/bin:$PATH"
status=0
for command in "$@"; do
  left=$(( (deadline - $(date +%s)) / 60 ))
  if [ "$left" -le 0 ]; then
    echo "campaign: out of time before: $command"
    continue
  fi
  echo "campaign: $(date -u +%H:%M:%SZ) $command --stop-after $left"
  # Word splitting of the command is intended: each is one command line.
  # shellcheck disable=SC2086
  $command --stop-after "$left"
  code=$?
  if [ "$code" -eq 75 ]; then
    # EX_TEMPFAIL: the deadline left repetitions not started, nothing failed; the next
    # campaign resumes them.
    echo "campaign: out of time in: $command"
  elif [ "$code" -eq 3 ]; then
    echo "campaign: repetitions left invalid (the machine disturbed them) by: $command"
    [ "$status" -eq 0 ] && status=3
  elif [ "$code" -ne 0 ]; then
    echo "campaign: exit $code from: $command"
    { [ "$status" -eq 0 ] || [ "$status" -eq 3 ]; } && status=$code
  fi
done
exit "$status"
