"""``Testbed``: bring the network up, supervise processes in it, tear it down.

Guarantees: after ``up()`` returns, the server namespace reaches every client
address through the router namespace (and the WAN emulator when configured);
``down()`` (run by ``with``, on exceptions, and on SIGINT/SIGTERM while inside
``with``) kills every process started in the namespaces and deletes them. A run
that was SIGKILLed leaves namespaces named ``<prefix>-*``; ``up()`` removes those
first, so the next run starts clean. The host's interfaces, routes and sysctls
are never changed: all links are created inside our namespaces.

Topology (docs/testbed.md)::

    <p>-srv [<p>s 10.77.0.1] ==veth== [<p>sr 10.77.0.254] <p>-rtr [<p>cr 10.78.255.254] ==veth== [<p>c 10.78.g.i] <p>-cli
                 HTB bottleneck on <p>s                     TUN <p>t + sojourn-engine wan
"""

from __future__ import annotations

import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict
from pathlib import Path

from sojourn.engine import engine_path

from . import handshakes, sysnet, uplink
from .config import (
    ROUTER_CLIENT_SIDE,
    ROUTER_SERVER_SIDE,
    SERVER_ADDR,
    SERVER_NET_PREFIXLEN,
    TestbedConfig,
)
from .counters import CLOCK_TICKS, CounterSampler, ns_processes
from .emulator import Emulator
from .cgroups import TestbedCgroups
from .cpu import ServerCpu, ServerCpuset
from .rto import InitialRto

ROLES = ("srv", "rtr", "cli")


class Testbed:
    """A running testbed; use as a context manager (see docs/testbed.md)."""

    __test__ = False  # not a pytest test class despite the name

    def __init__(self, config: TestbedConfig, workdir: str | os.PathLike | None = None, outlive_owner: bool = False):
        """``outlive_owner``: the testbed's processes keep running when the process that
        brought it up exits (`sojourn testbed up`); by default they die with it, so a
        killed run leaves no process behind."""
        self.config = config
        self.outlive_owner = outlive_owner
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix=f"sojourn-{config.prefix}-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.server_ns = config.ns("srv")
        self.client_ns = config.ns("cli")
        self.router_ns = config.ns("rtr")
        self.server_addr = SERVER_ADDR
        self.client_addrs: dict[str, list[str]] = config.group_addrs()
        self.uplink_dev = config.dev("s")
        self.emulator: Emulator | None = None
        self._processes: list[subprocess.Popen] = []
        self._anchor: subprocess.Popen | None = None
        self._counters: CounterSampler | None = None
        self._old_handlers: dict[int, object] = {}
        self._lock = threading.Lock()
        self._is_up = False
        # The testbed's cgroup tree, a cgroup per side (namespace) that its processes start in.
        self.cgroups: TestbedCgroups | None = None
        self._sides = {config.ns(role): role for role in ROLES}
        # Per side (server, client namespace): the initial RTO of its cgroup's sockets.
        self._initial_rto: dict[str, InitialRto] = {}
        # The server's CPU quota (a cgroup of the server's processes alone), when configured.
        self.server_cpu: ServerCpu | None = None
        # The CPUs the server under test may run on (a cgroup of its processes alone), when configured.
        self.server_cpuset: ServerCpuset | None = None
        # What `up` removed of a run that died with this prefix (its owner record and the list).
        self.leftovers: dict | None = None

    # -- lifecycle ---------------------------------------------------------

    def __enter__(self) -> "Testbed":
        self._install_signal_handlers()
        try:
            self.up()
        except BaseException:
            self.down()
            self._restore_signal_handlers()
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.down()
        finally:
            self._restore_signal_handlers()

    def up(self) -> "Testbed":
        """Create namespaces, links, addresses, routes, the bottleneck, TCP knobs
        and (when configured) the WAN emulator. Leftovers of a previous run with
        the same prefix are removed first."""
        sysnet.require_root()
        cfg = self.config
        sysnet.check_congestion_allowed([cfg.tcp.congestion, (cfg.client_tcp or cfg.tcp).congestion])
        owner = sysnet.dead_owner(cfg.prefix)
        removed = sysnet.remove_prefix(cfg.prefix)
        if owner and removed:
            # A killed run left these behind: say so rather than clean up silently.
            self.leftovers = {"owner": owner, "removed": removed}
        if not self.outlive_owner:
            sysnet.claim(cfg.prefix)
        self._is_up = True
        for role in ROLES:
            ns = cfg.ns(role)
            sysnet.ip(None, "netns", "add", ns)
            # IPv6 off on our links (not lo): no router solicitations or MLD in the emulator.
            sysnet.set_sysctls(ns, {"net.ipv6.conf.default.disable_ipv6": "1"})
            sysnet.ip(ns, "link", "set", "dev", "lo", "up")
        srv, rtr, cli = self.server_ns, self.router_ns, self.client_ns
        s, sr, c, cr = cfg.dev("s"), cfg.dev("sr"), cfg.dev("c"), cfg.dev("cr")
        sysnet.ip(srv, "link", "add", "name", s, "type", "veth", "peer", "name", sr, "netns", rtr)
        sysnet.ip(cli, "link", "add", "name", c, "type", "veth", "peer", "name", cr, "netns", rtr)
        sysnet.ip(srv, "addr", "add", f"{SERVER_ADDR}/{SERVER_NET_PREFIXLEN}", "dev", s)
        sysnet.ip(rtr, "addr", "add", f"{ROUTER_SERVER_SIDE}/{SERVER_NET_PREFIXLEN}", "dev", sr)
        sysnet.ip(rtr, "addr", "add", f"{ROUTER_CLIENT_SIDE}/16", "dev", cr)
        for addrs in self.client_addrs.values():
            for addr in addrs:
                sysnet.ip(cli, "addr", "add", f"{addr}/16", "dev", c)
        for ns, dev in ((srv, s), (rtr, sr), (rtr, cr), (cli, c)):
            sysnet.ip(ns, "link", "set", "dev", dev, "up")
        sysnet.set_sysctls(rtr, {
            "net.ipv4.ip_forward": "1",
            "net.ipv4.conf.all.rp_filter": "0",
            "net.ipv4.conf.default.rp_filter": "0",
        })
        client_tcp = cfg.client_tcp or cfg.tcp
        # Every port for the clients' connections (the default 32768-60999 holds 28,232 per
        # address, fewer than a persistent overload keeps open).
        sysnet.set_sysctls(cli, {"net.ipv4.ip_local_port_range": "1024 65535"})
        for ns, gateway, dev, knobs in ((srv, ROUTER_SERVER_SIDE, s, cfg.tcp), (cli, ROUTER_CLIENT_SIDE, c, client_tcp)):
            sysnet.set_sysctls(ns, knobs.sysctls())
            sysnet.ip(ns, "route", "replace", "default", "via", gateway, "dev", dev, *knobs.route_metrics())
        # A group's MTU (000 Table 2 (I)) is the server's route to it: its segments there are
        # no longer than the MTU, with or without the emulator in the path.
        for group, net in zip(cfg.groups, cfg.group_nets()):
            if group.route_metrics():
                sysnet.ip(srv, "route", "replace", str(net), "via", ROUTER_SERVER_SIDE, "dev", s,
                          *cfg.tcp.route_metrics(), *group.route_metrics())
        uplink.shape_uplink(srv, s, cfg.link_bps, cfg.uplink_queue, cfg.cutoffs)
        handshakes.count_handshakes(srv, s, rtr, sr)
        self.cgroups = TestbedCgroups(cfg.prefix)
        for ns, side, knobs in ((srv, "srv", cfg.tcp), (cli, "cli", client_tcp)):
            if knobs.initial_rto_ms is not None:
                self._initial_rto[ns] = InitialRto(self.cgroups.side(side), knobs.initial_rto_ms)
        if cfg.server_cpus is not None:
            self.server_cpu = ServerCpu(cfg.prefix, cfg.server_cpus, cfg.server_cpu_period_ms)
        if cfg.server_cpuset is not None:
            self.server_cpuset = ServerCpuset(cfg.prefix, cfg.server_cpuset)
        self._anchor = self._spawn(srv, ["sleep", "infinity"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        sysnet.wait_in_namespace(self._anchor.pid, srv)
        if cfg.uses_emulator:
            self.emulator = Emulator(cfg, self.workdir)
            self._processes.append(self.emulator.start(self._spawn))
            self.emulator.route_through(sr, cr)
        if cfg.tcp.cwnd_clamp is not None:
            self.warm_tcp_metrics()
        return self

    def warm_tcp_metrics(self) -> None:
        """Make the cwnd clamp apply from the first connection. Linux copies a
        locked ``cwnd`` route metric into a socket's clamp only from an existing
        TCP metrics entry (tcp_init_metrics looks up without creating), and the
        entry is created when an earlier connection to that address ends; so one
        short connection from the server to every client address comes first."""
        port = "9"
        probe = [sys.executable, "-m", "sojourn.testbed.probe"]
        listener = self._spawn(self.client_ns, probe + ["listen", "--bind", f"0.0.0.0:{port}", "--timeout", "2"],
                               stdout=subprocess.DEVNULL)
        try:
            addrs = [a for group in self.client_addrs.values() for a in group]
            for _ in range(100):
                if sysnet.run(sysnet.in_ns(self.client_ns, ["ss", "-tlnH", f"sport = :{port}"])).strip():
                    break
                time.sleep(0.02)
            sysnet.run(sysnet.in_ns(self.server_ns, probe + ["warm", "--targets", ",".join(addrs), "--port", port]))
            # The entry appears when our closed socket reaches TIME_WAIT, a round trip later.
            deadline = time.monotonic() + 5.0
            while True:
                cached = sysnet.ip(self.server_ns, "tcp_metrics", "show")
                missing = [a for a in addrs if f"{a} " not in cached]
                if not missing or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            if missing:
                raise sysnet.NetError(f"cwnd_clamp: no TCP metrics entry for {missing[:5]} after warming")
        finally:
            _stop_processes([listener])

    def down(self) -> None:
        """Stop counters and processes, delete the namespaces. Idempotent."""
        with self._lock:
            if self._counters:
                self._counters.stop()
                self._counters = None
            if self.emulator:
                self.emulator.stop()
            procs = self._processes + ([self._anchor] if self._anchor else [])
            self._processes, self._anchor = [], None
            _stop_processes(procs)
            self._initial_rto.clear()
            if self.cgroups:
                self.cgroups.remove()
                self.cgroups = None
            for limit in (self.server_cpu, self.server_cpuset):
                if limit:
                    limit.remove()
            self.server_cpu = self.server_cpuset = None
            if self._is_up:
                sysnet.remove_prefix(self.config.prefix)
                self._is_up = False

    def _install_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old_handlers[sig] = signal.signal(sig, _raise_interrupt)

    def _restore_signal_handlers(self) -> None:
        for sig, handler in self._old_handlers.items():
            signal.signal(sig, handler)
        self._old_handlers.clear()

    # -- processes ---------------------------------------------------------

    def preexec(self, ns: str):
        """What a process started in ``ns`` must run before exec: join this side's cgroup
        (sojourn.testbed.cgroups; the initial RTO follows it); None before ``up``. Pass it as
        ``preexec_fn`` to processes started elsewhere (sojourn.servers)."""
        return self.cgroups.preexec(self._sides[ns]) if self.cgroups else None

    def server_preexec(self):
        """The ``preexec_fn`` of the server under test: the server side's settings that
        follow processes (:meth:`preexec`), the server's CPU quota and its cpuset."""
        steps = [step for step in (self.preexec(self.server_ns), self.server_cpu and self.server_cpu.join,
                                   self.server_cpuset and self.server_cpuset.join) if step]
        if len(steps) < 2:
            return steps[0] if steps else None

        def every() -> None:
            for step in steps:
                step()
        return every

    def _spawn(self, ns: str, argv: list[str], **kwargs) -> subprocess.Popen:
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        step = kwargs.get("preexec_fn", self.preexec(ns))
        kwargs["preexec_fn"] = step if self.outlive_owner else sysnet.die_with_parent(step)
        return subprocess.Popen(sysnet.in_ns(ns, [str(a) for a in argv]), start_new_session=True, **kwargs)

    def popen(self, ns: str, argv: list[str], **kwargs) -> subprocess.Popen:
        """Start ``argv`` inside namespace ``ns`` (its own session); it is killed at
        teardown if still running. Keyword arguments go to ``subprocess.Popen``."""
        if ns not in (self.server_ns, self.client_ns, self.router_ns):
            raise ValueError(f"namespace {ns!r} is not one of this testbed's: "
                             f"{self.server_ns}, {self.client_ns}, {self.router_ns}")
        proc = self._spawn(ns, argv, **kwargs)
        self._processes.append(proc)
        return proc

    def run(self, ns: str, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
        """Run ``argv`` to completion inside ``ns`` (``subprocess.run`` semantics)."""
        kwargs.setdefault("preexec_fn", self.preexec(ns))
        return subprocess.run(sysnet.in_ns(ns, [str(a) for a in argv]), **kwargs)

    # -- counters and metadata ---------------------------------------------

    def start_counters(self, path_csv: str | os.PathLike, interval_s: float = 1.0) -> None:
        """Sample the server's kernel counters every ``interval_s`` into ``path_csv``
        (columns in docs/testbed.md) until ``stop_counters()`` or teardown."""
        if self._counters:
            raise RuntimeError("counters already running; stop_counters() first")
        assert self._anchor is not None, "start_counters() needs a testbed that is up"
        self._counters = CounterSampler(
            path_csv, interval_s, anchor_pid=self._anchor.pid, ns=self.server_ns,
            uplink_dev=self.uplink_dev, link_bps=self.config.link_bps,
            cutoffs=self.config.cutoffs, router_ns=self.router_ns, client_ns=self.client_ns, cgroups=self.cgroups)
        self._counters.start()

    def stop_counters(self) -> None:
        if self._counters:
            self._counters.stop()
            self._counters = None

    def server_cpu_seconds(self) -> dict[int, float]:
        """CPU seconds (utime + stime) each process in the server namespace has used so far:
        two readings give the server's CPU over the span between them (002 Figs. 10 and 12:
        utilization per load level)."""
        assert self._anchor is not None, "server_cpu_seconds() needs a testbed that is up"
        ticks = ns_processes(os.readlink(f"/proc/{self._anchor.pid}/ns/net")).ticks
        return {pid: t / CLOCK_TICKS for pid, t in ticks.items()}

    @property
    def wan_counters_path(self) -> Path | None:
        """The emulator's per-pipe counters CSV (None without the emulator)."""
        return self.emulator.counters_path if self.emulator else None

    def describe(self) -> dict:
        """Everything a result needs to say what network it ran on."""
        # What the knobs set on either side (tcp_rto_max_ms only when set: it exists from Linux
        # 6.15 on), and the kernel's own values that shape a run.
        keys = list(dict.fromkeys([*self.config.tcp.sysctls(), *(self.config.client_tcp or self.config.tcp).sysctls(),
                                   "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.ipv4.tcp_orphan_retries",
                                   "net.ipv4.tcp_retries2", "net.ipv4.tcp_recovery", "net.ipv4.tcp_early_retrans"]))
        return {
            "config": asdict(self.config),
            "namespaces": {"server": self.server_ns, "client": self.client_ns, "router": self.router_ns},
            "server_addr": self.server_addr,
            "client_addrs": self.client_addrs,
            "qdisc": sysnet.tc(self.server_ns, "-s", "qdisc", "show", "dev", self.uplink_dev),
            "class": sysnet.tc(self.server_ns, "-s", "class", "show", "dev", self.uplink_dev),
            "routes": {ns: sysnet.ip(ns, "route", "show") for ns in (self.server_ns, self.client_ns)},
            "sysctls": {ns: sysnet.read_sysctls(ns, keys) for ns in (self.server_ns, self.client_ns)},
            "emulator": self.emulator.describe() if self.emulator else None,
            "cgroup": str(self.cgroups.path) if self.cgroups else None,
            "initial_rto": {ns: cgroup.describe() for ns, cgroup in self._initial_rto.items()},
            "server_cpu": self.server_cpu.describe() if self.server_cpu else None,
            "server_cpuset": self.server_cpuset.describe() if self.server_cpuset else None,
            "versions": {
                "kernel": platform.release(),
                "iproute2": sysnet.run(["ip", "-V"]).strip(),
                "sojourn-engine": sysnet.run([str(engine_path()), "--version"]).strip(),
            },
        }


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def _stop_processes(procs: list[subprocess.Popen], grace_s: float = 3.0) -> None:
    """SIGTERM each process group, then SIGKILL what remains after ``grace_s``."""
    live = [p for p in procs if p.poll() is None]
    for proc in live:
        _killpg(proc, signal.SIGTERM)
    for proc in live:
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            _killpg(proc, signal.SIGKILL)
            proc.wait()


def _killpg(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
