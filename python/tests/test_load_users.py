"""`sojourn-engine load` user behaviour and failure outcomes against deliberately bad servers:
user abort and retry on a new connection (000 Table 2 (H)), hard timeouts, refused and reset
connections, session abort on a missed delay bound (003 §2), Ctrl-C, and parameter checks."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from sojourn.engine import engine_path


class BadServer:
    """A TCP server on 127.0.0.1 that accepts and then either never answers (`stall`),
    closes at once (`reset`, with SO_LINGER 0 so the client sees a reset), or answers one
    request with a keep-alive response and closes silently when the next one arrives
    (`once`: a keep-alive timeout racing the client's next request)."""

    def __init__(self, behaviour: str):
        self.behaviour = behaviour
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(1024)
        self.port = self.listener.getsockname()[1]
        self.accepted = 0
        self.held: list[socket.socket] = []
        self.stopping = False
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        self.listener.settimeout(0.05)
        while not self.stopping:
            try:
                conn, _ = self.listener.accept()
            except (TimeoutError, socket.timeout):
                continue
            except OSError:
                return
            self.accepted += 1
            if self.behaviour == "once":
                threading.Thread(target=self._answer_once, args=(conn,), daemon=True).start()
            elif self.behaviour == "reset":
                conn.recv(4096)
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                conn.close()
            else:
                self.held.append(conn)

    @staticmethod
    def _answer_once(conn: socket.socket) -> None:
        with conn:
            try:
                request = b""
                while b"\r\n\r\n" not in request:
                    chunk = conn.recv(4096)
                    if not chunk:
                        return
                    request += chunk
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                conn.recv(4096)  # the next request: closed without an answer
            except OSError:
                return  # the client went away first (end of the run)

    def __enter__(self) -> "BadServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping = True
        self.thread.join()
        for conn in self.held:
            conn.close()
        self.listener.close()


def engine_load(*argv: str) -> list[str]:
    return [str(engine_path()), "load", *argv, "--quiet"]


def run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(engine_load(*argv), capture_output=True, text=True, timeout=120)


def write_trace(path: Path, arrivals: list[float]) -> Path:
    path.write_text("arrival_s,client,path,size\n" + "".join(f"{t},{i},/x,10\n" for i, t in enumerate(arrivals)))
    return path


def test_abort_retries_on_new_connections_then_gives_up(tmp_path):
    out = tmp_path / "out"
    with BadServer("stall") as server:
        result = run("open", "--target", f"127.0.0.1:{server.port}", "--out", str(out),
                     "--trace", str(write_trace(tmp_path / "t.csv", [0.0, 0.1, 0.2])),
                     "--abort-after", "0.3", "--retries", "2", "--timeout", "5")
        assert result.returncode == 0, result.stderr
        accepted = server.accepted
    frame = pd.read_csv(out / "records.csv").sort_values(["request_id", "attempt"])
    assert len(frame) == 9 and accepted == 9, "3 requests x (1 try + 2 retries), each on its own new connection"
    assert frame["conn_id"].is_unique and frame["connect_start_s"].notna().all()
    for _, attempts in frame.groupby("request_id"):
        assert list(attempts["outcome"]) == ["aborted", "aborted", "gave_up"]
        assert list(attempts["final"]) == [0, 0, 1]
        assert attempts["scheduled_s"].nunique() == 1
        # Attempt 0's clock starts at the schedule, a retry's at its issue.
        base = [attempts["scheduled_s"].iloc[0]] + list(attempts["issued_s"].iloc[1:])
        waited = attempts["last_byte_s"].to_numpy() - base
        assert (waited >= 0.3 - 1e-6).all(), f"never aborted before --abort-after: {waited}"
        assert attempts["last_byte_s"].iloc[-1] - attempts["scheduled_s"].iloc[0] >= 0.9 - 1e-6
    info = json.loads((out / "summary.json").read_text())
    assert info["outcomes"] == {"gave_up": 3} and info["attempt_outcomes"] == {"aborted": 6, "gave_up": 3}


def test_timeout_refused_and_reset_outcomes(tmp_path):
    with BadServer("stall") as server:
        result = run("open", "--target", f"127.0.0.1:{server.port}", "--out", str(tmp_path / "stall"),
                     "--trace", str(write_trace(tmp_path / "t.csv", [0.0])), "--timeout", "0.2")
        assert result.returncode == 0, result.stderr
    frame = pd.read_csv(tmp_path / "stall" / "records.csv")
    assert list(frame["outcome"]) == ["timeout"]
    assert frame["last_byte_s"].iloc[0] >= 0.2

    closed_port = BadServer("stall")
    closed_port.listener.close()  # a port nobody listens on
    result = run("open", "--target", f"127.0.0.1:{closed_port.port}", "--out", str(tmp_path / "refused"),
                 "--trace", str(tmp_path / "t.csv"))
    frame = pd.read_csv(tmp_path / "refused" / "records.csv")
    assert list(frame["outcome"]) == ["connect_error"] and "refused" in frame["error"].iloc[0].lower()

    with BadServer("reset") as server:
        run("open", "--target", f"127.0.0.1:{server.port}", "--out", str(tmp_path / "reset"),
            "--trace", str(tmp_path / "t.csv"))
    frame = pd.read_csv(tmp_path / "reset" / "records.csv")
    assert list(frame["outcome"]) == ["reset"]


def test_request_racing_a_keepalive_close_goes_out_again_on_a_fresh_connection(tmp_path):
    out = tmp_path / "out"
    with BadServer("once") as server:
        result = run("closed", "--target", f"127.0.0.1:{server.port}", "--out", str(out), "--users", "1",
                     "--think-time", "const:0.05", "--duration", "0.5", "--path", "/x", "--requests-per-conn", "0")
        assert result.returncode == 0, result.stderr
        accepted = server.accepted
    frame = pd.read_csv(out / "records.csv")
    done = frame[frame["outcome"] == "ok"]
    assert len(done) >= 5 and set(frame["outcome"]) <= {"ok", "interrupted"}
    assert (frame["attempt"] == 0).all(), "no user-visible retry"
    assert (done["reuse_index"] == 0).all() and done["connect_start_s"].notna().all()
    assert done["conn_id"].is_unique and accepted >= len(done)


def test_sessions_abort_when_a_request_misses_its_bound(tmp_path):
    model = tmp_path / "model.toml"
    model.write_text('arrival-rate = 20.0\ndelay-bound-s = 0.2\nstart = { A = 1.0 }\n'
                     '[states.A]\npaths = ["/a"]\nnext = { A = 0.9, exit = 0.1 }\n')
    out = tmp_path / "out"
    with BadServer("stall") as server:
        result = run("sessions", "--target", f"127.0.0.1:{server.port}", "--out", str(out), "--model", str(model),
                     "--duration", "0.5")
        assert result.returncode == 0, result.stderr
    frame = pd.read_csv(out / "records.csv")
    info = json.loads((out / "summary.json").read_text())["workload"]
    assert set(frame["outcome"]) == {"gave_up"}
    assert frame["session"].is_unique, "a session ends at its first missed bound"
    assert info["sessions_aborted"] == info["sessions_started"] == len(frame) > 0


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_gives_every_request_a_final_outcome(tmp_path, stop):
    out = tmp_path / "out"
    with BadServer("stall") as server:
        process = subprocess.Popen(engine_load("open", "--target", f"127.0.0.1:{server.port}", "--out", str(out),
                                               "--rate", "200", "--duration", "30", "--path", "/x", "--clients", "50"),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(1.5)
            process.send_signal(stop)
            _, stderr = process.communicate(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert process.returncode != 0 and "interrupted" in stderr
    frame = pd.read_csv(out / "records.csv")
    info = json.loads((out / "summary.json").read_text())
    assert frame["request_id"].is_unique and (frame["final"] == 1).all()
    assert len(frame) == info["requests"] > 10
    assert set(frame["outcome"]) == {"interrupted"} and info["interrupted_by_signal"] is True


def test_drain_ends_an_open_run_after_the_last_request_and_interrupts_what_is_outstanding(tmp_path):
    """`--drain S`: S seconds after the last scheduled request the run ends; requests still
    outstanding get their final `interrupted` record, and the run is not a failure (000 §4
    counts only requests that finished before the final one arrived). Without it the same
    trace waits for its timeout."""
    trace = write_trace(tmp_path / "t.csv", [0.0, 0.2, 0.4])
    with BadServer("stall") as server:
        started = time.monotonic()
        result = run("open", "--target", f"127.0.0.1:{server.port}", "--out", str(tmp_path / "drained"),
                     "--trace", str(trace), "--timeout", "60", "--drain", "0.5")
        took = time.monotonic() - started
        assert result.returncode == 0, result.stderr
        timed = run("open", "--target", f"127.0.0.1:{server.port}", "--out", str(tmp_path / "timed"),
                    "--trace", str(trace), "--timeout", "1")
        assert timed.returncode == 0, timed.stderr
    frame = pd.read_csv(tmp_path / "drained" / "records.csv")
    info = json.loads((tmp_path / "drained" / "summary.json").read_text())
    assert took < 30, f"the run waited {took:.0f} s: not ended by --drain"
    assert list(frame["outcome"]) == ["interrupted"] * 3 and (frame["final"] == 1).all()
    assert frame["last_byte_s"].max() >= 0.9 - 1e-6, "ended before the last request's time + --drain"
    assert info["outcomes"] == {"interrupted": 3} and info["interrupted_by_signal"] is False
    assert list(pd.read_csv(tmp_path / "timed" / "records.csv")["outcome"]) == ["timeout"] * 3


@pytest.mark.parametrize("argv, message", [
    (["open", "--trace", "t.csv", "--rate", "5"], "--trace and --rate contradict"),
    (["open", "--rate", "5", "--duration", "1", "--path", "/x", "--drain=-1"], "--drain -1"),
    (["open", "--rate", "5", "--path", "/x"], "--rate needs --duration"),
    (["open", "--rate", "5", "--duration", "1", "--path", "/x", "--retries", "2"], "--retries 2 needs --abort-after"),
    (["open", "--rate", "5", "--duration", "1", "--path", "/x", "--abort-after", "9", "--timeout", "3"],
     "--abort-after 9 must be below --timeout 3"),
    (["open", "--rate", "5", "--duration", "1", "--path", "x"], "--path \"x\""),
    (["open", "--rate", "5", "--duration", "1", "--path", "/x", "--source-addrs", "::1"], "--source-addrs ::1"),
    (["closed", "--users", "0", "--duration", "1", "--path", "/x"], "--users 0"),
    (["closed", "--users", "1", "--duration", "1", "--path", "/x", "--think-time", "exp:-1"], "think time"),
    (["capacity", "--connections", "4,0", "--duration", "1", "--path", "/x"], "--connections 0"),
    (["closed", "--users", "2", "--duration", "1", "--path", "/x", "--start-spread", "1"],
     "--start-spread 1: must be at least 0 and below --duration"),
    (["capacity", "--connections", "4", "--duration", "1", "--path", "/x", "--start-spread=-0.5"], "--start-spread -0.5"),
    (["open", "--rate", "5", "--duration=-1", "--path", "/x"], "--duration -1"),
])
def test_rejects_contradictory_parameters_before_sending(tmp_path, argv, message):
    with BadServer("stall") as server:
        result = run(*argv, "--target", f"127.0.0.1:{server.port}", "--out", str(tmp_path / "out"))
        accepted = server.accepted
    assert result.returncode != 0
    assert message in result.stderr, result.stderr
    assert accepted == 0, "nothing was sent"


def test_a_bad_trace_row_is_rejected_before_anything_is_sent(tmp_path):
    trace = write_trace(tmp_path / "t.csv", [0.0, 0.1, 0.2])
    trace.write_text(trace.read_text() + "0.05,0,/late,10\n")  # arrival going backwards on line 5
    with BadServer("stall") as server:
        result = run("open", "--target", f"127.0.0.1:{server.port}", "--out", str(tmp_path / "out"), "--trace", str(trace))
        accepted = server.accepted
    assert result.returncode != 0 and "trace line 5" in result.stderr, result.stderr
    assert accepted == 0 and not (tmp_path / "out" / "records.csv").exists()
