"""sojourn.servers against the real servers: each one serves the docroot byte for byte,
keeps connections alive, logs when asked, and leaves no process or directory behind."""

from __future__ import annotations

import http.client
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from sojourn.servers import POLICIES, PROGRAMS, Server, ServerConfig, ServerError, SojournOptions, free_port, live_group_members

REAL_SERVERS = ["nginx", "apache2", "apache2-prefork", "lighttpd", "h2o"]


@pytest.fixture
def docroot(tmp_path_factory):
    """A world-readable docroot (apache2's workers run as www-data)."""
    root = Path(f"/tmp/sjrn-peers-{uuid.uuid4().hex[:8]}")
    (root / "o").mkdir(parents=True)
    os.chmod(root, 0o755)
    os.chmod(root / "o", 0o755)
    objects = {"/o/small.bin": os.urandom(700), "/o/large.bin": os.urandom(300_000)}
    for path, body in objects.items():
        (root / path.lstrip("/")).write_bytes(body)
    try:
        yield root, objects
    finally:
        shutil.rmtree(root, ignore_errors=True)


def group_alive(pgid: int) -> bool:
    return bool(live_group_members(pgid))


def logged(log: Path, entry: str) -> bool:
    return log.is_file() and entry in log.read_text()


@pytest.mark.parametrize("kind", REAL_SERVERS + ["sojourn"])
def test_serves_docroot_with_keepalive_and_log(kind, docroot):
    if shutil.which(PROGRAMS.get(kind, "true")) is None:
        pytest.skip(f"{kind} not installed")
    root, objects = docroot
    log = root / f"{kind}-access.log"
    port = free_port()
    options = SojournOptions(admin_port=free_port()) if kind == "sojourn" else None
    peer = Server(ServerConfig(kind=kind, root=root, port=port, workers=2, access_log=log, sojourn=options))
    with peer:
        pgid = peer.process.pid
        workdir = peer.workdir
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        for path, body in objects.items():
            conn.request("GET", path)
            response = conn.getresponse()
            assert response.status == 200
            assert response.read() == body
        # Both answers came over one connection: keep-alive works.
        assert conn.sock is not None
        conn.close()
        if peer.metrics_url:
            with urllib.request.urlopen(peer.metrics_url, timeout=10) as answer:
                assert answer.status == 200 and answer.read()
        missing = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        missing.request("GET", "/o/none.bin")
        assert missing.getresponse().status == 404
        missing.close()
        # A server logs a request once its response has left (httpd's end-of-request bucket),
        # so the line may trail the client's read; stop() kills the workers at once.
        deadline = time.monotonic() + 10
        while not logged(log, '"GET /o/large.bin HTTP/1.1" 200 300000') and time.monotonic() < deadline:
            time.sleep(0.05)
    assert not group_alive(pgid), f"{kind} processes survived stop()"
    assert not workdir.exists()
    assert logged(log, '"GET /o/large.bin HTTP/1.1" 200 300000'), log.read_text()
    # The port is free again.
    Server(ServerConfig(kind="nginx", root=root, port=port)).start().stop()


def test_bad_configs_are_named(docroot, tmp_path):
    root, _ = docroot
    with pytest.raises(ServerError, match="unknown server kind 'iis'"):
        Server(ServerConfig(kind="iis", root=root, port=8080))
    with pytest.raises(ServerError, match="not a directory"):
        Server(ServerConfig(kind="nginx", root=root / "nope", port=8080))
    with pytest.raises(ServerError, match="apply to the sojourn server only, not h2o"):
        Server(ServerConfig(kind="h2o", root=root, port=8080, sojourn=SojournOptions(linger_close=True)))
    private = tmp_path / "private"
    private.mkdir()
    os.chmod(tmp_path, 0o700)
    with pytest.raises(ServerError, match="cannot enter"):
        Server(ServerConfig(kind="apache2", root=private, port=free_port())).start()


def test_serve_names_the_policies_python_offers(docroot):
    """serve is the authority on its options: a policy it lacks stops it with its own
    message, whose list of policies must be the one the specs offer (servers.POLICIES)."""
    root, _ = docroot
    with pytest.raises(ServerError, match="unknown policy") as refused:
        Server(ServerConfig(kind="sojourn", root=root, port=free_port(), sojourn=SojournOptions(policy="sjf"))).start()
    offered = re.search(r"expected one of ([a-z, ]+)", str(refused.value)).group(1).split(", ")
    assert tuple(offered) == POLICIES


def test_taken_port_is_refused(docroot):
    root, _ = docroot
    port = free_port()
    with Server(ServerConfig(kind="nginx", root=root, port=port)):
        second = Server(ServerConfig(kind="lighttpd", root=root, port=port), start_timeout_s=5)
        with pytest.raises(ServerError, match=f"127.0.0.1:{port} is already in use"):
            second.start()
        assert second.process is None and second.workdir is None


def test_start_failure_reports_server_output(docroot):
    root, _ = docroot
    peer = Server(ServerConfig(kind="nginx", root=root, port=free_port(), extra_args=["-g", "bogus_directive on;"]))
    with pytest.raises(ServerError, match="(?s)exited with status 1.*unknown directive .bogus_directive."):
        peer.start()
    assert peer.process is None and peer.workdir is None


def test_command_kind_substitutes_placeholders(docroot):
    root, objects = docroot
    port = free_port()
    argv = ["python3", "-m", "http.server", "--bind", "{addr}", "--directory", "{root}", "{port}"]
    with Server(ServerConfig(kind="command", root=root, port=port, command=argv)) as peer:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/o/small.bin")
        assert conn.getresponse().read() == objects["/o/small.bin"]
        conn.close()
        pgid = peer.process.pid
    assert not group_alive(pgid)


@pytest.fixture
def bare_netns():
    """A fresh network namespace with only loopback up (root), deleted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("needs root for ip netns")
    ns = f"sjrn-peer-{os.getpid() % 100000}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"], check=True)
        yield ns
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)


@pytest.mark.netns
def test_runs_inside_a_network_namespace(docroot, bare_netns):
    root, objects = docroot
    ns = bare_netns
    port = 8080
    with Server(ServerConfig(kind="nginx", root=root, port=port, netns=ns)):
        fetched = subprocess.run(["ip", "netns", "exec", ns, "curl", "-sf", f"http://127.0.0.1:{port}/o/large.bin"],
                                 capture_output=True, check=True).stdout
        assert fetched == objects["/o/large.bin"]
        # Not reachable from the host's namespace: it really runs inside.
        outside = subprocess.run(["curl", "-s", "--max-time", "2", "-o", "/dev/null", "-w", "%{http_code}",
                                  f"http://127.0.0.1:{port}/o/small.bin"], capture_output=True, text=True).stdout
        assert outside != "200" or port_used_on_host(port)


@pytest.mark.netns
@pytest.mark.parametrize("kind", REAL_SERVERS + ["sojourn"])
def test_the_namespaces_somaxconn_sets_every_servers_accept_queue(kind, docroot, bare_netns):
    """Each server asks for LISTEN_BACKLOG and the kernel clamps it to the namespace's
    somaxconn, so the testbed's network.tcp.somaxconn (000's 512, 002's longer queue) holds
    for whichever server is under test: the listener's backlog (ss Send-Q) is exactly it."""
    if shutil.which(PROGRAMS.get(kind, "true")) is None:
        pytest.skip(f"{kind} not installed")
    root, _ = docroot
    ns = bare_netns
    subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw", "net.core.somaxconn=3001"], check=True)
    options = SojournOptions(admin_port=8081) if kind == "sojourn" else None
    with Server(ServerConfig(kind=kind, root=root, port=8080, netns=ns, sojourn=options)):
        shown = subprocess.run(["ip", "netns", "exec", ns, "ss", "-ltnH", "sport = :8080"],
                               capture_output=True, text=True, check=True).stdout
    backlogs = {int(line.split()[2]) for line in shown.splitlines()}
    assert backlogs == {3001}, shown


def port_used_on_host(port: int) -> bool:
    out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True).stdout
    return bool(out.strip())


# nginx and apache2 take the setting (worker_connections, MaxRequestWorkers) but do not hold
# a slot for a connection that is writing: apache2's event MPM completes writes without a
# worker and nginx answered the third client here too, so they are left out. apache2-prefork's
# process stays with its connection, as Apache 1.3's did.
@pytest.mark.parametrize("kind", ["sojourn", "apache2-prefork", "lighttpd", "h2o"])
def test_max_connections_makes_further_connections_wait_unanswered(kind, docroot):
    """000 §2: with every process busy, a connection waits in the accept queue. With
    max_connections = 2 and two clients each in the middle of a large response they do not
    read (busy connections: nginx and apache2 would reclaim idle keep-alive ones), a third
    client's request is not answered (no 503 either) until one of them closes."""
    import socket

    if shutil.which(PROGRAMS.get(kind, "true")) is None:
        pytest.skip(f"{kind} not installed")
    root, _ = docroot
    (root / "o" / "huge.bin").write_bytes(bytes(32 << 20))
    port = free_port()
    with Server(ServerConfig(kind=kind, root=root, port=port, workers=1, max_connections=2)):
        held = []
        for _ in range(2):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.settimeout(5)
            sock.connect(("127.0.0.1", port))
            sock.sendall(b"GET /o/huge.bin HTTP/1.1\r\nHost: t\r\n\r\n")
            assert sock.recv(64).startswith(b"HTTP/1.1 200")
            held.append(sock)
        third = socket.create_connection(("127.0.0.1", port), timeout=0.7)
        third.sendall(b"GET /o/small.bin HTTP/1.1\r\nHost: t\r\n\r\n")
        with pytest.raises(socket.timeout):
            third.recv(65536)
        held.pop(0).close()
        third.settimeout(10)
        assert third.recv(65536).startswith(b"HTTP/1.1 200")
        for sock in held + [third]:
            sock.close()


def test_sojourn_gets_every_setting_from_its_typed_config_file(docroot, tmp_path):
    """The sojourn peer writes one `serve --config` TOML (serve_toml) instead of argv; each
    setting reaches the server (policy and write slots on /metrics, the access log, the
    accept limit in its start-up line) and the file is kept beside the logs."""
    root, _ = docroot
    admin = free_port()
    options = SojournOptions(policy="srpt", admin_port=admin, linger_close=True, write_concurrency=1,
                             write_concurrency_from="50K", notsent_lowat="16K", head_fields="minimal",
                             delayed_ack=True, quantum="32K")
    config = ServerConfig(kind="sojourn", root=root, port=free_port(), access_log=tmp_path / "access.log",
                          max_connections=64, sojourn=options)
    with Server(config, log_dir=tmp_path) as peer:
        assert peer.argv[-2:] == ["--config", str(peer.workdir / "serve.toml")]
        with urllib.request.urlopen(peer.url + "/o/small.bin", timeout=5) as response:
            response.read()
            assert "ETag" not in response.headers and "Server" not in response.headers, response.headers
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics", timeout=5).read().decode()
    kept = (tmp_path / "server-serve.toml").read_text()
    for line in ('policy = "srpt"', "write-concurrency = 1", 'write-concurrency-from = "50K"', 'notsent-lowat = "16K"', "linger-close = true",
                 "accept-limit = 64", "threads = 1", 'head-fields = "minimal"', "delayed-ack = true", 'quantum = "32K"'):
        assert line in kept, (line, kept)
    assert 'policy="srpt"' in metrics
    assert "GET /o/small.bin" in (tmp_path / "access.log").read_text()


def _rto_after_acks_stop(docroot, prefix: str, options: SojournOptions) -> tuple[int, int]:
    """(rto in ms, backoff) of the server's socket ``ss`` shows 3.5 s after the client's
    ACKs stop reaching it (a blackhole route to the server in the client's namespace) while
    the server sends a 5 MB response."""
    from sojourn.testbed import Testbed, TestbedConfig

    root, _ = docroot
    # Still being sent when the ACKs stop: 40 Mbit on the uplink's 10 Mbit/s.
    (root / "o" / "huge.bin").write_bytes(os.urandom(5_000_000))
    with Testbed(TestbedConfig(prefix=prefix)) as tb:
        port = 8080
        with Server(ServerConfig(kind="sojourn", root=root, port=port, addr=tb.server_addr, netns=tb.server_ns,
                                 sojourn=options)):
            client = tb.popen(tb.client_ns, [sys.executable, "-c", (
                "import socket\n"
                f"s = socket.create_connection(('{tb.server_addr}', {port}))\n"
                "s.sendall(b'GET /o/huge.bin HTTP/1.1\\r\\nHost: t\\r\\n\\r\\n')\n"
                "s.recv(65536)\nprint('started', flush=True)\n"
                # Reading on keeps the window open: the server's timer is then the RTO, not a probe.
                "while s.recv(65536):\n    pass\n")], stdout=subprocess.PIPE, text=True)
            try:
                assert client.stdout.readline().strip() == "started"
                tb.run(tb.client_ns, ["ip", "route", "add", "blackhole", f"{tb.server_addr}/32"], check=True)
                time.sleep(3.5)
                shown = tb.run(tb.server_ns, ["ss", "-tinH", "state", "established", f"sport = :{port}"],
                               capture_output=True, text=True, check=True).stdout
            finally:
                client.kill()
                client.wait()
    rto, backoff = re.search(r"\brto:(\d+)", shown), re.search(r"\bbackoff:(\d+)", shown)
    assert rto and backoff, shown
    return int(rto.group(1)), int(backoff.group(1))


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for the testbed")
def test_rto_max_caps_the_backoff_of_the_servers_connections(docroot):
    """serve --rto-max-ms sets TCP_RTO_MAX_MS on its listener, which accepted connections
    inherit: with the client's ACKs gone, the server's timer backs off three times or more
    in 3.5 s, to 1 s at most with the cap and past it without."""
    capped, capped_backoff = _rto_after_acks_stop(docroot, "sjrtmc", SojournOptions(rto_max_ms=1000))
    assert capped_backoff >= 3 and capped == 1000
    uncapped, uncapped_backoff = _rto_after_acks_stop(docroot, "sjrtmu", SojournOptions())
    assert uncapped_backoff >= 3 and uncapped > 1000


def test_apache2_prefork_runs_a_process_per_connection_slot(docroot):
    """001 §6.2 configures Apache with 256 and 1024 processes: apache2-prefork starts
    max_connections single-threaded workers at once (besides its parent), all up by the time
    the server is ready, and keeps them."""
    if shutil.which("apache2") is None:
        pytest.skip("apache2 not installed")
    root, objects = docroot
    with Server(ServerConfig(kind="apache2-prefork", root=root, port=free_port(), max_connections=12)) as peer:
        # Every process is up when the server is handed over, not only the one that answered.
        members = live_group_members(peer.process.pid)
        assert len(members) == 13, members
        threads = {int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[17]) for pid in members}
        assert threads == {1}
        with urllib.request.urlopen(peer.url + "/o/large.bin", timeout=5) as response:
            assert response.read() == objects["/o/large.bin"]
