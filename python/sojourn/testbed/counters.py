"""Kernel counters of the server namespace, sampled into a CSV time series.

Reading ``/proc/<pid>/net/*`` of a process inside the server namespace shows that
namespace's counters, and a sock_diag netlink socket made there its sockets
(:mod:`sojourn.testbed.sockdiag`), so sampling costs no process spawn except three ``tc``
calls: the qdisc counters and the handshake counts of the server's and of the router's
namespace. Columns (docs/testbed.md):

``t_s`` seconds since sampling started; ``established``, ``syn_recv`` socket
counts; ``accept_queue`` connections waiting in listen queues; ``sockets_unacked``,
``sockets_probe0``, ``sockets_backoff``, ``sockets_rto_ge_1s``, ``max_rto_ticks``: a census
of the sockets holding unacknowledged bytes (``sockdiag.census``); cumulative
``listen_overflows``, ``listen_drops`` (SYNs and handshake ACKs dropped at a full queue), ``retrans_segs``,
``syn_retrans``, ``rto_timeouts``, ``loss_probes``, ``fast_retrans``, ``dsack_received``,
``host_queue_skips``, ``reordering_seen``, ``aborts_on_timeout``; the clients' cumulative
``client_active_opens``, ``client_syn_retrans``, ``client_attempt_fails`` (their own namespace's,
blank while no process runs there); cumulative ``syns_received``,
``synacks_sent`` and ``synacks_delivered`` on the uplink (:mod:`sojourn.testbed.handshakes`); ``uplink_tx_bytes`` and ``uplink_util`` (fraction of the link
rate over the last interval); ``server_cpu`` (CPU seconds per second of every
process in the server namespace over the last interval), ``server_rss_bytes`` (their
resident memory), ``server_processes`` (how many there are) and ``server_runnable`` (how
many are in state R, running or waiting for a CPU: 001 §6.2's run queue, per process as
there, not per thread), ``server_blocked`` (how many of their threads are in state D,
waiting uninterruptibly, e.g. on a disk or the filesystem's journal); ``router_cpu`` (CPU
seconds per second of every process in the router namespace: the WAN emulator, when it is
on, which shares the machine's CPUs with the server); ``host_cpu_stall``,
``host_io_stall``, ``host_memory_stall``: the fraction of the last interval in which some
task of the whole machine waited for a CPU, for I/O or for memory (pressure stall
information, PSI), disturbances no namespace counter sees; ``testbed_io_stall``: the same for
I/O and the testbed's own tasks (its cgroup tree's ``io.pressure``, sojourn.testbed.cgroups),
the fidelity guard's ``io_stall_s``; ``host_softirq`` (CPU seconds per
second the whole machine spent in softirqs, /proc/stat: the network stack's receive and
ACK-clocked send work, charged to whichever task it interrupted, the server's, the emulator's,
or to ksoftirqd, which neither server_cpu nor router_cpu counts); ``host_foreign_cpu`` (CPU
seconds per second the machine's tasks ran outside the testbed: /proc/stat's task time less
that of the processes in its three namespaces and of the runner, :func:`process_tree_ticks`;
the fidelity guard's ``foreign_cpu``); ``host_steal`` (the share of the machine's CPU time
the hypervisor gave to other guests, /proc/stat: the fidelity guard's ``cpu_steal`` per
interval, so a repetition voided for it shows when the host took the time); per queue of the
uplink (each band, or the FIFO) ``q<class>_sent_bytes``, ``q<class>_dropped``,
``q<class>_backlog_bytes`` with ``<class>`` the HTB class, e.g. ``q1_10``.
"""

from __future__ import annotations

import csv
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from . import handshakes, uplink
from .cgroups import TestbedCgroups, pressure_stall_us
from .sockdiag import SocketDiag

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# Cumulative kernel counters (/proc/net/netstat and snmp) sampled into a column each: the
# sum of the named counters.
KERNEL_COUNTERS: dict[str, tuple[str, ...]] = {
    "listen_overflows": ("TcpExt.ListenOverflows",),
    "listen_drops": ("TcpExt.ListenDrops",),
    "retrans_segs": ("Tcp.RetransSegs",),
    "syn_retrans": ("TcpExt.TCPSynRetrans",),
    # Why segments were sent again: the retransmission timer, tail loss probes (RFC 8985
    # §7) or fast retransmit; and the DSACKs that say a copy was not needed (RFC 2883 §4,
    # RFC 3708): retransmissions on a path that lost nothing.
    "rto_timeouts": ("TcpExt.TCPTimeouts",),
    "loss_probes": ("TcpExt.TCPLossProbes",),
    "fast_retrans": ("TcpExt.TCPFastRetrans",),
    "dsack_received": ("TcpExt.TCPDSACKRecv",),
    # A timer or probe that found its segment still in this host's queues (the uplink's
    # bands) sends nothing; and reordering the sender inferred (a segment of a socket whose
    # band rose overtaking its earlier ones in a lower band).
    "host_queue_skips": ("TcpExt.TCPSpuriousRtxHostQueues",),
    "reordering_seen": ("TcpExt.TCPSACKReorder", "TcpExt.TCPTSReorder", "TcpExt.TCPRenoReorder"),
    # Connections the kernel gave up on when their retransmissions or probes ran out
    # (tcp_retries2, tcp_orphan_retries): closed without a RST, so the peer only times out.
    "aborts_on_timeout": ("TcpExt.TCPAbortOnTimeout",),
}


# The clients' side of the handshakes, counted in their own namespace (cumulative): the
# connections they opened (SYNs sent), SYNs they sent again when the SYN-SENT timer fired,
# and attempts that failed (timed out in SYN-SENT, or reset). A SYN or SYN-ACK the path lost
# shows here as a retransmitted SYN, whichever direction lost it.
CLIENT_COUNTERS: dict[str, tuple[str, ...]] = {
    "client_active_opens": ("Tcp.ActiveOpens",),
    "client_syn_retrans": ("TcpExt.TCPSynRetrans",),
    "client_attempt_fails": ("Tcp.AttemptFails",),
}


def parse_proc_net_stats(text: str) -> dict[str, int]:
    """``/proc/net/netstat`` or ``/proc/net/snmp`` (header line, value line per
    protocol) as ``{"TcpExt.ListenDrops": n, ...}``."""
    values: dict[str, int] = {}
    lines = text.splitlines()
    for header, row in zip(lines[::2], lines[1::2]):
        proto, names = header.split(":", 1)
        _, numbers = row.split(":", 1)
        for name, number in zip(names.split(), numbers.split()):
            values[f"{proto}.{name}"] = int(number)
    return values


def tx_bytes(net_dev: str, dev: str) -> int:
    """Transmitted bytes of ``dev`` from ``/proc/net/dev``."""
    for line in net_dev.splitlines()[2:]:
        name, data = line.split(":", 1)
        if name.strip() == dev:
            return int(data.split()[8])
    raise KeyError(f"no interface {dev} in /proc/net/dev")


def counter_columns(stats: dict[str, int], columns: dict[str, tuple[str, ...]]) -> dict[str, int]:
    """Each column of ``columns`` (KERNEL_COUNTERS, CLIENT_COUNTERS): the sum of its named
    counters in ``stats`` (:func:`parse_proc_net_stats`), 0 for a counter the kernel lacks."""
    return {column: sum(stats.get(name, 0) for name in names) for column, names in columns.items()}


def client_counts(pids) -> dict[str, int | str]:
    """:data:`CLIENT_COUNTERS`, read through the first of ``pids`` (processes in the clients'
    namespace) whose /proc still answers; blank when none does (before the load generator
    starts, or after it exits: no process to read the namespace's counters through)."""
    for pid in pids:
        stats = parse_proc_net_stats(_read(f"/proc/{pid}/net/netstat")) | parse_proc_net_stats(
            _read(f"/proc/{pid}/net/snmp"))
        if stats:
            return counter_columns(stats, CLIENT_COUNTERS)
    return dict.fromkeys(CLIENT_COUNTERS, "")


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


class Lineage(NamedTuple):
    """What a process ran, in clock ticks, and who reaps it (proc(5) fields 14-17 and 4)."""

    own: int  # utime + stime
    reaped: int  # cutime + cstime: its children's, each added whole when it reaps one
    parent: int


@dataclass
class NsProcesses:
    """One pass over /proc: the processes of the server's network namespace and of others."""

    ticks: dict[int, int]  # utime + stime (clock ticks) per process in the server's namespace
    rss: int  # the sum of their resident set sizes in bytes
    runnable: int  # how many of them are runnable (state R, proc(5) field 3)
    blocked: int  # how many of their threads are blocked (state D: a worker thread may wait alone)
    others: dict[str, dict[int, int]]  # per other namespace, utime + stime per process in it
    # Every process of all those namespaces (process_tree_ticks).
    lineage: dict[int, Lineage]


def ns_processes(ns_inode: str, others: tuple[str, ...] = ()) -> NsProcesses:
    """The processes whose network namespace is ``ns_inode`` and, from the same pass, those
    of the namespaces ``others`` (an exiting process has no namespace links any more: it
    counts through its parent, :func:`process_tree_ticks`)."""
    sample = NsProcesses({}, 0, 0, 0, {inode: {} for inode in others}, {})
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            namespace = os.readlink(f"/proc/{entry}/ns/net")
        except OSError:
            continue
        if namespace != ns_inode and namespace not in sample.others:
            continue
        fields = _stat_fields(_read(f"/proc/{entry}/stat"))
        if not fields:
            continue
        pid, ticks = int(entry), int(fields[11]) + int(fields[12])
        sample.lineage[pid] = _lineage_entry(fields)
        if namespace != ns_inode:
            sample.others[namespace][pid] = ticks
            continue
        sample.ticks[pid] = ticks
        sample.rss += int(fields[21]) * PAGE_BYTES  # rss in pages (proc(5) field 24)
        sample.runnable += fields[0] == "R"
        try:
            threads = os.listdir(f"/proc/{entry}/task")
        except OSError:
            continue
        sample.blocked += sum(_stat_fields(_read(f"/proc/{entry}/task/{tid}/stat"))[:1] == ["D"] for tid in threads)
    return sample


def process_tree_ticks(previous: dict[int, Lineage], current: dict[int, Lineage],
                       owed: dict[int, int]) -> tuple[int, dict[int, int]]:
    """Clock ticks a set of processes ran between two samples of their ``lineage``
    (:class:`NsProcesses`), and what is still ``owed`` after them (pass it to the next call).

    A process in both counts what its own time and its reaped children's grew by; one new in
    the second counts both whole (it started in between). One gone by the second had been
    counted up to the first; its parent's reaped time takes in its whole total when it reaps
    it, so that much is owed by the parent and taken off its reaped time's growth, now or at
    a later sample: the parent may be read before it reaps (apache2's prefork master ending
    its idle children at once, 30 Nov 2026: taken off at once, one sample read 11-14 CPU
    s/s foreign). A child reaped unseen (a command run between samples) is counted whole."""
    if not previous:
        return 0, {}
    gone: dict[int, int] = {}
    for pid, (own, reaped, parent) in previous.items():
        if pid not in current:
            gone[parent] = gone.get(parent, 0) + own + reaped
    ran, owing = 0, {}
    for pid, (own, reaped, _) in current.items():
        if pid not in previous:
            ran += own + reaped
            continue
        absorbed = reaped - previous[pid].reaped
        owes = owed.get(pid, 0) + gone.get(pid, 0)
        repaid = min(owes, absorbed)
        ran += own - previous[pid].own + absorbed - repaid
        if owes > repaid:
            owing[pid] = owes - repaid
    return ran, owing


def cpu_rate(ticks: dict[int, int], previous: dict[int, int], elapsed_s: float) -> float:
    """CPU seconds per second of the processes in both samples (utime + stime in clock
    ticks, per pid) over ``elapsed_s``: a process that started between them counts from the
    next sample on."""
    used = sum(t - previous[pid] for pid, t in ticks.items() if pid in previous)
    return round(used / CLOCK_TICKS / max(elapsed_s, 1e-9), 4)


def own_lineage() -> Lineage:
    """The calling process's entry for :class:`NsProcesses`'s ``lineage``: the runner,
    whose threads (this sampler among them) and whose commands (``tc``, ``ip``) work for the
    testbed from outside its namespaces, and which reaps the testbed's processes."""
    return _lineage_entry(_stat_fields(_read("/proc/self/stat")))


def _lineage_entry(fields: list[str]) -> Lineage:
    """A process's :class:`Lineage` from its :func:`_stat_fields`."""
    return Lineage(own=int(fields[11]) + int(fields[12]), reaped=int(fields[13]) + int(fields[14]),
                   parent=int(fields[1]))


def _stat_fields(stat: str) -> list[str]:
    """The fields of a ``/proc/<pid>/stat`` line after the command name (state first); the
    name is cut at its last ')' since it may hold spaces and parentheses. Empty for a process
    that is gone."""
    return stat.rsplit(")", 1)[1].split() if stat else []


# Pressure stall information (Documentation/accounting/psi.rst): per resource, the
# cumulative microseconds in which at least one task waited for it.
PRESSURE_RESOURCES = ("cpu", "io", "memory")


class MachineTicks(NamedTuple):
    """The whole machine's cumulative CPU time in clock ticks, from ``/proc/stat``'s ``cpu``
    line (user nice system idle iowait irq softirq steal guest guest_nice; proc(5)):
    ``tasks`` user + nice + system (with IRQ time accounting a task's own utime + stime leave
    out the softirqs that interrupted it, as this does, so the two compare); ``idle`` idle +
    iowait; ``softirq``; ``steal``, the time the hypervisor gave to other guests; ``total``
    all eight (guest time is counted in user already)."""

    tasks: int
    idle: int
    softirq: int
    steal: int
    total: int

    def since(self, earlier: MachineTicks) -> MachineTicks:
        """The ticks spent from ``earlier`` to these."""
        return MachineTicks(*(now - then for now, then in zip(self, earlier)))

    @property
    def steal_share(self) -> float:
        """The hypervisor's share of these ticks (0 when none passed)."""
        return self.steal / self.total if self.total > 0 else 0.0


def machine_ticks(text: str) -> MachineTicks:
    """:class:`MachineTicks` from the text of ``/proc/stat`` (:func:`machine_ticks_now`
    reads the file)."""
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            user, nice, system, idle, iowait, irq, softirq, steal = ([int(v) for v in fields[1:9]] + [0] * 8)[:8]
            tasks, idle = user + nice + system, idle + iowait
            return MachineTicks(tasks=tasks, idle=idle, softirq=softirq, steal=steal,
                                total=tasks + idle + irq + softirq + steal)
    raise ValueError("/proc/stat has no cpu line")


def machine_ticks_now(stat: Path = Path("/proc/stat")) -> MachineTicks:
    """The machine's :class:`MachineTicks` as they stand now."""
    return machine_ticks(stat.read_text())


class CounterSampler:
    """A background thread writing one CSV row per interval."""

    def __init__(self, path_csv, interval_s: float, anchor_pid: int, ns: str, uplink_dev: str, link_bps: int,
                 router_ns: str, client_ns: str, cutoffs: list[int] | None = None,
                 cgroups: TestbedCgroups | None = None):
        if interval_s <= 0:
            raise ValueError(f"interval_s={interval_s}: must be > 0")
        self.path = Path(path_csv)
        self.interval_s = interval_s
        self.proc_net = f"/proc/{anchor_pid}/net"
        self.anchor_pid = anchor_pid
        self.ns_inode = os.readlink(f"/proc/{anchor_pid}/ns/net")
        self.ns = ns
        # The router's namespace, where the uplink delivers its SYN-ACKs.
        self.router_ns = router_ns
        # As /proc/<pid>/ns/net names it: the inode of the namespace's bind mount (ip-netns(8)).
        self.router_inode = f"net:[{os.stat(f'/run/netns/{router_ns}').st_ino}]"
        self.client_inode = f"net:[{os.stat(f'/run/netns/{client_ns}').st_ino}]"
        self.dev = uplink_dev
        self.link_bps = link_bps
        self.cutoffs = cutoffs
        # Pressure stall totals (microseconds some task waited), by the column of their rate.
        self.stall_sources = {f"host_{r}_stall": lambda r=r: pressure_stall_us(_read(f"/proc/pressure/{r}"))
                              for r in PRESSURE_RESOURCES}
        if cgroups:
            self.stall_sources["testbed_io_stall"] = cgroups.io_stall_us
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="testbed-counters", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling; re-raise here whatever stopped the sampler early."""
        self._stop.set()
        self._thread.join()
        if self._error is not None:
            raise RuntimeError(f"counter sampling into {self.path} failed: {self._error!r}") from self._error

    def _run(self) -> None:
        try:
            sockets = SocketDiag(self.anchor_pid)
            try:
                self._loop(sockets)
            finally:
                sockets.close()
        except BaseException as err:  # reported by stop(), in the caller's thread
            self._error = err

    def sample(self, sockets: SocketDiag) -> dict[str, float]:
        """One snapshot of the cumulative counters and gauges."""
        net = self.proc_net
        stats = parse_proc_net_stats(_read(f"{net}/netstat")) | parse_proc_net_stats(_read(f"{net}/snmp"))
        row: dict[str, float] = sockets.census()
        row |= counter_columns(stats, KERNEL_COUNTERS)
        # The router's count first: a SYN-ACK delivered by then was sent before the server's
        # count is read, so a sample never has more delivered than sent.
        row |= handshakes.handshake_counts(self.router_ns, self.ns)
        row["uplink_tx_bytes"] = tx_bytes(_read(f"{net}/dev"), self.dev)
        for q in uplink.uplink_stats(self.ns, self.dev, self.cutoffs):
            name = "q" + q["class"].replace(":", "_")
            row |= {f"{name}_sent_bytes": q["sent_bytes"], f"{name}_dropped": q["dropped"],
                    f"{name}_backlog_bytes": q["backlog_bytes"]}
        return row

    def _loop(self, sockets: SocketDiag) -> None:
        start = time.monotonic()
        previous_bytes = None
        previous_ticks: dict[int, int] = {}
        previous_router_ticks: dict[int, int] = {}
        previous_testbed: dict[int, Lineage] = {}
        owed: dict[int, int] = {}
        previous_stall, previous_stall_t = None, start
        previous_machine = None
        previous_t = start
        with open(self.path, "w", newline="") as out:
            writer = None
            next_t = start
            while True:
                now = time.monotonic()
                row = self.sample(sockets)
                processes = ns_processes(self.ns_inode, (self.router_inode, self.client_inode))
                ticks, router_ticks = processes.ticks, processes.others[self.router_inode]
                row |= client_counts(processes.others[self.client_inode])
                # The testbed: its three namespaces' processes and the runner.
                testbed = processes.lineage | {os.getpid(): own_lineage()}
                # Over their own span: reading the socket tables above can take a while under load.
                stall_t = time.monotonic()
                stall = {column: read() for column, read in self.stall_sources.items()}
                machine = machine_ticks(_read("/proc/stat"))
                elapsed = max(now - previous_t, 1e-9)
                sent = row["uplink_tx_bytes"] - previous_bytes if previous_bytes is not None else 0
                row["uplink_util"] = round(sent * 8 / elapsed / self.link_bps, 4)
                row["server_cpu"] = cpu_rate(ticks, previous_ticks, elapsed)
                row["server_rss_bytes"] = processes.rss
                row["server_processes"], row["server_runnable"] = len(ticks), processes.runnable
                row["server_blocked"] = processes.blocked
                row["router_cpu"] = cpu_rate(router_ticks, previous_router_ticks, elapsed)
                host_span = max(stall_t - previous_stall_t, 1e-9)
                for column, total_us in stall.items():
                    waited_us = total_us - previous_stall[column] if previous_stall else 0
                    row[column] = round(waited_us / 1e6 / host_span, 4)
                spent = machine.since(previous_machine) if previous_machine else MachineTicks(0, 0, 0, 0, 0)
                row["host_softirq"] = round(spent.softirq / CLOCK_TICKS / host_span, 4)
                row["host_steal"] = round(spent.steal_share, 4)
                # What the machine's tasks ran that the testbed's did not: builds, tests, other
                # testbeds (fidelity's foreign_cpu). Never below 0: the two are sampled by the tick.
                ours, owed = process_tree_ticks(previous_testbed, testbed, owed)
                row["host_foreign_cpu"] = round(max(0, spent.tasks - ours) / CLOCK_TICKS / host_span, 4)
                previous_bytes, previous_ticks, previous_t = row["uplink_tx_bytes"], ticks, now
                previous_router_ticks, previous_testbed = router_ticks, testbed
                previous_stall, previous_stall_t, previous_machine = stall, stall_t, machine
                row = {"t_s": round(now - start, 6)} | row
                if writer is None:
                    writer = csv.DictWriter(out, fieldnames=list(row), extrasaction="ignore", restval="")
                    writer.writeheader()
                writer.writerow(row)
                out.flush()
                next_t += self.interval_s
                if self._stop.wait(max(0.0, next_t - time.monotonic())):
                    return
