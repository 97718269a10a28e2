"""Benchmark of the WAN emulator (`sojourn-engine wan`), run as root:
``.venv/bin/python bench/wan/bench_wan.py [--seconds 5] [--out bench/out/wan.json]``.

1. Forwarding rate: iperf3 TCP (1500-byte MTU) through the emulator with no
   delay, loss or rate, against the peer: the same testbed with the kernel
   forwarding between the namespaces (no emulator); the emulator also with
   --no-offload (single packets only). Both directions: down (server -> client,
   iperf3 -R), where the uplink sends single segments (gso_max_segs 1, so its HTB
   schedules packets), and up (client -> server), where the clients' TCP hands
   64 KiB GSO packets to the emulator when offload is on. The bottleneck uplink is
   set to 10 Gbit/s so it does not limit either.
2. Delay error at 100 ms RTT with thousands of packets in flight: UDP floods in
   both directions (iperf3 --bidir) through 50 ms each way, while TCP handshakes
   measure the RTT from outside (the kernel's SYN -> SYN-ACK sample); the
   emulator reports how late each packet left against its deadline.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from sojourn.testbed import Testbed, TestbedConfig, WanGroup
from sojourn.testbed.counters import parse_proc_net_stats

PROBE = [sys.executable, "-m", "sojourn.testbed.probe"]
FAST_LINK = 10_000_000_000


def wait_port(tb: Testbed, ns: str, port: int) -> None:
    for _ in range(200):
        if tb.run(ns, ["ss", "-tlnH", f"sport = :{port}"], capture_output=True, text=True).stdout.strip():
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listening on {port} in {ns}")


def iperf3_tcp(tb: Testbed, seconds: float, port: int, down: bool) -> float:
    """Receiver goodput of an iperf3 run, bit/s: `down` (-R) the server namespace sends."""
    tb.popen(tb.server_ns, ["iperf3", "-s", "-1", "-B", tb.server_addr, "-p", str(port)], stdout=subprocess.DEVNULL)
    wait_port(tb, tb.server_ns, port)
    out = tb.run(tb.client_ns, ["iperf3", "-c", tb.server_addr, "-p", str(port), *(["-R"] if down else []),
                                "-t", str(seconds), "-O", "1", "-B", tb.client_addrs["g0"][0], "-J"],
                 capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["end"]["sum_received"]["bits_per_second"]


PEER = "kernel forwarding (peer)"
# name, emulator, offload
FORWARDERS = ((PEER, False, True), ("sojourn-engine wan", True, True), ("sojourn-engine wan --no-offload", True, False))


def forwarding(seconds: float) -> dict:
    results = {}
    for name, emulator, offload in FORWARDERS:
        cfg = TestbedConfig(prefix="sjbw", link_bps=FAST_LINK, groups=[WanGroup("g0")], emulator=emulator,
                            emulator_offload=offload)
        with Testbed(cfg) as tb:
            down_bps = iperf3_tcp(tb, seconds, 5401, down=True)
            up_bps = iperf3_tcp(tb, seconds, 5402, down=False)
            summary = None
            if tb.emulator:
                tb.emulator.stop()
                summary = json.loads(tb.emulator.summary_path.read_text())
        results[name] = {"down_bps": down_bps, "up_bps": up_bps,
                         "gso_packets": summary["gso"] if summary else None}
    return results


def delay_error(seconds: float, pps_each_way: int) -> dict:
    cfg = TestbedConfig(prefix="sjbw", link_bps=FAST_LINK, groups=[WanGroup("g0", rtt_ms=100)])
    with Testbed(cfg) as tb:
        tb.popen(tb.server_ns, PROBE + ["listen", "--bind", f"{tb.server_addr}:7100", "--timeout", "60"])
        tb.popen(tb.server_ns, ["iperf3", "-s", "-1", "-B", tb.server_addr, "-p", "5402"], stdout=subprocess.DEVNULL)
        wait_port(tb, tb.server_ns, 7100)
        wait_port(tb, tb.server_ns, 5402)
        size = 200
        flood = tb.popen(tb.client_ns, ["iperf3", "-c", tb.server_addr, "-p", "5402", "-u", "--bidir",
                                        "-b", str(pps_each_way * size * 8), "-l", str(size), "-t", str(seconds + 2),
                                        "-B", tb.client_addrs["g0"][0], "-J"], stdout=subprocess.PIPE, text=True)
        time.sleep(1.5)
        probe = tb.run(tb.client_ns, PROBE + ["connect", "--source", tb.client_addrs["g0"][0], "--target",
                                              f"{tb.server_addr}:7100", "--count", str(int(seconds * 8)),
                                              "--gap", "0.02"], capture_output=True, text=True, check=True)
        flood_out, _ = flood.communicate(timeout=seconds + 30)
        tun = json.loads(tb.run(tb.router_ns, ["ip", "-s", "-j", "link", "show", "dev", tb.config.dev("t")],
                                capture_output=True, text=True, check=True).stdout)[0]["stats64"]
        rcvbuf_errors = sum(
            parse_proc_net_stats(tb.run(ns, ["cat", "/proc/net/snmp"], capture_output=True, text=True).stdout)
            .get("Udp.RcvbufErrors", 0) for ns in (tb.server_ns, tb.client_ns))
        tb.emulator.stop()
        summary = json.loads(tb.emulator.summary_path.read_text())
    rtt_error_ms = np.array(json.loads(probe.stdout)["handshake_rtt_s"][1:]) * 1e3 - 100.0
    flood_end = json.loads(flood_out)["end"]
    return {
        "pps_each_way_offered": pps_each_way,
        "in_flight_peak_packets": sum(p["in_flight_peak"] for p in summary["pipes"]),
        "packets_released": summary["lateness_us"]["count"],
        "release_lateness_us": summary["lateness_us"],
        "handshake_rtt_error_ms": {
            "count": int(rtt_error_ms.size),
            "p50": float(np.percentile(rtt_error_ms, 50)),
            "p99": float(np.percentile(rtt_error_ms, 99)),
            "max": float(rtt_error_ms.max()),
        },
        "udp_lost_percent": {k: flood_end[k].get("lost_percent") for k in flood_end if k.startswith("sum")
                             and isinstance(flood_end[k], dict) and "lost_percent" in flood_end[k]},
        # Packets the kernel could not queue to the emulator (TUN queue full: the emulator fell behind).
        "tun_queue_drops": tun["tx"]["dropped"],
        "emulator_write_errors": summary["write_errors"],
        # Datagrams the iperf3 receivers' sockets dropped (the receivers fell behind, not the emulator).
        "udp_receiver_buffer_drops": rcvbuf_errors,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3, help="forwarding rounds (each runs every forwarder once)")
    parser.add_argument("--pps", type=int, default=60_000, help="UDP packets per second each way in the delay test")
    parser.add_argument("--out", default="bench/out/wan.json")
    args = parser.parse_args()
    rounds = [forwarding(args.seconds) for _ in range(args.rounds)]
    results = {"forwarding_rounds": rounds, "delay_100ms": delay_error(args.seconds, args.pps)}
    ratio_rounds = [{f"{name} / kernel {way}": r[f"{way}_bps"] / fwd[PEER][f"{way}_bps"]
                     for name, r in fwd.items() if name != PEER for way in ("down", "up")}
                    for fwd in rounds]
    results["forwarding_ratio_to_kernel_rounds"] = ratio_rounds
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))
    for i, (fwd, ratios) in enumerate(zip(rounds, ratio_rounds)):
        for name, r in fwd.items():
            print(f"round {i}  {name:32s} down {r['down_bps'] / 1e9:6.3f}  up {r['up_bps'] / 1e9:6.3f} Gbit/s TCP goodput")
        for name, ratio in ratios.items():
            print(f"round {i}  {name:45s} {ratio:6.3f}")
    d = results["delay_100ms"]
    lat, rtt = d["release_lateness_us"], d["handshake_rtt_error_ms"]
    print(f"delay 100ms in flight peak {d['in_flight_peak_packets']} packets, {d['packets_released']} released")
    print(f"delay 100ms release lateness  p50 {lat['p50']:.1f} us  p99 {lat['p99']:.1f} us  max {lat['max']:.1f} us")
    print(f"delay 100ms UDP loss % {d['udp_lost_percent']}: TUN queue drops {d['tun_queue_drops']}, "
          f"receiver socket drops {d['udp_receiver_buffer_drops']}")
    print(f"delay 100ms handshake RTT error p50 {rtt['p50']:.3f} ms  p99 {rtt['p99']:.3f} ms  max {rtt['max']:.3f} ms")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
