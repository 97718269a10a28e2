"""Testbed configuration, the emulator's config document, counter parsers and the
`sojourn testbed` argument parsing: pure code, no root needed."""

from __future__ import annotations

import argparse
import subprocess

import pytest
import tomli_w

from sojourn import cli
from sojourn.engine import engine_path
from sojourn.testbed import ConfigError, TcpKnobs, TestbedConfig, WanGroup
from sojourn.testbed.cli import parse_group, parse_rate
from sojourn.testbed.config import parse_bands
from sojourn.testbed.cgroups import pressure_stall_us
from sojourn.testbed.counters import parse_proc_net_stats, tx_bytes
from sojourn.testbed import handshakes, sockdiag
from sojourn.testbed.emulator import emulator_config
from sojourn.testbed.uplink import LeafQueue, band_of, uplink_commands


@pytest.mark.parametrize("kwargs, message", [
    ({"prefix": "SJ"}, "prefix='SJ'"),
    ({"prefix": "averylongprefix"}, "15 characters"),
    ({"link_bps": 10}, "link_bps=10"),
    ({"bands": "1K,x"}, "'x' is not a size"),
    ({"bands": "5K,1K"}, "strictly increasing"),
    ({"queue_bytes": 100_000, "queue_packets": 100}, "give one queue limit"),
    ({"queue_packets": 0}, "queue_packets=0"),
    ({"link_bps": 50_000, "bands": "1K,2K,5K,50K"}, "too low for 6 leaves"),
    ({"groups": [WanGroup("a"), WanGroup("a")]}, "repeat"),
    ({"groups": []}, "0 groups"),
    ({"emulator": False, "groups": [WanGroup("far", rtt_ms=50)]}, "only the emulator provides"),
])
def test_bad_testbed_values_are_named(kwargs, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        TestbedConfig(**kwargs)


@pytest.mark.parametrize("kwargs, message", [
    ({"loss": 1.0}, "loss=1.0"),
    ({"mtu": 200}, "mtu=200"),
    ({"loss_model": "gilbert"}, "bernoulli, two-state"),
    ({"loss": 0.5, "loss_model": "two-state", "conditional_loss": 0.35}, "conditional loss >= overall"),
    ({"clients": 0}, "clients=0"),
])
def test_bad_group_values_are_named(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        WanGroup("g", **kwargs)


def test_the_uplink_is_one_htb_builder_fifo_without_cutoffs_bands_with_them():
    """The classes of testbed/uplink.py are the ones crates/server/src/qdisc.rs's
    so_priority names: band i = 1:(0x10 + i), default 1:20."""
    fifo = [" ".join(c) for c in uplink_commands("eth9", 10_000_000, LeafQueue.of(None, None), None)]
    assert fifo == [
        "qdisc add dev eth9 root handle 1: htb default 10",
        "class add dev eth9 parent 1: classid 1:1 htb rate 10000000bit ceil 10000000bit burst 6250 cburst 6250",
        "class add dev eth9 parent 1:1 classid 1:10 htb rate 10000000bit ceil 10000000bit burst 6250 cburst 6250 prio 0 quantum 1514",
        "qdisc add dev eth9 parent 1:10 handle 10: pfifo limit 1000",
    ]
    bands = [" ".join(c) for c in uplink_commands("eth9", 10_000_000, LeafQueue.of(30_000, None), [1024, 2048, 5120, 51200])]
    assert bands[0] == "qdisc add dev eth9 root handle 1: htb default 20"
    assert bands[2] == "class add dev eth9 parent 1:1 classid 1:10 htb rate 8000bit ceil 10000000bit burst 6250 cburst 6250 prio 0 quantum 1514"
    assert bands[3] == "qdisc add dev eth9 parent 1:10 handle 10: bfifo limit 30000"
    assert bands[10] == "class add dev eth9 parent 1:1 classid 1:14 htb rate 8000bit ceil 10000000bit burst 6250 cburst 6250 prio 4 quantum 1514"
    assert bands[12:] == [
        "class add dev eth9 parent 1:1 classid 1:20 htb rate 8000bit ceil 10000000bit burst 6250 cburst 6250 prio 0 quantum 1514",
        "qdisc add dev eth9 parent 1:20 handle 20: bfifo limit 30000",
    ]
    assert " burst 1600 " in " ".join(uplink_commands("d", 1_000_000, LeafQueue.of(None, 100), None)[1]), "one frame at least"
    assert LeafQueue.of(None, 100) == LeafQueue("pfifo", 100)
    with pytest.raises(ValueError, match="give one queue limit, not both"):
        LeafQueue.of(30_000, 100)
    assert [band_of(c, [1024]) for c in ("1:10", "1:11", "1:20")] == [0, 1, None]
    assert band_of("1:10", None) is None, "the plain FIFO carries no band"


def test_bad_tcp_knobs_are_named():
    with pytest.raises(ConfigError, match="congestion='vegas'"):
        TcpKnobs(congestion="vegas")
    with pytest.raises(ConfigError, match="cwnd_clamp=0"):
        TcpKnobs(cwnd_clamp=0)
    with pytest.raises(ConfigError, match="orphan_retries=256"):
        TcpKnobs(orphan_retries=256)
    with pytest.raises(ConfigError, match=r"rto_max_ms=999, accepted None or 1000\.\.120000"):
        TcpKnobs(rto_max_ms=999)


def test_addresses_names_and_knobs():
    cfg = TestbedConfig(prefix="sjx", groups=[WanGroup("a", clients=2), WanGroup("b", rtt_ms=50)])
    assert cfg.group_addrs() == {"a": ["10.78.0.1", "10.78.0.2"], "b": ["10.78.1.1"]}
    assert (cfg.ns("srv"), cfg.dev("t")) == ("sjx-srv", "sjxt")
    assert cfg.uses_emulator and not TestbedConfig().uses_emulator
    small = TestbedConfig(prefix="sjx", groups=[WanGroup("a"), WanGroup("b", mtu=576)])
    assert not small.uses_emulator and [g.route_metrics() for g in small.groups] == [
        [], ["mtu", "lock", "576", "advmss", "536"]]
    assert [str(net) for net in small.group_nets()] == ["10.78.0.0/24", "10.78.1.0/24"]
    assert parse_bands("1K,2K,5K,50K") == [1024, 2048, 5120, 51200]
    knobs = TcpKnobs(initcwnd=4, cwnd_clamp=10, rto_min_ms=50, sack=False)
    assert knobs.route_metrics() == ["initcwnd", "4", "cwnd", "lock", "10", "rto_min", "50ms"]
    assert knobs.sysctls()["net.ipv4.tcp_sack"] == "0"
    assert knobs.sysctls()["net.ipv4.tcp_timestamps"] == "1"
    assert TcpKnobs(timestamps=False).sysctls()["net.ipv4.tcp_timestamps"] == "0"
    assert knobs.sysctls()["net.core.somaxconn"] == "512"
    # Linux's own orphan retries unless set.
    assert "net.ipv4.tcp_orphan_retries" not in knobs.sysctls()
    assert TcpKnobs(orphan_retries=40).sysctls()["net.ipv4.tcp_orphan_retries"] == "40"
    # The RTO's backoff cap only when asked for: the sysctl is missing before Linux 6.15.
    assert "net.ipv4.tcp_rto_max_ms" not in knobs.sysctls()
    assert TcpKnobs(rto_max_ms=1000).sysctls()["net.ipv4.tcp_rto_max_ms"] == "1000"
    # RACK-TLP is Linux's own unless turned off, when both of its sysctls go to 0.
    assert "net.ipv4.tcp_recovery" not in knobs.sysctls()
    assert {k: v for k, v in TcpKnobs(rack_tlp=False).sysctls().items() if k.endswith(("recovery", "early_retrans"))} \
        == {"net.ipv4.tcp_recovery": "0", "net.ipv4.tcp_early_retrans": "0"}


def test_emulator_document_and_the_engine_agree_on_keys(tmp_path):
    cfg = TestbedConfig(prefix="sjx", groups=[
        WanGroup("near"), WanGroup("far", rtt_ms=150, loss=0.03, loss_model="two-state", rate_bps=2_000_000, mtu=576)])
    doc = emulator_config(cfg, cfg.group_addrs(), tmp_path)
    assert doc["realtime"] > 0 and doc["counters"] == str(tmp_path / "wan_counters.csv")
    far = doc["groups"][1]
    assert far["down"]["delay-ms"] == 75 and far["up"]["delay-ms"] == 75
    assert far["mtu"] == 576 and far["addrs"] == ["10.78.1.1"]
    # The engine reads the same keys (the run's options too: an unknown one would be named
    # first): an out-of-range value is named before any device is touched.
    bad = tmp_path / "bad.toml"
    bad.write_text(tomli_w.dumps(doc | {"groups": [far | {"mtu": 100}]}))
    done = subprocess.run([str(engine_path()), "wan", "--config", str(bad)], capture_output=True, text=True)
    assert done.returncode != 0 and "mtu 100" in done.stderr


def diag_message(state: int, timer: int = 0, rqueue: int = 0, wqueue: int = 0,
                 info: tuple[int, int, int] | None = None) -> bytes:
    """An inet_diag_msg as the kernel writes it, with a tcp_info head (retransmits, probes,
    rto in µs) when given."""
    message = sockdiag.DIAG_MSG.pack(2, state, timer, 0, 0, rqueue, wqueue, 0, 0)
    if info is not None:
        retransmits, probes, rto_us = info
        body = sockdiag.TCP_INFO_HEAD.pack(state, 0, retransmits, probes, 0, 0, 0, 0, rto_us) + bytes(96)
        message += sockdiag.RTATTR.pack(sockdiag.RTATTR.size + len(body), sockdiag.INET_DIAG_INFO) + body
    return message


def test_the_socket_census_from_sock_diag_messages():
    # A listener with 3 waiting to be accepted, one socket in SYN-RECV (a request socket, no
    # tcp_info); an established socket with bytes unacked on the zero-window probe timer after
    # 3 unanswered probes, RTO 0.2 s; one in FIN-WAIT-1 in its second RTO backoff, RTO 3.2 s;
    # one established with nothing unacked.
    messages = [diag_message(sockdiag.TCP_LISTEN, rqueue=3, wqueue=512),
                diag_message(sockdiag.TCP_SYN_RECV),
                diag_message(sockdiag.TCP_ESTABLISHED, timer=4, wqueue=0x5A8, info=(0, 3, 200_000)),
                diag_message(4, timer=1, wqueue=0x10, info=(2, 0, 3_200_000)),
                diag_message(sockdiag.TCP_ESTABLISHED, info=(0, 0, 200_000))]
    assert sockdiag.census(messages, clock_ticks=100) == {
        "established": 2, "syn_recv": 1, "accept_queue": 3, "sockets_unacked": 2, "sockets_probe0": 1,
        "sockets_backoff": 2, "sockets_rto_ge_1s": 1, "max_rto_ticks": 320}
    # A dump read: two messages, then its end; a kernel error is raised, not skipped.
    header = sockdiag.NLMSG
    read = b"".join(header.pack(header.size + len(m), sockdiag.SOCK_DIAG_BY_FAMILY, 2, 1, 0) + m for m in messages[:2])
    done = header.pack(header.size + 4, sockdiag.NLMSG_DONE, 2, 1, 0) + bytes(4)
    assert list(sockdiag.replies(read + done)) == [*messages[:2], None]
    error = header.pack(header.size + 4, sockdiag.NLMSG_ERROR, 0, 1, 0) + (-2).to_bytes(4, "little", signed=True)
    with pytest.raises(OSError, match="No such file"):
        list(sockdiag.replies(error))


def test_proc_parsers():
    netstat = "TcpExt: SyncookiesSent ListenOverflows ListenDrops\nTcpExt: 0 7 9\nIpExt: InNoRoutes\nIpExt: 3\n"
    assert parse_proc_net_stats(netstat) == {"TcpExt.SyncookiesSent": 0, "TcpExt.ListenOverflows": 7,
                                             "TcpExt.ListenDrops": 9, "IpExt.InNoRoutes": 3}
    dev = ("Inter-|   Receive                            |  Transmit\n"
           " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets\n"
           "  sjxs: 100 2 0 0 0 0 0 0 5000 7 0 0 0 0 0 0\n")
    assert tx_bytes(dev, "sjxs") == 5000
    # /proc/pressure/io as Documentation/accounting/psi.rst prints it; a kernel without PSI
    # has no file (an empty read).
    psi = ("some avg10=0.63 avg60=1.66 avg300=0.68 total=580954362\n"
           "full avg10=0.59 avg60=1.34 avg300=0.54 total=412878206\n")
    assert pressure_stall_us(psi) == 580954362
    assert pressure_stall_us("") == 0


def test_cli_parsing():
    group = parse_group("name=far,clients=3,rtt_ms=75,loss=0.03,loss_model=two-state,rate_bps=1e6,reorder=yes")
    assert (group.name, group.clients, group.rtt_ms, group.rate_bps, group.reorder) == ("far", 3, 75.0, 1_000_000, True)
    with pytest.raises(argparse.ArgumentTypeError, match="key one of"):
        parse_group("nme=x")
    with pytest.raises(argparse.ArgumentTypeError, match="mtu=100"):
        parse_group("mtu=100")
    # The cases of crates/sched/src/rate.rs's tests: one grammar in Rust and Python.
    for text, bps in [("10mbit", 10**7), ("10Mbit", 10**7), ("1.5gbit", 15 * 10**8), ("10M", 10**7), ("800kbit/s", 8 * 10**5),
                      ("1Gbit/s", 10**9), ("2000000", 2 * 10**6), ("2e3", 2000), ("8bit", 8), (" 10mbit ", 10**7)]:
        assert parse_rate(text) == bps, text
    for bad in ["", "fast", "-1mbit", "0", "10mbps", "10 m bit", "mbit", "inf", "nan", "1e400", "10x", "1_000"]:
        with pytest.raises(argparse.ArgumentTypeError, match="expected bits per second as NUMBER"):
            parse_rate(bad)


def test_testbed_help(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["testbed", "up", "--help"])
    assert exit_info.value.code == 0
    assert "--group" in capsys.readouterr().out


def test_handshake_counts_are_read_from_the_mirred_actions():
    # `tc -s -j actions list action mirred` of a namespace counting (abridged from iproute2 6.1).
    listed = ('[{"total acts":2},{"actions":[{"order":0,"kind":"mirred","index":101,"stats":{"bytes":180,"packets":3}},'
              '{"order":1,"kind":"mirred","index":102,"stats":{"bytes":222,"packets":2}}]}]')
    assert handshakes.parse_counts(listed) == {"syns_received": 3, "synacks_sent": 2}
    # A namespace that does not count (or another program's mirred actions only) gives no columns.
    assert handshakes.parse_counts("") == {}
    assert handshakes.parse_counts('[{"total acts":1},{"actions":[{"index":7,"stats":{"packets":9}}]}]') == {}
    # Incoming SYNs without ACK on ingress, outgoing SYN-ACKs on egress, both into the sink.
    ingress, egress = (" ".join(command) for command in handshakes.handshake_commands("srv0s")[1:])
    assert ingress.startswith("filter add dev srv0s ingress") and "match u8 0x02 0x12 at 33" in ingress
    assert egress.startswith("filter add dev srv0s egress") and "match u8 0x12 0x12 at 33" in egress
    assert ingress.endswith(f"mirror dev {handshakes.SINK_DEV} index {handshakes.SYN_ACTION}")
    # The router's namespace counts the SYN-ACKs arriving past the uplink's queues.
    (delivered,) = (" ".join(command) for command in handshakes.delivered_commands("srv0sr")[1:])
    assert delivered.startswith("filter add dev srv0sr ingress") and "match u8 0x12 0x12 at 33" in delivered
    assert delivered.endswith(f"index {handshakes.SYNACK_DELIVERED_ACTION}")
    assert handshakes.parse_counts('[{"total acts":1},{"actions":[{"index":103,"stats":{"packets":5}}]}]') == {
        "synacks_delivered": 5}
