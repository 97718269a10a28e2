"""The machine a repetition ran on and its speed (sojourn.testbed.host, host.json)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from sojourn.runner import fidelity, layout, points
from sojourn.testbed import host
from sojourn.runner.points import ATTEMPTS, Point, run_point
from sojourn.runner.spec import validate

CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Processor
cpu MHz\t\t: 2600.000

processor\t: 1
model name\t: Intel(R) Xeon(R) Processor
cpu MHz\t\t: 2599.000
"""


def test_the_identity_of_a_machine_is_its_boot_id_and_first_processor():
    ident = host.identity(CPUINFO, "b7be9aa4-ce20\n", "6.18.44", 2)
    assert ident == {"boot_id": "b7be9aa4-ce20", "cpu_model": "Intel(R) Xeon(R) Processor", "cpu_mhz": 2600.0,
                     "kernel": "6.18.44", "cpus": 2}
    # A processor that states no model or speed (some virtual ones) is still a machine.
    assert host.identity("processor\t: 0\n", "x", "k", 1) == {"boot_id": "x", "cpu_model": "unknown",
                                                              "cpu_mhz": None, "kernel": "k", "cpus": 1}


def test_this_machines_speed_is_the_cpu_time_of_fixed_work():
    allowed = os.sched_getaffinity(0)
    speed = host.measure_speed(trials=1)
    assert os.sched_getaffinity(0) == allowed
    # Both ends' system calls and TCP stack for a round trip cost microseconds of CPU, not
    # nothing (the echo's share is counted) and not a millisecond; a loop step nanoseconds.
    assert 1 < speed.loopback_round_trip_cpu_us < 1000
    assert 1 < speed.interpreter_step_ns < 10_000
    # Each CPU this thread may use is measured, and the thread gets all of them back.
    assert set(speed.per_cpu) == {str(cpu) for cpu in os.sched_getaffinity(0)}
    assert min(cpu["loopback_round_trip_cpu_us"] for cpu in speed.per_cpu.values()) \
        <= speed.loopback_round_trip_cpu_us <= max(cpu["loopback_round_trip_cpu_us"] for cpu in speed.per_cpu.values())
    described = host.describe()
    assert described["boot_id"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert all(math.isfinite(described["speed"][key]) and described["speed"][key] > 0
               for key in ("loopback_round_trip_cpu_us", "interpreter_step_ns"))


def test_every_attempt_records_the_machine_it_ran_on(tmp_path, monkeypatch):
    """The attempt that counts leaves host.json; an invalid one its record in attempts.json."""
    outcomes = ["invalid", "complete"]

    def repetition(run, rep, directory, *args, **kwargs):
        state = outcomes.pop(0)
        (directory / fidelity.FILE).write_text(json.dumps({"valid": state == "complete"}))
        layout.mark(directory, state, "fidelity: cpu_steal 0.08 > 0.05" if state == "invalid" else "")
        return state

    monkeypatch.setattr(points, "run_repetition", repetition)
    monkeypatch.setattr(points, "point_inputs", lambda run, directory: None)
    run = validate({"name": "t", "workload": {"rho": 0.5},
                    "collect": {"fidelity": {"calm_steal_max": 0}}}).runs[0]
    directory = tmp_path / "t" / run.name / "0"
    assert run_point(Point(1, 0, run, 0, directory), tmp_path / "t", "", "sjt") == "complete"
    boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    kept = json.loads((directory / host.FILE).read_text())
    assert kept["boot_id"] == boot_id and kept["speed"]["loopback_round_trip_cpu_us"] > 0
    tried = json.loads((directory / ATTEMPTS).read_text())
    assert [attempt["host"]["boot_id"] for attempt in tried] == [boot_id]


def test_sojourn_testbed_host_prints_one_json_line_per_measurement(capsys):
    from sojourn.cli import main

    assert main(["testbed", "host", "--repeat", "2", "--trials", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(json.loads(line)["speed"]["loopback_round_trip_cpu_us"] > 0 for line in lines)
    with pytest.raises(SystemExit) as refused:
        main(["testbed", "host", "--repeat", "0"])
    assert refused.value.code == 2 and "'0': expected a whole number >= 1" in capsys.readouterr().err


def test_a_machine_that_cannot_be_measured_says_why_and_loses_no_repetition(monkeypatch):
    def no_loopback(trials=host.TRIALS):
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr(host, "measure_speed", no_loopback)
    assert host.record() == {"error": "ConnectionRefusedError: [Errno 111] Connection refused"}
