"""A CPU quota for the server under test, so the server is the bottleneck (002 §3.1: a
CPU-bound server beside eight client machines), not the two cores it shares here with the
clients, the links and the emulator.

The quota is a cgroup of the server's processes alone (the server's helpers, such as the
counter sampler, stay outside it): ``cpu.max`` where the cgroup v2 hierarchy has the cpu
controller, else the v1 cpu controller's ``cpu.cfs_quota_us`` (hybrid hosts such as these
machines mount it at /sys/fs/cgroup/cpu). A process sits in one cgroup per hierarchy, so on
a hybrid host the quota's v1 cgroup and the testbed's v2 cgroup (sojourn.testbed.cgroups:
the initial RTO, the I/O stall the fidelity guard judges) hold the server at once; on a host
with v2 alone the quota's cgroup takes the server out of the testbed's (not met here). :meth:`ServerCpu.stats` reads how often the quota throttled it,
the evidence that the server was CPU-bound.

Guarantees: :meth:`ServerCpu.remove` removes the cgroup (processes left in it moved out),
and :func:`remove_prefix` removes a killed run's leftovers by prefix.
"""

from __future__ import annotations

import os
from pathlib import Path

from .cgroups import CgroupError, cgroup2_root, remove_cgroup

CGROUP_NAME = "sojourn-{prefix}-srvcpu"
DEFAULT_PERIOD_MS = 100.0  # the scheduler's default CFS period


class CpuQuotaError(RuntimeError):
    """The quota cannot be set here; the message says what is missing."""


def controller_root() -> tuple[Path, int]:
    """Where cgroups with the cpu controller are made, and the cgroup version there."""
    try:
        unified = cgroup2_root()
        if "cpu" in (unified / "cgroup.controllers").read_text().split():
            return unified, 2
    except (CgroupError, OSError):
        pass
    for line in Path("/proc/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[2] == "cgroup" and "cpu" in fields[3].split(","):
            return Path(fields[1]), 1
    raise CpuQuotaError("no cgroup hierarchy with the cpu controller is mounted (see /proc/mounts); a server CPU "
                        "quota needs cgroup v2 with cpu in cgroup.controllers, or the v1 cpu controller")


class ServerCpu:
    """A cgroup whose processes together get at most ``cpus`` CPUs' worth of time in each
    period of ``period_ms``: a shorter period spreads the same share more evenly in time."""

    def __init__(self, prefix: str, cpus: float, period_ms: float = DEFAULT_PERIOD_MS):
        if not 0.01 <= cpus <= os.cpu_count():
            raise CpuQuotaError(f"server CPU quota {cpus:g}: accepted 0.01 to this machine's {os.cpu_count()} CPUs")
        self.period_us = round(period_ms * 1000)
        # cpu.max: a period of 1 ms to 1 s, a quota of at least 1 ms (kernel/sched/core.c).
        quota = round(cpus * self.period_us)
        if not (1_000 <= self.period_us <= 1_000_000 and quota >= 1_000):
            raise CpuQuotaError(f"server CPU quota {cpus:g} over a {period_ms:g} ms period: the kernel takes periods "
                                f"of 1-1000 ms and at least 1 ms of CPU in each (here {quota / 1000:g} ms)")
        root, self.version = controller_root()
        self.cpus = cpus
        self.path = root / CGROUP_NAME.format(prefix=prefix)
        try:
            if self.version == 2:
                (root / "cgroup.subtree_control").write_text("+cpu")
            self.path.mkdir(exist_ok=True)
            if self.version == 2:
                (self.path / "cpu.max").write_text(f"{quota} {self.period_us}")
            else:
                (self.path / "cpu.cfs_period_us").write_text(str(self.period_us))
                (self.path / "cpu.cfs_quota_us").write_text(str(quota))
        except OSError as err:
            self.remove()
            raise CpuQuotaError(f"cannot set a CPU quota of {cpus:g} in {self.path}: {err}") from None

    def join(self) -> None:
        """Moves the calling process into the cgroup (its children follow)."""
        with open(self.path / "cgroup.procs", "w") as out:
            out.write(str(os.getpid()))

    def stats(self) -> dict:
        """How the quota held the server: periods, throttled periods and throttled seconds."""
        fields = dict(line.split() for line in (self.path / "cpu.stat").read_text().splitlines() if line.strip())
        throttled_s = (int(fields.get("throttled_usec", 0)) / 1e6 if self.version == 2
                       else int(fields.get("throttled_time", 0)) / 1e9)
        return {"cpus": self.cpus, "periods": int(fields.get("nr_periods", 0)),
                "throttled_periods": int(fields.get("nr_throttled", 0)), "throttled_s": throttled_s}

    def describe(self) -> dict:
        return {"cpus": self.cpus, "cgroup": str(self.path), "cgroup_version": self.version,
                "period_us": self.period_us}

    def remove(self) -> None:
        remove_cgroup(self.path)


def remove_prefix(prefix: str) -> list[str]:
    """Removes the CPU quota cgroup of testbed ``prefix`` (a killed run's leftovers)."""
    try:
        root, _ = controller_root()
    except (CpuQuotaError, OSError):
        return []
    path = root / CGROUP_NAME.format(prefix=prefix)
    if not path.is_dir():
        return []
    remove_cgroup(path)
    return [f"cgroup {path}"]
