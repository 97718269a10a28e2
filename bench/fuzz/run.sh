#!/usr/bin/env bash
# Runs every fuzz target for FUZZ_SECONDS each (default 60; 900 for the 15-minute runs of
# docs/reliability.md), the request parser for REQUEST_SECONDS (default FUZZ_SECONDS), at
# nice 19 so measured work keeps the CPU. Rust targets: cargo-fuzz on nightly (fuzz/);
# Python targets: atheris (fuzz/python/targets.py). Corpora go to fuzz/corpus/<target>/
# (kept between runs, not committed); a crash stops its target with the reproducer in
# fuzz/artifacts/<target>/: keep it in python/tests/data/fuzz/<target>/ (Python) or as a
# unit test (Rust). Prints per target: runs, wall seconds, CPU seconds.
# REQUEST_CPU_SECONDS, if set, ends the request parser once it has used that much CPU
# (SIGUSR1: libFuzzer prints its final stats and exits), so a CPU budget holds on a busy
# machine where nice 19 gets less than wall time.
set -euo pipefail
cd "$(dirname "$0")/../.."
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
REQUEST_SECONDS=${REQUEST_SECONDS:-$FUZZ_SECONDS}
RUST_TARGETS=${RUST_TARGETS-"request response trace logparse"}
PY_TARGETS=${PY_TARGETS-"spec clf wc98 trace"}
PY=.venv/bin/python
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz
$PY -c "import atheris" 2>/dev/null || .venv/bin/pip install -q -e 'python[fuzz]'
mkdir -p fuzz/corpus fuzz/artifacts bench/out/fuzz

report() {  # target, log, wall seconds, cpu seconds
  local runs
  runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$2" | tail -1 | grep -oE '[0-9]+$' || echo "?")
  printf '%-14s runs %10s  wall %6.0f s  cpu %6.0f s  %s\n' "$1" "$runs" "$3" "$4" \
    "$(grep -q 'ERROR: libFuzzer' "$2" && echo CRASH || echo ok)"
}

timed() {  # name log cmd...: runs cmd at nice 19; reports its runs, wall and CPU seconds
  local name=$1 log=$2
  shift 2
  local start end cpu
  start=$(date +%s.%N)
  # `times` in the subshell prints the children's user and system time on its second line.
  cpu=$( ( nice -n 19 "$@" >"$log" 2>&1 || true; times ) | tail -1 |
         awk '{ split($1, u, /[ms]/); split($2, s, /[ms]/); print u[1]*60 + u[2] + s[1]*60 + s[2] }')
  end=$(date +%s.%N)
  report "$name" "$log" "$(echo "$end - $start" | bc)" "$cpu"
}

stop_after_cpu() {  # cpu seconds, target: SIGUSR1 to that fuzzer once it has used the CPU
  local budget=$1 target=$2 tick pid used
  tick=$(getconf CLK_TCK)
  while sleep 10; do
    # cargo fuzz starts it as target/<triple>/release/<target> from fuzz/.
    pid=$(pgrep -f -n "release/$target -artifact_prefix" || true)
    [ -n "$pid" ] || continue
    used=$(awk -v t="$tick" '{ print int(($14 + $15) / t) }' "/proc/$pid/stat" 2>/dev/null || echo 0)
    if [ "$used" -ge "$budget" ]; then kill -USR1 "$pid"; return; fi
  done
}

for target in $RUST_TARGETS; do
  seconds=$FUZZ_SECONDS
  watcher=
  if [ "$target" = request ]; then
    seconds=$REQUEST_SECONDS
    if [ -n "${REQUEST_CPU_SECONDS:-}" ]; then
      # The wall-time limit only as a backstop: at nice 19 on a busy machine the budget
      # may take several times its length in wall time.
      seconds=$((REQUEST_CPU_SECONDS * 4))
      stop_after_cpu "$REQUEST_CPU_SECONDS" request &
      watcher=$!
    fi
  fi
  mkdir -p "fuzz/corpus/$target" "fuzz/artifacts/$target"
  timed "rust/$target" "bench/out/fuzz/rust-$target.log" \
    bash -c "cd fuzz && cargo +nightly fuzz run $target corpus/$target -- -max_total_time=$seconds -print_final_stats=1 -artifact_prefix=artifacts/$target/"
  [ -z "$watcher" ] || kill "$watcher" 2>/dev/null || true
done
for target in $PY_TARGETS; do
  mkdir -p "fuzz/corpus/py-$target" "fuzz/artifacts/py-$target"
  timed "python/$target" "bench/out/fuzz/py-$target.log" \
    $PY fuzz/python/targets.py "$target" "-max_total_time=$FUZZ_SECONDS" -print_final_stats=1 \
    "-artifact_prefix=fuzz/artifacts/py-$target/" "fuzz/corpus/py-$target"
done
