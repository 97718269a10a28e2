"""The fidelity guard (sojourn.runner.fidelity) and concurrent testbeds: each measure
against its bound, a disturbed repetition marked invalid and redone on the real testbed,
and several testbeds at once in namespaces of their own."""

from __future__ import annotations

import functools
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from host_noise import HOST_NOISE_BOUNDS, HOST_NOISE_FIDELITY_LINES, fidelity_lines
from sojourn.runner import fidelity
from sojourn.runner.experiment import run_experiment
from sojourn.runner.spec import load_spec, validate
from sojourn.testbed.counters import MachineTicks, machine_ticks_now

def ticks(idle: int, steal: int, total: int) -> MachineTicks:
    """The machine's ticks with these idle, stolen and total counts (the rest spent in tasks)."""
    return MachineTicks(tasks=total - idle - steal, idle=idle, softirq=0, steal=steal, total=total)


DEFAULTS = validate({"name": "t", "workload": {"rho": 0.5}}).runs[0].config["collect"]["fidelity"]


def test_cpu_shares_come_from_proc_stat_deltas(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 100 700 100 0 0 0 0 0\ncpu0 1 2 3\n")
    start = machine_ticks_now(stat)
    stat.write_text("cpu  200 0 200 1000 100 0 0 100 0 0\n")
    shares = fidelity.cpu_shares(machine_ticks_now(stat).since(start))
    assert shares["cpu_idle"] == pytest.approx(300 / 600)  # idle + iowait over all ticks
    assert shares["cpu_steal"] == pytest.approx(100 / 600)


def counters(rates_bps: list[float], backlog: list[int]) -> pd.DataFrame:
    seconds = np.arange(len(rates_bps) + 1, dtype=float)
    sent = np.concatenate([[0.0], np.cumsum(np.array(rates_bps) / 8)])
    return pd.DataFrame({"t_s": seconds, "uplink_tx_bytes": sent, "q1_20_backlog_bytes": [0, *backlog]})


def test_uplink_rate_counts_only_intervals_inside_busy_stretches():
    # Samples 1-5 hold 20 ms of the 10 Mbit/s link (25,000 bytes) or more: the intervals 2-3
    # and 3-4 lie inside the stretch (9.9 Mbit/s); its edges (1-2, 4-5) and the rest do not count.
    table = counters([3e6, 5e6, 9.9e6, 9.9e6, 8e6, 2e6], [25000, 26000, 27000, 28000, 29000, 0])
    assert fidelity.uplink_rate(table, 10e6) == pytest.approx(0.99)
    # Momentary backlogs of a lightly loaded run: no stretch, nothing judged.
    assert fidelity.uplink_rate(counters([3e6] * 5, [0, 40000, 0, 40000, 0]), 10e6) is None
    # A short queue at every sample may have emptied in between: not a busy stretch.
    assert fidelity.uplink_rate(counters([9.6e6] * 5, [12000] * 5), 10e6) is None
    # On a slow link two frames are the floor (20 ms of 1 Mbit/s is under two frames).
    assert fidelity.uplink_rate(counters([0.99e6] * 5, [3100] * 5), 1e6) == pytest.approx(0.99)


def test_io_stall_is_the_longest_stretch_of_io_pressure_at_half_or_more():
    # overload-srpt's stall: 0.79 and 1.15 in two samples in a row, 1 s apart; a lone 0.6 and
    # values below 0.5 do not add to it.
    table = pd.DataFrame({"t_s": [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
                          "host_io_stall": [0.0, 0.6, 0.1, 0.79, 1.15, 0.49, 0.0]})
    assert fidelity.io_stall_seconds(table) == pytest.approx(2.0)
    assert fidelity.io_stall_seconds(table.assign(host_io_stall=0.25)) == 0.0
    assert fidelity.io_stall_seconds(table.drop(columns="host_io_stall")) is None  # counters from before the column
    # abort-retries: one sample at 0.5 or more, the sampler 2 us late each second: 1 s, which
    # meets the 1-s bound (it was 1.000002 s, and the repetition was redone).
    jittered = table.assign(t_s=[t * 1.000002 for t in table["t_s"]], host_io_stall=[0, 0, 0.7, 0, 0, 0, 0])
    assert fidelity.io_stall_seconds(jittered) == 1.0
    assert not fidelity.violations({"io_stall_s": fidelity.io_stall_seconds(jittered)}, fidelity.bounds_of(DEFAULTS))


def test_io_stall_judges_the_testbeds_own_pressure_where_the_counters_have_it():
    # A checkout beside a campaign: the machine's pressure at 0.8 for 3 s, the testbed's tasks
    # not waiting; then the testbed's client waiting for 2 s.
    table = pd.DataFrame({"t_s": [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
                          "host_io_stall": [0.0, 0.8, 0.8, 0.8, 0.0, 0.0, 0.0],
                          "testbed_io_stall": [0.0, 0.0, 0.0, 0.0, 0.7, 0.6, 0.0]})
    assert fidelity.io_stall_seconds(table) == 2.0
    assert fidelity.io_stall_seconds(table.drop(columns="testbed_io_stall")) == 3.0


def stage_series(seconds: list[float], processing_per_s: list[float], cpu_per_s: list[float]) -> pd.DataFrame:
    """The stage pool's series.csv: two stages sampled each second, the second never
    visited; ``processing_per_s`` and ``cpu_per_s`` are the first's per second."""
    processing, cpu = np.cumsum([0.0, *processing_per_s]), np.cumsum([0.0, *cpu_per_s])
    rows = [{"t_s": t, "stage": "MM", "processing_s": p, "cpu_s": c} for t, p, c in zip(seconds, processing, cpu)]
    rows += [{"t_s": t, "stage": "BR", "processing_s": 0.0, "cpu_s": 0.0} for t in seconds]
    return pd.DataFrame(rows)


def test_stage_stretch_is_the_worst_window_of_processing_over_cpu():
    seconds = [float(t) for t in range(31)]
    # A worker with a core to itself: processing takes its CPU time.
    assert fidelity.stage_stretch(stage_series(seconds, [0.9] * 30, [0.9] * 30)) == pytest.approx(1.0)
    # Seconds 12-15 processed at half speed (a busy loop beside it): their window has 9 s of
    # CPU in 7 x 0.9 + 3 x 1.8 = 11.7 s of processing; the others stay at 1.
    slow = [1.8 if 12 <= t < 15 else 0.9 for t in range(30)]
    cpu = [0.9] * 30
    value = fidelity.stage_stretch(stage_series(seconds, slow, cpu))
    assert value == pytest.approx(11.7 / 9.0)
    assert fidelity.violations({"stage_stretch": value}, fidelity.bounds_of(DEFAULTS)) == ["stage_stretch 1.3 > 1.05"]
    # A window with under 1 s of CPU is not judged: a few requests say little.
    assert fidelity.stage_stretch(stage_series(seconds, [0.09] * 30, [0.05] * 30)) is None
    # A series from before the cpu_s column: nothing judged.
    assert fidelity.stage_stretch(stage_series(seconds, cpu, cpu).drop(columns="cpu_s")) is None


def test_each_measure_is_judged_against_its_bound_and_zero_leaves_it_unjudged():
    bounds = fidelity.bounds_of(DEFAULTS)
    good = {"lag_p99_s": 0.001, "emulator_late_p99_s": 5e-5, "uplink_rate": 1.0, "cpu_idle": 0.7, "cpu_steal": 0.0,
            "io_stall_s": 1.0, "stage_stretch": 1.01, "foreign_cpu": 0.05}
    assert fidelity.violations(good, bounds) == []
    for name, bad in {"lag_p99_s": 0.02, "emulator_late_p99_s": 0.003, "uplink_rate": 0.9, "cpu_idle": 0.05,
                      "cpu_steal": 0.2, "io_stall_s": 2.0, "stage_stretch": 1.5}.items():
        lines = fidelity.violations({**good, name: bad}, bounds)
        assert len(lines) == 1 and lines[0].startswith(name), lines
    assert fidelity.violations({**good, "uplink_rate": None}, bounds) == []  # does not apply: not judged
    lenient = fidelity.bounds_of({**DEFAULTS, "lag_p99_ms": 0, "cpu_idle_min": 0})
    assert fidelity.violations({**good, "lag_p99_s": 1.0, "cpu_idle": 0.0}, lenient) == []
    # A CPU-bound run's lag and idle time are its results, and a closed loop's queue is not
    # continuously backlogged: recorded, not judged. Its stages' stretch is judged, and the CPU
    # foreign to its testbed, which a run other testbeds may share leaves to its idle time.
    cpu_bound = fidelity.bounds_of(DEFAULTS, cpu_bound_run=True)
    unpaced = fidelity.bounds_of({**DEFAULTS, "lag_p99_ms": 0, "cpu_idle_min": 0, "uplink_rate_tolerance": 0})
    assert cpu_bound == {**unpaced, "foreign_cpu": (None, 0.25)}
    assert cpu_bound["stage_stretch"] == (None, 1.05)
    assert fidelity.violations({**good, "foreign_cpu": 0.6}, cpu_bound) == ["foreign_cpu 0.6 > 0.25"]
    assert bounds["foreign_cpu"] == (None, None)


def test_foreign_cpu_is_the_worst_window_of_cpu_outside_the_testbed():
    seconds = np.arange(31.0)
    # Each sample's rate covers the second before it: samples 13-15 (seconds 12-15) are a
    # busy loop beside the run, so their window's 10 s hold 3 x 1.0 + 7 x 0.02 CPU seconds.
    rates = [1.0 if 13 <= t <= 15 else 0.02 for t in seconds]
    counters = pd.DataFrame({"t_s": seconds, "host_foreign_cpu": rates})
    assert fidelity.foreign_cpu(counters) == pytest.approx(0.314)
    assert fidelity.foreign_cpu(counters.assign(host_foreign_cpu=0.02)) == pytest.approx(0.02)
    assert fidelity.foreign_cpu(counters.drop(columns="host_foreign_cpu")) is None  # counters from before it


def test_a_running_repetition_is_found_invalid_only_when_nothing_left_can_save_it():
    bounds = fidelity.bounds_of({**DEFAULTS, "cpu_idle_min": 0.2}, cpu_bound_run=False)
    start = ticks(0, 0, 0)
    # 100 of 1000 ticks stolen so far: with 1000 ticks still to come, all unstolen, the share
    # could fall to 0.05, the bound itself: not yet certain.
    assert fidelity.certain_violations(bounds, start, ticks(500, 100, 1000), 1000, None) == []
    # With 900 to come it ends above 0.0526 whatever they bring: certain.
    assert fidelity.certain_violations(bounds, start, ticks(500, 100, 1000), 900, None) == [
        "cpu_steal 0.05263 > 0.05"]
    # Idle time is certain only when even an idle rest of the run cannot lift it to its bound.
    assert fidelity.certain_violations(bounds, start, ticks(0, 0, 1000), 300, None) == []
    assert fidelity.certain_violations(bounds, start, ticks(0, 0, 1000), 200, None) == ["cpu_idle 0.1667 < 0.2"]
    # Those 900 ticks spent as hoped (idle, none stolen): the guard's verdict at the end.
    at_end = fidelity.cpu_shares(ticks(1400, 100, 1900).since(start))
    assert fidelity.violations(at_end, bounds) == ["cpu_steal 0.05263 > 0.05"]


def test_foreign_cpu_is_certain_once_a_closed_window_exceeds_its_bound():
    bounds = fidelity.bounds_of(DEFAULTS, cpu_bound_run=True)
    idle = ticks(0, 0, 0)
    seconds = np.arange(26.0)
    # A busy loop in seconds 12-15; the window of seconds 20-30 is still open, and its
    # one busy second so far would read 1.0 on its own: only closed windows count.
    rates = [1.0 if 13 <= t <= 15 or t == 21 else 0.02 for t in seconds]
    table = pd.DataFrame({"t_s": seconds, "host_foreign_cpu": rates, "host_io_stall": 0.0})
    assert fidelity.certain_violations(bounds, idle, idle, 0, table) == ["foreign_cpu 0.314 > 0.25"]
    quiet_then_open = table.assign(host_foreign_cpu=[1.0 if t == 21 else 0.02 for t in seconds])
    assert fidelity.certain_violations(bounds, idle, idle, 0, quiet_then_open) == []
    # An I/O stall longer than its bound stays the longest so far.
    stalled = quiet_then_open.assign(host_io_stall=[0.9 if 3 <= t <= 5 else 0.0 for t in seconds])
    assert fidelity.certain_violations(bounds, idle, idle, 0, stalled) == ["io_stall_s 3 > 1"]


def test_the_watch_reads_the_counters_written_so_far_and_leaves_the_time_to_come_in_the_runs_favour(tmp_path):
    config = validate({"name": "t", "workload": {"mode": "closed", "clients": 4}}).runs[0].config
    path = tmp_path / "counters.csv"
    now = [0.0]
    watch = fidelity.Watch(config, path, ticks(0, 0, 0), longest_s=10.0, clock=lambda: now[0], ticks_per_s=100)
    assert watch.violations(ticks(0, 0, 1000)) == []  # no counters yet, 1250 ticks to come
    lines = ["t_s,host_foreign_cpu,host_io_stall"] + [f"{t},{1.0 if 13 <= t <= 15 else 0.0},0" for t in range(22)]
    path.write_text("\n".join(lines) + "\n21.5,0.0,0.9")  # a last line half written: left out
    assert watch.violations(ticks(500, 0, 1000)) == ["foreign_cpu 0.3 > 0.25"]
    now[0] = 10.0  # at its deadline: only the ticks so far count
    assert watch.violations(ticks(500, 60, 1000)) == ["cpu_steal 0.06 > 0.05", "foreign_cpu 0.3 > 0.25"]


class StealingHost:
    """A machine whose host takes the given share of each successive window of 200 ticks,
    with a clock that the waits advance."""

    def __init__(self, shares: list[float]):
        self.shares, self.now, self.ticks = list(shares), 1000.0, ticks(0, 0, 0)

    def sample(self) -> MachineTicks:
        return self.ticks

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        stolen = round(200 * self.shares.pop(0))
        self.ticks = self.ticks._replace(steal=self.ticks.steal + stolen, tasks=self.ticks.tasks + 200 - stolen,
                                         total=self.ticks.total + 200)

    def clock(self) -> float:
        return self.now

    def wait(self, stop_at: float | None = None, **settings) -> tuple[fidelity.Calm, list]:
        told = []
        calm = fidelity.wait_for_calm({**DEFAULTS, **settings}, stop_at, lambda steal, s: told.append((steal, s)),
                                      self.sample, self.sleep, self.clock)
        return calm, told


def test_an_attempt_waits_until_a_window_of_the_host_steal_is_calm():
    host = StealingHost([0.2, 0.1, 0.01, 0.0])
    calm, told = host.wait()
    assert calm == fidelity.Calm("calm", 3.0, 0.01)  # the third window, at the bound itself
    assert told == [(0.2, 1.0), (0.1, 2.0)]
    assert host.wait()[0] == fidelity.Calm("calm", 1.0, 0.0)  # a calm host costs one window


def test_the_wait_for_calm_ends_at_its_limit_or_the_deadline_and_is_skipped_when_steal_is_not_judged():
    assert StealingHost([0.3] * 5).wait(calm_wait_max_s=3)[0] == fidelity.Calm("gave up", 3.0, 0.3)
    calm = StealingHost([0.3] * 5).wait(stop_at=1002.0)[0]
    assert calm == fidelity.Calm("deadline", 2.0, 0.3) and not calm.starts
    never = StealingHost([])  # a sample or a wait would fail: none is taken
    assert never.wait(calm_steal_max=0)[0] == never.wait(cpu_steal_max=0)[0] == fidelity.Calm("not judged")


def test_a_point_whose_host_stays_stolen_until_the_deadline_is_not_started_and_keeps_its_last_attempt(tmp_path,
                                                                                                      monkeypatch):
    from sojourn.runner import points
    from sojourn.runner.points import ATTEMPTS, NOT_STARTED, Point, run_point

    host = StealingHost([0.3] * 3)
    monkeypatch.setattr(fidelity, "wait_for_calm", functools.partial(fidelity.wait_for_calm, sample=host.sample,
                                                                     sleep=host.sleep, clock=host.clock))
    monkeypatch.setattr(points, "run_repetition", lambda *args, **kwargs: pytest.fail("an attempt started"))
    run = validate({"name": "t", "workload": {"rho": 0.5}}).runs[0]
    directory = tmp_path / "t" / run.name / "0"
    directory.mkdir(parents=True)
    (directory / ATTEMPTS).write_text(json.dumps([{"reason": "fidelity: cpu_steal 0.08 > 0.05"}]))
    (directory / "status.json").write_text(json.dumps({"state": "invalid"}))
    events = []
    state = run_point(Point(1, 0, run, 0, directory), tmp_path / "t", "", "sjt", lambda *event: events.append(event),
                      stop_at=host.clock() + 1.5)
    assert state == NOT_STARTED
    assert [(kind, data["verdict"]) for kind, data in events] == [("calm", "waiting"), ("calm", "deadline")]
    assert json.loads((directory / "status.json").read_text())["state"] == "invalid"  # left for the next run
    assert json.loads((directory / ATTEMPTS).read_text())[0]["reason"].startswith("fidelity")


@pytest.mark.parametrize("workload, server, bound", [
    ({"rho": 0.5}, {}, False), ({"mode": "closed"}, {}, True),
    # 004's user equivalents think between requests: their demand is paced, as a trace's is.
    ({"mode": "closed", "think_s": 9.0}, {}, False), ({"mode": "closed", "think_s": 9.0}, {"cpu_quota": 0.5}, True),
    ({"rho": 0.5}, {"cpu_quota": 0.5}, True), ({"mode": "capacity", "levels": [1, 2]}, {}, True),
    ({"load_fraction": 0.5, "levels": [1, 2]}, {}, True)])
def test_cpu_bound_runs_are_told_from_link_bound_ones(workload, server, bound):
    config = validate({"name": "t", "workload": workload, "server": server}).runs[0].config
    assert fidelity.cpu_bound(config) is bound


def test_a_cpu_bound_spec_refuses_concurrency(tmp_path):
    path = tmp_path / "t.toml"
    path.write_text('name = "t"\n[workload]\nrho = 0.5\n[collect.fidelity]\ncpu_idle_min = 0\n'
                    '[variants.a]\n[variants.b]\n')
    with pytest.raises(ValueError, match="--concurrency 1"):
        run_experiment(load_spec(path), tmp_path / "results", concurrency=2)
    path.write_text('name = "t"\n[workload]\nmode = "closed"\n[variants.a]\n[variants.b]\n')
    with pytest.raises(ValueError, match="CPU-bound"):
        run_experiment(load_spec(path), tmp_path / "results", concurrency=2)
    # A cold docroot would be evicted under a testbed that shares it.
    path.write_text('name = "t"\n[workload]\nrho = 0.5\n[collect]\ndocroot_cache = "cold"\n[variants.a]\n[variants.b]\n')
    with pytest.raises(ValueError, match="docroot_cache"):
        run_experiment(load_spec(path), tmp_path / "results", concurrency=2)


root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")

SPEC = """\
name = "{name}"
[server]
kind = "sojourn"
[network]
link_mbps = 10
[workload]
rho = 0.5
duration_s = 4
clients = 20
seed = 3
[collect]
drain_s = 10
interval_s = 0.5
[collect.fidelity]
cpu_idle_min = 0.3
redo = {redo}
""" + HOST_NOISE_FIDELITY_LINES


def run_beside_busy_loops(spec: Path, results: Path, prefix: str, loops: int, seen: list):
    """Runs the spec with ``loops`` busy loops, each in a session of its own (the kernel
    shares the CPU between sessions first), from the start of its first attempt until an
    attempt is found invalid; ``seen`` gets every event."""
    hogs: list[subprocess.Popen] = []

    def on_event(kind, data):
        seen.append((kind, data))
        if kind == "repetition" and not data["skipped"]:
            hogs.extend(subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
                        for _ in range(loops))
        elif kind == "invalid":
            stop(hogs)

    def stop(processes):
        for hog in processes:
            hog.kill()
            hog.wait()

    try:
        return run_experiment(load_spec(spec), results, prefix=prefix, on_event=on_event)
    finally:
        stop(hogs)


@root_only
@pytest.mark.netns
def test_a_disturbed_repetition_is_marked_invalid_and_redone(tmp_path):
    """Two busy loops beside the first attempt take the machine's idle time below the
    bound: that attempt is invalid, its record kept in attempts.json and its counters beside
    it; the attempt run again without them is valid and complete."""
    path = tmp_path / "guard.toml"
    path.write_text(SPEC.format(name="guard", redo=1))
    seen: list[tuple[str, dict]] = []
    outcome = run_beside_busy_loops(path, tmp_path / "results", "sjfg", os.cpu_count() or 2, seen)
    directory = tmp_path / "results" / "guard" / "run" / "0"
    assert outcome.states == {("run", 0): "complete"}
    assert [kind for kind, _ in seen].count("invalid") == 1
    attempts = json.loads((directory / "attempts.json").read_text())
    assert len(attempts) == 1 and not attempts[0]["fidelity"]["valid"]
    assert "host_io_stall" in (directory / "attempt-0-counters.csv").read_text().splitlines()[0]
    assert any(line.startswith("cpu_idle") for line in attempts[0]["fidelity"]["violations"])
    record = json.loads((directory / "fidelity.json").read_text())
    assert record["valid"] and record["values"]["cpu_idle"] >= 0.3
    summary = json.loads((directory / "summary.json").read_text())
    assert summary["fidelity"] == record


STAGES_SPEC = """\
name = "stage-guard"
[server]
kind = "sojourn"
stages = { policy = "fifo", series_interval_ms = 250 }
[network]
link_mbps = 100
groups = [{ name = "gold" }, { name = "silver" }, { name = "bronze" }]
[workload]
mode = "sessions"
duration_s = 4
timeout_s = 5
# 12 sessions a second of 101 ms of CPU on average: more than the stage worker's core, so it
# computes throughout (a worker that sleeps between requests wins its core back from busy
# loops when it wakes: at 8 a second, 0.8 of its core, they stretched it only 1.10x).
sessions = { rate = 12 }
[collect]
drain_s = 5
interval_s = 0.5
[collect.fidelity]
# Alone it measured 1.0005-1.013 (sojourn.runner.fidelity).
stage_stretch_max = 1.25
# Only the stretch is under test: the host's steal (11-19% on a noisy 29 Nov) would also void an
# attempt, and the busy loops are foreign CPU (tested by itself below).
cpu_steal_max = 0
foreign_cpu_max = 0
redo = 1
"""


@root_only
@pytest.mark.netns
def test_a_cpu_stage_repetition_that_lost_its_cpu_is_marked_invalid_and_redone(tmp_path):
    """A CPU-bound run's idle time is not judged, but its stage worker's stretch is: busy
    loops beside the first attempt make its processing take longer than the CPU it burned,
    so that attempt is invalid; run again without them, it is valid. The kernel shares the
    CPU between sessions first (autogroup), and the server runs in a session of its own:
    two busy loops in one session stretched its saturated worker only 1.11x, so each of
    the four here has its own session (the server's then gets about 2/5 of the machine)."""
    path = tmp_path / "stage-guard.toml"
    path.write_text(STAGES_SPEC)
    outcome = run_beside_busy_loops(path, tmp_path / "results", "sjfs", 2 * (os.cpu_count() or 2), [])
    directory = tmp_path / "results" / "stage-guard" / "run" / "0"
    assert outcome.states == {("run", 0): "complete"}
    attempts = json.loads((directory / "attempts.json").read_text())
    assert len(attempts) == 1 and attempts[0]["fidelity"]["values"]["stage_stretch"] > 1.25, attempts
    assert [line.split()[0] for line in attempts[0]["fidelity"]["violations"]] == ["stage_stretch"]
    record = json.loads((directory / "fidelity.json").read_text())
    assert record["valid"] and 1.0 <= record["values"]["stage_stretch"] <= 1.25, record


FOREIGN_SPEC = """\
name = "foreign-guard"
[server]
kind = "sojourn"
[network]
link_mbps = 100
[workload]
mode = "closed"
duration_s = 40
clients = 8
seed = 3
[collect]
drain_s = 5
interval_s = 0.5
[collect.fidelity]
redo = 1
""" + fidelity_lines({key: value for key, value in HOST_NOISE_BOUNDS.items() if key != "foreign_cpu_max"})


@root_only
@pytest.mark.netns
def test_a_cpu_bound_repetition_beside_foreign_work_is_marked_invalid_and_redone(tmp_path):
    """A closed loop without think time saturates the server by design, so its idle time is
    not judged; busy loops outside the testbed beside its first attempt are foreign CPU, and
    that attempt is invalid, stopped as soon as one 10-s window of it had closed rather than
    after its 40 s; run again without them, it is valid."""
    path = tmp_path / "foreign-guard.toml"
    path.write_text(FOREIGN_SPEC)
    outcome = run_beside_busy_loops(path, tmp_path / "results", "sjff", os.cpu_count() or 2, [])
    directory = tmp_path / "results" / "foreign-guard" / "run" / "0"
    assert outcome.states == {("run", 0): "complete"}
    attempts = json.loads((directory / "attempts.json").read_text())
    assert len(attempts) == 1 and [line.split()[0] for line in attempts[0]["fidelity"]["violations"]] == ["foreign_cpu"]
    stopped = re.search(r"^fidelity: foreign_cpu [\d.]+ > 0.25 \(certain (\d+) s into the load, which was stopped\)$",
                        attempts[0]["reason"])
    assert stopped and int(stopped[1]) < 40, attempts[0]["reason"]
    record = json.loads((directory / "fidelity.json").read_text())
    assert record["valid"] and record["values"]["foreign_cpu"] <= 0.25, record


# No run is idle all the time, so cpu_idle is the violation (SPEC leaves the host's noise unjudged).
NEVER_IDLE_ENOUGH = "cpu_idle_min = 1"


@root_only
@pytest.mark.netns
def test_a_repetition_that_stays_disturbed_is_left_invalid_and_redone_by_the_next_run(tmp_path):
    path = tmp_path / "never.toml"
    path.write_text(SPEC.format(name="never", redo=0).replace("cpu_idle_min = 0.3", NEVER_IDLE_ENOUGH))
    outcome = run_experiment(load_spec(path), tmp_path / "results", prefix="sjfh")
    directory = tmp_path / "results" / "never" / "run" / "0"
    assert outcome.states == {("run", 0): "invalid"}
    status = json.loads((directory / "status.json").read_text())
    assert status["state"] == "invalid" and status["reason"].startswith("fidelity: cpu_idle")
    assert len(json.loads((directory / "attempts.json").read_text())) == 1
    # Not complete: the next run of the same spec runs it again rather than keeping it.
    seen = []
    run_experiment(load_spec(path), tmp_path / "results", prefix="sjfh", on_event=lambda kind, data: seen.append(data))
    assert {"run": "run", "rep": 0, "index": 1, "total": 1, "skipped": False} in seen
    # Its record holds both invocations' attempts, the earlier first.
    attempts = json.loads((directory / "attempts.json").read_text())
    assert len(attempts) == 2 and attempts[0]["started"] < attempts[1]["started"]
    assert (directory / "attempt-1-counters.csv").is_file()


@root_only
@pytest.mark.netns
def test_no_redo_starts_after_the_deadline(tmp_path):
    """A deadline that passes during the first attempt leaves the invalid repetition for the
    next run, its redos unspent, rather than running past the deadline by a repetition."""
    from sojourn.runner.experiment import NOT_STARTED

    path = tmp_path / "late.toml"
    path.write_text(SPEC.format(name="late", redo=3).replace("cpu_idle_min = 0.3", NEVER_IDLE_ENOUGH))
    seen: list[tuple[str, dict]] = []
    outcome = run_experiment(load_spec(path), tmp_path / "results", prefix="sjfl", stop_at=time.time() + 1,
                             on_event=lambda kind, data: seen.append((kind, data)))
    assert outcome.states == {("run", 0): NOT_STARTED}
    told = [data for kind, data in seen if kind == "invalid"]
    assert len(told) == 1 and not told[0]["again"], told
    directory = tmp_path / "results" / "late" / "run" / "0"
    assert json.loads((directory / "status.json").read_text())["state"] == "invalid"
    assert len(json.loads((directory / "attempts.json").read_text())) == 1


@root_only
@pytest.mark.netns
def test_sojourn_run_says_why_a_repetition_was_left_invalid(tmp_path):
    path = tmp_path / "never.toml"
    path.write_text(SPEC.format(name="never", redo=0).replace("cpu_idle_min = 0.3", NEVER_IDLE_ENOUGH))
    command = Path(sys.executable).with_name("sojourn")
    done = subprocess.run([str(command), "run", str(path), "--results", str(tmp_path / "results"), "--prefix", "sjfw",
                           "--no-report"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 3  # LEFT_INVALID: the machine, not the code, held it back
    said = " ".join(done.stdout.split())
    assert re.search(r"run rep 0: invalid in \d+ s \(fidelity: cpu_idle", said), done.stdout
    assert "1 repetition(s) left invalid" in said and "(exit status 3)" in said, done.stdout


@root_only
@pytest.mark.netns
def test_concurrent_testbeds_each_complete_in_their_own_namespaces(tmp_path):
    path = tmp_path / "many.toml"
    # What is under test is isolation, not the guard (tested above): three testbeds on two
    # cores may be judged disturbed by a noisy host (CI failed once on it, reason unprinted),
    # so only the idle time, which must be judged for --concurrency, is, and loosely.
    path.write_text(SPEC.format(name="many", redo=0).replace(
                        "cpu_idle_min = 0.3", "cpu_idle_min = 0.05\nio_stall_max_s = 0\nuplink_rate_tolerance = 0")
                    + '[variants.a]\nserver.policy = "fair"\n[variants.b]\nserver.policy = "srpt"\n'
                      '[variants.c]\nserver.policy = "las"\n')
    # Through the installed command: its worker processes import it again (multiprocessing's spawn).
    command = Path(sys.executable).with_name("sojourn")
    done = subprocess.run([str(command), "run", str(path), "--results", str(tmp_path / "results"), "--prefix", "sjfc",
                           "--concurrency", "3", "--no-report"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for name in ("a", "b", "c"):
        assert json.loads((tmp_path / "results" / "many" / name / "0" / "status.json").read_text())["state"] == "complete"
    prefixes = set()
    for name in ("a", "b", "c"):
        directory = tmp_path / "results" / "many" / name / "0"
        versions = json.loads((directory / "versions.json").read_text())
        prefixes.add(versions["testbed"]["namespaces"]["server"])
        assert json.loads((directory / "summary.json").read_text())["completed"] > 0
    assert len(prefixes) == 3
    assert "sjfc" not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


@root_only
@pytest.mark.netns
@pytest.mark.parametrize("stop", ["SIGTERM", "SIGINT"])
def test_stopping_concurrent_testbeds_stops_every_worker_and_starts_nothing_more(tmp_path, stop):
    """SIGTERM (or SIGINT) to the driver of `sojourn run --concurrency 2`: the repetitions
    under way end partial with their namespaces removed, no worker is left running and no
    further repetition starts (before, the workers outlived the driver and went on)."""
    path = tmp_path / "stop.toml"
    path.write_text(SPEC.format(name="stop", redo=0).replace("duration_s = 4", "duration_s = 60")
                    .replace("cpu_idle_min = 0.3", "cpu_idle_min = 0.05")
                    + "".join(f'[variants.{name}]\nserver.policy = "fair"\n' for name in "abcd"))
    results = tmp_path / "results"
    command = Path(sys.executable).with_name("sojourn")
    process = subprocess.Popen([str(command), "run", str(path), "--results", str(results), "--prefix", "sjfs",
                                "--concurrency", "2", "--no-report"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    try:
        deadline = time.monotonic() + 120
        while sum((results / "stop" / name / "0" / "intervals.csv").is_file() for name in "abcd") < 2:
            assert process.poll() is None, process.stdout.read()
            assert time.monotonic() < deadline, "two repetitions never started"
            time.sleep(0.2)
        workers = children(process.pid)
        process.send_signal(getattr(signal, stop))
        output, _ = process.communicate(timeout=90)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130, output[-3000:]
    started = [name for name in "abcd" if (results / "stop" / name / "0").is_dir()]
    assert len(started) == 2, started
    for name in started:
        status = json.loads((results / "stop" / name / "0" / "status.json").read_text())
        assert status["state"] == "partial" and "interrupted" in status["reason"], status
    time.sleep(2)  # a worker that went on would have started a repetition by now
    assert [name for name in "abcd" if (results / "stop" / name / "0").is_dir()] == started
    assert "sjfs" not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    left = subprocess.run(["pgrep", "-f", str(results)], capture_output=True, text=True).stdout.split()
    assert left == [], left
    assert [pid for pid in workers if Path(f"/proc/{pid}").exists()] == [], "pool workers outlived the driver"


def children(pid: int) -> list[int]:
    return [int(child) for task in Path(f"/proc/{pid}/task").iterdir()
            for child in (task / "children").read_text().split()]
