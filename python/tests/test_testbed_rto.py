"""The initial RTO set by cgroup BPF (000 Table 2 (F)), measured on the wire: a SYN (client
side) and a SYN-ACK (server side) that are lost on purpose are retransmitted after the
initial RTO, 3 s with ``initial_rto_ms = 3000`` and Linux's 1 s without it.

The namespace has a veth pair whose far end drops what it receives: a packet socket on the
near end sees each packet leave, so the packets and their times come from the kernel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from sojourn.testbed import sysnet
from sojourn.testbed.cgroups import TestbedCgroups, remove_prefix
from sojourn.testbed.rto import InitialRto, RtoError

pytestmark = [pytest.mark.netns, pytest.mark.skipif(os.geteuid() != 0, reason="needs root (netns, cgroups, BPF)")]

NS = "sjrtot-ns"

# Captures TCP packets leaving interface d0 for `seconds`, after optionally
# starting a client connect or sending a spoofed SYN to a local listener; prints the
# times (s since start) of packets with SYN set, per kind (syn, synack).
CAPTURE = textwrap.dedent("""
    import json, socket, struct, sys, time
    mode, seconds = sys.argv[1], float(sys.argv[2])
    tap = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(0x0003))
    tap.bind(("d0", 0))
    tap.settimeout(0.05)
    start = time.monotonic()
    if mode == "client":
        sock = socket.socket(); sock.setblocking(False)
        try:
            sock.connect(("10.99.0.2", 80))
        except BlockingIOError:
            pass
    else:
        listener = socket.socket(); listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("10.99.0.1", 8080)); listener.listen(8)
        raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
        raw.setsockopt(socket.IPPROTO_IP, socket.IP_HDRINCL, 1)
        src, dst = socket.inet_aton("10.99.0.9"), socket.inet_aton("10.99.0.1")
        tcp = struct.pack("!HHIIBBHHH", 40000, 8080, 1, 0, 5 << 4, 0x02, 64240, 0, 0)
        pseudo = src + dst + struct.pack("!BBH", 0, 6, len(tcp))
        data = pseudo + tcp
        total = sum(struct.unpack("!%dH" % (len(data) // 2), data))
        while total >> 16:
            total = (total & 0xFFFF) + (total >> 16)
        tcp = tcp[:16] + struct.pack("!H", ~total & 0xFFFF) + tcp[18:]
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 1, 0, 64, 6, 0, src, dst)
        raw.sendto(ip + tcp, ("10.99.0.1", 0))
    seen = {"syn": [], "synack": []}
    while time.monotonic() - start < seconds:
        try:
            frame = tap.recv(2048)
        except socket.timeout:
            continue
        ip = frame[14:]
        if len(ip) < 40 or ip[9] != 6:
            continue
        flags = ip[(ip[0] & 0x0F) * 4 + 13]
        if flags & 0x02:
            seen["synack" if flags & 0x10 else "syn"].append(time.monotonic() - start)
    print(json.dumps(seen))
""")


@pytest.fixture
def namespace():
    sysnet.ip(None, "netns", "delete", NS, check=False)
    sysnet.ip(None, "netns", "add", NS)
    try:
        # d0's peer d1 has no address and the namespace does not forward: frames reach
        # d1 and are dropped there. Static neighbours: no ARP that would hold the SYNs back.
        for argv in (["link", "set", "lo", "up"], ["link", "add", "d0", "type", "veth", "peer", "name", "d1"],
                     ["addr", "add", "10.99.0.1/24", "dev", "d0"], ["link", "set", "d0", "up"], ["link", "set", "d1", "up"],
                     ["neigh", "add", "10.99.0.2", "lladdr", "02:00:00:00:00:02", "dev", "d0", "nud", "permanent"],
                     ["neigh", "add", "10.99.0.9", "lladdr", "02:00:00:00:00:09", "dev", "d0", "nud", "permanent"]):
            sysnet.ip(NS, *argv)
        sysnet.set_sysctls(NS, {"net.ipv4.conf.all.rp_filter": "0", "net.ipv4.conf.d0.rp_filter": "0",
                                "net.ipv4.conf.lo.rp_filter": "0", "net.ipv4.tcp_syncookies": "0"})
        yield NS
    finally:
        sysnet.ip(None, "netns", "delete", NS, check=False)
        remove_prefix("sjrtot")


def first_retransmission(ns: str, mode: str, preexec, seconds: float) -> float:
    done = subprocess.run(sysnet.in_ns(ns, [sys.executable, "-c", CAPTURE, mode, str(seconds)]),
                          capture_output=True, text=True, timeout=seconds + 20, preexec_fn=preexec)
    assert done.returncode == 0, done.stderr
    times = json.loads(done.stdout)["syn" if mode == "client" else "synack"]
    assert len(times) >= 2, f"{mode}: expected a packet and its retransmission, saw {times}"
    return times[1] - times[0]


def wheel_slack_s(timeout_s: float, hz: int) -> float:
    """How late the kernel's timer wheel may fire a timer of ``timeout_s``: a timer n
    levels up the wheel expires at a granularity of 8^n jiffies (kernel/time/timer.c,
    LVL_CLK_SHIFT = 3, level n from 63 * 8^(n-1) jiffies), never early. At HZ = 250 a 3 s
    retransmission timer sits at level 2: up to 256 ms late; a 1 s one up to 32 ms."""
    jiffies, level = timeout_s * hz, 0
    while jiffies >= 63 * 8 ** level:
        level += 1
    return 8 ** level / hz


@pytest.mark.parametrize("mode", ["client", "server"])
def test_a_lost_handshake_packet_is_retransmitted_after_the_initial_rto(namespace, mode):
    side = "cli" if mode == "client" else "srv"
    cgroups = TestbedCgroups("sjrtot")
    try:
        rto = InitialRto(cgroups.side(side), 3000)
        assert rto.describe()["jiffies"] == 3 * rto.hz
        gap = first_retransmission(namespace, mode, cgroups.preexec(side), 3.6)
        assert 3.0 - 0.01 <= gap <= 3.0 + wheel_slack_s(3.0, rto.hz) + 0.01, gap
    finally:
        cgroups.remove()
    assert not cgroups.path.exists()
    # Without the setting: Linux's 1 s (RFC 6298 §2.1).
    gap = first_retransmission(namespace, mode, None, 1.6)
    assert 1.0 - 0.01 <= gap <= 1.0 + wheel_slack_s(1.0, rto.hz) + 0.01, gap


def test_bad_values_are_refused_and_leftovers_removed_by_prefix():
    cgroups = TestbedCgroups("sjrtot")
    with pytest.raises(RtoError, match="initial_rto_ms=0"):
        InitialRto(cgroups.side("cli"), 0)
    with pytest.raises(ValueError, match="side 'router'"):
        cgroups.side("router")
    left = InitialRto(cgroups.side("srv"), 500)
    assert left.jiffies == left.hz // 2
    assert remove_prefix("sjrtot") == [f"cgroup {cgroups.path}"]
    assert not cgroups.path.exists() and remove_prefix("sjrtot") == []
