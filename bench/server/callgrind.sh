#!/usr/bin/env bash
# Instruction counts of `sojourn-engine serve` per request, fair vs srpt, under
# valgrind's callgrind (deterministic where timing is not: perf is not on every VM).
# Only user-space instructions are counted: the kernel's share of a request
# (read, writev, sendfile, epoll) is not.
#
#   bench/server/callgrind.sh          (REQUESTS=20000 CONNECTIONS=64 to change)
#
# For each file size and policy: one worker thread under callgrind, collection
# switched on after a warm-up, then `ab -k -n REQUESTS -c CONNECTIONS` fetches the
# file. Prints instructions per request for the whole server and for the
# ready-queue operations of the scheduling path (`ReadyQueue::push` and `pop`,
# inclusive; the rest of `run_scheduler` is inlined into the loop and shared by
# both policies), srpt/fair ratios last.
# Output also goes to bench/out/server-callgrind.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
REQUESTS=${REQUESTS:-20000}
CONNECTIONS=${CONNECTIONS:-64}
ENGINE=${ENGINE:-target/release/sojourn-engine}
for tool in valgrind callgrind_control callgrind_annotate ab; do
    command -v "$tool" >/dev/null || { echo "bench/server/callgrind: $tool is not installed (scripts/setup-system.sh installs it)" >&2; exit 1; }
done
[ -x "$ENGINE" ] || cargo build --release -p sojourn-engine
work=$(mktemp -d /tmp/sjs2-callgrind.XXXXXX)
server_pid=
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/root" bench/out
for size in 1 10 100; do head -c $((size * 1024)) /dev/urandom > "$work/root/${size}k.bin"; done
port=18495

. bench/server/wait_port.sh
# Inclusive instructions of the functions whose name matches $2 in callgrind output $1.
inclusive() {
    callgrind_annotate --inclusive=yes "$1" 2>/dev/null | awk -v pat="$2" '!found && $0 ~ pat {gsub(",", "", $1); print $1; found = 1}'
}
total() { callgrind_annotate "$1" 2>/dev/null | awk '!found && /PROGRAM TOTALS/ {gsub(",", "", $1); print $1; found = 1}'; }

declare -A result
for size in 1 10 100; do
    for policy in fair srpt; do
        out="$work/cg.$policy.$size"
        valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out" \
            "$ENGINE" serve --root "$work/root" --listen 127.0.0.1:$port --threads 1 --policy "$policy" 2>"$work/serve.err" &
        server_pid=$!
        wait_port "$port"
        ab -q -k -n 1000 -c "$CONNECTIONS" "http://127.0.0.1:$port/${size}k.bin" >/dev/null  # warm-up: cache filled
        callgrind_control -i on "$server_pid" >/dev/null
        ab -q -k -n "$REQUESTS" -c "$CONNECTIONS" "http://127.0.0.1:$port/${size}k.bin" > "$work/ab.out"
        callgrind_control -i off "$server_pid" >/dev/null
        kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=
        grep -q "^Non-2xx" "$work/ab.out" && { echo "bench/server/callgrind: $policy answered errors" >&2; cat "$work/ab.out" >&2; exit 1; }
        all=$(total "$out")
        push=$(inclusive "$out" "ReadyQueue::push")
        pop=$(inclusive "$out" "ReadyQueue::pop")
        result[$policy,$size]="$all ${push:-0} ${pop:-0}"
        echo "$policy ${size}KiB: ${result[$policy,$size]}" >&2
    done
done
{
    echo "# instructions per request under callgrind, 1 worker, ab -k -n $REQUESTS -c $CONNECTIONS, $(date -u +%FT%TZ)"
    printf "%-6s %-5s %12s %12s %12s\n" size policy all queue.push queue.pop
    for size in 1 10 100; do
        for policy in fair srpt; do
            read -r all push pop <<<"${result[$policy,$size]}"
            awk -v z="${size}KiB" -v p="$policy" -v n="$REQUESTS" -v a="$all" -v u="$push" -v o="$pop" \
                'BEGIN {printf "%-6s %-5s %12.0f %12.0f %12.0f\n", z, p, a/n, u/n, o/n}'
        done
        read -r fa fu fo <<<"${result[fair,$size]}"
        read -r sa su so <<<"${result[srpt,$size]}"
        awk -v z="${size}KiB" -v fa="$fa" -v sa="$sa" -v fq="$((fu + fo))" -v sq="$((su + so))" 'BEGIN {printf "%-6s srpt/fair: all %.3f, queue push+pop %.3f\n", z, sa/fa, sq/fq}'
    done
} | tee bench/out/server-callgrind.txt
