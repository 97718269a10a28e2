"""Counts of the handshake packets on the server's uplink: SYNs in from the clients,
SYN-ACKs out of the server, and SYN-ACKs through the uplink's queues to the router, which no
kernel MIB counts.

000 §6.1 reports the share of incoming SYNs the server dropped ("1% in the baseline case");
ListenDrops counts the SYNs dropped but no kernel counter gives the SYNs received, the share's
denominator (sojourn.analysis.metrics.dropped_syn_share). The SYN-ACKs are counted before the
uplink's queues, so they include those a full queue then drops (which TCPSynRetrans does not
count among SYN-ACKs sent again: tcp_rtx_synack counts a send the queue accepted). The same
SYN-ACKs counted again where the uplink delivers them, on the router's end of its link, give
those the queues dropped: the handshakes FAIR loses in the uplink's FIFO (000 §6 reads its
delays as drops in the server's transmit queue), otherwise only inferred from their time.

This kernel has neither the gact action nor u32 hit counters (CONFIG_CLS_U32_PERF), so a u32
filter on each direction's clsact hook matches the packets, and a mirred action mirrors them
to an ifb device that discards the copies: the action's packet count is the count.
"""

from __future__ import annotations

import json

from . import sysnet

# The ifb that takes (and drops) the copies; it lives in the server's namespace.
SINK_DEV = "synsink"
# mirred action indexes of the counts, and the column each gives (counters.csv).
SYN_ACTION, SYNACK_ACTION, SYNACK_DELIVERED_ACTION = 101, 102, 103
COLUMNS = {SYN_ACTION: "syns_received", SYNACK_ACTION: "synacks_sent", SYNACK_DELIVERED_ACTION: "synacks_delivered"}
# An IPv4 header without options (first byte 0x45; the testbed's packets carry none), so the
# TCP flags byte (RFC 9293 §3.1, offset 13) sits at byte 33; SYN is 0x02, ACK 0x10.
IPV4_NO_OPTIONS = ["match", "u8", "0x45", "0xff", "at", "0", "match", "ip", "protocol", "6", "0xff"]
SYN_ONLY = ["match", "u8", "0x02", "0x12", "at", "33"]
SYN_ACK = ["match", "u8", "0x12", "0x12", "at", "33"]


def _counting(dev: str, hook: str, flags: list[str], index: int) -> list[str]:
    return ["filter", "add", "dev", dev, hook, "protocol", "ip", "prio", "1", "u32", *IPV4_NO_OPTIONS, *flags,
            "action", "mirred", "egress", "mirror", "dev", SINK_DEV, "index", str(index)]


def handshake_commands(dev: str) -> list[list[str]]:
    """The ``tc`` invocations (arguments after ``tc``) that count the server's ``dev``'s
    incoming SYNs (without ACK) and outgoing SYN-ACKs, once the ifb ``SINK_DEV`` exists."""
    return [["qdisc", "add", "dev", dev, "clsact"],
            _counting(dev, "ingress", SYN_ONLY, SYN_ACTION),
            _counting(dev, "egress", SYN_ACK, SYNACK_ACTION)]


def delivered_commands(dev: str) -> list[list[str]]:
    """The ``tc`` invocations that count the SYN-ACKs arriving on the router's ``dev``, the
    far end of the server's uplink (past its queues)."""
    return [["qdisc", "add", "dev", dev, "clsact"],
            _counting(dev, "ingress", SYN_ACK, SYNACK_DELIVERED_ACTION)]


def _count(ns: str, commands: list[list[str]]) -> None:
    sysnet.ip(ns, "link", "add", SINK_DEV, "type", "ifb")
    sysnet.ip(ns, "link", "set", "dev", SINK_DEV, "up")
    for command in commands:
        sysnet.tc(ns, *command)


def count_handshakes(server_ns: str, uplink_dev: str, router_ns: str, router_dev: str) -> None:
    """Start counting the handshake packets on the uplink, ``uplink_dev`` in ``server_ns``
    and its peer ``router_dev`` in ``router_ns`` (before any traffic: the counts are
    cumulative from here)."""
    _count(server_ns, handshake_commands(uplink_dev))
    _count(router_ns, delivered_commands(router_dev))


def parse_counts(tc_json: str) -> dict[str, int]:
    """The counts (COLUMNS) that ``tc -s -j actions list action mirred`` of one namespace
    holds; empty when the namespace counts none."""
    listed = json.loads(tc_json) if tc_json.strip() else []
    packets = {action["index"]: action["stats"]["packets"]
               for part in listed for action in part.get("actions", ())}
    return {column: packets[index] for index, column in COLUMNS.items() if index in packets}


def handshake_counts(*namespaces: str) -> dict[str, int]:
    """The cumulative counts in ``namespaces`` (:func:`parse_counts`)."""
    counts: dict[str, int] = {}
    for ns in namespaces:
        counts |= parse_counts(sysnet.tc(ns, "-s", "-j", "actions", "list", "action", "mirred"))
    return counts
