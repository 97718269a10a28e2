"""The machine a repetition ran on, and how fast it was just before it started (``host.json``).

These machines are virtual and shared: a campaign longer than a session goes on in the next
one, perhaps on another machine, and a machine's speed moves with what its neighbours do,
unseen by steal. A CPU-bound run measures that speed along with the server. 002's loss runs
of 2 Dec 2026 show it: under the same 0.2-CPU quota at 0% loss, the capacities measured in one
session (13:21-13:51 UTC) were 6622 and 6145 requests/s (sojourn) and 7439 (nginx), those of
the next (17:53-18:24 UTC) 3863 (sojourn), 4855 and 4641 (nginx), each server using its whole
quota and steal at 0.0-0.7% in all six; and the WAN emulator, the same program on the same
packets, spent 64-87 CPU µs per request at each level in the first session and 141-195 in the
second (counters.csv's router_cpu over the level's requests/s). Which machine each ran on was
not recorded. So every repetition records the machine's identity (its boot id changes with the
machine) and a speed measured, after the wait for calm, with no testbed running: the CPU time
a fixed piece of the work a server does costs here (TCP round trips over loopback: system
calls, the TCP stack, a copy) and that of a fixed interpreter loop (a core's speed at branchy
user code). Comparing repetitions' capacities across machines then has a measured factor
beside it.
"""

from __future__ import annotations

import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

FILE = "host.json"

# One trial: this many round trips of a 4 KiB request and its 4 KiB echo (a small response,
# SURGE's median file is a few KiB) over one TCP connection on 127.0.0.1.
ROUND_TRIPS = 1000
MESSAGE_BYTES = 4096
# One trial of the interpreter loop: this many steps.
LOOP_STEPS = 200_000
# A trial takes milliseconds; an echo end that stopped answering fails the measurement here.
ECHO_TIMEOUT_S = 10.0
# The median of this many trials of each (a neighbour's burst in one trial does not move it).
TRIALS = 5

# The echo end, a process of its own so the two ends' CPU time is each a thread's, on the same
# CPU as the measuring thread (it inherits the thread's affinity): across two CPUs the same
# round trips cost 17-40 µs of CPU in one series (wake-ups of an idle CPU, wherever the
# scheduler put each end), on one 6.8-8.2 (7 Dec 2026, with a campaign running on the machine). It accepts one connection per trial
# and, when the client closes it, prints the CPU seconds it spent on it.
_ECHO = """
import socket, sys, time
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(1)
print(listener.getsockname()[1], flush=True)
size = int(sys.argv[1])
while True:
    conn, _ = listener.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    began = time.thread_time()
    while True:
        data = conn.recv(size, socket.MSG_WAITALL)
        if not data:
            break
        conn.sendall(data)
    conn.close()
    print(time.thread_time() - began, flush=True)
"""


@dataclass(frozen=True)
class Speed:
    """CPU time of fixed work on this machine (lower is faster): the median over its CPUs
    of each CPU's median of TRIALS, and each CPU's own (a neighbour busy on one CPU's
    sibling slows that one)."""

    loopback_round_trip_cpu_us: float  # both ends' CPU per 4 KiB TCP round trip over loopback
    interpreter_step_ns: float  # thread CPU per step of a fixed Python loop
    per_cpu: dict[str, dict[str, float]]  # by CPU number, as host.json's keys are


def identity(cpuinfo: str, boot_id: str, kernel: str, cpus: int) -> dict:
    """Which machine this is: ``boot_id`` (a new one at every boot, so a new machine too),
    the processor's model and nominal MHz as /proc/cpuinfo gives them, the kernel, the CPUs."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    mhz = fields.get("cpu MHz")
    return {"boot_id": boot_id.strip(), "cpu_model": fields.get("model name", "unknown"),
            "cpu_mhz": float(mhz) if mhz else None, "kernel": kernel, "cpus": cpus}


def _round_trips(port: int, echo: subprocess.Popen) -> float:
    """One trial: CPU seconds of both ends per round trip."""
    message = bytes(MESSAGE_BYTES)
    with socket.create_connection(("127.0.0.1", port), timeout=ECHO_TIMEOUT_S) as conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        began = time.thread_time()
        for _ in range(ROUND_TRIPS):
            conn.sendall(message)
            conn.recv(MESSAGE_BYTES, socket.MSG_WAITALL)
        ours = time.thread_time() - began
    theirs = float(echo.stdout.readline())
    return (ours + theirs) / ROUND_TRIPS


def _interpreter_step() -> float:
    """One trial: thread CPU seconds per step of a fixed loop."""
    began, x = time.thread_time(), 0
    for i in range(LOOP_STEPS):
        x = (x * 31 + i) & 0xFFFF
    return (time.thread_time() - began) / LOOP_STEPS


def _on_cpu(cpu: int, trials: int) -> dict[str, float]:
    """Both pieces of fixed work with the measuring thread and the echo end on ``cpu``; the
    thread's own CPUs are given back after."""
    allowed = os.sched_getaffinity(0)  # 0: this thread only, not the runner's others
    os.sched_setaffinity(0, {cpu})
    echo = subprocess.Popen([sys.executable, "-c", _ECHO, str(MESSAGE_BYTES)], stdout=subprocess.PIPE,
                            text=True)
    try:
        port = int(echo.stdout.readline())
        _round_trips(port, echo)  # warm-up: the echo's first connection, both ends' caches
        trips = [_round_trips(port, echo) for _ in range(trials)]
        steps = [_interpreter_step() for _ in range(trials)]
    finally:
        echo.kill()
        echo.wait()
        os.sched_setaffinity(0, allowed)
    return {"loopback_round_trip_cpu_us": round(statistics.median(trips) * 1e6, 3),
            "interpreter_step_ns": round(statistics.median(steps) * 1e9, 3)}


def measure_speed(trials: int = TRIALS) -> Speed:
    """:class:`Speed` now: ``trials`` of each piece of fixed work on each CPU this thread may
    use."""
    per_cpu = {str(cpu): _on_cpu(cpu, trials) for cpu in sorted(os.sched_getaffinity(0))}
    return Speed(**{key: round(statistics.median(cpu[key] for cpu in per_cpu.values()), 3)
                    for key in ("loopback_round_trip_cpu_us", "interpreter_step_ns")}, per_cpu=per_cpu)


def describe(proc: Path = Path("/proc"), speed: Speed | None = None) -> dict:
    """This machine's :func:`identity` and its speed (``speed``, or :func:`measure_speed`
    now), as host.json holds them."""
    ident = identity((proc / "cpuinfo").read_text(), (proc / "sys/kernel/random/boot_id").read_text(),
                     platform.release(), os.cpu_count() or 0)
    return ident | {"speed": asdict(speed or measure_speed())}


def record() -> dict:
    """:func:`describe`, or where this machine cannot be measured (no /proc file, no loopback
    socket, an echo end that died) what went wrong, as ``error``: a repetition is not lost
    for want of its machine's record."""
    try:
        return describe()
    except (OSError, ValueError, subprocess.SubprocessError) as err:
        return {"error": f"{type(err).__name__}: {err}"}
