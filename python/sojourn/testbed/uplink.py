"""The bottleneck: the server's uplink (server -> clients), 000 §2.2 Fig. 2, and the one
builder of its qdisc.

``shape_uplink`` rate-limits it with HTB: a root class at the link rate and leaf classes
under it, each with its own FIFO (``LeafQueue``). Without cutoffs there is one leaf at the
full rate: a plain FIFO. With cutoffs (kernel-level SRPT, 000 §3) there is one leaf per
size band plus a default leaf, all under the same root, so both are measured against the
same rate limiter. This kernel has no ``prio`` qdisc, so strict priority comes from HTB
itself: each band's leaf has ``prio i``, a tiny guaranteed rate and ``ceil`` at the link
rate, so it borrows the whole link whenever no higher-priority leaf has packets
(docs/architecture.md).

The contract with the server (crates/server/src/qdisc.rs): band ``i`` is class
``1:(0x10 + i)`` (tc writes it in hex: ``1:10`` ... ``1:17``), and a socket whose
``SO_PRIORITY`` is ``(1 << 16) | (0x10 + i)`` is classified straight into it, which is
what ``serve --kernel-bands`` sets. Traffic whose priority names no class (SYN/ACKs of
listening sockets, a server without kernel bands, other programs) goes to the default
class ``1:20`` at priority 0, like the control band of 000 §3.2; without cutoffs the one
FIFO leaf ``1:10`` is the default.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from . import sysnet

HTB_MAJOR = 1
ROOT_CLASS = "1:1"
# Band i is class 1:(BAND_MINOR_BASE + i); the server's SO_PRIORITY names the same classes.
BAND_MINOR_BASE = 0x10
DEFAULT_MINOR = 0x20
# Guaranteed rate of each band's leaf: tiny, so priority (not the rate) decides sharing.
BAND_LEAF_RATE_BPS = 8_000
# One Ethernet frame on the uplink (MTU 1500 and its 14-byte header).
FRAME_BYTES = 1514
# HTB quantum of each leaf: one frame (tc warns about tiny computed quanta).
LEAF_QUANTUM = FRAME_BYTES
# tc's default burst (1600 bytes, 1.3 ms at 10 Mbit/s) idles the link whenever the qdisc
# watchdog wakes later than that, which a busy machine does; 5 ms of tokens ride it out.
BURST_S = 0.005
BURST_MIN_BYTES = 1600
# HTB's own leaf queue holds the device's txqueuelen packets, 1000 on a veth; it is
# given explicitly so every leaf's limit shows in `tc qdisc` and its counters.
DEFAULT_QUEUE_PACKETS = 1000


@dataclass(frozen=True)
class LeafQueue:
    """Each leaf's FIFO: ``pfifo`` holding ``limit`` packets or ``bfifo`` holding ``limit``
    bytes (000 §3.1: Linux 2.4's transmit queue held 100 packets)."""
    kind: str
    limit: int

    @classmethod
    def of(cls, queue_bytes: int | None, queue_packets: int | None) -> "LeafQueue":
        """The queue from a limit in bytes or in packets (None: 1000 packets). Giving both is
        an error: the testbed has this one rule for it (spec and `sojourn testbed up` reach
        the qdisc through here)."""
        if queue_bytes and queue_packets:
            raise ValueError(f"queue_bytes={queue_bytes} and queue_packets={queue_packets}: give one queue limit, not both")
        if queue_bytes:
            return cls("bfifo", queue_bytes)
        return cls("pfifo", queue_packets or DEFAULT_QUEUE_PACKETS)


def band_class(band: int) -> str:
    """The HTB class of band ``band`` (0 = highest priority), in tc's hex notation."""
    return f"{HTB_MAJOR:x}:{BAND_MINOR_BASE + band:x}"


DEFAULT_CLASS = f"{HTB_MAJOR:x}:{DEFAULT_MINOR:x}"


def uplink_commands(dev: str, rate_bps: int, queue: LeafQueue, cutoffs: list[int] | None) -> list[list[str]]:
    """The ``tc`` invocations (arguments after ``tc``) that shape ``dev``: one FIFO leaf
    without ``cutoffs``, else one strict-priority leaf per band (``len(cutoffs) + 1``) and
    the default leaf."""
    if cutoffs:
        leaves = [(band_class(band), band) for band in range(len(cutoffs) + 1)] + [(DEFAULT_CLASS, 0)]
        leaf_rate, default = BAND_LEAF_RATE_BPS, DEFAULT_CLASS
        if rate_bps < 2 * len(leaves) * BAND_LEAF_RATE_BPS:
            raise ValueError(f"rate {rate_bps} bit/s is too low for {len(leaves)} leaves of {BAND_LEAF_RATE_BPS} bit/s "
                             f"guaranteed each: use at least {2 * len(leaves) * BAND_LEAF_RATE_BPS} bit/s")
    else:
        leaves = [(band_class(0), 0)]
        leaf_rate, default = rate_bps, band_class(0)
    burst = str(max(BURST_MIN_BYTES, int(rate_bps * BURST_S / 8)))
    ceil = ["ceil", f"{rate_bps}bit", "burst", burst, "cburst", burst]
    commands = [
        ["qdisc", "add", "dev", dev, "root", "handle", f"{HTB_MAJOR:x}:", "htb", "default", default.split(":")[1]],
        ["class", "add", "dev", dev, "parent", f"{HTB_MAJOR:x}:", "classid", ROOT_CLASS, "htb", "rate", f"{rate_bps}bit", *ceil],
    ]
    for classid, prio in leaves:
        commands.append(["class", "add", "dev", dev, "parent", ROOT_CLASS, "classid", classid, "htb", "rate", f"{leaf_rate}bit",
                         *ceil, "prio", str(prio), "quantum", str(LEAF_QUANTUM)])
        # The leaf's queue gets handle (minor):, e.g. 10: under class 1:10.
        commands.append(["qdisc", "add", "dev", dev, "parent", classid, "handle", classid.split(":")[1] + ":",
                         queue.kind, "limit", str(queue.limit)])
    return commands


def shape_uplink(ns: str, dev: str, rate_bps: int, queue: LeafQueue, cutoffs: list[int] | None) -> None:
    """Rate-limit ``dev`` in ``ns`` to ``rate_bps`` (``uplink_commands``)."""
    commands = uplink_commands(dev, rate_bps, queue, cutoffs)
    # Single-MSS segments, so the bottleneck schedules packets and not 64 KB
    # TSO bursts (a band switch would otherwise wait for a whole burst).
    sysnet.ip(ns, "link", "set", "dev", dev, "gso_max_segs", "1")
    sysnet.tc(ns, "qdisc", "del", "dev", dev, "root", check=False)
    for command in commands:
        sysnet.tc(ns, *command)


def band_of(classid: str, cutoffs: list[int] | None) -> int | None:
    """The band a leaf class carries, None for the default class (and the plain FIFO)."""
    major, minor = (int(part, 16) for part in classid.split(":"))
    band = minor - BAND_MINOR_BASE
    return band if cutoffs and major == HTB_MAJOR and 0 <= band <= len(cutoffs) else None


def uplink_stats(ns: str, dev: str, cutoffs: list[int] | None) -> list[dict]:
    """Counters of each leaf queue of the uplink, from its leaf qdisc (``tc -j -s qdisc``;
    iproute2 6.1 prints HTB classes as text even with -j): the HTB ``class``, its ``band``
    (None: the default class or the plain FIFO), bytes and packets sent, packets dropped,
    backlog bytes and packets; bands in order, the default class last."""
    out = sysnet.tc(ns, "-j", "-s", "qdisc", "show", "dev", dev)
    # Leaf queues hang under the HTB's classes (the clsact hook that counts handshakes does not).
    leaves = [q for q in (json.loads(out) if out.strip() else [])
              if not q.get("root") and q.get("parent", "").startswith(f"{HTB_MAJOR:x}:")]
    rows = [{"band": band_of(q["parent"], cutoffs), "class": q["parent"], "sent_bytes": q.get("bytes", 0),
             "sent_packets": q.get("packets", 0), "dropped": q.get("drops", 0), "backlog_bytes": q.get("backlog", 0),
             "backlog_packets": q.get("qlen", 0)} for q in leaves]
    return sorted(rows, key=lambda row: (row["band"] is None, row["band"] or 0))
