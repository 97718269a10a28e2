"""Whether a repetition measured the system and not the machine it ran on.

Several testbeds may share this machine (``sojourn run --concurrency N``), and builds or
benchmarks may run beside a campaign. A repetition is only evidence if the instruments
kept their promises while it ran, so every repetition records its own fidelity in
``fidelity.json`` and is marked ``invalid`` (and redone) when one falls outside its bound:

| measure | from | default bound (spec key under ``collect.fidelity``) |
|---|---|---|
| ``lag_p99_s``: how late the generator issued its requests, 99th percentile | ``load_summary.json`` | <= 5 ms (``lag_p99_ms``) |
| ``emulator_late_p99_s``: how late the WAN emulator released packets, 99th percentile | ``testbed/wan_summary.json`` | <= 1 ms (``emulator_late_p99_ms``) |
| ``uplink_rate``: the uplink's rate over the link rate in the intervals inside busy stretches (queue >= 20 ms of the link's bytes, and two frames, at four samples in a row) | ``counters.csv`` | 1 +- 0.03 (``uplink_rate_tolerance``) |
| ``cpu_idle``: the machine's idle share of CPU time over the run | ``/proc/stat`` | >= 0.2 (``cpu_idle_min``) |
| ``cpu_steal``: the hypervisor's share (time taken by other guests) | ``/proc/stat`` | <= 0.05 (``cpu_steal_max``) |
| ``io_stall_s``: the longest stretch in which the testbed's I/O pressure (some task of its cgroups waiting for I/O, ``testbed_io_stall``; the machine's, ``host_io_stall``, in counters from before that column) stayed at 0.5 or more | ``counters.csv`` | <= 1 s (``io_stall_max_s``) |
| ``stage_stretch``: the most the stage pool's processing took over the thread CPU time it burned, in any 10-s window with at least 1 s of it (1 while its worker had a core to itself) | ``series.csv`` (CPU stages only) | <= 1.05 (``stage_stretch_max``) |
| ``foreign_cpu``: the most CPU seconds per second the machine's tasks ran outside the testbed (its namespaces' processes and the runner) in any 10-s window: builds, tests, other testbeds | ``counters.csv`` (``host_foreign_cpu``; CPU-bound runs only) | <= 0.25 (``foreign_cpu_max``) |

While a repetition runs, :class:`Watch` stops it as soon as a verdict is certain whatever
the rest of the run brings (a stolen share no later tick can dilute below its bound, a
closed window of foreign CPU above its own), so a disturbed attempt is redone at once.

A measure that does not apply (no WAN emulator; a run whose uplink never stayed busy for a
whole sampling interval) is recorded as ``null`` and not judged, nor is one whose bound a
spec sets to 0. The defaults suit link-bound experiments, open-loop trace replays: the
generator's p99 lag is 0.04-3 ms in those published under docs/reproduction/000, far below
the response times measured there (tens of milliseconds and up); so do closed loops whose users
think between requests (004), paced as a trace is. In a CPU-bound run (closed loops without
think time, capacity and session modes, a load relative to the server's capacity, CPU stages,
a CPU quota on the server) the generator shares the two cores with a saturated server by
design, so its lag and the idle time are results there, not disturbance, and a saturated
closed loop's queue empties between samples (the uplink-rate measure needs continuous
backlog): these are recorded and not judged, and
such runs refuse ``--concurrency`` above 1 (:func:`cpu_bound`). What such a run's stages
measure is judged instead: a stage request burns its cost in *thread CPU time*, so a worker
that lost its core to anything else (a build, another testbed) takes longer in wall time, and
``stage_stretch`` shows it. And whatever else ran on the machine is measured directly, as
``foreign_cpu``: a CPU-bound run has no idle time to lose, so a test run beside it (30 Nov
2026: 001's cwnd at load 0.9, the machine's CPU pressure 0.58-0.67 for 40 s, 40% of SYNs
dropped and the mean response 0.85 s against 7-10 ms in its other repetitions) took the
server's CPU unseen by every other measure. Concurrent testbeds are foreign to each other, so
it is judged in CPU-bound runs only, which refuse ``--concurrency``.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

from sojourn.runner import layout
from sojourn.testbed.counters import MachineTicks, machine_ticks_now
from sojourn.testbed.uplink import FRAME_BYTES

FILE = "fidelity.json"

# measure -> the collect.fidelity setting that bounds it, the setting's unit in the measure's,
# and the side it bounds: at "most" the setting, at "least", or "around" 1 by it.
GUARDS = {"lag_p99_s": ("lag_p99_ms", 1e-3, "most"), "emulator_late_p99_s": ("emulator_late_p99_ms", 1e-3, "most"),
          "uplink_rate": ("uplink_rate_tolerance", 1.0, "around"), "cpu_idle": ("cpu_idle_min", 1.0, "least"),
          "cpu_steal": ("cpu_steal_max", 1.0, "most"), "io_stall_s": ("io_stall_max_s", 1.0, "most"),
          "stage_stretch": ("stage_stretch_max", 1.0, "most"), "foreign_cpu": ("foreign_cpu_max", 1.0, "most")}
MEASURES = tuple(GUARDS)
Bounds = dict[str, tuple[float | None, float | None]]


def cpu_bound(config: dict) -> bool:
    """Whether a run's resolved configuration loads the CPU by design: anything but an
    open-loop trace replay or a closed loop of users who think between requests (004's
    user equivalents, whose demand a link of their size bounds), without CPU stages or a
    CPU quota on the server."""
    workload, server = config["workload"], config["server"]
    paced = workload["mode"] == "open" or (workload["mode"] == "closed" and workload["think_s"] > 0)
    return not paced or bool(workload["load_fraction"]) or bool(server["stages"]) or bool(server["cpu_quota"])


def may_share_the_machine(config: dict) -> bool:
    """Whether a run may run beside other testbeds: the guard must be able to see its
    disturbance, so not a CPU-bound run nor one whose idle time is not judged; nor one that
    serves from disk (``collect.docroot_cache = "cold"``), whose eviction would reach a
    docroot the others share and whose disk reads the guard does not judge."""
    return (not cpu_bound(config) and config["collect"]["fidelity"]["cpu_idle_min"] > 0
            and config["collect"]["docroot_cache"] != "cold")


def bounds_of(settings: dict, cpu_bound_run: bool = False) -> Bounds:
    """measure -> (lowest, highest) accepted (None: unbounded on that side), from a
    run's ``collect.fidelity`` table; a setting of 0 leaves its measure unjudged, and so
    does a CPU-bound run its generator lag, idle time and uplink rate (a closed loop's
    queue empties between samples, so its busy stretches are not continuous), and any other
    run the CPU foreign to it (another testbed may share the machine: its idle time is judged)."""
    if cpu_bound_run:
        settings = {**settings, "lag_p99_ms": 0, "cpu_idle_min": 0, "uplink_rate_tolerance": 0}
    else:
        settings = {**settings, "foreign_cpu_max": 0}

    def bound(setting: str, unit: float, side: str) -> tuple[float | None, float | None]:
        value = settings[setting] * unit
        if not value:
            return None, None
        return {"most": (None, value), "least": (value, None), "around": (1 - value, 1 + value)}[side]

    return {measure: bound(*guard) for measure, guard in GUARDS.items()}


def run_bounds(config: dict) -> Bounds:
    """The bounds a run's resolved ``config`` is judged by (:func:`bounds_of`)."""
    return bounds_of(config["collect"]["fidelity"], cpu_bound(config))


def worst(measure: str, values: list[float]) -> float:
    """The value of ``measure`` furthest on the wrong side of its bound (GUARDS)."""
    side = GUARDS[measure][2]
    return {"most": max, "least": min, "around": lambda v: max(v, key=lambda rate: abs(rate - 1))}[side](values)


def cpu_shares(spent: MachineTicks) -> dict[str, float | None]:
    """The idle and stolen shares of the machine ticks ``spent`` over a run
    (``MachineTicks.since``); None when no tick passed."""
    if spent.total <= 0:
        return {"cpu_idle": None, "cpu_steal": None}
    return {"cpu_idle": spent.idle / spent.total, "cpu_steal": spent.steal_share}


# Host steal comes in bursts: 5-38% of each 10-s interval from 22:25 to 22:50 UTC on 6 Dec 2026,
# near 0 either side (under 0.1% over all but one valid repetition of 000's rtt). An attempt
# started in a burst was voided after up to 16 minutes (cpu_steal above 5%, or the WAN emulator
# 1.2-2.6 ms late at p99 under 2.5-5.6% of steal over the run), so an attempt starts only after
# a window of this length in which the host took at most ``calm_steal_max``: 200 ticks on two
# cores, in which a burst's 5% is 10.
CALM_WINDOW_S = 1.0


@dataclass(frozen=True)
class Calm:
    """How long an attempt waited for the host's steal to calm (:func:`wait_for_calm`):
    ``verdict`` "calm", "not judged" (no wait asked for), "gave up" (started anyway after
    ``calm_wait_max_s``) or "deadline" (not started); ``steal`` the last window's share."""

    verdict: str
    waited_s: float = 0.0
    steal: float | None = None

    @property
    def starts(self) -> bool:
        return self.verdict != "deadline"


def wait_for_calm(settings: dict, stop_at: float | None, on_wait: Callable[[float, float], None] = lambda steal, s: None,
                  sample: Callable[[], MachineTicks] = machine_ticks_now, sleep: Callable[[float], None] = time.sleep,
                  clock: Callable[[], float] = time.time) -> Calm:
    """Waits, window after window of ``CALM_WINDOW_S``, until the host took at most
    ``settings["calm_steal_max"]`` of one (a run's ``collect.fidelity``), telling
    ``on_wait(steal, waited_s)`` after each window that was not calm; no longer than
    ``calm_wait_max_s`` (0: no limit) nor past ``stop_at`` (a time.time() instant). No wait
    when either that setting or ``cpu_steal_max`` is 0 (steal not judged)."""
    most = settings["calm_steal_max"]
    if not most or not settings["cpu_steal_max"]:
        return Calm("not judged")
    began, start = clock(), sample()
    while True:
        sleep(CALM_WINDOW_S)
        end = sample()
        steal = end.since(start).steal_share
        waited = clock() - began
        if steal <= most:
            return Calm("calm", waited, steal)
        if stop_at is not None and clock() >= stop_at:
            return Calm("deadline", waited, steal)
        if settings["calm_wait_max_s"] and waited >= settings["calm_wait_max_s"]:
            return Calm("gave up", waited, steal)
        on_wait(steal, waited)
        start = end


# A sample counts as busy when the uplink's queues hold at least 20 ms of the link's bytes (and
# two full frames): a queue that deep at both ends of an interval, and at the samples either
# side, was not idle in between unless its arrivals paused longer than that. Two frames alone
# (2.4 ms at 10 Mbit/s) was too shallow: in 000's persistent-connection runs the short queue
# emptied between one-second samples and the measure read 0.966-0.978 with the machine 80%
# idle; from 20 ms of backlog it read 0.998-1.002 in the same counters.
BUSY_BACKLOG_S = 0.020


def uplink_rate(counters: pd.DataFrame, link_bps: float) -> float | None:
    """The uplink's measured rate over ``link_bps`` in the intervals inside a busy stretch
    (four busy samples in a row, the two inner ones the interval's ends; busy: 20 ms of the
    link's bytes queued): the shaper's
    accuracy while it had work throughout. None when no stretch was that long (a lightly
    loaded run), so nothing is judged."""
    backlog = [c for c in counters.columns if c.endswith("_backlog_bytes")]
    if "uplink_tx_bytes" not in counters or not backlog or len(counters) < 4:
        return None
    busy_bytes = max(2 * FRAME_BYTES, link_bps * BUSY_BACKLOG_S / 8)
    busy = (counters[backlog].sum(axis=1) >= busy_bytes).to_numpy()
    inside = busy[:-3] & busy[1:-2] & busy[2:-1] & busy[3:]  # interval k+1 -> k+2
    seconds = counters["t_s"].diff().to_numpy()[2:-1]
    sent = counters["uplink_tx_bytes"].diff().to_numpy()[2:-1]
    if not inside.any() or seconds[inside].sum() <= 0:
        return None
    return float(sent[inside].sum() * 8 / seconds[inside].sum() / link_bps)


# I/O pressure at which the server was seen to stall: in overload-srpt (26 Nov 2026, 4 testbeds
# at once) the machine's I/O pressure read 0.79 and 1.15 in two one-second samples while tests
# ran beside the campaign, and in all four testbeds SRPT's small responses got their first
# byte 1.6 s late, the server's CPU fell to 0.02 and 71 connections waited unaccepted; no other
# sample of those 1800 s reached 0.5, nor did a 1 GiB write with fsync beside 4 testbeds (0.25).
# The machine's pressure also counts disk work that keeps no testbed task waiting, so the
# testbed's own (its cgroups', sojourn.testbed.cgroups) is judged where the counters have it.
IO_STALL_LEVEL = 0.5
IO_STALL_COLUMNS = ("testbed_io_stall", "host_io_stall")


def io_stall_seconds(counters: pd.DataFrame) -> float | None:
    """The longest run of samples in which the testbed's I/O pressure (``testbed_io_stall``,
    the share of the interval some task of the testbed waited for I/O; the machine's,
    ``host_io_stall``, in counters from before that column) was at least ``IO_STALL_LEVEL``,
    in seconds of sampling (to the millisecond: one sample of a 1-s sampler is 1 s, not the
    1.000002 s its jitter makes of it, and meets a bound of 1 s); None for counters with
    neither column."""
    column = next((name for name in IO_STALL_COLUMNS if name in counters), None)
    if column is None or len(counters) < 2:
        return None
    stalled = counters[column] >= IO_STALL_LEVEL
    longest = stalled.groupby((~stalled).cumsum()).sum().max()  # each calm sample starts a new stretch
    return round(float(longest * counters["t_s"].diff().median()), 3)


# Measured solo (overload-control-dwfs at 1.2 times the stage worker's CPU, 27 Nov 2026, the
# stages' nominal costs standing in for the CPU they burned): processing took 1.0005-1.013
# times its CPU in every 10-s window of the 600-s run, 1.0015 over the whole run. Beside a
# cargo build at SCHED_IDLE and nice 19 (at 1.4 times its CPU), 1.09-1.16 in the 8 windows the
# build lasted, with the machine's CPU pressure (host_cpu_stall) at 0.52 against 0.01 before.
STRETCH_WINDOW_S = 10.0
STRETCH_MIN_CPU_S = 1.0


def stage_stretch(series: pd.DataFrame) -> float | None:
    """The largest ratio of the stage pool's processing time to the thread CPU time it
    burned (all stages summed) in any ``STRETCH_WINDOW_S`` window of the series with at
    least ``STRETCH_MIN_CPU_S`` of CPU; a request counts both in the window it completed in.
    None without the ``cpu_s`` column (a server from before it) or such a window."""
    if "cpu_s" not in series or series.empty:
        return None
    totals = series.groupby("t_s")[["processing_s", "cpu_s"]].sum().sort_index()
    window_ends = totals.groupby((totals.index.to_numpy() // STRETCH_WINDOW_S).astype(int)).last()
    per_window = window_ends.diff().fillna(window_ends.iloc[:1])  # counters start at 0
    judged = per_window[per_window["cpu_s"] >= STRETCH_MIN_CPU_S]
    if judged.empty:
        return None
    return round(float((judged["processing_s"] / judged["cpu_s"]).max()), 4)


FOREIGN_WINDOW_S = 10.0


def foreign_cpu(counters: pd.DataFrame) -> float | None:
    """The most CPU seconds per second outside the testbed (``host_foreign_cpu``, each
    sample's rate over the interval before it) in any ``FOREIGN_WINDOW_S`` window of the
    counters; None for counters from before the column."""
    if "host_foreign_cpu" not in counters or len(counters) < 2:
        return None
    seconds = counters["t_s"].diff().iloc[1:]
    used = counters["host_foreign_cpu"].iloc[1:] * seconds
    window = (counters["t_s"].iloc[1:] // FOREIGN_WINDOW_S).astype(int)
    per_window = used.groupby(window).sum() / seconds.groupby(window).sum()
    return round(float(per_window.max()), 4)


def measure(directory: Path, link_bps: float, cpu: dict[str, float | None]) -> dict[str, float | None]:
    """Every measure of the table above for the repetition in ``directory``."""
    directory = Path(directory)
    values: dict[str, float | None] = dict.fromkeys(MEASURES)
    values.update(cpu)
    load = directory / "load_summary.json"
    if load.is_file():
        lag = json.loads(load.read_text()).get("lag_s", {})
        values["lag_p99_s"] = lag.get("p99")
    wan = directory / "testbed" / "wan_summary.json"
    if wan.is_file():
        late = json.loads(wan.read_text()).get("lateness_us", {})
        if late.get("count"):
            values["emulator_late_p99_s"] = late["p99"] / 1e6
    counters = directory / "counters.csv"
    if counters.is_file() and counters.stat().st_size > 0:
        table = pd.read_csv(counters)
        values["uplink_rate"] = uplink_rate(table, link_bps)
        values["io_stall_s"] = io_stall_seconds(table)
        values["foreign_cpu"] = foreign_cpu(table)
    series = directory / "series.csv"
    if series.is_file() and series.stat().st_size > 0:
        values["stage_stretch"] = stage_stretch(pd.read_csv(series))
    return values


# How much longer than the nominal ticks a stretch of wall time may count: this guest's
# /proc/stat gave 1890-2130 ticks to 10-s intervals of 2000 nominal (30 Nov 2026, host steal
# 0-31%), so a stretch still to come is counted at 1.25 times its nominal ticks, in the
# repetition's favour.
TICKS_MARGIN = 1.25


def certain_violations(bounds: Bounds, start: MachineTicks, now: MachineTicks, ticks_left: float,
                       counters: pd.DataFrame | None) -> list[str]:
    """The violations a running repetition has already earned whatever happens in the
    ``ticks_left`` machine ticks it may still run: the idle and steal shares at their best
    (every tick left idle, none stolen), the worst 10-s window of foreign CPU among the
    windows already closed (a later sample lies past them), the longest I/O stall so far.
    One line per violation, as :func:`violations` writes them; empty when none is certain."""
    elapsed = now.total - start.total + ticks_left
    best: dict[str, float | None] = dict.fromkeys(MEASURES)
    if elapsed > 0:
        best["cpu_idle"] = (now.idle - start.idle + ticks_left) / elapsed
        best["cpu_steal"] = (now.steal - start.steal) / elapsed
    if counters is not None and len(counters) > 1:
        closed = counters[counters["t_s"] // FOREIGN_WINDOW_S < counters["t_s"].iloc[-1] // FOREIGN_WINDOW_S]
        best["foreign_cpu"] = foreign_cpu(closed)
        best["io_stall_s"] = io_stall_seconds(counters)
    return violations(best, bounds)


class Watch:
    """Judges a repetition while it runs, so one the guard will find invalid whatever comes
    next is stopped at once and redone, not run to its end: under host steal of 8-35% (30 Nov
    2026) 001's latency repetitions were each judged invalid only after their 150 s, and 004's
    after their 600 s. ``longest_s`` bounds the wall time from now to the verdict (the load's
    limits and the teardown)."""

    def __init__(self, config: dict, counters: Path, start: MachineTicks, longest_s: float,
                 clock=time.monotonic, ticks_per_s: float | None = None):
        self.bounds = run_bounds(config)
        self.counters, self.start, self.clock = Path(counters), start, clock
        self.deadline = clock() + longest_s
        self.ticks_per_s = ticks_per_s or os.sysconf("SC_CLK_TCK") * (os.cpu_count() or 1)

    def violations(self, now: MachineTicks | None = None) -> list[str]:
        """The violations already certain (:func:`certain_violations`)."""
        now = now or machine_ticks_now()
        ticks_left = max(self.deadline - self.clock(), 0.0) * self.ticks_per_s * TICKS_MARGIN
        return certain_violations(self.bounds, self.start, now, ticks_left, self._counters())

    def _counters(self) -> pd.DataFrame | None:
        if not any(self.bounds[name] != (None, None) for name in ("foreign_cpu", "io_stall_s")):
            return None
        try:  # the sampler appends a line each interval: the last may be half written
            table = pd.read_csv(self.counters)
        except (FileNotFoundError, pd.errors.EmptyDataError, pd.errors.ParserError):
            return None
        return table.iloc[:-1]


def violations(values: dict[str, float | None], bounds: Bounds) -> list[str]:
    """One line per measure outside its bound, naming value and bound."""
    lines = []
    for name, (low, high) in bounds.items():
        value = values.get(name)
        if value is None:
            continue
        if low is not None and value < low:
            lines.append(f"{name} {value:.4g} < {low:g}")
        if high is not None and value > high:
            lines.append(f"{name} {value:.4g} > {high:g}")
    return lines


def assess(directory: Path, config: dict, cpu: dict[str, float | None]) -> dict:
    """Measures the repetition against the bounds of its run's resolved ``config``
    (``collect.fidelity``), writes ``fidelity.json`` and returns its content: ``values``,
    ``bounds``, ``valid`` and the ``violations`` (empty when valid)."""
    link_bps = config["network"]["link_mbps"] * 1e6
    bounds = run_bounds(config)
    values = measure(directory, link_bps, cpu)
    broken = violations(values, bounds)
    record = {"values": values, "bounds": {k: list(v) for k, v in bounds.items()}, "valid": not broken,
              "violations": broken}
    layout.write_json(Path(directory) / FILE, record)
    return record
