"""``sojourn testbed up|down|status|host``: the testbed by hand.

``up`` builds the testbed and leaves it running (the emulator and helper
processes keep running in the namespaces); ``down`` removes everything with the
prefix, including leftovers of a killed run; ``status`` shows what exists; ``host``
measures the machine as every repetition's host.json records it.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import fields

from sojourn.argtypes import positive_int

from . import host, sysnet
from .config import CONGESTION_CONTROLS, ConfigError, TcpKnobs, TestbedConfig, WanGroup
from .topology import Testbed

GROUP_FIELDS = {f.name: f.type for f in fields(WanGroup)}


def parse_group(text: str) -> WanGroup:
    """``name=g0,clients=2,rtt_ms=50,loss=0.03,loss_model=two-state`` -> WanGroup."""
    values: dict[str, object] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or key not in GROUP_FIELDS:
            raise argparse.ArgumentTypeError(
                f"--group item {item!r}: expected key=value with key one of {', '.join(GROUP_FIELDS)}")
        kind = GROUP_FIELDS[key]
        try:
            if "bool" in kind:
                values[key] = value.lower() in ("1", "true", "yes", "on")
            elif "int" in kind:
                values[key] = None if value.lower() == "none" else int(float(value))
            elif "float" in kind:
                values[key] = float(value)
            else:
                values[key] = value
        except ValueError:
            raise argparse.ArgumentTypeError(f"--group {key}={value!r}: not a number") from None
    values.setdefault("name", "g0")
    try:
        return WanGroup(**values)
    except ConfigError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


RATE = re.compile(r"(?P<number>\+?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?)(?P<prefix>[kmg])?(?:bit/s|bit)?", re.IGNORECASE)
RATE_PREFIX = {None: 1.0, "k": 1e3, "m": 1e6, "g": 1e9}


def parse_rate(text: str) -> int:
    """Whole bits per second from ``NUMBER[k|m|g][bit|bit/s]`` (case-insensitive; k, m,
    g powers of 1000): ``10mbit``, ``10M``, ``1.5gbit``, ``2000000``. The grammar of
    sojourn_sched::rate::parse_rate (docs/formats.md "Rates"); ``bps`` is refused as
    ambiguous (tc reads it as bytes/s)."""
    match = RATE.fullmatch(text.strip())
    bps = float(match["number"]) * RATE_PREFIX[(match["prefix"] or "").lower() or None] if match else math.nan
    if not (math.isfinite(bps) and bps >= 1):
        raise argparse.ArgumentTypeError(f"rate {text!r}: expected bits per second as NUMBER[k|m|g][bit], "
                                         "e.g. 10mbit, 10M, 1.5gbit, 800kbit or 2000000")
    return round(bps)


def register(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="testbed_command", metavar="ACTION", required=True)
    up = sub.add_parser("up", help="build the testbed and leave it running",
                        description="Build the namespaces, the bottleneck uplink, the WAN emulator and TCP knobs.")
    up.add_argument("--prefix", default="sjtb", help="name prefix of namespaces and interfaces (default sjtb)")
    up.add_argument("--link", type=parse_rate, default=10_000_000, help="server uplink rate in bit/s (default 10M)")
    up.add_argument("--queue-bytes", type=int, help="uplink queue limit in bytes, per band with --bands (default 1000 packets)")
    up.add_argument("--queue-packets", type=int, help="uplink queue limit in packets, per band with --bands (000 §3.1: 100)")
    up.add_argument("--bands", help="size cutoffs of the priority bands, e.g. 1K,2K,5K,50K (default: one FIFO)")
    up.add_argument("--group", action="append", type=parse_group, metavar="SPEC",
                    help="a client group, e.g. name=g0,clients=2,rtt_ms=50,loss=0.03,loss_model=two-state,"
                         "rate_bps=1000000,mtu=1500 (repeatable; default one client, no WAN conditions)")
    up.add_argument("--congestion", choices=CONGESTION_CONTROLS, default="reno",
                    help="congestion control of both namespaces (default reno, the papers' NewReno)")
    up.add_argument("--no-sack", action="store_true", help="disable SACK")
    up.add_argument("--no-timestamps", action="store_true", help="disable TCP timestamps (RFC 7323): MSS 1460, not 1448")
    up.add_argument("--syncookies", action="store_true", help="enable SYN cookies")
    up.add_argument("--syn-backlog", type=int, default=512, help="tcp_max_syn_backlog (default 512)")
    up.add_argument("--somaxconn", type=int, default=512, help="accept queue limit (default 512)")
    up.add_argument("--initcwnd", type=int, help="initial congestion window (route metric)")
    up.add_argument("--cwnd-clamp", type=int, help="congestion window clamp (locked route metric)")
    up.add_argument("--rto-min-ms", type=int, help="minimum RTO in ms (route metric)")
    up.add_argument("--rto-max-ms", type=int,
                    help="the most backoff may take the RTO to, in ms (net.ipv4.tcp_rto_max_ms, 1000..120000)")
    up.add_argument("--no-rack-tlp", action="store_true",
                    help="no RACK loss detection or tail loss probe (RFC 8985), as in the papers' kernels")
    up.add_argument("--emulator", choices=("auto", "on", "off"), default="auto",
                    help="run the WAN emulator: auto = when a group has WAN conditions")
    up.add_argument("--seed", type=int, default=1, help="emulator random seed")
    up.add_argument("--workdir", help="where the emulator's config and counters go (default: a temp dir)")
    up.set_defaults(func=cmd_up)
    down = sub.add_parser("down", help="remove the testbed (and leftovers of killed runs)")
    down.add_argument("--prefix", default="sjtb")
    down.set_defaults(func=cmd_down)
    status = sub.add_parser("status", help="show namespaces, addresses, qdiscs and processes of the testbed")
    status.add_argument("--prefix", default="sjtb")
    status.set_defaults(func=cmd_status)
    machine = sub.add_parser("host", help="the machine's identity and speed, as each repetition's host.json records "
                                          "it (one JSON line per measurement)",
                             description="The machine's boot id, processor and kernel, and the CPU time of fixed work "
                                         "(loopback TCP round trips, an interpreter loop; the median of --trials each), "
                                         "as sojourn.testbed.host measures it before every repetition. --repeat "
                                         "measures again, --every seconds apart: the spread is the measure's own noise "
                                         "here.")
    machine.add_argument("--repeat", type=positive_int, default=1, metavar="N", help="measurements (default 1)")
    machine.add_argument("--every", type=float, default=0.0, metavar="S",
                         help="seconds between measurements (default 0)")
    machine.add_argument("--trials", type=positive_int, default=host.TRIALS, metavar="N",
                         help=f"trials of each piece of fixed work per measurement (default: as host.json, {host.TRIALS})")
    machine.set_defaults(func=cmd_host)


def cmd_up(args: argparse.Namespace) -> int:
    try:
        tcp = TcpKnobs(congestion=args.congestion, sack=not args.no_sack, timestamps=not args.no_timestamps, syncookies=args.syncookies,
                       syn_backlog=args.syn_backlog, somaxconn=args.somaxconn, initcwnd=args.initcwnd,
                       cwnd_clamp=args.cwnd_clamp, rto_min_ms=args.rto_min_ms,
                       rto_max_ms=args.rto_max_ms, rack_tlp=not args.no_rack_tlp)
        cfg = TestbedConfig(prefix=args.prefix, link_bps=args.link, queue_bytes=args.queue_bytes,
                            queue_packets=args.queue_packets, bands=args.bands,
                            groups=tuple(args.group or [WanGroup(name="g0")]), tcp=tcp,
                            emulator={"auto": None, "on": True, "off": False}[args.emulator], seed=args.seed)
        tb = Testbed(cfg, workdir=args.workdir, outlive_owner=True)
        tb.up()
    except (ConfigError, PermissionError, sysnet.NetError, FileNotFoundError) as err:
        print(f"sojourn testbed up: {err}", file=sys.stderr)
        if isinstance(err, sysnet.NetError):
            sysnet.remove_prefix(args.prefix)
        return 1
    print(json.dumps({"server_ns": tb.server_ns, "server_addr": tb.server_addr, "client_ns": tb.client_ns,
                      "client_addrs": tb.client_addrs, "router_ns": tb.router_ns,
                      "wan_counters": str(tb.wan_counters_path) if tb.wan_counters_path else None}, indent=2))
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    try:
        sysnet.require_root()
    except PermissionError as err:
        print(f"sojourn testbed down: {err}", file=sys.stderr)
        return 1
    removed = sysnet.remove_prefix(args.prefix)
    print("\n".join(removed) if removed else f"nothing with prefix {args.prefix}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    names = sysnet.namespaces_with_prefix(args.prefix)
    if not names:
        print(f"no testbed with prefix {args.prefix}")
        return 1
    owner = sysnet.dead_owner(args.prefix)
    if owner:
        print(f"leftovers of a run that died: pid {owner.get('pid')} ({owner.get('argv') or 'unknown command'}) is "
              f"gone; `sojourn testbed down --prefix {args.prefix}` or the next run with this prefix removes them")
    for ns in names:
        print(f"== {ns} (pids {' '.join(map(str, sysnet.ns_pids(ns))) or '-'})")
        print(sysnet.ip(ns, "-br", "addr", "show").rstrip())
        if ns.endswith("-srv"):
            print(sysnet.tc(ns, "-s", "qdisc", "show", "dev", f"{args.prefix}s", check=False).rstrip())
    return 0


def cmd_host(args: argparse.Namespace) -> int:
    import time

    for n in range(args.repeat):
        if n and args.every > 0:
            time.sleep(args.every)
        speed = host.measure_speed(args.trials)
        print(json.dumps(host.describe(speed=speed) | {"t": round(time.time(), 3)}), flush=True)
    return 0
