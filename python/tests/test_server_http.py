"""`sojourn-engine serve` with Python's http.client: keep-alive over one connection
under each policy (with write concurrency 1 and a small quantum, so responses
interleave through the scheduler), HEAD, a range, 304 and 404."""

from __future__ import annotations

import http.client
import os
import threading

import pytest

from sojourn.servers import Server, ServerConfig, SojournOptions, free_port


@pytest.fixture(params=["fair", "srpt", "las"])
def server(request, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    for size in (100, 70_000, 1_000_000):
        (root / f"f{size}.bin").write_bytes(bytes(i % 251 for i in range(size)))
    options = SojournOptions(policy=request.param, quantum="4K", write_concurrency=1, notsent_lowat="16K")
    config = ServerConfig(kind="sojourn", root=root, port=free_port(), workers=os.cpu_count() or 1, sojourn=options)
    with Server(config):
        yield config.port


def test_http_client_keep_alive(server):
    conn = http.client.HTTPConnection("127.0.0.1", server, timeout=10)
    for size in (100, 1_000_000, 70_000):
        conn.request("GET", f"/f{size}.bin")
        response = conn.getresponse()
        assert response.status == 200
        assert response.read() == bytes(i % 251 for i in range(size))
    conn.request("HEAD", "/f70000.bin")
    head = conn.getresponse()
    assert (head.status, head.getheader("Content-Length"), head.read()) == (200, "70000", b"")
    etag = head.getheader("ETag")
    conn.request("GET", "/f70000.bin", headers={"If-None-Match": etag})
    not_modified = conn.getresponse()
    assert (not_modified.status, not_modified.read()) == (304, b"")
    conn.request("GET", "/f70000.bin", headers={"Range": "bytes=10-19"})
    partial = conn.getresponse()
    assert (partial.status, partial.read()) == (206, bytes(i % 251 for i in range(10, 20)))
    conn.request("GET", "/missing")
    missing = conn.getresponse()
    assert (missing.status, missing.read()) == (404, b"404 Not Found\n")
    conn.close()


def test_concurrent_downloads_all_complete(server):
    """Eight clients at once through one write slot: every body arrives whole."""
    results = []

    def fetch(size):
        conn = http.client.HTTPConnection("127.0.0.1", server, timeout=20)
        conn.request("GET", f"/f{size}.bin")
        response = conn.getresponse()
        results.append((size, response.status, len(response.read())))
        conn.close()

    threads = [threading.Thread(target=fetch, args=(size,)) for size in (1_000_000, 100, 70_000, 1_000_000) * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == sorted((size, 200, size) for size in (1_000_000, 100, 70_000, 1_000_000) * 2)
