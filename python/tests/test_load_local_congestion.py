"""Why the demo's FAIR runs had `timeout`s that the server said it had answered (docs/results/README.md).

The bottleneck queue of the testbed is the server's own uplink qdisc. A segment that this
qdisc refuses is not "lost in the network": Linux hands the drop back to TCP, which keeps the
segment unsent; with nothing in flight it retries from the zero-window-probe (persist) timer
every 0.5 s and counts each failed try as a probe. A socket the application has already
closed (an orphan, which is what every server does after the last byte of a `Connection:
close` response) is given `tcp_orphan_retries` (0 means 8) such probes, then destroyed
silently: no FIN, no RST (TcpExtTCPAbortOnTimeout counts it). A socket still held open
by the application gets `tcp_retries2` (15) probes.

The tests reproduce that with one connection between two namespaces, a server that answers
once and a qdisc that refuses every packet for a while, and check what `sojourn-engine load`
records: the orphan's client times out with the request sent and no response byte, while a
server that keeps the socket open until the client closes (lingering close) gets its response
through once the queue accepts packets again.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from sojourn.engine import engine_path

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="Linux TCP behaviour"),
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
]

SERVER_NS, CLIENT_NS = "sjivo-srv", "sjivo-cli"
SERVER_IF, CLIENT_IF = "sjivos", "sjivoc"
SERVER_ADDR, CLIENT_ADDR, PORT = "10.213.0.1", "10.213.0.2", 8080
BODY = 300
# Orphans get 8 probes (tcp_orphan_retries = 0); live sockets 15 (tcp_retries2).
ORPHAN_PROBES = 8
# The client's --timeout: past the orphan's ~4.5 s of probes, and ample for the held socket.
TIMEOUT = {"orphan": "12", "linger": "60"}

# Answers one request when told "go" on stdin, then closes at once (an orphan with unsent
# data) or, with "linger", shuts down writing and closes only when the client has closed.
SERVER = f"""
import socket, sys
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("{SERVER_ADDR}", {PORT}))
listener.listen(8)
print("listening", flush=True)
conn, _ = listener.accept()
head = b""
while b"\\r\\n\\r\\n" not in head:
    head += conn.recv(4096)
print("request", flush=True)
sys.stdin.readline()
body = bytes((i + 1) % 256 for i in range({BODY}))
conn.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: {BODY}\\r\\nConnection: close\\r\\n\\r\\n" + body)
if sys.argv[1] == "linger":
    conn.shutdown(socket.SHUT_WR)
    while conn.recv(4096):
        pass
conn.close()
print("closed", flush=True)
"""


def sh(*argv: str) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} failed: {result.stderr}")
    return result.stdout


def in_server(*argv: str) -> str:
    return sh("ip", "netns", "exec", SERVER_NS, *argv)


def counter(name: str) -> int:
    line = in_server("nstat", "-azs", name).splitlines()[-1].split()
    assert line[0] == name, line
    return int(line[1])


def probes_out() -> int | None:
    """Probes of the server's socket to the client (its persist timer), None if it has no such socket."""
    text = in_server("ss", "-tnoH", "dst", CLIENT_ADDR)
    if not text.strip():
        return None
    if "timer:(persist," not in text:
        return 0
    return int(text.split("timer:(persist,")[1].split(")")[0].split(",")[1])


def wait_for(condition, what: str, limit_s: float = 40.0):
    """Polls `condition` until it returns a truthy value (the bound only catches a hang)."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"gave up waiting for {what}")


def set_queue(limit: int) -> None:
    # pfifo with limit 0 refuses every packet: the local drop TCP sees when the uplink queue is full.
    in_server("tc", "qdisc", "replace", "dev", SERVER_IF, "root", "pfifo", "limit", str(limit))


@pytest.fixture
def link():
    for ns in (SERVER_NS, CLIENT_NS):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    try:
        sh("ip", "netns", "add", SERVER_NS)
        sh("ip", "netns", "add", CLIENT_NS)
        sh("ip", "link", "add", SERVER_IF, "netns", SERVER_NS, "type", "veth", "peer", "name", CLIENT_IF, "netns", CLIENT_NS)
        for ns, interface, address in ((SERVER_NS, SERVER_IF, SERVER_ADDR), (CLIENT_NS, CLIENT_IF, CLIENT_ADDR)):
            sh("ip", "netns", "exec", ns, "ip", "addr", "add", f"{address}/24", "dev", interface)
            sh("ip", "netns", "exec", ns, "ip", "link", "set", interface, "up")
            sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
        in_server("sysctl", "-qw", "net.ipv4.tcp_orphan_retries=0", "net.ipv4.tcp_retries2=15")
        set_queue(1000)
        yield
    finally:
        for ns in (SERVER_NS, CLIENT_NS):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def exchange(tmp_path: Path, close: str) -> tuple[pd.Series, int, int]:
    """One request against the one-shot server; the uplink refuses every packet from just
    before the response until the server's socket has failed ORPHAN_PROBES + 1 probes or
    was destroyed. Returns the request's record, the aborts counted by the server's kernel
    and the probes the socket had made when the queue reopened."""
    trace = tmp_path / "trace.csv"
    trace.write_text(f"arrival_s,client,path,size\n0.0,0,/x,{BODY}\n")
    out = tmp_path / "out"
    server = subprocess.Popen(["ip", "netns", "exec", SERVER_NS, sys.executable, "-c", SERVER, close],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    load = None
    try:
        assert server.stdout.readline().strip() == "listening"
        aborts_before = counter("TcpExtTCPAbortOnTimeout")
        load = subprocess.Popen(["ip", "netns", "exec", CLIENT_NS, str(engine_path()), "load", "open", "--trace", str(trace),
                                 "--target", f"{SERVER_ADDR}:{PORT}", "--out", str(out), "--requests-per-conn", "1",
                                 "--timeout", TIMEOUT[close], "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert server.stdout.readline().strip() == "request"
        set_queue(0)
        server.stdin.write("go\n")
        server.stdin.flush()

        def gone_or_probed_past_orphan_limit():
            probes = probes_out()
            return ("gone", -1) if probes is None else (probes > ORPHAN_PROBES and ("probed", probes))
        _, probes = wait_for(gone_or_probed_past_orphan_limit, "the server socket to die or outlive the orphan limit")
        set_queue(1000)
        load.wait(timeout=60)
        aborts = counter("TcpExtTCPAbortOnTimeout") - aborts_before
    finally:
        for process in (load, server):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
    records = pd.read_csv(out / "records.csv", keep_default_na=True)
    assert len(records) == 1
    return records.iloc[0], aborts, probes


def test_an_orphan_refused_by_the_local_queue_is_destroyed_silently(link, tmp_path):
    record, aborts, _ = exchange(tmp_path, "orphan")
    assert aborts == 1, "the server's kernel gave up the orphaned socket"
    # The client never hears of it: a timeout with the request sent and no response byte.
    assert record["outcome"] == "timeout"
    assert "no response byte" in record["error"]
    assert pd.notna(record["sent_s"]) and record["bytes"] == 0 and pd.isna(record["first_byte_s"])


def test_a_socket_held_open_survives_the_same_refusals(link, tmp_path):
    record, aborts, probes = exchange(tmp_path, "linger")
    assert probes > ORPHAN_PROBES, "it outlived the number of probes that kills an orphan"
    assert aborts == 0
    assert record["outcome"] == "ok" and record["bytes"] == BODY
