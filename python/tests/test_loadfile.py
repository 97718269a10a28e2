"""The runner's load generator file (sojourn.runner.loadfile), made by the run's plan from
the spec's workload and read by the real engine: every key the runner writes is an option
`sojourn-engine load --config` accepts, and the command line overrides the file."""

from __future__ import annotations

import json
import socket
import subprocess
import tomllib

import pytest

from sojourn.engine import engine_path, options_toml
from sojourn.runner.inputs import Inputs
from sojourn.runner.loadfile import LoadFile
from sojourn.runner.spec import validate


def plan(**workload):
    """The plan of a one-run spec with these workload keys."""
    return validate({"name": "t", "workload": workload, "variants": {"a": {}}}).runs[0].plan


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def inputs(tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text("arrival_s,client,path,size\n0.0,0,/a,100\n0.01,1,/b,200\n")
    (tmp_path / "paths.txt").write_text("/a\n/b\n")
    return Inputs(trace, tmp_path, [], 0.01, 2)


def run(run_file: LoadFile, *overrides: str) -> subprocess.CompletedProcess:
    path = run_file.write(run_file.out / "load.toml")
    return subprocess.run([str(engine_path()), "load", "--config", str(path), *overrides],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("mode", ["open", "closed"])
def test_every_key_the_runner_writes_is_accepted(tmp_path, inputs, mode):
    out = tmp_path / "out"
    out.mkdir()
    load = {"open": {"rho": 0.5}, "closed": {"mode": "closed", "users": 2, "duration_s": 0.3, "think_s": 0.05}}[mode]
    run_file = plan(**load, abort_after_s=0.5, retries=1, timeout_s=2.0, verify=True).load.placed(
        f"127.0.0.1:{closed_port()}", out, ["127.0.0.1", "127.0.0.1"], inputs.trace)
    written = tomllib.loads((run_file.write(out / "load.toml")).read_text())
    assert written["mode"] == mode and written["verify-content"] is True and written["abort-after"] == 0.5
    assert ("trace" in written) == (mode == "open") and ("paths-file" in written) == (mode == "closed")
    done = run(run_file)
    assert done.returncode == 0, done.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["requests"] >= (2 if mode == "open" else 1)
    assert set(summary["outcomes"]) == {"connect_error"}


def test_the_command_line_overrides_the_file(tmp_path, inputs):
    run_file = plan(rho=0.5).load.placed(f"127.0.0.1:{closed_port()}", tmp_path, ["127.0.0.1"], inputs.trace)
    assert run(run_file, "--seed", "9").returncode == 0
    assert json.loads((tmp_path / "summary.json").read_text())["config"]["seed"] == 9


def test_a_bad_key_is_named_with_the_file(tmp_path, inputs):
    run_file = plan(rho=0.5).load.placed("127.0.0.1:1", tmp_path, ["127.0.0.1"], inputs.trace)
    path = run_file.write(tmp_path / "load.toml")
    path.write_text(path.read_text() + "requests-per-connection = 3\n")
    done = subprocess.run([str(engine_path()), "load", "--config", str(path)], capture_output=True, text=True)
    assert done.returncode != 0
    assert str(path) in done.stderr and "unknown field `requests-per-connection`" in done.stderr
    with pytest.raises(ValueError, match="load mode 'burst'"):
        LoadFile(mode="burst", seed=1, timeout=1.0, requests_per_conn=1, conns_per_client=1)
    with pytest.raises(ValueError, match="target, out, source_addrs not set"):
        plan(rho=0.5).load.write(tmp_path / "unplaced.toml")


def test_the_plan_holds_each_modes_documents():
    """What each workload mode runs: the load and the capacity probe's level, as the spec
    gives them (a closed user keeps one connection; sessions verify no docroot bodies)."""
    open_run = plan(rho=0.5, abort_after_s=3.0, retries=2)
    assert (open_run.load.mode, open_run.load.abort_after, open_run.load.retries, open_run.probe) == ("open", 3.0, 2, None)
    assert plan(rho=0.5).load.retries is None  # retries only with aborts
    # An open run awaits answers collect.drain_s after its last request (load --drain).
    assert plan(rho=0.5).load.drain == 60.0 == plan(rho=0.5).load.timeout  # by default every request ends on its own
    drained = validate({"name": "t", "workload": {"rho": 1.2}, "collect": {"drain_s": 0}, "variants": {"a": {}}})
    assert drained.runs[0].plan.load.drain == 0.0
    closed = plan(mode="closed", users=7, duration_s=30.0, think_s=2.0).load
    assert (closed.users, closed.duration, closed.think_time, closed.conns_per_client) == (7, 30.0, "exp:2.0", 1)
    assert closed.start_spread is None  # all at once unless the spec spreads them
    spread = plan(mode="capacity", levels=[8], level_s=5.0, warmup_s=2.0, start_spread_s=1.5).probe
    assert spread.start_spread == 1.5 and "start-spread = 1.5" in options_toml(spread)
    probe_only = plan(mode="capacity", levels=[8, 16], level_s=5.0)
    assert probe_only.load is None and (probe_only.probe.mode, probe_only.probe.duration) == ("closed", 5.0)
    fraction = plan(profile="", rho=0.0, load_fraction=0.9, levels=[8], level_s=5.0)
    assert fraction.load.mode == "open" and fraction.probe.users is None
