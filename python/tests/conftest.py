"""Fixtures shared by the test modules."""

from __future__ import annotations

import socket
import subprocess
import time

import pytest

from sojourn.engine import engine_path
from sojourn.peers import free_port


@pytest.fixture
def start_server():
    """``start_server(*args)`` starts ``sojourn-engine serve ARGS`` on a free loopback port
    and returns the port once it accepts connections; every server started is stopped
    when the test ends, failed or not."""
    processes = []

    def start(*args: str) -> int:
        port = free_port()
        processes.append(subprocess.Popen([str(engine_path()), "serve", "--listen", f"127.0.0.1:{port}", *args],
                                          stderr=subprocess.PIPE))
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return port
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"sojourn-engine serve {' '.join(args)} did not accept on port {port}")

    yield start
    for process in processes:
        process.terminate()
        process.wait(timeout=20)
