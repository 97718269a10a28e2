"""`sojourn-engine load` against real servers (nginx, `sojourn-engine serve`): exact accounting,
k-reuse confirmed by the server's own connection counter, validation, source addresses,
closed users with think time, the capacity sweep and session transition frequencies."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request
from pathlib import Path

import pandas as pd
import pytest

from sojourn.analysis.records import read_records, requests
from sojourn.engine import engine_path
from sojourn.servers import Server, ServerConfig, free_port
from sojourn.workloads.docroot import content, file_for

FILES = {"/1k.bin": 1024, "/8k.bin": 8192, "/64k.bin": 65536,
         **{f"/stage/{state}/{i}": 512 for state in "ABC" for i in range(2)}}


def make_docroot(root: Path) -> Path:
    for path, size in FILES.items():
        target = file_for(root, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content(path, size=size))
    return root


def load(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run([str(engine_path()), "load", *argv, "--quiet"], capture_output=True, text=True, timeout=120)
    if check and result.returncode != 0:
        raise AssertionError(f"load {' '.join(argv)} failed ({result.returncode}):\n{result.stderr}")
    return result


def records(out: Path) -> pd.DataFrame:
    return pd.read_csv(out / "records.csv", keep_default_na=True, dtype={"error": "string"})


def summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def assert_exact_accounting(frame: pd.DataFrame, info: dict) -> None:
    finals = frame[frame["final"] == 1]
    assert finals["request_id"].is_unique, "exactly one final outcome per request"
    assert set(frame["request_id"]) == set(finals["request_id"])
    assert len(finals) == info["requests"] == sum(info["outcomes"].values())
    assert len(frame) == info["attempts"]


@pytest.fixture(params=["nginx", "sojourn"])
def server(request, tmp_path):
    """A running server on 127.0.0.1 with an access log and a way to read its accepted-connection count."""
    root = make_docroot(tmp_path / "docroot")
    log = tmp_path / "access.log"
    port = free_port()
    extra = []
    admin_port = None
    if request.param == "sojourn":
        admin_port = free_port()
        extra = ["--admin", f"127.0.0.1:{admin_port}"]
    peer = Server(ServerConfig(kind=request.param, root=root, port=port, access_log=log, extra_args=extra))
    with peer:
        def accepted() -> int:
            if request.param == "nginx":
                # stub_status counts the connection asking too: the caller subtracts it.
                text = urllib.request.urlopen(f"{peer.url}/nginx_status", timeout=5).read().decode()
                return int(text.splitlines()[2].split()[0])
            text = urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/metrics", timeout=5).read().decode()
            return int(re.search(r"^sojourn_connections_accepted_total(?:\{[^}]*\})? (\d+)$", text, re.M).group(1))
        peer.accepted = accepted
        peer.access_log = log
        yield peer


def test_open_poisson_accounting_and_k_reuse(server, tmp_path):
    out = tmp_path / "out"
    before = server.accepted()
    load("open", "--target", f"127.0.0.1:{server.config.port}", "--out", str(out), "--rate", "400", "--duration", "1",
         "--path", "/1k.bin", "--path", "/8k.bin", "--clients", "4", "--conns-per-client", "1",
         "--requests-per-conn", "5", "--verify-content")
    # nginx's counter includes the stub_status connection of the second reading.
    opened = server.accepted() - before - (1 if server.config.kind == "nginx" else 0)
    frame, info = records(out), summary(out)
    assert_exact_accounting(frame, info)
    assert (frame["outcome"] == "ok").all(), frame["outcome"].value_counts()
    n = len(frame)
    assert 300 < n < 500
    connections = frame["conn_id"].nunique()
    assert connections == info["connections_opened"] == opened, "the server saw exactly our connections"
    assert n / 5 <= connections <= n / 5 + 4, "k = 5: a fifth as many connections as requests"
    assert frame["reuse_index"].max() == 4
    assert frame.loc[frame["reuse_index"] > 0, "connect_start_s"].isna().all()
    assert (frame["bytes"] == frame["path"].map(FILES)).all()
    assert (frame["scheduled_s"] <= frame["issued_s"]).all()
    assert (frame["sent_s"] <= frame["first_byte_s"]).all() and (frame["first_byte_s"] <= frame["last_byte_s"]).all()
    intervals = pd.read_csv(out / "intervals.csv")
    assert intervals["issued"].sum() == n and intervals["completed"].sum() == n


def test_trace_replay_validates_responses(server, tmp_path):
    bad = file_for(Path(server.config.root), "/corrupt.bin")
    bad.write_bytes(b"\x00" * 100)
    trace = tmp_path / "trace.csv"
    trace.write_text("arrival_s,client,path,size,session\n"
                     "0.0,0,/1k.bin,1024,-1\n"
                     "0.2,1,/8k.bin,1000,5\n"
                     "0.4,0,/missing.bin,10,\n"
                     "0.6,2,/corrupt.bin,100,-1\n")
    out = tmp_path / "out"
    load("open", "--target", f"127.0.0.1:{server.config.port}", "--out", str(out), "--trace", str(trace),
         "--time-scale", "2", "--verify-content")
    frame = records(out).set_index("path")
    assert_exact_accounting(frame.reset_index(), summary(out))
    assert frame.loc["/1k.bin", "outcome"] == "ok"
    assert frame.loc["/8k.bin", "outcome"] == "invalid" and "trace expects 1000" in frame.loc["/8k.bin", "error"]
    assert frame.loc["/8k.bin", "session"] == 5
    assert frame.loc["/missing.bin", "outcome"] == "http_error" and frame.loc["/missing.bin", "status"] == 404
    assert frame.loc["/corrupt.bin", "outcome"] == "invalid" and "content rule at byte 0" in frame.loc["/corrupt.bin", "error"]
    assert list(frame["scheduled_s"]) == [0.0, 0.1, 0.2, 0.3], "time scale 2 halves the arrival times"
    # The analysis side reads the same file by the docs/formats.md contract.
    per_request = requests(read_records(out / "records.csv"))
    assert list(per_request["completed"]) == [True, False, False, False]
    assert per_request["response_s"].iloc[0] == pytest.approx(frame.loc["/1k.bin", "last_byte_s"], abs=1e-6)


def test_clients_bind_their_source_addresses(server, tmp_path):
    out = tmp_path / "out"
    load("open", "--target", f"127.0.0.1:{server.config.port}", "--out", str(out), "--rate", "100", "--duration", "0.5",
         "--path", "/1k.bin", "--clients", "2", "--source-addrs", "127.0.0.2,127.0.0.3")
    frame = records(out)
    assert (frame["outcome"] == "ok").all()
    seen = {line.split()[0] for line in server.access_log.read_text().splitlines() if "/1k.bin" in line}
    assert seen == {"127.0.0.2", "127.0.0.3"}


def test_closed_users_think_between_requests(server, tmp_path):
    out = tmp_path / "out"
    load("closed", "--target", f"127.0.0.1:{server.config.port}", "--out", str(out), "--users", "3",
         "--think-time", "const:0.2", "--duration", "1.5", "--path", "/8k.bin", "--requests-per-conn", "0")
    frame, info = records(out), summary(out)
    assert_exact_accounting(frame, info)
    for client, requests in frame.sort_values("request_id").groupby("client"):
        assert 2 <= len(requests) <= 8, f"user {client}: 1.5 s with 0.2 s think allows at most 8 requests"
        gaps = requests["scheduled_s"].to_numpy()[1:] - requests["last_byte_s"].to_numpy()[:-1]
        assert ((gaps > 0.199) & (gaps < 0.2011)).all(), gaps
        assert requests["conn_id"].nunique() == 1, "unlimited persistence: one connection per user"
    assert frame["client"].nunique() == 3


def test_a_start_spread_starts_the_users_one_after_another(server, tmp_path):
    """--start-spread S: user u of N issues its first request at u * S / N (docs/load.md),
    with two threads too, and then goes on as a closed user."""
    out = tmp_path / "out"
    load("closed", "--target", f"127.0.0.1:{server.config.port}", "--out", str(out), "--users", "4",
         "--duration", "1.2", "--start-spread", "0.8", "--threads", "2", "--path", "/1k.bin", "--requests-per-conn", "0")
    frame, info = records(out), summary(out)
    assert_exact_accounting(frame, info)
    first = frame.sort_values("scheduled_s").groupby("client")["scheduled_s"].first()
    assert first.to_dict() == pytest.approx({0: 0.0, 1: 0.2, 2: 0.4, 3: 0.6}, abs=1e-6)
    assert (frame.groupby("client").size() > 1).all(), "each user goes on after its first response"


def test_capacity_sweep(server, tmp_path):
    out = tmp_path / "out"
    result = load("capacity", "--target", f"127.0.0.1:{server.config.port}", "--out", str(out),
                  "--connections", "1,4", "--duration", "0.5", "--path", "/1k.bin", "--requests-per-conn", "0")
    capacity = json.loads((out / "capacity.json").read_text())
    levels = capacity["levels"]
    assert [level["connections"] for level in levels] == [1, 4]
    assert capacity["capacity_rps"] == max(level["throughput_rps"] for level in levels) > 0
    assert "capacity" in result.stdout
    for level in levels:
        frame = records(out / level["dir"])
        assert_exact_accounting(frame, summary(out / level["dir"]))
        assert frame["conn_id"].nunique() == level["connections"]
        assert set(frame["outcome"]) <= {"ok", "interrupted"}


def test_threads_split_clients_and_merge_records_in_completion_order(server, tmp_path):
    """`--threads N`: each loop owns the clients c with c mod N = its index; the merged
    records hold the same requests as a one-loop run, ordered by completion."""
    trace = tmp_path / "trace.csv"
    paths = ["/1k.bin", "/8k.bin", "/64k.bin"]
    trace.write_text("arrival_s,client,path,size\n" + "".join(
        f"{i * 0.004:.6f},{i % 7},{paths[i % 3]},{FILES[paths[i % 3]]}\n" for i in range(300)))
    runs = {}
    for threads in (1, 3):
        out = tmp_path / f"t{threads}"
        load("open", "--target", f"127.0.0.1:{server.config.port}", "--out", str(out), "--trace", str(trace),
             "--threads", str(threads), "--requests-per-conn", "4", "--verify-content")
        frame, info = records(out), summary(out)
        assert_exact_accounting(frame, info)
        assert info["threads"] == threads and len(info["loop_busy_fraction_per_thread"]) == threads
        assert frame["last_byte_s"].is_monotonic_increasing, "merged in order of completion"
        assert frame.groupby("conn_id")["client"].nunique().max() == 1, "a connection serves one client"
        assert frame["conn_id"].nunique() == info["connections_opened"]
        intervals = pd.read_csv(out / "intervals.csv")
        assert intervals["issued"].sum() == 300 and intervals["completed"].sum() == 300
        assert not list(out.glob(".loop-*")), "the loops' part directories are merged and removed"
        runs[threads] = frame
    same = ["request_id", "client", "path", "expected_size", "bytes", "scheduled_s", "outcome"]
    one, three = (runs[t][same].sort_values("request_id").reset_index(drop=True) for t in (1, 3))
    assert (one["outcome"] == "ok").all()
    pd.testing.assert_frame_equal(one, three)

    out = tmp_path / "capacity"
    load("capacity", "--target", f"127.0.0.1:{server.config.port}", "--out", str(out), "--connections", "5",
         "--duration", "0.5", "--path", "/1k.bin", "--requests-per-conn", "0", "--threads", "2")
    frame = records(out / "c5")
    assert_exact_accounting(frame, summary(out / "c5"))
    assert sorted(frame["client"].unique()) == [0, 1, 2, 3, 4] and frame["conn_id"].nunique() == 5


MODEL = """
arrival-rate = 300.0
delay-bound-s = 5.0
start = { A = 1.0 }
[states.A]
paths = ["/stage/A/0", "/stage/A/1"]
next = { A = 0.2, B = 0.5, exit = 0.3 }
[states.B]
paths = ["/stage/B/0", "/stage/B/1"]
next = { A = 0.4, C = 0.6 }
[states.C]
paths = ["/stage/C/0"]
next = { exit = 1.0 }
"""


def test_sessions_follow_the_transition_matrix(server, tmp_path):
    model = tmp_path / "model.toml"
    model.write_text(MODEL)
    out = tmp_path / "out"
    load("sessions", "--target", f"127.0.0.1:{server.config.port}", "--out", str(out), "--model", str(model),
         "--duration", "2", "--requests-per-conn", "0")
    frame, info = records(out), summary(out)
    assert_exact_accounting(frame, info)
    assert (frame["outcome"] == "ok").all()
    work = info["workload"]
    assert work["sessions_started"] == work["sessions_completed"] + work["sessions_aborted"] + work["sessions_unfinished"]
    assert work["sessions_aborted"] == 0 and work["sessions_unfinished"] == 0
    frame["state"] = frame["path"].str.split("/").str[2]
    counts: dict[tuple[str, str], int] = {}
    for _, session in frame.sort_values("request_id").groupby("session"):
        states = list(session["state"]) + ["exit"]
        assert states[0] == "A"
        for a, b in zip(states, states[1:]):
            counts[(a, b)] = counts.get((a, b), 0) + 1
    expected = {"A": {"A": 0.2, "B": 0.5, "exit": 0.3}, "B": {"A": 0.4, "C": 0.6}, "C": {"exit": 1.0}}
    for origin, row in expected.items():
        total = sum(n for (a, _), n in counts.items() if a == origin)
        assert total > 100
        for target, p in row.items():
            assert abs(counts.get((origin, target), 0) / total - p) < 0.06, (origin, target, counts)
    assert sum(1 for (a, b) in counts if b not in expected[a]) == 0, "no transition outside the matrix"


def test_a_truncated_body_is_still_checked_so_corruption_is_told_from_truncation(tmp_path):
    """A server that closes mid-body (e.g. its send timeout under heavy loss): the bytes that
    came are verified, so the record says whether they were also wrong."""
    import socket
    import threading

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        for _ in range(2):
            conn, _ = listener.accept()
            request = conn.recv(4096).decode()
            path = request.split()[1]
            right = content(path, size=1000)[:300]
            body = right if path == "/cut.bin" else bytes(300)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + body)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    trace = tmp_path / "trace.csv"
    trace.write_text("arrival_s,client,path,size\n0.0,0,/cut.bin,1000\n0.1,1,/wrong.bin,1000\n")
    out = tmp_path / "out"
    load("open", "--target", f"127.0.0.1:{port}", "--out", str(out), "--trace", str(trace), "--verify-content")
    thread.join(timeout=10)
    listener.close()
    frame = records(out).set_index("path")
    assert frame.loc["/cut.bin", "outcome"] == "invalid"
    assert frame.loc["/cut.bin", "error"] == "body ended after 300 of 1000 bytes"
    assert frame.loc["/wrong.bin", "error"].startswith("body differs from the content rule at byte 0; body ended after")
