"""A census of one network namespace's TCP sockets by sock_diag netlink (sock_diag(7),
linux/inet_diag.h), the socket columns the counters sample each second (docs/testbed.md).

It replaces reading ``/proc/<pid>/net/tcp``, which lists TIME_WAIT sockets too: under 000
§4's persistent overload 99% of a server namespace's sockets were in TIME_WAIT, and its
sampler's reads took up to 2 s each (docs/testbed.md "Counters" has the measurement,
bench/counters the comparison). The dump asks for every state but TIME_WAIT, which holds no
bytes, and its messages are read in place, without text or copies.

The netlink socket is opened inside the server's namespace (a socket keeps the namespace it
was made in) by the calling thread entering it and coming back at once.
"""

from __future__ import annotations

import ctypes
import os
import socket
import struct
from collections.abc import Iterable, Iterator

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
INET_DIAG_INFO = 2  # attribute: struct tcp_info
CLONE_NEWNET = 0x40000000

# include/net/tcp_states.h
TCP_ESTABLISHED, TCP_SYN_RECV, TCP_TIME_WAIT, TCP_LISTEN = 1, 3, 6, 10
# Every state but TIME_WAIT, which holds no bytes (TCPF_ALL without TCPF_TIME_WAIT).
STATES = 0xFFF & ~(1 << TCP_TIME_WAIT)
# idiag_timer 4: the zero-window probe timer (ICSK_TIME_PROBE0), as /proc's "tr" field.
TIMER_PROBE0 = 4

NLMSG = struct.Struct("=IHHII")  # len, type, flags, seq, pid
# inet_diag_req_v2: family, protocol, extensions, pad, states, inet_diag_sockid (48 bytes)
REQUEST = struct.Struct("=BBBxI48x")
# inet_diag_msg: family, state, timer, retrans, inet_diag_sockid, expires, rqueue, wqueue, uid, inode
DIAG_MSG = struct.Struct("=BBBB48xIIIII")
RTATTR = struct.Struct("=HH")  # len, type
# struct tcp_info's head: state, ca_state, retransmits, probes, backoff, options,
# wscales, flags (eight bytes), then tcpi_rto in microseconds.
TCP_INFO_HEAD = struct.Struct("=BBBBBBBBI")

CENSUS_COLUMNS = ("established", "syn_recv", "accept_queue", "sockets_unacked", "sockets_probe0", "sockets_backoff",
                  "sockets_rto_ge_1s", "max_rto_ticks")


def dump_request(family: int, seq: int = 1) -> bytes:
    """A SOCK_DIAG_BY_FAMILY dump of ``family``'s TCP sockets in :data:`STATES`, each with
    its tcp_info."""
    body = REQUEST.pack(family, socket.IPPROTO_TCP, 1 << (INET_DIAG_INFO - 1), STATES)
    return NLMSG.pack(NLMSG.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, seq, 0) + body


def replies(buffer: bytes) -> Iterator[memoryview | None]:
    """The inet_diag_msg payloads of one netlink read (views into it, not copies), then None
    if it held the dump's end; the kernel's error (NLMSG_ERROR) raised as OSError."""
    view = memoryview(buffer)
    offset = 0
    while offset + NLMSG.size <= len(buffer):
        length, kind, _, _, _ = NLMSG.unpack_from(buffer, offset)
        if length < NLMSG.size:
            raise OSError(f"sock_diag: a netlink message of {length} bytes")
        if kind == NLMSG_DONE:
            yield None
            return
        if kind == NLMSG_ERROR:
            code = -struct.unpack_from("=i", buffer, offset + NLMSG.size)[0]
            raise OSError(code, f"sock_diag dump: {os.strerror(code)}")
        yield view[offset + NLMSG.size:offset + length]
        offset += (length + 3) & ~3


def tcp_info_head(message: memoryview) -> tuple[int, int, int] | None:
    """(retransmits, probes, rto in µs) from a message's INET_DIAG_INFO attribute; None
    without one (a request socket has none)."""
    offset = DIAG_MSG.size
    while offset + RTATTR.size <= len(message):
        length, kind = RTATTR.unpack_from(message, offset)
        if length < RTATTR.size:
            return None
        if kind == INET_DIAG_INFO and length >= RTATTR.size + TCP_INFO_HEAD.size:
            _, _, retransmits, probes, _, _, _, _, rto_us = TCP_INFO_HEAD.unpack_from(message, offset + RTATTR.size)
            return retransmits, probes, rto_us
        offset += (length + 3) & ~3
    return None


def census(messages: Iterable[memoryview], clock_ticks: int = os.sysconf("SC_CLK_TCK")) -> dict[str, int]:
    """Counts of established and SYN-RECV sockets, the summed accept-queue length of
    listening ones (a LISTEN socket's rqueue is its accept backlog), and a census of the
    sockets holding bytes not yet acknowledged (wqueue, write_seq - snd_una, > 0):

    - ``sockets_probe0``: of those, on the zero-window probe timer: nothing in flight and the
      next send waits, for a zero window or after a full local queue refused it;
    - ``sockets_backoff``: of those, in backoff: RTO retransmissions or unanswered probes
      (tcp_info's retransmits and probes, /proc's ``retrnsmt`` and ``timeout``);
    - ``sockets_rto_ge_1s``: of those, an RTO (doubled by each backoff) of at least 1 s;
    - ``max_rto_ticks``: the largest such RTO in clock ticks, as /proc prints it.
    """
    counts = dict.fromkeys(CENSUS_COLUMNS, 0)
    for message in messages:
        _, state, timer, retrans, _, rqueue, wqueue, _, _ = DIAG_MSG.unpack_from(message)
        if state == TCP_LISTEN:
            counts["accept_queue"] += rqueue
            continue
        counts["established"] += state == TCP_ESTABLISHED
        counts["syn_recv"] += state == TCP_SYN_RECV
        if wqueue == 0:
            continue
        counts["sockets_unacked"] += 1
        counts["sockets_probe0"] += timer == TIMER_PROBE0
        info = tcp_info_head(message)
        retransmits, probes, rto_us = info if info else (retrans, 0, 0)
        counts["sockets_backoff"] += retransmits > 0 or probes > 0
        counts["sockets_rto_ge_1s"] += rto_us >= 1_000_000
        counts["max_rto_ticks"] = max(counts["max_rto_ticks"], rto_us * clock_ticks // 1_000_000)
    return counts


def _setns(fd: int) -> None:
    if hasattr(os, "setns"):  # Python 3.12
        os.setns(fd, os.CLONE_NEWNET)
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"setns: {os.strerror(code)}")


class SocketDiag:
    """A sock_diag netlink socket in the network namespace of process ``pid``."""

    def __init__(self, pid: int):
        with open("/proc/thread-self/ns/net") as home, open(f"/proc/{pid}/ns/net") as target:
            _setns(target.fileno())
            try:
                self._socket = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG)
            finally:
                _setns(home.fileno())
        self._seq = 0

    def census(self) -> dict[str, int]:
        """:func:`census` of the namespace's IPv4 and IPv6 TCP sockets, taken as the dumps
        arrive."""
        return census(message for family in (socket.AF_INET, socket.AF_INET6) for message in self._dump(family))

    def _dump(self, family: int) -> Iterator[memoryview]:
        self._seq += 1
        self._socket.send(dump_request(family, self._seq))
        while True:
            for message in replies(self._socket.recv(1 << 20)):
                if message is None:
                    return
                yield message

    def close(self) -> None:
        self._socket.close()
