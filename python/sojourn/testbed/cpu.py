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

A cpuset (:class:`ServerCpuset`) keeps the server on cores of its own instead: its threads
share those cores as the processes of a machine that size do, never throttled. A quota lets
the server run on every core until the period's share is spent, then holds all of it, its
front end too, until the next period.

Guarantees: :meth:`ServerCpu.remove` and :meth:`ServerCpuset.remove` remove their cgroup
(processes left in it moved out), and :func:`remove_prefix` removes a killed run's leftovers
by prefix.
"""

from __future__ import annotations

import os
from pathlib import Path

from .cgroups import CgroupError, cgroup2_root, join_cgroup, remove_cgroup

CGROUP_NAME = "sojourn-{prefix}-srvcpu"
CPUSET_NAME = "sojourn-{prefix}-srvcpuset"
DEFAULT_PERIOD_MS = 100.0  # the scheduler's default CFS period


class CpuQuotaError(RuntimeError):
    """The quota cannot be set here; the message says what is missing."""


def controller_root(controller: str = "cpu") -> tuple[Path, int]:
    """Where cgroups with ``controller`` (cpu or cpuset) are made, and the cgroup version there."""
    try:
        unified = cgroup2_root()
        if controller in (unified / "cgroup.controllers").read_text().split():
            return unified, 2
    except (CgroupError, OSError):
        pass
    for line in Path("/proc/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[2] == "cgroup" and controller in fields[3].split(","):
            return Path(fields[1]), 1
    raise CpuQuotaError(f"no cgroup hierarchy with the {controller} controller is mounted (see /proc/mounts); the "
                        f"server's {controller} cgroup needs cgroup v2 with {controller} in cgroup.controllers, or "
                        f"the v1 {controller} controller")


def parse_cpu_list(text: str) -> list[int]:
    """The CPUs of a list such as "1", "0-1" or "0,2" (cpuset.cpus's form), each one this
    machine has; ValueError naming the list otherwise."""
    cpus: set[int] = set()
    try:
        for part in text.split(","):
            low, _, high = part.strip().partition("-")
            cpus.update(range(int(low), int(high or low) + 1))
    except ValueError:
        raise ValueError(f"CPU list {text!r}: expected numbers and ranges such as 1, 0-1 or 0,2") from None
    present = os.sched_getaffinity(0)
    if not cpus or not cpus <= present:
        raise ValueError(f"CPU list {text!r}: this machine offers CPUs {sorted(present)}")
    return sorted(cpus)


class ServerCgroup:
    """A cgroup of the server's processes alone (``path``), which the server joins before exec."""

    path: Path

    def join(self) -> None:
        """Moves the calling process into the cgroup (its children follow)."""
        join_cgroup(self.path)

    def remove(self) -> None:
        remove_cgroup(self.path)


class ServerCpu(ServerCgroup):
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


class ServerCpuset(ServerCgroup):
    """A cgroup whose processes run only on the CPUs of ``cpus`` (a list such as "1")."""

    def __init__(self, prefix: str, cpus: str):
        try:
            self.cpus = parse_cpu_list(cpus)
        except ValueError as err:
            raise CpuQuotaError(f"server cpuset: {err}") from None
        root, self.version = controller_root("cpuset")
        self.path = root / CPUSET_NAME.format(prefix=prefix)
        listed = ",".join(map(str, self.cpus))
        try:
            if self.version == 2:
                (root / "cgroup.subtree_control").write_text("+cpuset")
            self.path.mkdir(exist_ok=True)
            (self.path / "cpuset.cpus").write_text(listed)
            if self.version == 1:  # v1 takes no task before its memory nodes are set
                (self.path / "cpuset.mems").write_text((root / "cpuset.mems").read_text().strip())
        except OSError as err:
            self.remove()
            raise CpuQuotaError(f"cannot keep the server on CPUs {listed} in {self.path}: {err}") from None

    def describe(self) -> dict:
        return {"cpus": self.cpus, "cgroup": str(self.path), "cgroup_version": self.version}


def remove_prefix(prefix: str) -> list[str]:
    """Removes the CPU quota and cpuset cgroups of testbed ``prefix`` (a killed run's leftovers)."""
    removed = []
    for controller, name in (("cpu", CGROUP_NAME), ("cpuset", CPUSET_NAME)):
        try:
            root, _ = controller_root(controller)
        except (CpuQuotaError, OSError):
            continue
        path = root / name.format(prefix=prefix)
        if path.is_dir():
            remove_cgroup(path)
            removed.append(f"cgroup {path}")
    return removed
