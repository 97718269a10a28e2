"""The testbed measured: each test configures a feature and measures it from the
outside (TCP handshakes, iperf3, numbered UDP datagrams, ss -ti, qdisc counters).
Needs root; every testbed is torn down by its ``with`` block, also on failure."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest
from scipy import stats

from sojourn import analysis
from sojourn.engine import engine_path
from sojourn.testbed import TcpKnobs, Testbed, TestbedConfig, WanGroup
from sojourn.testbed.counters import parse_proc_net_stats
from sojourn.testbed.probe import loss_stats
from sojourn.testbed.uplink import uplink_stats

pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
]

PROBE = [sys.executable, "-m", "sojourn.testbed.probe"]
# Wire bytes per payload byte of a full-size TCP segment with timestamps:
# 1448 payload + 32 TCP + 20 IP + 14 Ethernet (HTB counts link-layer bytes).
WIRE_PER_PAYLOAD = 1514 / 1448


def wait_listening(tb: Testbed, ns: str, port: int, proto: str = "t") -> None:
    for _ in range(100):
        out = tb.run(ns, ["ss", f"-{proto}lnH", f"sport = :{port}"], capture_output=True, text=True).stdout
        if out.strip():
            return
        time.sleep(0.05)
    raise AssertionError(f"nothing listening on port {port} in {ns}")


def probe_json(proc: subprocess.Popen, timeout: float = 60) -> dict:
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, f"probe failed with {proc.returncode}"
    return json.loads(out)


def measure_handshake_errors(groups: list[WanGroup], parallel: int = 10, per_probe: int = 31):
    """Handshake RTT minus configured RTT (ms) per group, 300 handshakes each (so p99 is not
    just the maximum), and the emulator's own release lateness over the same run."""
    errors = {}
    with Testbed(TestbedConfig(prefix="sjtba", groups=groups, emulator=True)) as tb:
        tb.popen(tb.server_ns, PROBE + ["listen", "--bind", f"{tb.server_addr}:7000", "--timeout", "20"])
        wait_listening(tb, tb.server_ns, 7000)
        for group in groups:
            probes = [tb.popen(tb.client_ns, PROBE + ["connect", "--source", tb.client_addrs[group.name][0],
                                                      "--target", f"{tb.server_addr}:7000", "--count", str(per_probe),
                                                      "--gap", "0.001", "--wait", "2"],
                               stdout=subprocess.PIPE, text=True)
                      for _ in range(parallel)]
            # The kernel's SYN -> SYN-ACK sample (µs resolution, no probe scheduling in it);
            # each probe's first handshake also resolves neighbours (ARP): not part of the RTT.
            rtt_ms = np.concatenate([np.array(probe_json(p)["handshake_rtt_s"][1:]) * 1e3 for p in probes])
            errors[group.name] = rtt_ms - group.rtt_ms
        tb.emulator.stop()
        lateness = json.loads(tb.emulator.summary_path.read_text())["lateness_us"]
    return errors, lateness


def test_rtt_of_each_group_within_1ms_at_p99():
    groups = [WanGroup("g0", rtt_ms=0), WanGroup("g1", rtt_ms=37.5), WanGroup("g2", rtt_ms=150)]

    def check(errors: dict) -> str | None:
        for name, error_ms in errors.items():
            if error_ms.min() < -0.05:
                return f"{name}: a handshake beat the configured RTT by {-error_ms.min():.3f} ms"
        p99 = {name: float(np.percentile(e, 99)) for name, e in errors.items()}
        worst = max(p99, key=p99.get)
        if p99[worst] < 1.0:
            return None
        return f"{worst}: p99 error {p99[worst]:.3f} ms (all: {p99}); largest {np.sort(errors[worst])[-5:].round(3)}"

    retry_if_stalled(lambda: measure_handshake_errors(groups), check)


def link_bits_per_second(iperf3: dict, packet_per_payload: float) -> float:
    """What crossed the link per second in an iperf3 -R run: the payload received plus
    the full-size segments the sender retransmitted (a queue overflow makes TCP resend
    what the link already carried), in packet bytes."""
    end = iperf3["end"]
    received, sent = end["sum_received"], end["sum_sent"]
    payload_bytes = received["bytes"] + sent.get("retransmits", 0) * 1448
    return payload_bytes * 8 * packet_per_payload / received["seconds"]


def stalled(lateness: dict) -> bool:
    """Whether the SCHED_FIFO emulator itself woke over 1 ms late: on this PREEMPT_NONE
    kernel that means the machine (other tasks' kernel work, the hypervisor) stalled, and
    a timing measurement taken meanwhile says nothing about the testbed."""
    return lateness["max"] > 1000


def retry_if_stalled(measure, check, attempts: int = 3) -> None:
    """``measure()`` returns (result, emulator lateness); ``check(result)`` returns a failure
    message or None. A failure is final unless the emulator reports a stall, in which case
    a fresh testbed measures again (at most ``attempts`` times). When every attempt was
    stalled the machine gave no undisturbed window to measure in: that is reported as a
    skip naming the stalls, never as a pass."""
    for attempt in range(1, attempts + 1):
        result, lateness = measure()
        failure = check(result)
        if failure is None:
            return
        if not stalled(lateness):
            pytest.fail(f"{failure}; emulator release lateness {lateness} µs (attempt {attempt})")
    pytest.skip(f"machine stalled the emulator in all {attempts} attempts (last: {failure}; "
                f"release lateness {lateness} µs): timing precision not measurable on this load")


def iperf3_link_rate(cfg: TestbedConfig, port: int, packet_per_payload: float):
    """iperf3 -R (the server sends, so data crosses the uplink and the groups' down pipes),
    6 s after skipping 2 s of slow start; returns what crossed the link and the emulator's lateness."""
    with Testbed(cfg) as tb:
        tb.popen(tb.server_ns, ["iperf3", "-s", "-1", "-B", tb.server_addr, "-p", str(port)], stdout=subprocess.DEVNULL)
        wait_listening(tb, tb.server_ns, port)
        result = tb.run(tb.client_ns, ["iperf3", "-c", tb.server_addr, "-p", str(port), "-R", "-t", "6", "-O", "2",
                                       "-B", tb.client_addrs["g0"][0], "-J"], capture_output=True, text=True, check=True)
        tb.emulator.stop()
        lateness = json.loads(tb.emulator.summary_path.read_text())["lateness_us"]
    return link_bits_per_second(json.loads(result.stdout), packet_per_payload), lateness


def within_3_percent(rate: int, what: str):
    def check(measured: float) -> str | None:
        if abs(measured - rate) / rate < 0.03:
            return None
        return f"{what} {measured / 1e6:.3f} Mbit/s for {rate / 1e6} configured"
    return check


def test_iperf3_throughput_through_the_bottleneck_within_3_percent():
    rate = 10_000_000
    cfg = TestbedConfig(prefix="sjtbb", link_bps=rate, groups=[WanGroup("g0", rtt_ms=10)])
    retry_if_stalled(lambda: iperf3_link_rate(cfg, 5301, WIRE_PER_PAYLOAD), within_3_percent(rate, "wire rate"))


def test_iperf3_throughput_through_an_emulated_access_link_within_3_percent():
    rate = 8_000_000
    cfg = TestbedConfig(prefix="sjtbi", link_bps=100_000_000, groups=[WanGroup("g0", rtt_ms=20, rate_bps=rate)])
    # The emulator serializes IP packets (no Ethernet header): 1500 bytes carry 1448 of payload.
    retry_if_stalled(lambda: iperf3_link_rate(cfg, 5302, 1500 / 1448), within_3_percent(rate, "IP rate"))


def udp_loss(tb: Testbed, group: str, count: int, port: int) -> dict:
    receiver = tb.popen(tb.server_ns, PROBE + ["udp-recv", "--bind", f"{tb.server_addr}:{port}",
                                               "--count", str(count)],
                        stdout=subprocess.PIPE, text=True)
    wait_listening(tb, tb.server_ns, port, proto="u")
    tb.run(tb.client_ns, PROBE + ["udp-send", "--source", tb.client_addrs[group][0], "--target",
                                  f"{tb.server_addr}:{port}", "--count", str(count), "--pps", "10000"],
           check=True, capture_output=True)
    return probe_json(receiver)


def emulator_up_pipe(tb: Testbed) -> dict:
    """The emulator's final counters of the clients -> server pipe, with the drops that
    happened outside it (TUN queue full, receiver socket full) for diagnosis."""
    rcvbuf = parse_proc_net_stats(tb.run(tb.server_ns, ["cat", "/proc/net/snmp"], capture_output=True,
                                         text=True).stdout).get("Udp.RcvbufErrors", 0)
    tun_drops = tb.emulator.tun_drops()
    tb.emulator.stop()  # writes the final counters
    pipes = json.loads(tb.emulator.summary_path.read_text())["pipes"]
    up = next(p for p in pipes if p["direction"] == "up")
    return up | {"tun_queue_drops": tun_drops, "receiver_buffer_drops": rcvbuf}


def measure_loss(group: WanGroup, count: int, port: int, attempts: int = 3) -> dict:
    """Send ``count`` numbered datagrams clients -> server through ``group``'s loss; every
    missing datagram must be one the emulator counted as lost. Datagrams dropped outside
    the emulator (its TUN queue overflowing while the machine stalled it, or the receiver's
    socket buffer) disturb the sample: then a fresh testbed measures again."""
    for attempt in range(1, attempts + 1):
        with Testbed(TestbedConfig(prefix="sjtbc", groups=[group])) as tb:
            measured = udp_loss(tb, group.name, count, port)
            up = emulator_up_pipe(tb)
        outside = up["tun_queue_drops"] + up["receiver_buffer_drops"]
        if outside == 0 or attempt == attempts:
            break
    assert measured["lost"] == up["loss_drops"], f"every missing datagram was an emulated loss: {measured} {up}"
    return measured


def test_bernoulli_loss_within_its_binomial_interval():
    loss, count = 0.05, 20_000
    measured = measure_loss(WanGroup("g0", loss=loss), count, 7001)
    assert stats.binomtest(measured["lost"], count, loss).pvalue > 0.001, measured
    # Independent loss: a loss says nothing about the next packet.
    assert abs(measured["conditional"] - loss) < 0.03, measured


def test_two_state_loss_has_the_conditional_probability_and_bursts_of_002():
    loss, conditional, count = 0.06, 0.35, 40_000
    measured = measure_loss(WanGroup("g0", loss=loss, loss_model="two-state", conditional_loss=conditional),
                            count, 7002)
    assert stats.binomtest(measured["lost"], count, loss).pvalue > 0.0001 or abs(measured["loss"] - loss) < 0.006, measured
    sigma = (conditional * (1 - conditional) / measured["pairs_after_loss"]) ** 0.5
    assert abs(measured["conditional"] - conditional) < 4 * sigma, measured
    # Burst lengths are geometric with mean 1 / (1 - conditional) (002 §3.4, Fig. 5).
    assert abs(measured["mean_burst"] - 1 / (1 - conditional)) < 0.15, measured


def test_loss_stats_counts_bursts():
    s = loss_stats([True, False, False, True, False, True, True])
    assert (s["lost"], s["mean_burst"], s["conditional"]) == (3, 1.5, 1 / 3)


def test_strict_priority_between_two_bands():
    cfg = TestbedConfig(prefix="sjtbe", link_bps=10_000_000, bands="1K,2K,5K,50K")
    high, low = (1 << 16) | 0x10, (1 << 16) | 0x14  # classes 1:10 (band 0) and 1:14 (band 4)
    with Testbed(cfg) as tb:
        client = tb.client_addrs["g0"][0]
        sinks = {name: tb.popen(tb.client_ns, PROBE + ["sink", "--bind", f"{client}:{port}", "--timeout", "3"],
                                stdout=subprocess.PIPE, text=True)
                 for name, port in (("high", 7010), ("low", 7011))}
        wait_listening(tb, tb.client_ns, 7010)
        wait_listening(tb, tb.client_ns, 7011)
        sources = [tb.popen(tb.server_ns, PROBE + ["source", "--target", f"{client}:{port}", "--seconds", "4",
                                                   "--priority", str(prio)], stdout=subprocess.DEVNULL)
                   for port, prio in ((7010, high), (7011, low))]
        for source in sources:
            source.wait(timeout=30)
        received = {name: probe_json(sink)["bytes"] for name, sink in sinks.items()}
    # Over 4 s at 10 Mbit/s the link carries up to 5 MB: both flows had data waiting
    # the whole time, and the low band got only what the high band left.
    assert received["high"] + received["low"] > 2_000_000, f"the link was not busy: {received}"
    assert received["low"] < 0.1 * received["high"], received


# Big responses in flight while the small ones are fetched. Beside one, FAIR's small responses
# took 17-20 ms and SRPT's 3-4 ms in four runs, but SRPT's 11 ms in a fifth, on a noisy host
# (30 Nov 2026: ratio 1.9, the test failed). Beside four, FAIR's took 26-27 ms and SRPT's 3-4
# (ratio 7.4-8.4 in three runs): SRPT at 11 ms would still pass.
BIG_TRANSFERS = 4


def small_response_mean(tb: Testbed, root, policy: list[str]) -> float:
    """Mean completion time (s) of 50 small responses fetched one after another on a
    persistent connection while BIG_TRANSFERS 5 MB responses are in flight from the same
    server."""
    base = f"http://{tb.server_addr}:8080"
    server = tb.popen(tb.server_ns, [str(engine_path()), "serve", "--root", str(root), "--threads", "1",
                                     "--listen", f"{tb.server_addr}:8080", *policy], stderr=subprocess.DEVNULL)
    try:
        wait_listening(tb, tb.server_ns, 8080)
        bigs = [tb.popen(tb.client_ns, ["curl", "-s", "-o", "/dev/null", f"{base}/big.bin"])
                for _ in range(BIG_TRANSFERS)]
        time.sleep(1.5)  # their windows have opened by now
        curl = ["curl", "-s", "-w", "%{http_code} %{time_total}\\n"]
        for i in range(50):
            curl += ["-o", "/dev/null", f"{base}/s{i}.bin"]
        out = tb.run(tb.client_ns, curl, capture_output=True, text=True, timeout=60).stdout
        for big in bigs:
            big.kill()
            big.wait()
    finally:
        server.terminate()
        server.wait(timeout=15)
    rows = [line.split() for line in out.splitlines()]
    assert len(rows) == 50 and all(status == "200" for status, _ in rows), out
    return sum(float(seconds) for _, seconds in rows) / len(rows)


def test_srpt_kernel_bands_finish_small_responses_sooner_than_fair(tmp_path):
    """Kernel-level SRPT end to end (000 §3): the testbed's banded uplink and the
    server's SO_PRIORITY agree on the classes (testbed/uplink.py, crates/server/src/qdisc.rs).
    While 5 MB responses cross the 10 Mbit/s uplink, 50 small (3 KB) ones finish
    clearly sooner under `srpt --kernel-bands` than under `fair`, and the per-band
    counters show where they went: the small ones in band 2, the big ones in band 4."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "big.bin").write_bytes(os.urandom(5_000_000))
    for i in range(50):
        (root / f"s{i}.bin").write_bytes(os.urandom(3_000))
    with Testbed(TestbedConfig(prefix="sjtbk", link_bps=10_000_000, bands="1K,2K,5K,50K")) as tb:
        fair = small_response_mean(tb, root, ["--policy", "fair"])
        before = {row["band"]: row["sent_bytes"] for row in uplink_stats(tb.server_ns, tb.uplink_dev, tb.config.cutoffs)}
        srpt = small_response_mean(tb, root, ["--policy", "srpt", "--kernel-bands"])
        rows = uplink_stats(tb.server_ns, tb.uplink_dev, tb.config.cutoffs)
    sent = {row["band"]: row["sent_bytes"] - before.get(row["band"], 0) for row in rows}
    assert [row["class"] for row in rows] == ["1:10", "1:11", "1:12", "1:13", "1:14", "1:20"], rows
    assert sent[2] >= 50 * 3_000, f"band 2 carried the small responses: {rows}"
    assert sent[4] > 1_000_000, f"band 4 carried the big responses: {rows}"
    print(f"mean of 50 small responses beside {BIG_TRANSFERS} 5 MB ones at 10 Mbit/s: fair {fair:.3f} s, "
          f"srpt --kernel-bands {srpt:.3f} s, ratio {fair / srpt:.1f}")
    assert srpt * 2 < fair, f"srpt {srpt:.3f} s is not clearly below fair {fair:.3f} s"


def test_a_response_starved_by_a_higher_band_outlives_the_send_timeout(tmp_path):
    """--send-timeout closes a connection whose client reads nothing, not one whose bytes wait
    in this host: a 3 MB response in the lowest band, starved for 4 s by a flood in the top
    band (kernel-level SRPT's strict priority, 000 §3), with a 1-s send timeout, completes
    once the flood ends."""
    root = tmp_path / "root"
    root.mkdir()
    body = os.urandom(3_000_000)
    (root / "big.bin").write_bytes(body)
    top_band = (1 << 16) | 0x10  # class 1:10
    with Testbed(TestbedConfig(prefix="sjtbs", link_bps=10_000_000, bands="1K,2K,5K,50K")) as tb:
        client = tb.client_addrs["g0"][0]
        server = tb.popen(tb.server_ns, [str(engine_path()), "serve", "--root", str(root), "--threads", "1",
                                         "--listen", f"{tb.server_addr}:8080", "--policy", "srpt", "--kernel-bands",
                                         "--send-timeout", "1"], stderr=subprocess.DEVNULL)
        try:
            wait_listening(tb, tb.server_ns, 8080)
            sink = tb.popen(tb.client_ns, PROBE + ["sink", "--bind", f"{client}:7020", "--timeout", "3"],
                            stdout=subprocess.PIPE, text=True)
            wait_listening(tb, tb.client_ns, 7020)
            big = tb.popen(tb.client_ns, ["curl", "-s", "-o", str(tmp_path / "got.bin"), "-w", "%{http_code}",
                                          f"http://{tb.server_addr}:8080/big.bin"], stdout=subprocess.PIPE, text=True)
            time.sleep(0.5)  # the response is under way
            flood = tb.popen(tb.server_ns, PROBE + ["source", "--target", f"{client}:7020", "--seconds", "4",
                                                    "--priority", str(top_band)], stdout=subprocess.DEVNULL)
            flood.wait(timeout=30)
            flooded = probe_json(sink)["bytes"]
            status, _ = big.communicate(timeout=60)
        finally:
            server.terminate()
            server.wait(timeout=15)
    # The flood held the link (up to 5 MB in 4 s), so the big response was starved well
    # past the 1-s timeout; it still arrived whole.
    assert flooded > 2_000_000, f"the flood did not fill the link: {flooded} bytes"
    assert big.returncode == 0 and status == "200", f"curl exit {big.returncode}, status {status!r}"
    assert (tmp_path / "got.bin").read_bytes() == body


def max_cwnd_and_options(tb: Testbed, port: int) -> tuple[int, set[str]]:
    """Run a bulk transfer server -> client and sample `ss -tio` in the server namespace
    (iproute2 6.1 prints the ts/sack flags only with -o)."""
    client = tb.client_addrs["g0"][0]
    sink = tb.popen(tb.client_ns, PROBE + ["sink", "--bind", f"{client}:{port}", "--timeout", "3"],
                    stdout=subprocess.PIPE, text=True)
    wait_listening(tb, tb.client_ns, port)
    source = tb.popen(tb.server_ns, PROBE + ["source", "--target", f"{client}:{port}", "--seconds", "3"],
                      stdout=subprocess.DEVNULL)
    cwnds, options = [], set()
    while source.poll() is None:
        out = tb.run(tb.server_ns, ["ss", "-tinoH", "state", "established", f"dport = :{port}"],
                     capture_output=True, text=True).stdout
        cwnds += [int(m) for m in re.findall(r"\bcwnd:(\d+)", out)]
        options |= set(out.split())
        time.sleep(0.05)
    probe_json(sink)
    assert cwnds, "no established connection seen"
    return max(cwnds), options


def test_cwnd_clamp_sack_and_timestamps_visible_in_ss():
    group = [WanGroup("g0", rtt_ms=40)]
    clamped = TestbedConfig(prefix="sjtbf", groups=group, link_bps=20_000_000,
                            tcp=TcpKnobs(cwnd_clamp=6, sack=False, timestamps=False))
    with Testbed(clamped) as tb:
        cwnd, options = max_cwnd_and_options(tb, 7020)
    assert cwnd <= 6, cwnd
    assert "sack" not in options and "ts" not in options, options
    free = TestbedConfig(prefix="sjtbf", groups=group, link_bps=20_000_000, tcp=TcpKnobs(sack=True))
    with Testbed(free) as tb:
        cwnd, options = max_cwnd_and_options(tb, 7021)
    assert cwnd > 6, f"without the clamp cwnd should grow past 6 (BDP is ~66 segments): {cwnd}"
    assert "sack" in options and "ts" in options, options


def test_mtu_clamps_the_mss_of_a_group():
    """000 Table 2 (I): the server's route to a group locks its path MTU, so the server sends
    that group segments of at most ``mtu - 40`` bytes, without the emulator."""
    groups = [WanGroup("small", mtu=576), WanGroup("full")]
    with Testbed(TestbedConfig(prefix="sjtbg", groups=groups)) as tb:
        assert tb.emulator is None, "an MTU alone needs no emulator"
        for name, port, mss in (("small", 7030, 536), ("full", 7031, 1460)):
            sink = tb.popen(tb.client_ns, PROBE + ["sink", "--bind", f"{tb.client_addrs[name][0]}:{port}",
                                                   "--timeout", "2"], stdout=subprocess.PIPE, text=True)
            wait_listening(tb, tb.client_ns, port)
            source = tb.popen(tb.server_ns, PROBE + ["source", "--target", f"{tb.client_addrs[name][0]}:{port}",
                                                     "--seconds", "1"], stdout=subprocess.DEVNULL)
            out = ""
            while "mss:" not in out and source.poll() is None:
                out = tb.run(tb.server_ns, ["ss", "-tinoH", "state", "established", f"dport = :{port}"],
                             capture_output=True, text=True).stdout
            source.wait(timeout=20)
            probe_json(sink)
            # ss reports the MSS we send with, minus TCP options such as timestamps.
            sent_mss = int(re.search(r"\bmss:(\d+)", out).group(1))
            assert mss - 12 <= sent_mss <= mss, (name, out)


def stream_to_a_client(tb: Testbed, port: int, seconds: int) -> dict:
    """TCP from the server namespace to a sink on the first client address for ``seconds``
    (across the uplink, and the emulator when it is on); the sink's report."""
    client = tb.client_addrs["g0"][0]
    sink = tb.popen(tb.client_ns, PROBE + ["sink", "--bind", f"{client}:{port}", "--timeout", str(seconds + 1)],
                    stdout=subprocess.PIPE, text=True)
    wait_listening(tb, tb.client_ns, port)
    tb.run(tb.server_ns, PROBE + ["source", "--target", f"{client}:{port}", "--seconds", str(seconds)],
           check=True, capture_output=True)
    return probe_json(sink)


def test_counters_record_uplink_traffic_accept_queue_and_listen_drops(tmp_path):
    with Testbed(TestbedConfig(prefix="sjtbh", tcp=TcpKnobs(somaxconn=4, syn_backlog=4, orphan_retries=40,
                                                                rto_max_ms=2000, rack_tlp=False))) as tb:
        path = tmp_path / "counters.csv"
        tb.start_counters(path, interval_s=0.2)
        # A process spinning in the server namespace: runnable in the samples it spans.
        spinner = tb.popen(tb.server_ns, [sys.executable, "-c", "import time\nend = time.time() + 1.5\n"
                                          "while time.time() < end: pass"])
        stream_to_a_client(tb, 7040, seconds=1)
        # A listener that never accepts, with a backlog of 1: handshakes beyond it overflow.
        tb.popen(tb.server_ns, [sys.executable, "-c", "import socket, time; "
                                f"s = socket.create_server(('{tb.server_addr}', 7041), backlog=1); time.sleep(30)"])
        wait_listening(tb, tb.server_ns, 7041)
        tb.run(tb.client_ns, [sys.executable, "-c", "import socket, time; socks = [socket.socket() for _ in range(8)]; "
                              "[s.setblocking(False) for s in socks]; "
                              f"[s.connect_ex(('{tb.server_addr}', 7041)) for s in socks]; time.sleep(0.5)"], check=True)
        time.sleep(0.5)
        spinner.wait(timeout=10)
        tb.stop_counters()
        description = tb.describe()
    import pandas as pd

    rows = pd.read_csv(path)
    assert len(rows) >= 5
    assert rows["uplink_tx_bytes"].iloc[-1] > 1_000_000
    assert rows["q1_10_sent_bytes"].iloc[-1] > 1_000_000
    assert rows["uplink_util"].max() > 0.8
    assert rows["listen_overflows"].iloc[-1] > 0 or rows["listen_drops"].iloc[-1] > 0
    # The eight SYNs to the listener that never accepts were counted on the way in, and the
    # SYN-ACKs of the handshakes it began on the way out; some SYNs found its queues full.
    assert rows["syns_received"].iloc[-1] >= 8 and rows["synacks_sent"].iloc[-1] >= 1
    # The clients' side, counted in their namespace while a process ran there: the eight
    # connections they opened (blank in samples with no process there to read through).
    opened = pd.to_numeric(rows["client_active_opens"], errors="coerce")
    assert opened.max() >= 8 and opened.dropna().is_monotonic_increasing
    shares = analysis.counter_metrics(rows)
    assert 0 <= shares["syn_drop_share_min"] <= shares["syn_drop_share_max"] <= 1 and shares["syn_drop_share_max"] > 0
    assert rows["accept_queue"].max() >= 1
    # The source's bytes wait in the uplink's queue unacknowledged while it sends.
    assert rows["sockets_unacked"].max() >= 1 and rows["max_rto_ticks"].max() > 0
    for part in ("sockets_probe0", "sockets_backoff", "sockets_rto_ge_1s"):
        assert (rows[part] <= rows["sockets_unacked"]).all(), part
    assert rows["server_runnable"].max() >= 1 and rows["server_processes"].max() >= 2
    assert (rows["router_cpu"] == 0).all(), "no emulator: no process in the router namespace"
    assert (rows["server_runnable"] <= rows["server_processes"]).all()
    # Stall fractions of a real interval: in [0, 1] (a little over 1 from the kernel's lazy
    # aggregation of per-CPU stall times against the sampler's clock).
    for resource in ("cpu", "io", "memory"):
        assert rows[f"host_{resource}_stall"].between(0, 1.05).all(), resource
    for cumulative in ("retrans_segs", "rto_timeouts", "loss_probes", "fast_retrans", "dsack_received", "host_queue_skips",
                       "reordering_seen", "aborts_on_timeout"):
        assert rows[cumulative].is_monotonic_increasing and rows[cumulative].iloc[0] >= 0, cumulative
    assert description["sysctls"][tb.server_ns]["net.core.somaxconn"] == "4"
    assert description["sysctls"][tb.server_ns]["net.ipv4.tcp_orphan_retries"] == "40"
    assert description["sysctls"][tb.server_ns]["net.ipv4.tcp_rto_max_ms"] == "2000"
    assert description["sysctls"][tb.client_ns]["net.ipv4.tcp_recovery"] == "0"
    assert description["sysctls"][tb.server_ns]["net.ipv4.tcp_early_retrans"] == "0"
    assert "htb" in description["qdisc"]


def test_client_counters_are_read_through_a_live_process_and_blank_without_one():
    from sojourn.testbed.counters import CLIENT_COUNTERS, client_counts

    blank = dict.fromkeys(CLIENT_COUNTERS, "")
    gone = 1 << 23  # above the kernel's largest pid_max (2^22): no such process
    assert client_counts([]) == blank and client_counts([gone]) == blank
    live = client_counts([gone, os.getpid()])
    assert set(live) == set(CLIENT_COUNTERS) and all(isinstance(v, int) and v >= 0 for v in live.values())


def test_a_testbed_process_that_exits_counts_through_the_parent_that_reaps_it():
    from sojourn.testbed.counters import Lineage, process_tree_ticks

    previous = {10: Lineage(100, 0, 1), 11: Lineage(50, 0, 10), 12: Lineage(30, 0, 10)}
    # 11 ran 5 more ticks and exited, and 10 reaped it (its reaped time grew by 11's 55) and
    # ran 2 itself; 12 ran 3; 13 started in between and ran 4.
    current = {10: Lineage(102, 55, 1), 12: Lineage(33, 0, 10), 13: Lineage(4, 0, 10)}
    assert process_tree_ticks(previous, current, {}) == (2 + 5 + 3 + 4, {})
    assert process_tree_ticks({}, current, {}) == (0, {})  # the first sample: nothing to count from
    # Gone, and not reaped by a process of the set: its last interval is not counted.
    assert process_tree_ticks({20: Lineage(40, 0, 1), 10: Lineage(100, 0, 1)}, {10: Lineage(101, 0, 1)}, {}) == (1, {})
    # A command the parent ran and reaped between two samples, never seen itself: counted whole.
    assert process_tree_ticks({10: Lineage(100, 0, 1)}, {10: Lineage(100, 7, 1)}, {}) == (7, {})


def test_a_child_gone_before_its_parent_reaps_it_is_owed_until_it_does():
    """apache2's prefork master ends many idle children at once: a sample can find them gone
    (exiting, or reaped after the master's line was read) with the master's reaped time not
    yet grown. What they had been counted is owed, not taken off the master's own work."""
    from sojourn.testbed.counters import Lineage, process_tree_ticks

    first = {10: Lineage(100, 0, 1), 11: Lineage(50, 0, 10), 12: Lineage(60, 0, 10)}
    second = {10: Lineage(101, 0, 1)}  # both children gone, neither reaped yet
    third = {10: Lineage(102, 50 + 2, 1)}  # 11 reaped: it ran 2 more before it exited
    fourth = {10: Lineage(102, 52 + 61, 1)}  # 12 reaped: 1 more
    counted, owed = [], {}
    for before, after in ((first, second), (second, third), (third, fourth)):
        ran, owed = process_tree_ticks(before, after, owed)
        counted.append(ran)
    # Which child a reaping was is not known, so the owed ticks are repaid first and the
    # children's last ones counted after; over the three intervals, the master's 2 and the
    # children's 3, and nothing left owed.
    assert counted == [1, 1, 3] and owed == {}
    # Taken off at once instead, the first interval would have read 1 - 110 ticks.


def test_foreign_cpu_counts_a_busy_loop_outside_the_testbed_and_not_one_inside(tmp_path):
    """counters.csv's host_foreign_cpu: a busy loop in the server namespace is the testbed's
    own (server_cpu), one in the host's namespace is foreign to it. Compared phase against
    phase, so whatever else this machine runs meanwhile is in both."""
    import pandas as pd

    spin = [sys.executable, "-c", "import time\nend = time.time() + 2.5\nwhile time.time() < end: pass"]
    with Testbed(TestbedConfig(prefix="sjtbf")) as tb:
        path = tmp_path / "counters.csv"
        started = time.monotonic()
        tb.start_counters(path, interval_s=0.25)
        phases = {}
        for phase, start in (("inside", lambda: tb.popen(tb.server_ns, spin)), ("outside", lambda: subprocess.Popen(spin))):
            begun = time.monotonic() - started
            start().wait(timeout=30)
            phases[phase] = (begun + 0.5, time.monotonic() - started - 0.25)  # whole samples of the loop
        tb.stop_counters()
    rows = pd.read_csv(path)
    mean = {phase: rows[rows["t_s"].between(*span)][["host_foreign_cpu", "server_cpu"]].mean()
            for phase, span in phases.items()}
    assert mean["inside"]["server_cpu"] > 0.6, mean
    assert mean["outside"]["host_foreign_cpu"] - mean["inside"]["host_foreign_cpu"] > 0.6, mean
    assert rows["host_foreign_cpu"].between(0, os.cpu_count() + 0.05).all()


def test_foreign_cpu_stays_low_while_a_testbed_process_reaps_busy_children_late(tmp_path):
    """A process in the server namespace forks busy children and reaps them only after they
    have all exited (prefork servers end idle children in bursts): the children vanish from
    the namespace before their time reaches the parent, and none of it is foreign."""
    import pandas as pd

    script = ("import os, time\nkids = []\nfor _ in range(6):\n    pid = os.fork()\n    if pid == 0:\n"
              "        end = time.time() + 1.5\n        while time.time() < end: pass\n        os._exit(0)\n"
              "    kids.append(pid)\ntime.sleep(3)\nfor pid in kids: os.waitpid(pid, 0)\ntime.sleep(1.5)\n")
    with Testbed(TestbedConfig(prefix="sjtbz")) as tb:
        path = tmp_path / "counters.csv"
        tb.start_counters(path, interval_s=0.25)
        tb.popen(tb.server_ns, [sys.executable, "-c", script]).wait(timeout=30)
        tb.stop_counters()
    rows = pd.read_csv(path)
    assert rows["server_cpu"].max() > 1.0, rows["server_cpu"].max()  # the children ran on both cores
    # The whole run's foreign CPU against what the children burned (about 3 CPU seconds):
    # counted twice or taken off the parent, it would be about that much.
    seconds = rows["t_s"].diff().iloc[1:]
    assert (rows["host_foreign_cpu"].iloc[1:] * seconds).sum() < 1.0, rows["host_foreign_cpu"].tolist()


def test_router_cpu_counts_the_emulators_time(tmp_path):
    """With the WAN emulator on, the router namespace's processes (the emulator) use CPU
    while traffic crosses it: counters.csv's router_cpu, beside server_cpu."""
    cfg = TestbedConfig(prefix="sjtbr", link_bps=100_000_000, groups=[WanGroup("g0", rtt_ms=2)])
    with Testbed(cfg) as tb:
        path = tmp_path / "counters.csv"
        tb.start_counters(path, interval_s=0.2)
        received = stream_to_a_client(tb, 7042, seconds=2)
        tb.stop_counters()
    import pandas as pd

    rows = pd.read_csv(path)
    assert received["bytes"] > 1_000_000, received
    assert rows["router_cpu"].max() > 0 and rows["router_cpu"].between(0, 2.05).all()
    # The stream's receive work runs in softirqs somewhere on the machine.
    assert rows["host_softirq"].max() > 0 and rows["host_softirq"].between(0, os.cpu_count() + 0.05).all()
    # The host's steal is a share of the machine's time, whatever the hypervisor does meanwhile.
    assert rows["host_steal"].between(0, 1).all(), rows["host_steal"].tolist()


def test_emulator_rps_steers_what_the_emulator_writes_to_every_cpu():
    """``emulator_rps``: the TUN device's receive queue hands the packets the emulator writes
    to every CPU's backlog (its rps_cpus mask), and a stream still crosses the emulator whole;
    without it the mask stays 0 (each packet received in the emulator's own write())."""
    every_cpu = (1 << os.cpu_count()) - 1
    for rps, mask in ((True, every_cpu), (False, 0)):
        cfg = TestbedConfig(prefix="sjtbs", link_bps=100_000_000, groups=[WanGroup("g0", rtt_ms=2)], emulator_rps=rps)
        with Testbed(cfg) as tb:
            shown = tb.run(tb.emulator.ns, ["cat", tb.emulator.rps_path()], capture_output=True, text=True).stdout
            received = stream_to_a_client(tb, 7044, seconds=1) if rps else None
        assert int(shown.strip().replace(",", ""), 16) == mask, shown
        assert received is None or received["bytes"] > 1_000_000, received


def test_machine_ticks_are_proc_stats_task_time_softirq_and_steal():
    from sojourn.testbed.counters import machine_ticks

    stat = "cpu  1358293 37174 1380384 7965795 17296 0 895684 18952 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n"
    ticks = machine_ticks(stat)
    assert ticks.tasks == 1358293 + 37174 + 1380384 and ticks.idle == 7965795 + 17296
    assert (ticks.softirq, ticks.steal) == (895684, 18952)
    assert ticks.total == 1358293 + 37174 + 1380384 + 7965795 + 17296 + 895684 + 18952
    with pytest.raises(ValueError):
        machine_ticks("intr 1 2 3\n")


def test_the_emulators_counters_trace_its_lateness_and_release_bursts_per_interval():
    """wan_counters.csv gives each interval the loop's delay error (late_p99_us, late_max_us)
    and the most packets it released in one turn (release_burst_max): where in a run a late
    emulator was late, and whether packets due together or a stall of the loop did it. While
    a stream crosses a delayed pipe every interval released something, and no interval's
    worst exceeds the run's (wan_summary.json)."""
    import pandas as pd

    cfg = TestbedConfig(prefix="sjtbw", link_bps=100_000_000, groups=[WanGroup("g0", rtt_ms=20)])
    with Testbed(cfg) as tb:
        received = stream_to_a_client(tb, 7043, seconds=3)
        tb.emulator.stop()
        summary = json.loads(tb.emulator.summary_path.read_text())
        rows = pd.read_csv(tb.wan_counters_path)
    assert received["bytes"] > 1_000_000, received
    down = rows[rows["direction"] == "down"]
    busy = down[down["forwarded"].diff() > 0]
    assert len(busy) >= 2, down
    assert (busy["release_burst_max"] >= 1).all() and (busy["late_max_us"] > 0).all(), busy
    assert (rows["late_p99_us"] <= rows["late_max_us"]).all()
    assert rows["late_max_us"].max() <= summary["lateness_us"]["max"] * 1.01 + 0.1, (rows, summary)
    late = summary["lateness_us"]
    assert 0 < late["mean"] <= late["max"], late


# The flood's SO_PRIORITY: none (the listener's SYN-ACKs share its FIFO, FAIR's uplink), or
# the one data band of `bands = "1024M"` (1:10), which leaves the SYN-ACKs the default class
# at the same HTB priority: a queue of their own, as SRPT's control band (000 §3.2, the
# `fair-synack-band` run of experiments/000/workloads-handshake.toml).
SHARED_FIFO, OWN_QUEUE = (None, None), ("1024M", (1 << 16) | 0x10)


@pytest.mark.parametrize("bands, flood_priority", [SHARED_FIFO, OWN_QUEUE], ids=["shared-fifo", "own-queue"])
def test_synacks_a_full_uplink_queue_drops_are_counted_past_the_queue(tmp_path, bands, flood_priority):
    """The uplink's 4-packet FIFO kept full by datagrams at three times its rate: handshakes
    begun meanwhile lose SYN-ACKs there. Those counted leaving the server but not arriving at
    the router are the summary's synacks_dropped, no more than the FIFO dropped in all. With
    the flood in a band of its own, the same flood drops only its own datagrams: no SYN-ACK
    is lost and no handshake waits for a SYN sent again."""
    with Testbed(TestbedConfig(prefix="sjtsy", queue_packets=4, bands=bands)) as tb:
        path = tmp_path / "counters.csv"
        tb.start_counters(path, interval_s=0.2)
        client = tb.client_addrs["g0"][0]
        listener = tb.popen(tb.server_ns, PROBE + ["listen", "--bind", f"{tb.server_addr}:7050", "--timeout", "8"],
                            stdout=subprocess.PIPE, text=True)
        wait_listening(tb, tb.server_ns, 7050)
        flood = tb.popen(tb.server_ns, PROBE + ["udp-send", "--source", tb.server_addr, "--target", f"{client}:7051",
                                                "--count", "9000", "--pps", "3000", "--size", "1400",
                                                *(["--priority", str(flood_priority)] if flood_priority else [])],
                         stdout=subprocess.PIPE, text=True)
        connects = probe_json(tb.popen(tb.client_ns, PROBE + ["connect", "--source", client, "--target",
                                                              f"{tb.server_addr}:7050", "--count", "30",
                                                              "--gap", "0.05", "--wait", "0.3"],
                                       stdout=subprocess.PIPE, text=True))
        probe_json(flood)
        time.sleep(0.5)
        tb.stop_counters()
        listener.kill()
    import pandas as pd

    rows = pd.read_csv(path)
    assert len(connects["connect_s"]) == 30
    summary = analysis.counter_metrics(rows)
    fifo_drops = summary["uplink_drops"]
    assert rows["synacks_sent"].iloc[-1] >= 30 and rows["synacks_delivered"].iloc[-1] >= 30
    assert rows["synacks_delivered"].is_monotonic_increasing
    if flood_priority is None:
        assert 1 <= summary["synacks_dropped"] <= fifo_drops, (summary["synacks_dropped"], fifo_drops)
        # A dropped SYN-ACK is a handshake that waited for the client's SYN to be sent again.
        assert max(connects["connect_s"]) >= 0.9
    else:
        assert rows["q1_10_dropped"].iloc[-1] > 100, "the flood did not overflow its own band"
        assert summary["synacks_dropped"] == 0 and max(connects["connect_s"]) < 0.9, (summary, connects)


# In the server namespace: three connections a listener never accepts, and one whose reader
# never reads, its writer filling the window until the kernel probes a zero window.
STALLED_SOCKETS = """
import socket, sys, time
addr = sys.argv[1]
waiting = socket.create_server((addr, 7050), backlog=8)
queued = [socket.create_connection((addr, 7050)) for _ in range(3)]
reader = socket.create_server((addr, 7051))
writer = socket.create_connection((addr, 7051))
accepted, _ = reader.accept()
writer.setblocking(False)
try:
    while True:
        writer.send(b"x" * 65536)
except BlockingIOError:
    pass
print("ready", flush=True)
time.sleep(30)
"""


def _ss(tb: Testbed, *args: str) -> list[list[str]]:
    out = tb.run(tb.server_ns, ["ss", "-tanH", *args], capture_output=True, text=True, check=True).stdout
    return [line.split() for line in out.splitlines() if line.strip()]


def test_the_socket_census_counts_what_ss_shows():
    """sockdiag's census of the server namespace (a netlink socket made there from another
    namespace) against ss(8)'s listing of the same sockets."""
    from sojourn.testbed.sockdiag import SocketDiag

    with Testbed(TestbedConfig(prefix="sjtbd")) as tb:
        helper = tb.popen(tb.server_ns, [sys.executable, "-c", STALLED_SOCKETS, tb.server_addr],
                          stdout=subprocess.PIPE, text=True)
        assert helper.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 10
        while not any("persist" in " ".join(line) for line in _ss(tb, "-o")) and time.monotonic() < deadline:
            time.sleep(0.2)  # the first zero-window probe is due an RTO after the window closed
        diag = SocketDiag(helper.pid)
        try:
            counts = diag.census()
        finally:
            diag.close()
        listing = _ss(tb, "-o")
    states = [line[0] for line in listing]
    assert counts["established"] == states.count("ESTAB") == 3 * 2 + 2
    assert counts["syn_recv"] == states.count("SYN-RECV") == 0
    assert counts["accept_queue"] == sum(int(line[1]) for line in listing if line[0] == "LISTEN") == 3
    unacked = [line for line in listing if line[0] != "LISTEN" and int(line[2]) > 0]
    assert counts["sockets_unacked"] == len(unacked) == 1
    assert counts["sockets_probe0"] == sum("persist" in " ".join(line) for line in unacked) == 1
    assert 0 < counts["max_rto_ticks"] < 100, "a loopback RTO: Linux's 200 ms floor, in 1/100 s"


@pytest.mark.parametrize("bands", [None, "1K,2K,5K,50K"], ids=["fifo", "bands"])
def test_queue_in_packets_bounds_every_queue_and_overflows_into_drops(bands):
    """000 §3.1: Linux 2.4's transmit queue held 100 packets; `queue_packets` sets that
    limit on the plain uplink and on every band. A bulk TCP flow at priority band 4
    (or the FIFO) overflows a 10-packet queue, and the queue's drop counter moves."""
    cfg = TestbedConfig(prefix="sjtbq", link_bps=10_000_000, bands=bands, queue_packets=10)
    with Testbed(cfg) as tb:
        qdiscs = tb.run(tb.server_ns, ["tc", "qdisc", "show", "dev", tb.uplink_dev], capture_output=True, text=True).stdout
        leaves = re.findall(r"qdisc pfifo \w+: parent 1:(\w+) limit 10p", qdiscs)
        assert sorted(leaves) == (["10"] if not bands else ["10", "11", "12", "13", "14", "20"]), qdiscs
        client = tb.client_addrs["g0"][0]
        sink = tb.popen(tb.client_ns, PROBE + ["sink", "--bind", f"{client}:7020", "--timeout", "3"],
                        stdout=subprocess.PIPE, text=True)
        wait_listening(tb, tb.client_ns, 7020)
        low = (1 << 16) | 0x14
        source = tb.popen(tb.server_ns, PROBE + ["source", "--target", f"{client}:7020", "--seconds", "2"]
                          + (["--priority", str(low)] if bands else []), stdout=subprocess.DEVNULL)
        source.wait(timeout=30)
        assert probe_json(sink)["bytes"] > 1_000_000
        stats_text = tb.run(tb.server_ns, ["tc", "-s", "qdisc", "show", "dev", tb.uplink_dev],
                            capture_output=True, text=True).stdout
    leaf = "10" if not bands else "14"
    block = stats_text.split(f"parent 1:{leaf} limit 10p", 1)[1]
    dropped = int(re.search(r"dropped (\d+)", block).group(1))
    assert dropped > 0, stats_text


def test_offload_keeps_every_byte_through_whole_and_cut_gso_packets():
    """With a delay-only group beside a lossy one the emulator takes GSO packets:
    the delay-only pipes hold them whole, the lossy pipes cut them into segments
    (crates/wan/src/offload.rs). 8 MB each way per group arrive byte for byte, the
    576-byte MTU group's MSS is still clamped, and the summary shows both paths.
    (Only the clients send GSO packets: the server's uplink sends single segments,
    gso_max_segs 1, so its HTB schedules packets.)"""
    groups = [WanGroup("whole", rtt_ms=10, mtu=576), WanGroup("cut", rtt_ms=10, loss=0.02)]
    size = 8_000_000
    with Testbed(TestbedConfig(prefix="sjtbo", link_bps=1_000_000_000, groups=groups)) as tb:
        transfers = []
        for i, name in enumerate(("whole", "cut")):
            client = tb.client_addrs[name][0]
            for port, sink_ns, source_ns, source, target in (
                    (7050 + 2 * i, tb.client_ns, tb.server_ns, tb.server_addr, client),
                    (7051 + 2 * i, tb.server_ns, tb.client_ns, client, tb.server_addr)):
                sink = tb.popen(sink_ns, PROBE + ["sink", "--bind", f"{target}:{port}", "--timeout", "30"],
                                stdout=subprocess.PIPE, text=True)
                wait_listening(tb, sink_ns, port)
                source = tb.popen(source_ns, PROBE + ["source", "--source", source, "--target", f"{target}:{port}",
                                                      "--bytes", str(size), "--seconds", "60"],
                                  stdout=subprocess.PIPE, text=True)
                transfers.append((name, port, source, sink))
        for name, port, source, sink in transfers:
            sent, received = probe_json(source, timeout=90), probe_json(sink, timeout=90)
            assert sent["bytes"] == received["bytes"] == size, (name, port, sent, received)
            assert sent["sha256"] == received["sha256"], (name, port)
        tb.emulator.stop()
        summary = json.loads(tb.emulator.summary_path.read_text())
    assert summary["vnet_headers"] is True
    assert summary["gso"]["whole"] > 0 and summary["gso"]["cut"] > 0, summary["gso"]
    assert summary["write_errors"] == 0
    assert summary["mss_clamped"] >= 2, "both handshakes of the 576-byte group are clamped"
    cut = [p for p in summary["pipes"] if p["group"] == "cut"]
    assert all(p["loss_drops"] > 0 for p in cut), cut
