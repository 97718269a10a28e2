"""What one request costs on the wire: `sojourn-engine serve` on loopback, every packet it
sends captured with an AF_PACKET socket (needs root, as the testbed does).

One request per connection, as 000's workload opens them: the server sends the SYN-ACK,
the response and the ACK of the client's FIN, and by default also the ACK of the request.
The FIN always leaves with the response's last segment (TCP_CORK until the shutdown);
`--delayed-ack` folds the request's ACK into the response too, and `--head-fields minimal`
shortens the head (docs/analysis.md, "Where the time goes")."""

from __future__ import annotations

import os
import socket
import struct
import time

import pytest

from sojourn.servers import Server, ServerConfig, SojournOptions, free_port

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="AF_PACKET capture needs root")

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
BODY = bytes(i % 251 for i in range(3000))  # one segment: loopback's MSS is ~64K


def _flags(byte: int) -> str:
    return "".join(name for bit, name in ((0x02, "S"), (0x10, "A"), (0x08, "P"), (0x01, "F")) if byte & bit)


def _sent_by(capture: socket.socket, port: int) -> list[tuple[str, int]]:
    """(flags, payload bytes) of every TCP packet from `port` captured so far."""
    packets = []
    capture.settimeout(0.2)
    try:
        while True:
            frame, address = capture.recvfrom(70_000)
            if address[2] != PACKET_OUTGOING:
                continue  # loopback shows each packet twice: once going out, once coming in
            ip = frame[14:]
            if ip[9] != socket.IPPROTO_TCP:
                continue
            tcp = ip[(ip[0] & 0x0F) * 4:]
            source_port = struct.unpack("!H", tcp[:2])[0]
            if source_port == port:
                total = struct.unpack("!H", ip[2:4])[0]
                packets.append((_flags(tcp[13]), total - (ip[0] & 0x0F) * 4 - (tcp[12] >> 4) * 4))
    except socket.timeout:
        return packets


def _one_request(port: int) -> tuple[list[tuple[str, int]], bytes]:
    """GET /a.bin on a connection of its own; the packets the server sent, and the response."""
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL)) as capture:
        capture.bind(("lo", 0))
        with socket.create_connection(("127.0.0.1", port)) as client:
            client.sendall(b"GET /a.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            received = b""
            while chunk := client.recv(65536):
                received += chunk
        time.sleep(0.1)  # the ACK of the client's FIN
        return _sent_by(capture, port), received


FULL = ["Server", "Date", "Content-Length", "Content-Type", "Last-Modified", "ETag", "Accept-Ranges", "Connection"]
MINIMAL = ["Date", "Content-Length", "Connection"]  # RFC 9110 §8.3: no Content-Type for octet-stream


@pytest.mark.parametrize("options, expect_fields, expect_packets", [
    ({}, FULL, ["SA", "A", "APF", "A"]),
    ({"delayed_ack": True}, FULL, ["SA", "APF", "A"]),
    ({"delayed_ack": True, "head_fields": "minimal"}, MINIMAL, ["SA", "APF", "A"]),
])
def test_packets_per_request(tmp_path, options, expect_fields, expect_packets):
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.bin").write_bytes(BODY)
    port = free_port()
    with Server(ServerConfig(kind="sojourn", root=root, port=port, sojourn=SojournOptions(**options))):
        time.sleep(0.1)  # the start-up probe's packets are over before the capture starts
        packets, received = _one_request(port)
    head, _, body = received.partition(b"\r\n\r\n")
    assert body == BODY
    lines = head.decode().split("\r\n")
    assert lines[0] == "HTTP/1.1 200 OK"
    assert [line.split(":")[0] for line in lines[1:]] == expect_fields, head.decode()
    assert [flags for flags, _ in packets] == expect_packets, packets
    assert sum(length for _, length in packets) == len(head) + 4 + len(BODY)
