"""Counts of the handshake packets on the server's interface: SYNs in from the clients and
SYN-ACKs out, which no kernel MIB counts.

000 §6.1 reports the share of incoming SYNs the server dropped ("1% in the baseline case");
ListenDrops counts the SYNs dropped but no kernel counter gives the SYNs received, the share's
denominator (sojourn.analysis.metrics.dropped_syn_share). The SYN-ACKs are counted before the
uplink's queues, so they include those a full queue then drops (which TCPSynRetrans does not
count among SYN-ACKs sent again: tcp_rtx_synack counts a send the queue accepted).

This kernel has neither the gact action nor u32 hit counters (CONFIG_CLS_U32_PERF), so a u32
filter on each direction's clsact hook matches the packets, and a mirred action mirrors them
to an ifb device that discards the copies: the action's packet count is the count.
"""

from __future__ import annotations

import json

from . import sysnet

# The ifb that takes (and drops) the copies; it lives in the server's namespace.
SINK_DEV = "synsink"
# mirred action indexes of the two counts.
SYN_ACTION, SYNACK_ACTION = 101, 102
# An IPv4 header without options (first byte 0x45; the testbed's packets carry none), so the
# TCP flags byte (RFC 9293 §3.1, offset 13) sits at byte 33; SYN is 0x02, ACK 0x10.
IPV4_NO_OPTIONS = ["match", "u8", "0x45", "0xff", "at", "0", "match", "ip", "protocol", "6", "0xff"]
SYN_ONLY = ["match", "u8", "0x02", "0x12", "at", "33"]
SYN_ACK = ["match", "u8", "0x12", "0x12", "at", "33"]


def handshake_commands(dev: str) -> list[list[str]]:
    """The ``tc`` invocations (arguments after ``tc``) that count ``dev``'s incoming SYNs
    (without ACK) and outgoing SYN-ACKs, once the ifb ``SINK_DEV`` exists."""
    def counting(hook: str, flags: list[str], index: int) -> list[str]:
        return ["filter", "add", "dev", dev, hook, "protocol", "ip", "prio", "1", "u32", *IPV4_NO_OPTIONS, *flags,
                "action", "mirred", "egress", "mirror", "dev", SINK_DEV, "index", str(index)]
    return [["qdisc", "add", "dev", dev, "clsact"],
            counting("ingress", SYN_ONLY, SYN_ACTION),
            counting("egress", SYN_ACK, SYNACK_ACTION)]


def count_handshakes(ns: str, dev: str) -> None:
    """Start counting the handshake packets of ``dev`` in ``ns`` (before any traffic: the
    counts are cumulative from here)."""
    sysnet.ip(ns, "link", "add", SINK_DEV, "type", "ifb")
    sysnet.ip(ns, "link", "set", "dev", SINK_DEV, "up")
    for command in handshake_commands(dev):
        sysnet.tc(ns, *command)


def parse_counts(tc_json: str) -> dict[str, int]:
    """``syns_received`` and ``synacks_sent`` from ``tc -s -j actions list action mirred``;
    empty when the namespace does not count them."""
    listed = json.loads(tc_json) if tc_json.strip() else []
    packets = {action["index"]: action["stats"]["packets"]
               for part in listed for action in part.get("actions", ())}
    if SYN_ACTION not in packets or SYNACK_ACTION not in packets:
        return {}
    return {"syns_received": packets[SYN_ACTION], "synacks_sent": packets[SYNACK_ACTION]}


def handshake_counts(ns: str) -> dict[str, int]:
    """The cumulative counts in ``ns`` (:func:`parse_counts`)."""
    return parse_counts(sysnet.tc(ns, "-s", "-j", "actions", "list", "action", "mirred"))
