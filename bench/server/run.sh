#!/usr/bin/env bash
# Benchmark: sojourn-engine serve (fair, srpt) against Debian's nginx and h2o on loopback.
#
#   bench/server/run.sh            (DURATION=5 CONNECTIONS=64 WORKERS=2 WRK_THREADS=WORKERS IDLE=10000 to change)
#
# Every server: WORKERS worker threads/processes, keep-alive, an access log to a file
# (buffered in nginx and sojourn; h2o 2.2 writes each line); nginx and sojourn use sendfile,
# h2o sends files its own way. h2o is the fastest static
# server in recent public benchmarks; it is skipped with a note when not installed. wrk (keep-alive) fetches 1 KiB, 10 KiB
# and 100 KiB files; the script prints requests/s and the ratios sojourn/nginx and
# srpt/fair. The machine may be shared: the three servers take turns (in a rotating
# order) for ROUNDS rounds and the best round of each server is reported (other jobs
# can only slow a server down, so the best round is the least disturbed; every round
# is printed too, and the medians after the table). Each round also reads the server's CPU
# time (its threads and its children's) and the whole machine's busy time, per request: what
# the server costs beside the client and the kernel, where requests/s alone cannot say.
# Then it opens IDLE idle keep-alive connections to each server (after
# one request each) and prints the growth of the servers' resident memory per
# connection (user-space RSS only; kernel socket buffers are not counted).
# Last, srpt vs fair in PAIRS interleaved pairs per size (default 8): both servers
# run side by side and wrk (same settings, PAIR_DURATION seconds, default 3) hits
# fair then srpt, srpt then fair, ... alternating who goes first; the srpt/fair
# ratio of each pair is kept and the median ratio with its range and quartiles is
# printed per size (a pair's two runs are seconds apart, so machine load mostly
# cancels in the ratio). Each run also reads the server's CPU time (on-CPU ns of
# all its threads, /proc/PID/task/*/schedstat) before and after, so the pairs give srpt/fair of CPU
# time per request too: the cost of the policy, which other jobs on the machine
# disturb far less than throughput.
# Then, apart from the timed rounds (tracing slows every call), each server serves each size
# for SYSCALL_DURATION seconds (default 2) under `perf trace -s` and the script prints its
# system calls per request by name: where a server's kernel time can still be cut and where
# it is one read, one write and one sendfile per request already.
# ROUNDS=0 skips the comparison with nginx, IDLE=0 the memory measurement, SYSCALL_DURATION=0
# the system calls, PAIRS=0 the pairs. Output also goes to bench/out/server.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-3}
CONNECTIONS=${CONNECTIONS:-64}
WORKERS=${WORKERS:-2}
IDLE=${IDLE:-10000}
PAIRS=${PAIRS:-8}
PAIR_DURATION=${PAIR_DURATION:-3}
SYSCALL_DURATION=${SYSCALL_DURATION:-2}
WRK_THREADS=${WRK_THREADS:-$WORKERS}  # the client's threads; it shares the machine's cores with the server
ENGINE=${ENGINE:-target/release/sojourn-engine}
for tool in wrk nginx python3; do
    command -v "$tool" >/dev/null || { echo "bench/server: $tool is not installed (scripts/setup-system.sh installs it)" >&2; exit 1; }
done
[ -x "$ENGINE" ] || cargo build --release -p sojourn-engine
ulimit -n $((IDLE + 1000))  # each process (server, idle client) holds IDLE sockets

work=$(mktemp -d /tmp/sjsrv-bench.XXXXXX)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/root" bench/out
for size in 1 10 100; do head -c $((size * 1024)) /dev/urandom > "$work/root/${size}k.bin"; done
chmod -R a+rX "$work"

port_sojourn=18480
port_srpt=18481
port_nginx=18490
port_h2o=18495
servers=(sojourn-fair sojourn-srpt nginx)
if command -v h2o >/dev/null; then
    servers+=(h2o)
    {
        [ "$(id -u)" = 0 ] && echo "user: root"
        printf 'listen:\n  host: 127.0.0.1\n  port: %s\n' "$port_h2o"
        echo "num-threads: $WORKERS"
        echo "max-connections: $((IDLE + 1000))"
        echo "pid-file: $work/h2o.pid"
        echo "error-log: $work/h2o-error.log"
        echo "access-log: $work/h2o-access.log"
        printf 'hosts:\n  default:\n    paths:\n      /:\n        file.dir: %s\n' "$work/root"
    } > "$work/h2o.conf"
else
    echo "bench/server: h2o is not installed: its column is skipped (scripts/setup-system.sh installs it)" >&2
fi
cat > "$work/nginx.conf" <<CONF
worker_processes $WORKERS;
daemon off;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
worker_rlimit_nofile $((IDLE + 1000));
events { worker_connections $((IDLE + 1000)); }
http {
    # Buffered as sojourn's is (a writer thread joins the workers' lines into one write).
    access_log $work/nginx-access.log combined buffer=64k flush=1s;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 120;
    keepalive_requests 100000000;
    open_file_cache max=1000 inactive=60s;
    types { application/octet-stream bin; }
    client_body_temp_path $work/nginx-body;
    proxy_temp_path $work/nginx-proxy;
    fastcgi_temp_path $work/nginx-fastcgi;
    uwsgi_temp_path $work/nginx-uwsgi;
    scgi_temp_path $work/nginx-scgi;
    server {
        listen 127.0.0.1:$port_nginx reuseport;
        root $work/root;
    }
}
CONF

start_sojourn() { # policy [port]
    "$ENGINE" serve --root "$work/root" --listen "127.0.0.1:${2:-$port_sojourn}" --threads "$WORKERS" --policy "$1" \
        --access-log "$work/sojourn-$1-access.log" --keepalive-timeout 120 --max-connections $((IDLE + 1000)) 2>"$work/sojourn-$1.err" &
    server_pid=$!
    pids+=("$server_pid")
}
start_h2o() {
    h2o -c "$work/h2o.conf" >"$work/h2o.err" 2>&1 &
    server_pid=$!
    pids+=("$server_pid")
}
start_nginx() {
    nginx -c "$work/nginx.conf" 2>"$work/nginx.err" &
    server_pid=$!
    pids+=("$server_pid")
}
. bench/server/wait_port.sh
stop() { kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; }

# Requests/s of one wrk run: name port size seconds
wrk_rps() {
    wrk -t "$WRK_THREADS" -c "$CONNECTIONS" -d "${4}s" "http://127.0.0.1:$2/${3}k.bin" > "$work/wrk.out"
    grep -q "Non-2xx" "$work/wrk.out" && { echo "bench/server: $1 answered errors:" >&2; cat "$work/wrk.out" >&2; exit 1; }
    awk '/^Requests\/sec/ {print $2}' "$work/wrk.out"
}

# A server's process and its children (nginx's workers).
with_children() { echo "$1" $(pgrep -P "$1" || true); }
# Resident memory (KiB) of a process and its children.
rss_kib() {
    local total=0 pid
    for pid in $(with_children "$1"); do
        total=$((total + $(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")))
    done
    echo "$total"
}

# On-CPU ns of all threads of a process and of its children (nginx's workers).
cpu_ns() { local pid; for pid in $(with_children "$1"); do cat /proc/"$pid"/task/*/schedstat; done | awk '{ns += $1} END {print ns}'; }
# Busy CPU time of the whole machine so far (all CPUs, clock ticks: proc(5) /proc/stat, all but idle and iowait).
busy_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }
declare -A rps server_us machine_us  # name,size -> each round's requests/s; CPU µs per request of the server, of the machine
run_wrk() { # name port
    local size r s m before_server before_busy
    for size in 1 10 100; do
        before_server=$(cpu_ns "$server_pid") before_busy=$(busy_ticks)
        r=$(wrk_rps "$1" "$2" "$size" "$DURATION")
        read -r s m < <(awk -v a="$(cpu_ns "$server_pid")" -v b="$before_server" -v ba="$(busy_ticks)" -v bb="$before_busy" -v hz="$(getconf CLK_TCK)" \
            '/requests in/ {printf "%.2f %.2f\n", (a - b) / 1e3 / $1, (ba - bb) / hz * 1e6 / $1}' "$work/wrk.out")
        rps[$1,$size]="${rps[$1,$size]:-} $r"
        server_us[$1,$size]="${server_us[$1,$size]:-} $s"
        machine_us[$1,$size]="${machine_us[$1,$size]:-} $m"
        echo "round $round $1 ${size}KiB: $r req/s, CPU per request: server $s µs, whole machine $m µs" >&2
    done
}
quartiles() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1} END {q1 = v[int((NR + 3) / 4)]; q3 = v[int((3 * NR + 3) / 4)]; printf "%.3f-%.3f", q1, q3}'; }
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
best() { tr ' ' '\n' | grep . | sort -g | tail -1; }

declare -A per_conn
measure_idle() { # name port
    local before after
    sleep 0.5
    before=$(rss_kib "$server_pid")
    coproc HOLD { python3 bench/server/hold.py 127.0.0.1 "$2" "$IDLE" /1k.bin; }
    read -r line <&"${HOLD[0]}"
    [ "$line" = ready ] || { echo "bench/server: idle client failed for $1" >&2; exit 1; }
    sleep 0.5
    after=$(rss_kib "$server_pid")
    per_conn[$1]=$(awk -v a="$after" -v b="$before" -v n="$IDLE" 'BEGIN {printf "%.0f", (a - b) * 1024 / n}')
    exec {HOLD[1]}>&-
    wait "$HOLD_PID" 2>/dev/null || true
}

start_server() { # sojourn-fair | sojourn-srpt | nginx | h2o: starts it and sets server_port
    case $1 in
        nginx) start_nginx; server_port=$port_nginx ;;
        h2o) start_h2o; server_port=$port_h2o ;;
        *) start_sojourn "${1#sojourn-}"; server_port=$port_sojourn ;;
    esac
    wait_port "$server_port"
}
bench_one() { start_server "$1"; run_wrk "$1" "$server_port"; stop; }
for round in $(seq "$ROUNDS"); do
    # Rotate the order every round so no server always follows the same one.
    for i in "${!servers[@]}"; do bench_one "${servers[$(((i + round - 1) % ${#servers[@]}))]}"; done
done
if [ "$IDLE" -gt 0 ]; then
    start_sojourn fair; wait_port $port_sojourn
    measure_idle sojourn-fair $port_sojourn
    stop
    start_nginx; wait_port $port_nginx
    measure_idle nginx $port_nginx
    stop
fi

# System calls per request of each server and size, under perf trace (not timed).
declare -A syscalls  # name,size -> "calls/request total (name calls/request, ...)"
trace_syscalls() { # name port
    local size pids
    pids=$(with_children "$server_pid" | tr ' ' ,)
    for size in 1 10 100; do
        perf trace -s -p "$pids" -o "$work/trace.txt" &
        local tracer=$!
        sleep 1  # perf attaches to every thread before the load starts
        wrk_rps "$1" "$2" "$size" "$SYSCALL_DURATION" >/dev/null
        kill -INT "$tracer"; wait "$tracer" 2>/dev/null || true
        # perf trace -s: a table per thread, "syscall calls errors total min avg max stddev".
        syscalls[$1,$size]=$(awk -v n="$(awk '/requests in/ {print $1}' "$work/wrk.out")" '
            $1 ~ /^[a-z_0-9]+$/ && $2 ~ /^[0-9]+$/ && $3 ~ /^[0-9]+$/ && NF == 8 {calls[$1] += $2; total += $2}
            END {printf "%.2f\n", total / n; for (c in calls) if (calls[c] / n >= 0.01) printf "%.2f %s\n", calls[c] / n, c}' "$work/trace.txt" |
            { read -r total; printf '%s (%s)' "$total" "$(sort -gr | awk '{printf "%s%s %s", (NR > 1 ? ", " : ""), $2, $1}')"; })
        echo "syscalls $1 ${size}KiB: ${syscalls[$1,$size]}" >&2
    done
}
if [ "$SYSCALL_DURATION" != 0 ] && command -v perf >/dev/null; then
    for name in "${servers[@]}"; do start_server "$name"; trace_syscalls "$name" "$server_port"; stop; done
fi

# srpt vs fair, interleaved pairs.
pair_run() { # name port size pid: prints requests/s and the server's CPU µs per request
    local before rps
    before=$(cpu_ns "$4")
    rps=$(wrk_rps "$1" "$2" "$3" "$PAIR_DURATION")
    awk -v r="$rps" -v b="$before" -v a="$(cpu_ns "$4")" '/requests in/ {printf "%s %.3f\n", r, (a - b) / 1e3 / $1}' "$work/wrk.out"
}
declare -A ratios cpu_ratios  # size -> srpt/fair of each pair (requests/s; CPU per request)
start_sojourn fair; fair_pid=$server_pid
start_sojourn srpt $port_srpt; srpt_pid=$server_pid
wait_port $port_sojourn; wait_port $port_srpt
for size in 1 10 100; do
    for pair in $(seq "$PAIRS"); do
        if [ $((pair % 2)) = 1 ]; then
            read -r f fc <<<"$(pair_run fair $port_sojourn "$size" "$fair_pid")"; read -r s sc <<<"$(pair_run srpt $port_srpt "$size" "$srpt_pid")"
        else
            read -r s sc <<<"$(pair_run srpt $port_srpt "$size" "$srpt_pid")"; read -r f fc <<<"$(pair_run fair $port_sojourn "$size" "$fair_pid")"
        fi
        ratio=$(awk -v s="$s" -v f="$f" 'BEGIN {printf "%.4f", s / f}')
        cpu_ratio=$(awk -v s="$sc" -v f="$fc" 'BEGIN {printf "%.4f", s / f}')
        ratios[$size]="${ratios[$size]:-} $ratio"
        cpu_ratios[$size]="${cpu_ratios[$size]:-} $cpu_ratio"
        echo "pair $pair ${size}KiB: fair $f srpt $s req/s, srpt/fair $ratio; CPU µs/request fair $fc srpt $sc, srpt/fair $cpu_ratio" >&2
    done
done
kill "$fair_pid" "$srpt_pid"; wait "$fair_pid" "$srpt_pid" 2>/dev/null || true

{
    [ "$ROUNDS" -gt 0 ] && {
    echo "# sojourn vs nginx $(nginx -v 2>&1 | sed 's/.*\///') and h2o $(h2o --version 2>/dev/null | head -1 | awk '{print $3}'), plain (no pinning, no real-time priority), loopback, wrk -t$WRK_THREADS -c$CONNECTIONS -d${DURATION}s, best of $ROUNDS rounds, $WORKERS workers, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"
    printf "%-6s %14s %14s %14s %14s %12s %12s %12s %12s\n" size sojourn-fair sojourn-srpt nginx h2o fair/nginx srpt/nginx fair/h2o srpt/fair
    for size in 1 10 100; do
        f=$(best <<<"${rps[sojourn-fair,$size]}") s=$(best <<<"${rps[sojourn-srpt,$size]}") n=$(best <<<"${rps[nginx,$size]}")
        h=$(best <<<"${rps[h2o,$size]:-}")
        awk -v z="${size}KiB" -v f="$f" -v s="$s" -v n="$n" -v h="${h:-0}" 'BEGIN {printf "%-6s %14.0f %14.0f %14.0f %14.0f %12.2f %12.2f %12s %12.2f\n", z, f, s, n, h, f/n, s/n, (h > 0 ? sprintf("%.2f", f/h) : "-"), s/f}'
    done
    for size in 1 10 100; do
        echo "medians ${size}KiB: sojourn-fair $(median <<<"${rps[sojourn-fair,$size]}") sojourn-srpt $(median <<<"${rps[sojourn-srpt,$size]}") nginx $(median <<<"${rps[nginx,$size]}") h2o $(median <<<"${rps[h2o,$size]:-0}")"
    done
    echo "CPU µs per request, median of the rounds, server / whole machine (wrk, the server and the kernel's loopback TCP for both):"
    for size in 1 10 100; do
        line="  ${size}KiB:"
        for name in "${servers[@]}"; do line+=" $name $(median <<<"${server_us[$name,$size]}") / $(median <<<"${machine_us[$name,$size]}")"; done
        echo "$line"
    done
    }
    if [ -n "${syscalls[nginx,1]:-}" ]; then
        echo "system calls per request under perf trace -s, wrk -t$WRK_THREADS -c$CONNECTIONS -d${SYSCALL_DURATION}s (all, and each name at 0.01 or more):"
        for size in 1 10 100; do
            for name in "${servers[@]}"; do echo "  ${size}KiB $name: ${syscalls[$name,$size]}"; done
        done
    fi
    [ "$IDLE" -gt 0 ] && echo "memory per idle keep-alive connection ($IDLE open, user-space RSS growth): sojourn ${per_conn[sojourn-fair]} B, nginx ${per_conn[nginx]} B"
    [ "$PAIRS" -gt 0 ] || exit 0
    echo "# $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "srpt/fair in $PAIRS interleaved pairs per size (wrk -t$WRK_THREADS -c$CONNECTIONS -d${PAIR_DURATION}s each, alternating who goes first):"
    for size in 1 10 100; do
        r="${ratios[$size]}"
        echo "  ${size}KiB: median $(median <<<"$r" | awk '{printf "%.3f", $1}'), quartiles $(quartiles <<<"$r"), range $(tr ' ' '\n' <<<"$r" | grep . | sort -g | head -1)-$(best <<<"$r"); pairs:$r"
    done
    echo "srpt/fair of the servers' CPU time per request, same pairs (below 1: srpt cheaper):"
    for size in 1 10 100; do
        r="${cpu_ratios[$size]}"
        echo "  ${size}KiB: median $(median <<<"$r" | awk '{printf "%.3f", $1}'), quartiles $(quartiles <<<"$r"), range $(tr ' ' '\n' <<<"$r" | grep . | sort -g | head -1)-$(best <<<"$r"); pairs:$r"
    done
} | tee bench/out/server.txt
