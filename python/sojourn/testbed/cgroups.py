"""The testbed's own cgroup v2 tree: a directory per testbed, a child per side::

    <cgroup2 root>/sojourn-<prefix>/{srv,rtr,cli}

Every process the testbed starts in a namespace starts inside its side's cgroup
(:meth:`TestbedCgroups.preexec`, before exec; its children follow), so the kernel accounts
for the testbed's tasks apart from the machine's. Two things use that:

- the fidelity guard's I/O stall: a cgroup's pressure stall information counts the tasks of
  its whole subtree (Documentation/accounting/psi.rst, "Cgroup2 interface"), so the tree's
  ``io.pressure`` is the share of time some task of the testbed waited for I/O. A developer's
  disk work beside a campaign raises the machine's I/O pressure (/proc/pressure/io) whether
  or not the testbed's tasks wait;
- the initial RTO's sock_ops program (sojourn.testbed.rto), attached to one side's cgroup.

Guarantees: :meth:`TestbedCgroups.remove` removes the tree (processes left in it moved to
the root cgroup), and :func:`remove_prefix` removes a killed run's leftovers by prefix.
"""

from __future__ import annotations

import os
import time
from functools import partial
from pathlib import Path

TREE_NAME = "sojourn-{prefix}"
SIDES = ("srv", "rtr", "cli")


class CgroupError(RuntimeError):
    """The testbed's cgroups cannot be made here; the message says what is missing."""


def cgroup2_root() -> Path:
    """Where the unified (v2) cgroup hierarchy is mounted (/sys/fs/cgroup or, on hybrid
    systems, /sys/fs/cgroup/unified)."""
    for line in Path("/proc/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[2] == "cgroup2":
            return Path(fields[1])
    raise CgroupError("no cgroup2 hierarchy is mounted (see /proc/mounts); the testbed keeps its processes in "
                      "cgroup v2 (mount -t cgroup2 none /sys/fs/cgroup/unified)")


def pressure_stall_us(text: str) -> int:
    """The ``some`` line's ``total=`` (microseconds) of a pressure file (``/proc/pressure/io``
    or a cgroup's ``io.pressure``): how long at least one task waited; 0 when the kernel has
    no PSI."""
    for line in text.splitlines():
        kind, *fields = line.split()
        if kind == "some":
            return int(dict(field.split("=") for field in fields)["total"])
    return 0


class TestbedCgroups:
    """The cgroup tree of testbed ``prefix``, made on construction."""

    __test__ = False  # not a pytest test class despite the name

    def __init__(self, prefix: str):
        self.path = cgroup2_root() / TREE_NAME.format(prefix=prefix)
        try:
            for path in (self.path, *(self.path / side for side in SIDES)):
                path.mkdir(exist_ok=True)
        except OSError as err:
            self.remove()
            raise CgroupError(f"cannot create the testbed's cgroup {self.path}: {err}") from None

    def side(self, side: str) -> Path:
        """The cgroup of one side (``srv``, ``rtr`` or ``cli``)."""
        if side not in SIDES:
            raise ValueError(f"side {side!r}: one of {', '.join(SIDES)}")
        return self.path / side

    def preexec(self, side: str):
        """A ``preexec_fn`` that moves the child into ``side``'s cgroup before it execs."""
        return partial(join_cgroup, self.side(side))

    def io_stall_us(self) -> int:
        """Microseconds, since the tree was made, in which some task of the testbed waited for I/O."""
        return pressure_stall_us((self.path / "io.pressure").read_text())

    def remove(self) -> None:
        remove_tree(self.path)


def join_cgroup(path: Path) -> None:
    """Moves the calling process into the cgroup at ``path`` (its children follow)."""
    with open(path / "cgroup.procs", "w") as out:
        out.write(str(os.getpid()))


def remove_cgroup(path: Path) -> None:
    """Moves any process left in ``path`` to the root cgroup of its hierarchy, then removes it."""
    if not path.is_dir():
        return
    root = path.parent
    while (root.parent / "cgroup.procs").exists():
        root = root.parent
    try:
        pids = (path / "cgroup.procs").read_text().split()
    except OSError:
        pids = []
    for pid in pids:
        try:
            (root / "cgroup.procs").write_text(pid)
        except OSError:
            pass  # exited meanwhile
    for _ in range(50):
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)  # the last processes are still leaving
    path.rmdir()


def remove_tree(path: Path) -> None:
    """Removes a testbed's tree: its sides first (a cgroup with children cannot go)."""
    for side in SIDES:
        remove_cgroup(path / side)
    remove_cgroup(path)


def remove_prefix(prefix: str) -> list[str]:
    """Removes the cgroup tree of testbed ``prefix`` (a killed run's leftovers)."""
    try:
        path = cgroup2_root() / TREE_NAME.format(prefix=prefix)
    except (CgroupError, OSError):
        return []
    if not path.is_dir():
        return []
    remove_tree(path)
    return [f"cgroup {path}"]
