"""The testbed's cgroup v2 tree (sojourn.testbed.cgroups): every side's processes start in
their side's cgroup, the tree goes at teardown, and its I/O pressure counts the testbed's own
tasks waiting for the disk, not the machine's."""

from __future__ import annotations

import os
import subprocess
import tempfile

import pandas as pd
import pytest

from sojourn.testbed import TcpKnobs, Testbed, TestbedConfig
from sojourn.testbed.cgroups import pressure_stall_us

pytestmark = [pytest.mark.netns, pytest.mark.skipif(os.geteuid() != 0, reason="needs root (netns, cgroups)")]


def test_the_testbed_starts_each_side_in_its_cgroup_and_removes_them():
    with Testbed(TestbedConfig(prefix="sjrtou", tcp=TcpKnobs(initial_rto_ms=3000))) as tb:
        described = tb.describe()
        rto = described["initial_rto"]
        assert set(rto) == {tb.server_ns, tb.client_ns}
        for ns, side in ((tb.server_ns, "srv"), (tb.router_ns, "rtr"), (tb.client_ns, "cli")):
            process = tb.popen(ns, ["sleep", "30"])
            cgroup = os.path.join(described["cgroup"], side)
            assert str(process.pid) in open(os.path.join(cgroup, "cgroup.procs")).read().split()
            if ns in rto:
                assert rto[ns]["initial_rto_ms"] == 3000 and rto[ns]["cgroup"] == cgroup
    assert not os.path.exists(described["cgroup"])


def synced_writes(seconds: float) -> list[str]:
    """dd writing 64 KiB blocks for ``seconds``, each synced to the disk before the next: a
    task that waits for I/O. /var/tmp, not /tmp: a tmpfs /tmp would make no I/O."""
    target = tempfile.NamedTemporaryFile(dir="/var/tmp", prefix="sojourn-io-", delete=False).name
    return ["sh", "-c", f"timeout {seconds} dd if=/dev/zero of={target} bs=64k count=100000 oflag=dsync status=none; "
                        f"rm -f {target}"]


def test_the_testbeds_io_stall_counts_its_own_tasks_not_the_machines(tmp_path):
    with Testbed(TestbedConfig(prefix="sjcgio")) as tb:
        host, testbed = pressure_stall_us(open("/proc/pressure/io").read()), tb.cgroups.io_stall_us()
        subprocess.run(synced_writes(1), check=True)  # outside the testbed
        assert pressure_stall_us(open("/proc/pressure/io").read()) > host
        assert tb.cgroups.io_stall_us() == testbed, "the machine's disk work counted as the testbed's"
        tb.start_counters(tmp_path / "counters.csv", interval_s=0.25)
        tb.run(tb.client_ns, synced_writes(2), check=True)
        assert tb.cgroups.io_stall_us() > testbed
        tb.stop_counters()
    counters = pd.read_csv(tmp_path / "counters.csv")
    assert counters["testbed_io_stall"].max() > 0, counters[["t_s", "host_io_stall", "testbed_io_stall"]]
