"""Teardown leaves nothing behind: namespaces, links, cgroups and processes are counted
before and after a normal run, a failing run and a SIGKILLed run (whose
leftovers the next run with the same prefix removes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from sojourn.testbed import Testbed, TestbedConfig, WanGroup, sysnet
from sojourn.testbed.cgroups import cgroup2_root

pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
]

PREFIX = "sjtbz"
MARKER = ["sleep", "317"]  # a process the tests start inside the namespaces
CONFIG = TestbedConfig(prefix=PREFIX, groups=[WanGroup("g0", rtt_ms=10), WanGroup("g1", loss=0.01)])


def snapshot() -> dict:
    """What exists on the host: our namespaces, host links, the testbed's cgroup tree, and
    processes whose command line mentions the prefix (the emulator's) or is the marker."""
    marker = "\0".join(MARKER).encode() + b"\0"
    procs = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if (PREFIX.encode() in cmdline and b"pytest" not in cmdline) or cmdline == marker:
            procs.append(int(pid))
    links = [line.split(":")[1].strip() for line in sysnet.ip(None, "-o", "link", "show").splitlines()]
    return {
        "namespaces": sorted(sysnet.namespaces_with_prefix(PREFIX)),
        "host_links": sorted(links),
        "cgroups": sorted(path.name for path in cgroup2_root().glob(f"sojourn-{PREFIX}*")),
        "processes": sorted(procs),
    }


def test_normal_run_leaves_nothing():
    before = snapshot()
    with Testbed(CONFIG) as tb:
        tb.popen(tb.server_ns, MARKER)
        during = snapshot()
    assert len(during["namespaces"]) == 3 and during["cgroups"] == [f"sojourn-{PREFIX}"] and during["processes"], during
    assert snapshot() == before


def test_failing_run_leaves_nothing():
    before = snapshot()
    with pytest.raises(RuntimeError, match="experiment failed"):
        with Testbed(CONFIG) as tb:
            tb.popen(tb.client_ns, MARKER)
            raise RuntimeError("experiment failed")
    assert snapshot() == before


def test_sigterm_tears_down():
    before = snapshot()
    script = ("import time\nfrom sojourn.testbed import Testbed, TestbedConfig\n"
              f"with Testbed(TestbedConfig(prefix='{PREFIX}', emulator=True)) as tb:\n"
              f"    tb.popen(tb.server_ns, {MARKER!r})\n"
              "    print('up', flush=True)\n    time.sleep(300)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "up"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    finally:
        proc.kill()
    assert snapshot() == before


def test_sigkilled_run_is_cleared_by_the_next_run():
    before = snapshot()
    script = ("import time; from sojourn.testbed import Testbed, TestbedConfig, WanGroup; "
              f"tb = Testbed(TestbedConfig(prefix='{PREFIX}', groups=[WanGroup('g0', rtt_ms=10)])).__enter__(); "
              f"tb.popen(tb.server_ns, {MARKER!r}); print('up', flush=True); time.sleep(300)")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "up"
        proc.kill()
        proc.wait(timeout=10)
        # The parent-death SIGKILL is delivered at once, but the processes take a moment to
        # exit (an exited one, a zombie until this VM's init reaps it, has an empty cmdline).
        deadline = time.monotonic() + 2
        while (left := snapshot())["processes"] and time.monotonic() < deadline:
            time.sleep(0.05)
        # The namespaces stay (they are mounts), its processes died with it (parent-death signal).
        assert len(left["namespaces"]) == 3, "a SIGKILLed run leaves its namespaces"
        assert not left["processes"], f"processes outlived their testbed's owner: {left['processes']}"
        with Testbed(CONFIG):
            pass
    finally:
        proc.kill()
        sysnet.remove_prefix(PREFIX)
    time.sleep(0.2)
    assert snapshot() == before


def test_cli_up_then_down_leaves_nothing():
    before = snapshot()
    sojourn = [sys.executable, "-m", "sojourn.cli", "testbed"]
    up = subprocess.run(sojourn + ["up", "--prefix", PREFIX, "--group", "name=far,rtt_ms=20,loss=0.01"],
                        capture_output=True, text=True)
    try:
        assert up.returncode == 0, up.stderr
        assert '"server_addr": "10.77.0.1"' in up.stdout
        status = subprocess.run(sojourn + ["status", "--prefix", PREFIX], capture_output=True, text=True)
        assert status.returncode == 0 and f"{PREFIX}-rtr" in status.stdout
        assert len(snapshot()["processes"]) >= 1, "the emulator keeps running after `up` returns"
        down = subprocess.run(sojourn + ["down", "--prefix", PREFIX], capture_output=True, text=True)
        assert down.returncode == 0 and f"netns {PREFIX}-srv" in down.stdout
    finally:
        sysnet.remove_prefix(PREFIX)
    assert snapshot() == before


def test_without_privileges_the_command_says_so():
    # Root with every capability dropped (so the files stay readable, wherever the clone is).
    done = subprocess.run(["setpriv", "--bounding-set=-all", "--inh-caps=-all",
                           sys.executable, "-m", "sojourn.cli", "testbed", "up", "--prefix", PREFIX],
                          capture_output=True, text=True)
    assert done.returncode == 1, done.stderr
    assert "needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN)" in done.stderr
    assert sysnet.namespaces_with_prefix(PREFIX) == []


def test_cleanup_spares_a_testbed_whose_prefix_extends_ours():
    """Removing prefix ``sjtbz`` removes its own host interfaces (``sjtbzs``) but not those
    of a concurrent testbed ``sjtbzq`` (``sjtbzqs``), whose names merely start with it."""
    ours, theirs = f"{PREFIX}s", f"{PREFIX}qs"
    try:
        for name in (ours, theirs):  # veth: this kernel has no dummy device type
            sysnet.ip(None, "link", "add", name, "type", "veth", "peer", "name", name + "p")
        removed = sysnet.remove_prefix(PREFIX)
        left = sysnet.host_links_with_prefix(f"{PREFIX}q")
        assert f"link {ours}" in removed
        assert left == [theirs], (removed, left)
    finally:
        for name in (ours, theirs):
            sysnet.ip(None, "link", "delete", name, check=False)
