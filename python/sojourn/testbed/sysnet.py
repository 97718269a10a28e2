"""The I/O edge of the testbed: ``ip``, ``tc`` and ``sysctl`` run inside our
namespaces, privilege checks, and removal of leftovers by name prefix.

Every command runs with an argument list (no shell) and raises ``NetError``
naming the command and the kernel's message when it fails. Nothing here touches
the host namespace's interfaces, routes or sysctls: sysctls and routes are only
ever changed through ``ip netns exec <ns>`` / ``ip -n <ns>``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time


class NetError(RuntimeError):
    """A network set-up command failed; the message holds the command and its stderr."""


CAP_NET_ADMIN = 12
CAP_SYS_ADMIN = 21  # `ip netns add` mounts the namespace under /run/netns


def require_root() -> None:
    """Stop with a clear message unless we hold the capabilities namespaces need
    (root normally does; a root shell with capabilities dropped does not)."""
    try:
        with open("/proc/self/status") as status:
            caps = int(next(line for line in status if line.startswith("CapEff:")).split()[1], 16)
    except (OSError, StopIteration, ValueError):
        caps = 0
    if all(caps & (1 << cap) for cap in (CAP_NET_ADMIN, CAP_SYS_ADMIN)):
        return
    raise PermissionError(
        "the testbed needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) to create network namespaces; "
        "run as root, e.g. `sudo .venv/bin/sojourn testbed up`")


def run(argv: list[str], check: bool = True) -> str:
    """Run a command, return its stdout; raise NetError with stderr on failure."""
    done = subprocess.run(argv, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise NetError(f"`{' '.join(argv)}` failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def ip(ns: str | None, *args: str, check: bool = True) -> str:
    """``ip [-n ns] args...``."""
    return run(["ip", *(["-n", ns] if ns else []), *args], check=check)


def in_ns(ns: str, argv: list[str]) -> list[str]:
    """The argument list that runs ``argv`` inside namespace ``ns``."""
    return ["ip", "netns", "exec", ns, *argv]


def tc(ns: str, *args: str, check: bool = True) -> str:
    return run(in_ns(ns, ["tc", *args]), check=check)


def set_sysctls(ns: str, values: dict[str, str]) -> None:
    """Write sysctls inside ``ns`` (never the host's)."""
    if values:
        run(in_ns(ns, ["sysctl", "-q", "-w", *(f"{key}={value}" for key, value in values.items())]))


def read_sysctls(ns: str, keys: list[str]) -> dict[str, str]:
    out = run(in_ns(ns, ["sysctl", "-n", *keys]))
    return dict(zip(keys, out.split("\n")))


def namespaces() -> list[str]:
    """Names of all network namespaces known to ``ip netns``."""
    return [line.split()[0] for line in run(["ip", "netns", "list"]).splitlines() if line.strip()]


def namespaces_with_prefix(prefix: str) -> list[str]:
    return [name for name in namespaces() if name.startswith(prefix + "-")]


def ns_pids(ns: str) -> list[int]:
    return [int(pid) for pid in run(["ip", "netns", "pids", ns], check=False).split()]


def kill_pids(pids: list[int], grace_s: float = 3.0) -> None:
    """SIGTERM, then SIGKILL whatever is still alive after ``grace_s``."""
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while pids and time.monotonic() < deadline:
        pids = [pid for pid in pids if _alive(pid)]
        time.sleep(0.05)
    for pid in pids:
        _signal(pid, signal.SIGKILL)


PR_SET_PDEATHSIG = 1
OWNERS = "/run/sojourn"


def die_with_parent(*then):
    """A ``preexec_fn``: the child gets SIGKILL when the process that started it dies
    (prctl PR_SET_PDEATHSIG, kept across exec), so a SIGKILLed `sojourn run` takes its
    server, load generator, emulator and namespace holder with it; then runs ``then``
    (e.g. joining a cgroup). The check of the parent's pid closes the race of a parent
    that died before the prctl."""
    import ctypes

    parent = os.getpid()

    def prepare() -> None:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)
        for step in then:
            if step is not None:
                step()
    return prepare


def _owner_path(prefix: str) -> str:
    return os.path.join(OWNERS, f"{prefix}.json")


def claim(prefix: str) -> None:
    """Records this process as the owner of testbed ``prefix`` (see :func:`dead_owner`)."""
    import json

    os.makedirs(OWNERS, exist_ok=True)
    with open(_owner_path(prefix), "w") as out:
        json.dump({"pid": os.getpid(), "start": _start_time(os.getpid()), "argv": _cmdline(os.getpid())}, out)


def release(prefix: str) -> None:
    try:
        os.unlink(_owner_path(prefix))
    except FileNotFoundError:
        pass


def dead_owner(prefix: str) -> dict | None:
    """The owner record of testbed ``prefix`` if that process is gone (a run killed before
    it could tear down), else None."""
    import json

    try:
        with open(_owner_path(prefix)) as record:
            owner = json.load(record)
    except (OSError, ValueError):
        return None
    alive = _alive(owner.get("pid", 0)) and _start_time(owner["pid"]) == owner.get("start")
    return None if alive else owner


def _start_time(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def remove_prefix(prefix: str) -> list[str]:
    """Remove every namespace named ``<prefix>-*`` (killing the processes in it
    first) and any host interface named ``<prefix><role>`` for a testbed device role
    (exact names, so prefix ``sjtb`` never touches a concurrent ``sjtba`` testbed); return what
    was removed. Used by teardown and to clear leftovers of a SIGKILLed run."""
    removed = []
    for ns in namespaces_with_prefix(prefix):
        kill_pids(ns_pids(ns))
        ip(None, "netns", "delete", ns, check=False)
        removed.append(f"netns {ns}")
    for dev in host_links_with_prefix(prefix):
        ip(None, "link", "delete", dev, check=False)
        removed.append(f"link {dev}")
    from sojourn.testbed import cgroups, cpu  # the testbed's cgroup tree and CPU-quota cgroup of the same prefix
    removed += cgroups.remove_prefix(prefix)
    removed += cpu.remove_prefix(prefix)
    release(prefix)
    return removed


# Interface roles of a testbed (see TestbedConfig.dev): server uplink and its router side,
# clients' link and its router side, the emulator's TUN.
DEVICE_ROLES = ("s", "sr", "c", "cr", "t")


def host_links_with_prefix(prefix: str) -> list[str]:
    wanted = {prefix + role for role in DEVICE_ROLES}
    names = []
    for line in ip(None, "-o", "link", "show").splitlines():
        name = line.split(":", 2)[1].strip().split("@", 1)[0]
        if name in wanted:
            names.append(name)
    return names


def check_congestion_allowed(algorithms: list[str]) -> None:
    """A network namespace other than the host's may only pick congestion control
    algorithms in the host's allowed list (tcp_set_default_congestion_control);
    say so up front instead of failing on a bare EPERM."""
    with open("/proc/sys/net/ipv4/tcp_allowed_congestion_control") as f:
        allowed = f.read().split()
    for name in algorithms:
        if name not in allowed:
            raise NetError(
                f"congestion control {name!r} is not in the host's net.ipv4.tcp_allowed_congestion_control "
                f"({' '.join(allowed)}), so a namespace cannot use it; choose one of those, or add it on the "
                f"host yourself (the testbed never changes host sysctls)")


def wait_in_namespace(pid: int, ns: str, timeout_s: float = 5.0) -> None:
    """Wait until process ``pid`` (started through ``ip netns exec``) has entered
    namespace ``ns``, so its ``/proc/<pid>/net`` shows that namespace."""
    target = os.stat(f"/run/netns/{ns}").st_ino
    deadline = time.monotonic() + timeout_s
    while os.stat(f"/proc/{pid}/ns/net").st_ino != target:
        if time.monotonic() > deadline:
            raise NetError(f"process {pid} did not enter namespace {ns} within {timeout_s} s")
        time.sleep(0.01)
