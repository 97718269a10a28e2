"""SIGKILL of `sojourn run` mid-run: its server, load generator and namespace holder die
with it (parent-death signal), `sojourn testbed status` names the leftovers as a dead run's,
and the next run says what it found, removes it, and leaves nothing behind when it is done."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from host_noise import HOST_NOISE_UNJUDGED
from sojourn.testbed import sysnet

pytestmark = [pytest.mark.netns, pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")]

PREFIX = "sjhk"
SPEC = """name = "killed"
[network]
link_mbps = 10
[workload]
rho = 0.5
duration_s = 8
clients = 10
seed = 1
[collect]
""" + HOST_NOISE_UNJUDGED + """\
drain_s = 5
"""


def sojourn(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "sojourn.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True, **kwargs)


def pids_in_testbed() -> set[int]:
    return {pid for ns in sysnet.namespaces_with_prefix(PREFIX) for pid in sysnet.ns_pids(ns)}


def test_sigkill_of_sojourn_run_leaves_no_process_and_the_next_run_cleans_up(tmp_path):
    spec = tmp_path / "killed.toml"
    spec.write_text(SPEC)
    results = tmp_path / "results"
    rep = results / "killed" / "run" / "0"
    run = sojourn("run", str(spec), "--results", str(results), "--prefix", PREFIX, "--no-report")
    try:
        deadline = time.monotonic() + 90
        while not (rep / "load.toml").is_file():  # server up, load generator started
            assert run.poll() is None, run.stdout.read()
            assert time.monotonic() < deadline, "the load generator never started"
            time.sleep(0.2)
        time.sleep(1.0)
        children = pids_in_testbed()
        assert len(children) >= 3, children  # namespace holder, server, load generator (at least)
        os.kill(run.pid, signal.SIGKILL)
        run.wait(timeout=10)
        deadline = time.monotonic() + 5
        while pids_in_testbed() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not pids_in_testbed(), f"processes outlived `sojourn run`: {pids_in_testbed()}"
        assert json.loads((rep / "status.json").read_text())["state"] == "running"
        status = subprocess.run([sys.executable, "-m", "sojourn.cli", "testbed", "status", "--prefix", PREFIX],
                                capture_output=True, text=True)
        assert "leftovers of a run that died" in status.stdout and str(run.pid) in status.stdout
        # The next run says what it found, redoes the repetition and removes everything at its end.
        again = sojourn("run", str(spec), "--results", str(results), "--prefix", PREFIX, "--no-report")
        output, _ = again.communicate(timeout=180)
        assert again.returncode == 0, output
        assert "left 'running' by a run that died" in output
        assert f"removed what a run that died (pid {run.pid}) left" in output
        assert json.loads((rep / "status.json").read_text())["state"] == "complete"
    finally:
        for proc in (run,):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        sysnet.remove_prefix(PREFIX)
    assert not sysnet.namespaces_with_prefix(PREFIX)
    assert not sysnet.host_links_with_prefix(PREFIX)
    assert not Path(sysnet.OWNERS, f"{PREFIX}.json").exists()


def test_a_dead_server_is_recorded_promptly_not_drained_late(tmp_path):
    """Issue 17: the server dies mid-run. The load generator keeps its schedule: refused
    connects are recorded at their scheduled time (within two round trips) and the run
    ends at its scheduled end, not seconds later."""
    import csv

    from sojourn.engine import engine_path
    from sojourn.testbed import Testbed, TestbedConfig, WanGroup

    root = tmp_path / "root"
    root.mkdir()
    (root / "a.bin").write_bytes(bytes(1000))
    engine = str(engine_path())
    with Testbed(TestbedConfig(prefix="sjdt", groups=[WanGroup("g0", clients=10, rtt_ms=20)])) as tb:
        server = tb.popen(tb.server_ns, [engine, "serve", "--root", str(root), "--listen", f"{tb.server_addr}:8080",
                                         "--threads", "1"], stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        addrs = ",".join(a for group in tb.client_addrs.values() for a in group)
        started = time.monotonic()
        load = tb.popen(tb.client_ns, [engine, "load", "open", "--target", f"{tb.server_addr}:8080", "--rate", "500",
                                       "--duration", "6", "--path", "/a.bin", "--clients", "200", "--source-addrs", addrs,
                                       "-o", str(tmp_path / "out"), "--quiet"])
        time.sleep(2)
        server.kill()
        assert load.wait(timeout=60) == 0
        wall = time.monotonic() - started
    assert wall < 7.0, f"a 6 s run took {wall:.1f} s after the server died"
    rows = list(csv.DictReader((tmp_path / "out" / "records.csv").open()))
    refused = [r for r in rows if r["outcome"] == "connect_error"]
    assert len(refused) > 1000 and all("refused" in r["error"] for r in refused)
    late = sorted(float(r["last_byte_s"]) - float(r["scheduled_s"]) for r in refused)
    assert late[int(0.99 * len(late))] < 0.1, late[-10:]  # two 20 ms round trips and then some


def test_a_server_killed_mid_run_makes_the_repetition_partial_naming_it(tmp_path):
    """The records of a run whose server died are whole but measure a dead process: the
    repetition is partial, its reason names the server and the signal, so a resume redoes it."""
    spec = tmp_path / "killed.toml"
    spec.write_text(SPEC.replace('name = "killed"', 'name = "server-killed"'))
    results = tmp_path / "results"
    rep = results / "server-killed" / "run" / "0"
    run = sojourn("run", str(spec), "--results", str(results), "--prefix", PREFIX, "--no-report")
    try:
        deadline = time.monotonic() + 90
        while not (rep / "load.toml").is_file():
            assert run.poll() is None, run.stdout.read()
            assert time.monotonic() < deadline, "the load generator never started"
            time.sleep(0.2)
        servers = [pid for pid in sysnet.ns_pids(f"{PREFIX}-srv")
                   if b"serve" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")]
        assert len(servers) == 1, servers
        os.kill(servers[0], signal.SIGKILL)
        output, _ = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
        sysnet.remove_prefix(PREFIX)
    status = json.loads((rep / "status.json").read_text())
    assert status["state"] == "partial", (status, output)
    assert "server under test (sojourn) ended during the run (killed by SIGKILL)" in status["reason"]
    assert run.returncode != 0
