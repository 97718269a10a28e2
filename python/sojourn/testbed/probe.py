"""Measurement probes run inside the testbed's namespaces (by tests and bench/wan):
``python -m sojourn.testbed.probe ACTION ...``, each printing one JSON object.

- ``listen``: accept and close TCP connections (the far end of ``connect`` and ``warm``);
- ``warm``: one connection to each of many addresses (fills the TCP metrics cache);
- ``connect``: time N TCP handshakes (each takes one round trip), by the clock
  around ``connect()`` and by the kernel's own SYN -> SYN-ACK sample;
- ``udp-send`` / ``udp-recv``: numbered datagrams on one flow, paced; the
  receiver reports which sequence numbers arrived, so loss, conditional loss
  and burst lengths can be computed (``loss_stats``);
- ``sink`` / ``source``: a bulk TCP transfer, the source optionally with
  ``SO_PRIORITY`` (to pick an HTB band), the sink counting bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import socket
import struct
import sys
import time

SEQ = struct.Struct("!I")


def parse_endpoint(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    try:
        return host, int(port)
    except ValueError:
        raise argparse.ArgumentTypeError(f"endpoint {text!r}: expected ADDRESS:PORT") from None


def loss_stats(received: list[bool]) -> dict:
    """Loss rate, P(lost | previous lost) and mean burst length of a sequence of
    arrivals (True = arrived)."""
    lost = [not r for r in received]
    n_lost = sum(lost)
    after_loss = [b for a, b in zip(lost, lost[1:]) if a]
    bursts = sum(1 for i, l in enumerate(lost) if l and (i == 0 or not lost[i - 1]))
    return {
        "sent": len(received),
        "lost": n_lost,
        "loss": n_lost / len(received) if received else 0.0,
        "conditional": sum(after_loss) / len(after_loss) if after_loss else 0.0,
        "pairs_after_loss": len(after_loss),
        "mean_burst": n_lost / bursts if bursts else 0.0,
    }


def cmd_listen(args) -> dict:
    server = socket.create_server(args.bind, backlog=1024)
    server.settimeout(args.timeout)
    accepted = 0
    try:
        while True:
            conn, _ = server.accept()
            conn.close()
            accepted += 1
    except TimeoutError:
        return {"accepted": accepted}


# struct tcp_info (linux/tcp.h): 8 one-byte fields, then u32s; tcpi_rtt is the 16th u32.
TCP_INFO_RTT = struct.Struct("=I")
TCP_INFO_RTT_OFFSET = 8 + 15 * 4


def handshake_rtt_s(sock: socket.socket) -> float:
    """The kernel's RTT estimate right after connect(): its only sample is the
    SYN -> SYN-ACK time, measured in the kernel (no user-space scheduling in it)."""
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    return TCP_INFO_RTT.unpack_from(info, TCP_INFO_RTT_OFFSET)[0] / 1e6


def cmd_connect(args) -> dict:
    times, kernel = [], []
    time.sleep(args.wait)
    for _ in range(args.count):
        sock = socket.socket()
        sock.bind((args.source, 0))
        start = time.perf_counter()
        sock.connect(args.target)
        times.append(time.perf_counter() - start)
        kernel.append(handshake_rtt_s(sock))
        sock.close()
        time.sleep(args.gap)
    return {"connect_s": times, "handshake_rtt_s": kernel}


def cmd_warm(args) -> dict:
    """One short connection to each target, closed by us first, so the kernel
    creates a TCP metrics entry for it (see ``Testbed.warm_tcp_metrics``)."""
    from concurrent.futures import ThreadPoolExecutor

    def touch(addr: str) -> bool:
        try:
            with socket.create_connection((addr, args.port), timeout=10):
                return True
        except OSError:
            return False

    with ThreadPoolExecutor(max_workers=64) as pool:
        ok = sum(pool.map(touch, args.targets.split(",")))
    return {"connected": ok}


PRIORITY_HELP = "SO_PRIORITY (an HTB class id selects that band)"


def _prioritized(sock: socket.socket, priority: int | None) -> socket.socket:
    """The socket with ``SO_PRIORITY`` set when given: an HTB class id selects that band."""
    if priority is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_PRIORITY, priority)
    return sock


def cmd_udp_send(args) -> dict:
    sock = _prioritized(socket.socket(socket.AF_INET, socket.SOCK_DGRAM), args.priority)
    sock.bind((args.source, 0))
    pad = bytes(max(0, args.size - SEQ.size))
    start = time.perf_counter()
    for seq in range(args.count):
        # Sleep only when 2 ms ahead of schedule: short sleeps overshoot on a busy machine.
        if (ahead := start + seq / args.pps - time.perf_counter()) > 0.002:
            time.sleep(ahead)
        sock.sendto(SEQ.pack(seq) + pad, args.target)
    return {"sent": args.count, "seconds": time.perf_counter() - start}


def cmd_udp_recv(args) -> dict:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.bind(args.bind)
    sock.settimeout(args.timeout)
    arrived = bytearray(args.count)
    try:
        while True:
            data = sock.recv(65536)
            sock.settimeout(args.idle)
            seq = SEQ.unpack_from(data)[0]
            if seq < args.count:
                arrived[seq] = 1
    except TimeoutError:
        pass
    return loss_stats([bool(a) for a in arrived])


def cmd_sink(args) -> dict:
    server = socket.create_server(args.bind)
    server.settimeout(args.timeout)
    conn, _ = server.accept()
    conn.settimeout(args.timeout)
    total = 0
    digest = hashlib.sha256()
    try:
        while data := conn.recv(1 << 16):
            total += len(data)
            digest.update(data)
    except TimeoutError:
        pass
    return {"bytes": total, "sha256": digest.hexdigest()}


def cmd_source(args) -> dict:
    sock = _prioritized(socket.socket(), args.priority)
    if args.source:
        sock.bind((args.source, 0))
    sock.connect(args.target)
    # Random bytes with each 64 KiB chunk numbered, so a byte that is changed, lost,
    # repeated or moved anywhere in the stream changes the digest the sink reports.
    block = random.Random(1).randbytes(1 << 16)
    digest = hashlib.sha256()
    sent, number, pending = 0, 0, b""
    end = time.monotonic() + args.seconds
    while time.monotonic() < end and (args.bytes is None or sent < args.bytes):
        if not pending:
            pending = number.to_bytes(8, "big") + block[8:]
            number += 1
            if args.bytes is not None:
                pending = pending[:args.bytes - sent]
        n = sock.send(pending)
        digest.update(pending[:n])
        pending = pending[n:]
        sent += n
    sock.close()
    return {"bytes": sent, "sha256": digest.hexdigest()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sojourn.testbed.probe", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    p = sub.add_parser("listen", help="accept and close connections until idle for --timeout s")
    p.add_argument("--bind", type=parse_endpoint, required=True)
    p.add_argument("--timeout", type=float, default=5.0)
    p.set_defaults(func=cmd_listen)
    p = sub.add_parser("connect", help="time --count TCP handshakes")
    p.add_argument("--source", required=True)
    p.add_argument("--target", type=parse_endpoint, required=True)
    p.add_argument("--count", type=int, default=100)
    p.add_argument("--gap", type=float, default=0.005, help="seconds between connections")
    p.add_argument("--wait", type=float, default=0.0,
                   help="seconds to wait before the first connection (lets parallel probes all start first)")
    p.set_defaults(func=cmd_connect)
    p = sub.add_parser("warm", help="connect to each of --targets once and close")
    p.add_argument("--targets", required=True, help="comma-separated addresses")
    p.add_argument("--port", type=int, required=True)
    p.set_defaults(func=cmd_warm)
    p = sub.add_parser("udp-send", help="send --count numbered datagrams at --pps")
    p.add_argument("--source", required=True)
    p.add_argument("--target", type=parse_endpoint, required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--pps", type=float, default=10_000)
    p.add_argument("--size", type=int, default=200)
    p.add_argument("--priority", type=int, help=PRIORITY_HELP)
    p.set_defaults(func=cmd_udp_send)
    p = sub.add_parser("udp-recv", help="record which of --count datagrams arrive")
    p.add_argument("--bind", type=parse_endpoint, required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the first datagram")
    p.add_argument("--idle", type=float, default=2.0, help="stop after this many seconds without a datagram")
    p.set_defaults(func=cmd_udp_recv)
    p = sub.add_parser("sink", help="accept one connection and count its bytes")
    p.add_argument("--bind", type=parse_endpoint, required=True)
    p.add_argument("--timeout", type=float, default=10.0)
    p.set_defaults(func=cmd_sink)
    p = sub.add_parser("source", help="send bulk data for --seconds")
    p.add_argument("--target", type=parse_endpoint, required=True)
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--source", help="local address to send from (a client group's)")
    p.add_argument("--bytes", type=int, help="stop after this many bytes (or --seconds, whichever comes first)")
    p.add_argument("--priority", type=int, help=PRIORITY_HELP)
    p.set_defaults(func=cmd_source)
    args = parser.parse_args(argv)
    json.dump(args.func(args), sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
