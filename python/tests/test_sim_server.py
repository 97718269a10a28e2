"""The quantum-based simulator against a real ``sojourn-engine serve`` in the testbed.

A small trace whose arrivals overload a 10 Mbit/s uplink for about two seconds (a
backlogged bottleneck) is replayed by ``sojourn-engine load`` against ``sojourn-engine
serve`` (one worker, so one ReadyQueue) and simulated by ``sojourn-engine sim --quantum``
with the same policy, quantum and write concurrency. The order of completions must agree.

Tolerance. The simulator models each socket's unsent bytes (TCP_NOTSENT_LOWAT, here
16 KB, given to both) but not the uplink's FIFO, TCP's window or the round trip to the
client: the link shares bytes equally among sockets, where the real FIFO sends the
packets already queued first. Two completions closer together in the simulation than the
time to drain what the model leaves out, ``(lowat + quantum + uplink queue) / rate`` plus
20 ms of scheduling and timer slack, may swap. Beyond that, an SRPT decision can still
flip when two responses' remaining bytes differ by less than that much (the server counts
bytes handed to the kernel as sent), moving both completions by a whole service time and
sometimes a few later pairs; and a retransmission timeout or CPU contention on the shared
machine can stall the real link. So at most 5% of the pairs separated by more than the
tolerance may finish out of order (observed: 0-3.2%).

Needs root (network namespaces); prefix ``sjsim``; torn down by the ``with`` block.
"""

from __future__ import annotations

import os
import random
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from sojourn.engine import engine_path
from sojourn.testbed import Testbed, TestbedConfig, WanGroup

pytestmark = [pytest.mark.netns, pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")]

LINK_BPS = 10_000_000
# HTB counts Ethernet frames: TCP payload gets 1448 of every 1514 bytes (docs/testbed.md).
PAYLOAD_BPS = LINK_BPS * 1448 / 1514
QUANTUM = 16 * 1024
LOWAT = 16 * 1024
QUEUE_BYTES = 30_000
SLACK_S = 0.02
TOLERANCE_S = (LOWAT + QUANTUM + QUEUE_BYTES) * 8 / PAYLOAD_BPS + SLACK_S


def make_trace(directory: Path) -> Path:
    """24 requests over 1.2 s, sizes 8 KB - 400 KB (log-uniform, seeded): about 3.5 s of work."""
    rng = random.Random(7)
    docroot = directory / "docroot" / "o"
    docroot.mkdir(parents=True)
    rows, t = [], 0.0
    for i in range(24):
        size = int(8_000 * 50 ** rng.random())
        (docroot / f"{i:03d}.bin").write_bytes(bytes(size))
        rows.append({"arrival_s": round(t, 6), "client": i, "path": f"/o/{i:03d}.bin", "size": size})
        t += rng.expovariate(20.0)
    trace = directory / "trace.csv"
    pd.DataFrame(rows).to_csv(trace, index=False)
    return trace


def simulate(measured: pd.DataFrame, out: Path, policy: str, concurrency: int | None) -> pd.Series:
    """The simulator on the arrivals the server saw: each request from when it was fully sent."""
    out.mkdir(parents=True)
    trace = out / "arrivals.csv"
    arrivals = measured.sort_values(["sent_s", "request_id"])
    pd.DataFrame({"arrival_s": (arrivals["sent_s"] - arrivals["sent_s"].min()).round(6), "client": arrivals.index,
                  "path": arrivals["path"], "size": arrivals["expected_size"]}).to_csv(trace, index=False)
    args = [str(engine_path()), "sim", "--trace", str(trace), "--link", str(PAYLOAD_BPS), "--policy", policy,
            "--quantum", str(QUANTUM), "--kernel-buffer", str(LOWAT), "--out", str(out)]
    if concurrency:
        args += ["--write-concurrency", str(concurrency)]
    subprocess.run(args, check=True, capture_output=True, text=True)
    finish = pd.read_csv(out / "records.csv")["last_byte_s"].to_numpy()
    return pd.Series(finish + arrivals["sent_s"].min(), index=arrivals.index).sort_index()


def serve_and_load(tb: Testbed, directory: Path, trace: Path, policy: str, concurrency: int | None) -> pd.DataFrame:
    serve = [str(engine_path()), "serve", "--root", str(directory / "docroot"), "--listen", f"{tb.server_addr}:8080",
             "--policy", policy, "--threads", "1", "--quantum", str(QUANTUM), "--notsent-lowat", str(LOWAT)]
    if concurrency:
        serve += ["--write-concurrency", str(concurrency)]
    out = directory / f"load-{policy}"
    server = tb.popen(tb.server_ns, serve, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        time.sleep(0.5)
        assert server.poll() is None, server.stderr.read().decode()
        tb.run(tb.client_ns, [str(engine_path()), "load", "open", "--target", f"{tb.server_addr}:8080",
                              "--trace", str(trace), "--out", str(out), "--quiet",
                              "--source-addrs", ",".join(tb.client_addrs["g0"])], check=True, capture_output=True)
    finally:
        server.terminate()
        server.wait(timeout=15)
    records = pd.read_csv(out / "records.csv")
    records = records[records["final"] == 1]
    assert (records["outcome"] == "ok").all(), records[["request_id", "outcome", "error"]]
    return records.set_index("request_id").sort_index()


def discordant_pairs(simulated: pd.Series, measured: pd.Series, tolerance_s: float) -> list[tuple[int, int]]:
    """Pairs the simulation separates by more than the tolerance but the server finished the other way round."""
    ids = list(simulated.index)
    wrong = []
    for a in ids:
        for b in ids:
            if simulated[b] - simulated[a] > tolerance_s and measured[a] > measured[b]:
                wrong.append((a, b))
    return wrong


@pytest.mark.parametrize("policy,concurrency,allowed", [("srpt", 1, 0.05), ("fair", None, 0.05)])
def test_quantum_simulation_orders_completions_like_the_server(tmp_path, policy, concurrency, allowed):
    trace = make_trace(tmp_path)
    with Testbed(TestbedConfig(prefix="sjsim", link_bps=LINK_BPS, queue_bytes=QUEUE_BYTES,
                               groups=[WanGroup(name="g0", clients=1)])) as tb:
        records = serve_and_load(tb, tmp_path, trace, policy, concurrency)
    simulated = simulate(records, tmp_path / f"sim-{policy}", policy, concurrency)
    measured = records["last_byte_s"]
    assert list(measured.index) == list(simulated.index)
    wrong = discordant_pairs(simulated, measured, TOLERANCE_S)
    table = pd.DataFrame({"simulated_s": simulated, "measured_s": measured})
    separated = sum(1 for a in simulated.index for b in simulated.index if simulated[b] - simulated[a] > TOLERANCE_S)
    assert len(wrong) <= allowed * separated, f"pairs out of order beyond {TOLERANCE_S:.3f} s: {wrong}\n{table}"
    # The comparison has teeth: most pairs are further apart than the tolerance.
    assert separated > 0.6 * len(simulated) * (len(simulated) - 1) / 2
