"""The bottleneck: the server's uplink (server -> clients), 000 §2.2 Fig. 2.

``shape_uplink`` sets it up. Without bands it is an HTB root class at the link
rate with one FIFO leaf (the same shaper as the banded case, so both are
measured against the same rate limiter). With bands it is ``sojourn-engine bands
setup`` (the server area owns the strict-priority HTB layout,
crates/server/src/qdisc.rs); the testbed does not duplicate it.
"""

from __future__ import annotations

import json
import subprocess

from sojourn.engine import engine_path

from . import sysnet

# The FIFO leaf's class id; ``SO_PRIORITY`` of 0 falls through to it by ``default``.
ROOT_HANDLE = "1:"
LINK_CLASS = "1:1"
FIFO_CLASS = "1:10"
BURST_S = 0.005
BURST_MIN_BYTES = 1600


def shape_uplink(ns: str, dev: str, rate_bps: int, queue_bytes: int | None, cutoffs: list[int] | None,
                 queue_packets: int | None = None) -> None:
    """Rate-limit ``dev`` in ``ns`` to ``rate_bps`` with a ``queue_bytes`` or
    ``queue_packets`` FIFO (None: 1000 packets) or, with ``cutoffs``, strict-priority
    size bands, each with that queue limit."""
    # Single-MSS segments, so the bottleneck schedules packets and not 64 KB
    # TSO bursts (a band switch would otherwise wait for a whole burst).
    sysnet.ip(ns, "link", "set", "dev", dev, "gso_max_segs", "1")
    sysnet.tc(ns, "qdisc", "del", "dev", dev, "root", check=False)
    if cutoffs:
        _bands_setup(ns, dev, rate_bps, cutoffs, queue_bytes, queue_packets)
        return
    rate = f"{rate_bps}bit"
    # tc's default burst (1600 bytes, 1.3 ms at 10 Mbit/s) idles the link whenever the qdisc
    # watchdog wakes later than that, which a busy machine does; 5 ms of tokens ride it out.
    burst = str(max(BURST_MIN_BYTES, int(rate_bps * BURST_S / 8)))
    shaping = ["rate", rate, "ceil", rate, "burst", burst, "cburst", burst]
    sysnet.tc(ns, "qdisc", "add", "dev", dev, "root", "handle", ROOT_HANDLE, "htb", "default", "10")
    sysnet.tc(ns, "class", "add", "dev", dev, "parent", ROOT_HANDLE, "classid", LINK_CLASS, "htb", *shaping)
    sysnet.tc(ns, "class", "add", "dev", dev, "parent", LINK_CLASS, "classid", FIFO_CLASS, "htb", *shaping)
    leaf = ["bfifo", "limit", str(queue_bytes)] if queue_bytes else ["pfifo", "limit", str(queue_packets or 1000)]
    sysnet.tc(ns, "qdisc", "add", "dev", dev, "parent", FIFO_CLASS, "handle", "10:", *leaf)


def _bands_setup(ns: str, dev: str, rate_bps: int, cutoffs: list[int], queue_bytes: int | None,
                 queue_packets: int | None) -> None:
    argv = [str(engine_path()), "bands", "setup", "--dev", dev, "--rate", f"{rate_bps}bit",
            "--cutoffs", ",".join(str(c) for c in cutoffs), "--burst-ms", str(BURST_S * 1000)]
    if queue_bytes:
        argv += ["--queue-bytes", str(queue_bytes)]
    if queue_packets:
        argv += ["--queue-packets", str(queue_packets)]
    done = subprocess.run(sysnet.in_ns(ns, argv), capture_output=True, text=True)
    if done.returncode != 0:
        raise sysnet.NetError(
            f"priority bands need `sojourn-engine bands setup` (issue 2): `{' '.join(argv)}` failed: "
            f"{done.stderr.strip()}")


def uplink_stats(ns: str, dev: str, cutoffs: list[int] | None) -> list[dict]:
    """Per-queue counters of the uplink: one entry per band (``sojourn-engine bands
    show --json``) or for the single FIFO (its leaf qdisc, ``tc -j -s qdisc``):
    the HTB class, bytes sent, packets dropped, backlog bytes."""
    keys = ("class", "sent_bytes", "dropped", "backlog_bytes")
    if cutoffs:
        argv = [str(engine_path()), "bands", "show", "--dev", dev, "--bands", str(len(cutoffs) + 1), "--json"]
        lines = sysnet.run(sysnet.in_ns(ns, argv)).splitlines()
        return [{k: band[k] for k in keys} for band in map(json.loads, filter(None, lines))]
    # iproute2 6.1 prints HTB classes as text even with -j, leaf qdiscs as JSON.
    out = sysnet.tc(ns, "-j", "-s", "qdisc", "show", "dev", dev)
    return [
        {"class": q["parent"], "sent_bytes": q.get("bytes", 0), "dropped": q.get("drops", 0),
         "backlog_bytes": q.get("backlog", 0)}
        for q in (json.loads(out) if out.strip() else [])
        if not q.get("root") and "parent" in q
    ]
