"""`sojourn-engine load` against its peers on loopback (see run.sh for usage).

1. Capacity: `load capacity --threads T` (C keep-alive connections, every record written)
   vs `wrk -tT -cC`, for each T of --threads (default 1 and 2), rounds alternating, against
   one nginx worker serving 1 KiB; paired ratios of requests/s, and CPU time (user +
   system) per request of each generator, which other load on a shared machine disturbs less.
2. Open loop at 20,000 requests/s: `load open --rate 20000` (Poisson) — achieved rate vs
   target and generator lag p99 (asks: within 1 %, <= 1 ms) — beside wrk2 -R 20000
   (constant rate), whose achieved rate and corrected latency percentiles are printed.

By default everything runs as a user runs it: no pinning, no real-time priority (the figure
that counts). With --tuned (root, at least two CPUs) the generators and the nginx worker run
SCHED_FIFO (chrt -f 20), the generator pinned to CPU 0 and nginx to CPU 1, the same for every
generator. Writes bench/out/load.json (load-tuned.json with --tuned).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from sojourn.engine import engine_path
from sojourn.servers import Server, ServerConfig, free_port, live_group_members
from sojourn.workloads.docroot import content, file_for

REPO = Path(__file__).resolve().parents[2]
PATH = "/1k.bin"
RATE = 20_000


def realtime(argv: list[str], enabled: bool) -> list[str]:
    """The generator's argv: SCHED_FIFO 20 on CPU 0 (nginx gets CPU 1), when enabled."""
    return ["taskset", "-c", "0", "chrt", "-f", "20", *argv] if enabled else argv


def children_cpu_s() -> tuple[float, float]:
    """User and system CPU seconds of finished child processes so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime, usage.ru_stime


def cpu_since(before: tuple[float, float]) -> tuple[float, float]:
    """(user + system, system) CPU seconds of the children finished since ``before``."""
    user, system = children_cpu_s()
    return user - before[0] + system - before[1], system - before[1]


def on_cpu_s(pids: list[int]) -> float:
    """On-CPU seconds so far of every thread of these processes (/proc/PID/task/*/schedstat,
    which counts the softirq work done on a task's time too: loopback TCP for its peer)."""
    return sum(int(stat.read_text().split()[0]) for pid in pids for stat in Path(f"/proc/{pid}/task").glob("*/schedstat")) / 1e9


def steal_s() -> float:
    """CPU time the hypervisor took from this VM so far, all CPUs (/proc/stat `steal`, proc(5))."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()
    return int(fields[8]) / os.sysconf("SC_CLK_TCK")


def wrk_requests(output: str) -> int:
    match = re.search(r"(\d+) requests in", output)
    if not match:
        raise RuntimeError(f"no request count in wrk output:\n{output}")
    return int(match.group(1))


def wrk_rps(output: str) -> float:
    match = re.search(r"Requests/sec:\s+([\d.]+)", output)
    if not match:
        raise RuntimeError(f"no Requests/sec in wrk output:\n{output}")
    return float(match.group(1))


def wrk2_percentiles(output: str) -> dict[str, float]:
    """Corrected latency percentiles (ms) from wrk2 --latency."""
    units = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4}
    found = {}
    for quantile, value, unit in re.findall(r"^\s+(50|90|99|99\.9)\.000%\s+([\d.]+)(us|ms|s|m)\s*$", output, re.M):
        found[f"p{quantile.replace('.', '')}_ms"] = float(value) * units[unit]
    return found


def nginx_requests(port: int) -> int:
    """nginx's own count of requests served (stub_status; it includes this request)."""
    text = subprocess.run(["curl", "-s", f"http://127.0.0.1:{port}/nginx_status"], check=True,
                          capture_output=True, text=True).stdout
    return int(text.splitlines()[2].split()[2])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of each run (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=3, help="paired rounds (load then its peer), capacity and open loop each (default %(default)s)")
    parser.add_argument("--connections", type=int, default=64, help="connections for the capacity runs (default %(default)s)")
    parser.add_argument("--threads", default="1,2", help="generator threads to compare at, comma separated (default %(default)s)")
    parser.add_argument("--tuned", action="store_true", help="SCHED_FIFO and pinning (root, two CPUs); default: plain")
    args = parser.parse_args()
    thread_counts = [int(t) for t in args.threads.split(",")]
    rt = args.tuned
    if rt and not (os.geteuid() == 0 and shutil.which("chrt") and shutil.which("taskset") and (os.cpu_count() or 1) >= 2):
        raise SystemExit("--tuned needs root, chrt, taskset and two CPUs")
    engine = str(engine_path())
    wrk2 = os.environ.get("WRK2", "/tmp/wrk2/wrk")
    if not shutil.which("wrk"):
        raise SystemExit("wrk is not installed (apt-get install wrk)")
    result: dict = {"tuned": rt, "seconds": args.seconds, "connections": args.connections, "path": PATH}
    with tempfile.TemporaryDirectory(prefix="sojourn-bench-load-") as scratch:
        work = Path(scratch)
        root = work / "docroot"
        target = file_for(root, PATH)
        target.parent.mkdir(parents=True)
        target.write_bytes(content(PATH, size=1024))
        port = free_port()
        with Server(ServerConfig(kind="nginx", root=root, port=port, workers=1)) as nginx:
            if rt:
                for pid in live_group_members(nginx.process.pid):
                    subprocess.run(["chrt", "-f", "-p", "20", str(pid)], check=True)
                    subprocess.run(["taskset", "-pc", "1", str(pid)], check=True, capture_output=True)
            url = f"http://127.0.0.1:{port}{PATH}"
            nginx_pids = live_group_members(nginx.process.pid)

            def nginx_busy(argv: list[str], **options) -> tuple[subprocess.CompletedProcess, float]:
                """Runs a generator; also returns the CPUs nginx kept busy meanwhile (1.0: its
                one worker never waited for work, so no generator could get more from it)."""
                cpu_before, wall_before = on_cpu_s(nginx_pids), time.monotonic()
                done = subprocess.run(argv, check=True, capture_output=True, **options)
                return done, (on_cpu_s(nginx_pids) - cpu_before) / (time.monotonic() - wall_before)

            result["capacity"] = {}
            for threads in thread_counts:
                ours, theirs, ours_cpu, theirs_cpu, ours_sys, theirs_sys, steal = [], [], [], [], [], [], []
                ours_nginx, theirs_nginx = [], []
                for round_number in range(args.rounds):
                    out = work / f"cap{threads}-{round_number}"
                    steal_before = steal_s()
                    cpu_before = children_cpu_s()
                    _, busy = nginx_busy(realtime([engine, "load", "capacity", "--target", f"127.0.0.1:{port}", "--out", str(out),
                                                   "--connections", str(args.connections), "--duration", str(args.seconds),
                                                   "--path", PATH, "--requests-per-conn", "0", "--threads", str(threads),
                                                   "--quiet"], rt))
                    ours_nginx.append(busy)
                    cpu, system = cpu_since(cpu_before)
                    summary = json.loads((out / f"c{args.connections}" / "summary.json").read_text())
                    rows = sum(1 for _ in open(out / f"c{args.connections}" / "records.csv")) - 1
                    assert rows == summary["attempts"], "every record written"
                    ours.append(summary["throughput_rps"])
                    ours_cpu.append(cpu / rows * 1e6)
                    ours_sys.append(system / rows * 1e6)
                    cpu_before = children_cpu_s()
                    wrk, busy = nginx_busy(realtime(["wrk", f"-t{threads}", f"-c{args.connections}", f"-d{args.seconds:g}s", url], rt),
                                           text=True)
                    theirs_nginx.append(busy)
                    cpu, system = cpu_since(cpu_before)
                    requests = wrk_requests(wrk.stdout)
                    theirs_cpu.append(cpu / requests * 1e6)
                    theirs_sys.append(system / requests * 1e6)
                    theirs.append(wrk_rps(wrk.stdout))
                    steal.append(steal_s() - steal_before)
                    print(f"capacity, {threads} thread(s), round {round_number}: sojourn load {ours[-1]:.0f}/s "
                          f"({ours_cpu[-1]:.2f} µs CPU per request), wrk {theirs[-1]:.0f}/s ({theirs_cpu[-1]:.2f} µs CPU per "
                          f"request), nginx busy {ours_nginx[-1]:.2f} / {theirs_nginx[-1]:.2f} CPUs, steal over the pair "
                          f"{steal[-1]:.2f} s", flush=True)
                result["capacity"][str(threads)] = {
                    "sojourn_rps": ours, "wrk_rps": theirs,
                    "sojourn_cpu_us_per_request": ours_cpu, "wrk_cpu_us_per_request": theirs_cpu,
                    # The kernel's part (system time: the syscalls and loopback TCP on both ends'
                    # behalf): no user-space saving takes a generator below it.
                    "sojourn_sys_us_per_request": ours_sys, "wrk_sys_us_per_request": theirs_sys,
                    "ratio_of_medians": statistics.median(ours) / statistics.median(theirs),
                    # Rounds run in pairs (load, then wrk): the ratio within a pair cancels the
                    # machine's slow drifts; its median and range are the figure to quote.
                    "paired_ratios": [a / b for a, b in zip(ours, theirs)],
                    "paired_cpu_ratios": [b / a for a, b in zip(ours_cpu, theirs_cpu)],
                    "steal_s_per_pair": steal,
                    # nginx's one worker at 1.0 CPU: the server, not the generator, sets the rate.
                    "nginx_busy_cpus_with_sojourn": ours_nginx, "nginx_busy_cpus_with_wrk": theirs_nginx,
                    "cpu_ratio_of_medians": statistics.median(theirs_cpu) / statistics.median(ours_cpu)}

            result["open"], result["wrk2"] = [], []
            for round_number in range(args.rounds):
                out = work / f"open{round_number}"
                served_before = nginx_requests(port)
                steal_before = steal_s()
                subprocess.run(realtime([engine, "load", "open", "--target", f"127.0.0.1:{port}", "--out", str(out),
                                         "--rate", str(RATE), "--duration", str(args.seconds), "--path", PATH,
                                         "--clients", "64", "--conns-per-client", "4", "--requests-per-conn", "0",
                                         "--quiet"], rt), check=True, capture_output=True)
                served = nginx_requests(port) - served_before - 1
                summary = json.loads((out / "summary.json").read_text())
                issued = summary["requests"]
                row = {
                    "target_rps": RATE,
                    "issued_rps": issued / args.seconds,
                    "rate_error": issued / args.seconds / RATE - 1,
                    "completed_ok": summary["outcomes"].get("ok", 0),
                    "nginx_served": served,
                    "lag_p99_ms": summary["lag_s"]["p99"] * 1e3,
                    "lag_p999_ms": summary["lag_s"]["p999"] * 1e3,
                    "response_p50_ms": summary["response_time_s"]["p50"] * 1e3,
                    "response_p99_ms": summary["response_time_s"]["p99"] * 1e3,
                    "steal_s": steal_s() - steal_before,
                    "loop_busy_fraction": summary["loop_busy_fraction"],
                    # Where late dispatches came from (docs/load.md): the loop's own long passes,
                    # or waiting for a CPU held by something else.
                    "loop_longest_pass_ms": summary["loop_longest_pass_s"] * 1e3,
                    "loop_worst_second_runqueue_wait_ms": (summary["loop_worst_second_runqueue_wait_s"] or 0.0) * 1e3,
                }
                result["open"].append(row)
                print(f"open 20k/s round {round_number}: issued {row['issued_rps']:.0f}/s ({row['rate_error']:+.2%}), "
                      f"nginx served {row['nginx_served']}, lag p99 {row['lag_p99_ms']:.3f} ms, response p50 {row['response_p50_ms']:.3f} "
                      f"p99 {row['response_p99_ms']:.3f} ms, longest loop pass {row['loop_longest_pass_ms']:.3f} ms, "
                      f"worst second's run-queue wait {row['loop_worst_second_runqueue_wait_ms']:.3f} ms, steal {row['steal_s']:.2f} s", flush=True)
                if not Path(wrk2).is_file():
                    print(f"wrk2 not found at {wrk2}: skipped (see bench/load/run.sh)")
                    continue
                served_before = nginx_requests(port)
                run = subprocess.run(realtime([wrk2, "-t1", "-c256", f"-d{args.seconds:g}s", f"-R{RATE}", "--latency", url], rt),
                                     check=True, capture_output=True, text=True)
                served = nginx_requests(port) - served_before - 1
                row = {"target_rps": RATE, "achieved_rps": wrk_rps(run.stdout), "nginx_served": served,
                       "rate_error": wrk_rps(run.stdout) / RATE - 1, **wrk2_percentiles(run.stdout)}
                result["wrk2"].append(row)
                print(f"wrk2 -R 20000 round {round_number}: achieved {row['achieved_rps']:.0f}/s ({row['rate_error']:+.2%}), "
                      f"nginx served {row['nginx_served']}, corrected latency {({k: round(v, 3) for k, v in row.items() if k.endswith('_ms')})}", flush=True)
    out_dir = REPO / "bench" / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / ("load-tuned.json" if rt else "load.json")).write_text(json.dumps(result, indent=2) + "\n")
    for threads, cap in result["capacity"].items():
        paired, paired_cpu = cap["paired_ratios"], cap["paired_cpu_ratios"]
        print(f"{'tuned' if rt else 'plain'}, {threads} thread(s): paired requests/s ratio sojourn/wrk median "
              f"{statistics.median(paired):.3f} (range {min(paired):.3f}-{max(paired):.3f}); CPU per request wrk/sojourn "
              f"median {statistics.median(paired_cpu):.3f} (range {min(paired_cpu):.3f}-{max(paired_cpu):.3f}); "
              f"system time per request sojourn {statistics.median(cap['sojourn_sys_us_per_request']):.2f} of "
              f"{statistics.median(cap['sojourn_cpu_us_per_request']):.2f} µs, wrk {statistics.median(cap['wrk_sys_us_per_request']):.2f} "
              f"of {statistics.median(cap['wrk_cpu_us_per_request']):.2f} µs; nginx's one worker busy (CPUs, median) "
              f"{statistics.median(cap['nginx_busy_cpus_with_sojourn']):.2f} with sojourn, "
              f"{statistics.median(cap['nginx_busy_cpus_with_wrk']):.2f} with wrk")
    if result["open"]:
        lags = [row["lag_p99_ms"] for row in result["open"]]
        print(f"open 20k/s: lag p99 per round {', '.join(f'{lag:.3f}' for lag in lags)} ms; "
              f"{sum(lag <= 1.0 for lag in lags)} of {len(lags)} <= 1 ms  -> bench/out/load.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
