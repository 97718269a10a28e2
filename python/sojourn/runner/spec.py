"""Experiment specs (TOML): schema, strict validation, variants × sweep × repetitions.

Guarantees: :func:`load_spec` either returns an :class:`Experiment` whose every run has
a complete, validated configuration (defaults filled in), or raises :class:`SpecError`
naming the offending key (dotted path) and what is accepted: unknown keys, wrong
types, values out of range and impossible combinations are all rejected before anything
starts. The schema, with each key's meaning, is :data:`SCHEMA`; docs/experiments.md
shows it with examples.

A spec has base sections (``server``, ``network``, ``workload``, ``collect``);
``[variants.<name>]`` tables override any of their keys (one run each, side by side);
``[sweep]`` varies one parameter over a list of values (one run per value and variant);
``repetitions`` repeats each run.
"""

from __future__ import annotations

import copy
import json
import math
import re
import shutil
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import tomli_w

from sojourn import papers, servers
from sojourn.runner import layout
from sojourn.runner.plan import SPEC_KEYS, RunPlan, plan_of
from sojourn.testbed.config import ConfigError
from sojourn.testbed.cpu import parse_cpu_list

MODELS = ("wc98", "nasa", "surge", "specweb99")
PROFILES = tuple(f"W{i}" for i in range(1, 11))
CONGESTION = ("reno", "cubic", "bbr")
LOSS_MODELS = ("bernoulli", "two-state")
LOAD_MODES = ("open", "sessions", "closed", "capacity")
DISPATCH_POLICIES = ("fifo", "rr", "edf", "wfs", "dwfs")
STAGE_ORDERS = ("deadline", "class", "arrival")  # sched::dispatch::StageOrder
# serve --admission NAME[:KEY=VALUE,...] (crates/sched/src/admission; docs/server.md).


@dataclass(frozen=True)
class Key:
    """One leaf of the schema: accepted Python types, default, optional check, meaning."""

    types: tuple[type, ...]
    default: Any
    doc: str
    choices: tuple | None = None
    minimum: float | None = None
    maximum: float | None = None


def _k(types, default, doc, **kw) -> Key:
    return Key(types if isinstance(types, tuple) else (types,), default, doc, **kw)


NUMBER = (int, float)
GROUP_SCHEMA: dict[str, Key] = {
    "name": _k(str, "wan", "group name (addresses and counters are labelled with it)"),
    "addresses": _k(int, 1, "client source addresses in this group; trace client c uses address c mod (all addresses)",
                    minimum=1, maximum=250),
    "rtt_ms": _k(NUMBER, 0.0, "round-trip propagation delay added by the emulator (000 Table 2 (B))", minimum=0, maximum=10_000),
    "jitter_ms": _k(NUMBER, 0.0, "delay jitter (order kept)", minimum=0, maximum=10_000),
    "loss": _k(NUMBER, 0.0, "packet loss probability per direction (000 Table 2 (C), 002 §3.4)", minimum=0, maximum=0.99),
    "loss_model": _k(str, "bernoulli", "bernoulli, or two-state (dependent loss, 002 §3.4 Table 1)", choices=LOSS_MODELS),
    "mtu": _k(int, 1500, "link MTU in bytes (000 Table 2 (I))", minimum=536, maximum=1500),
}

# The stage pool's configuration (`serve --stages`, docs/dwfs.md), checked here so a bad
# key is named before anything starts; series_csv is the runner's (the run directory).
STAGE_SCHEMA: dict[str, Key] = {
    "name": _k(str, None, "stage name: requests for /stage/<name>/... go to it"),
    "processing_ms": _k(NUMBER, None, "CPU time one request of the stage costs", minimum=0.001),
}
CLASS_SCHEMA: dict[str, Key] = {
    "name": _k(str, None, "class name; without networks, the network group of the same name supplies its clients"),
    "timeout_ms": _k(NUMBER, None, "the class's delay bound (003 §5.2)", minimum=0.001),
    "networks": _k(list, [], "client addresses/CIDRs of the class (default: its network group's addresses)"),
}
# The stage pool's default classes (docs/dwfs.md), from sojourn/papers.toml: 003 §5.2's
# classes with their timeouts of 10, 15, 20 s x 1/100.
DEFAULT_CLASSES = tuple({"name": name, "timeout_ms": timeout_s * 10}
                        for name, timeout_s in zip(papers.sessions()["class_names"], papers.sessions()["class_timeouts_s"]))
STAGES_SCHEMA: dict[str, Key] = {
    "policy": _k(str, "dwfs", "dispatch policy of the stage pool", choices=DISPATCH_POLICIES),
    "stage_order": _k(str, "deadline", "dwfs's order within a stage: earliest deadline, shortest timeout's class "
                                       "first, or oldest first (003 §5.2 does not say)", choices=STAGE_ORDERS),
    "workers": _k(int, 1, "CPU worker threads of the stage pool", minimum=1, maximum=256),
    "weights": _k(list, [], "rr / wfs static weights, one per stage"),
    "transitions": _k(list, [], "stage transition matrix (default 003 Fig. 5 for MM, CO, SR, BR)"),
    "series_interval_ms": _k(NUMBER, 1000.0, "stage series sampling interval", minimum=10),
    "stage": _k(list, [], "[[stage]] tables (name, processing_ms); default MM, CO, SR, BR at 5, 10, 15, 20 ms"),
    "class": _k(list, [], "[[class]] tables in priority order (name, timeout_ms, networks); default gold, silver, "
                          "bronze at 100, 150, 200 ms"),
}

SCHEMA: dict[str, Any] = {
    "name": _k(str, None, "experiment name: results go to results/<name>/"),
    "description": _k(str, "", "one line shown at the top of the report"),
    "repetitions": _k(int, 1, "repetitions of every run (for the 90% confidence intervals of 002 §3.5)", minimum=1, maximum=100),
    "baseline": _k(str, "", "run the report's ratios are relative to (default: the first run)"),
    "server": {
        "kind": _k(str, "sojourn", "server under test", choices=servers.KINDS),
        "policy": _k(str, "fair", "sojourn's connection scheduling policy", choices=servers.POLICIES),
        "kernel_bands": _k(bool, False, "sojourn sets SO_PRIORITY by remaining bytes (kernel-level SRPT, 000 §3)"),
        "workers": _k(int, 1, "worker threads/processes (same on every server)", minimum=1, maximum=256),
        "access_log": _k(bool, False, "write the server's access log into the result"),
        "args": _k(list, [], "extra command-line arguments for the server"),
        "command": _k(list, [], "kind = command: argv with {root} {addr} {port} {workers} placeholders"),
        "port": _k(int, 8080, "listening port in the server namespace", minimum=1, maximum=65535),
        "max_connections": _k(int, 0, "open connections beyond which the server stops accepting (they wait in the "
                                      "kernel's accept queue, then SYNs drop), as Apache 1.3's 350 processes (000 §2); "
                                      "0 = the server's default (docs/experiments.md names each server's setting)",
                              minimum=0),
        "cpu_quota": _k(NUMBER, 0.0, "CPUs' worth of time the server under test may use (a cgroup of its "
                                     "processes alone, sojourn.testbed.cpu), so the server is the bottleneck as 002 "
                                     "§3.1's CPU-bound server was; e.g. 0.5; 0 = no quota. Every summary states it "
                                     "and how often it throttled the server (server_cpu)", minimum=0, maximum=1024),
        "cpu_period_ms": _k(NUMBER, 100.0, "with cpu_quota: the quota's period (cgroup cpu.max); the server runs "
                                           "at most cpu_quota x the period, then waits for the next one, so a long "
                                           "period (the kernel's default, 100 ms) sends its replies in bursts a "
                                           "period apart that clients in step keep; a slow CPU runs smoothly",
                            minimum=1, maximum=1000),
        "cpuset": _k(str, "", "the CPUs the server under test may run on (a cpuset cgroup of its processes alone, "
                              "sojourn.testbed.cpu), e.g. \"1\": its threads share that core as one CPU's processes "
                              "do, never throttled as a quota's are; \"\" = any"),
        "linger_close": _k(bool, False, "sojourn: lingering close, Apache 1.3's lingering_close (000 §2): keep a "
                                        "finished connection until the client closes"),
        "write_concurrency": _k(int, 0, "sojourn: at most this many responses with unsent data in the kernel "
                                        "(004 §3.3); 0 = unlimited. With notsent_lowat it makes the server's write "
                                        "order (policy) reach the wire", minimum=0),
        "write_concurrency_from": _k(str, "", "sojourn: write_concurrency limits only responses with at least these "
                                              "bytes left, e.g. \"50K\" (smaller ones never wait for a slot); needs "
                                              "policy = 'srpt' and write_concurrency; empty = every response"),
        "notsent_lowat": _k(str, "", "sojourn: TCP_NOTSENT_LOWAT per connection, e.g. \"16K\"; empty = kernel's"),
        "rto_max_ms": _k(int, 0, "sojourn: TCP_RTO_MAX_MS on its connections, the most the RTO's backoff reaches, in "
                                 "ms (1000..120000, Linux 6.15+); 0 = the namespace's (network.tcp.rto_max_ms)",
                         minimum=0, maximum=120_000),
        "quantum": _k(str, "32K", "sojourn: bytes written per scheduling decision (serve --quantum); the "
                                  "default is 004 §3.1's 32 KB blocks, serve's own default 128K"),
        "head_fields": _k(str, "full", "sojourn: response head fields, full or minimal (no Server, validators, "
                                       "Accept-Ranges or octet-stream Content-Type: ~160 bytes less per request "
                                       "on the uplink)", choices=("full", "minimal")),
        "delayed_ack": _k(bool, False, "sojourn: TCP_QUICKACK off on the listener, so a request's ACK leaves with "
                                       "the response instead of in a packet of its own"),
        "cache_file_max": _k(str, "", "sojourn: files up to this size are served from memory, larger ones with "
                                      "sendfile (serve --cache-file-max); \"0\" = every file with sendfile; empty = "
                                      "serve's 64K"),
        "admission": _k(str, "", "sojourn: refuse requests early under overload with a 503 (serve --admission): "
                                 "NAME[:KEY=VALUE,...] with NAME one of gradient, codel, delay, size (docs/server.md); "
                                 "size's rate defaults to network.link_mbps; empty = none"),
        "stages": _k((str, dict), "", "sojourn: serve /stage/<name>/ on a CPU worker pool (serve --stages): a TOML "
                                      "file (path relative to the spec) or an inline table of its keys (docs/dwfs.md)"),
    },
    "network": {
        "link_mbps": _k(NUMBER, 10.0, "bottleneck uplink rate server -> clients, Mbit/s (000 §2.5)", minimum=0.01, maximum=100_000),
        "queue_bytes": _k(int, 0, "uplink queue limit in bytes, per band with bands (0 = testbed default)", minimum=0),
        "queue_packets": _k(int, 0, "uplink queue limit in packets, per band with bands (0 = testbed default of 1000, "
                                    "Linux's txqueuelen; 000 §3.1's kernel held 100)", minimum=0),
        "bands": _k(str, "", "priority bands on the uplink by size cutoffs, e.g. \"1K,2K,5K,50K\" (000 §3); empty = one FIFO"),
        "groups": _k(list, [], "client groups with their own WAN conditions ([[network.groups]] tables); none = one group, no WAN"),
        "emulator": _k(str, "auto", "route the clients through the WAN emulator: auto = when a group asks for WAN "
                                    "conditions, on = always, even without any (002 Fig. 8: what emulation itself costs)",
                       choices=("auto", "on")),
        "emulator_rps": _k(bool, False, "with the emulator: steer the receiving hosts' processing of the packets it "
                                        "writes to every CPU (RPS on its TUN device), so less of that runs in the "
                                        "emulator's own thread and delays the packets behind; a server under "
                                        "cpu_quota then pays for receive work in its softirqs (docs/testbed.md)"),
        "tcp": {
            "congestion": _k(str, "reno", "congestion control (the host must allow it)", choices=CONGESTION),
            "sack": _k(bool, True, "TCP SACK (000 Table 2 (F) context, 002 §4.3)"),
            "timestamps": _k(bool, True, "TCP timestamps (RFC 7323); false: 12 bytes less header per segment "
                                         "(MSS 1460, not 1448), and the ideal schedules use that framing"),
            "syncookies": _k(bool, False, "SYN cookies (000 Table 2 (G))"),
            "syn_backlog": _k(int, 512, "SYN queue length (000: 512)", minimum=1),
            "somaxconn": _k(int, 512, "accept queue length (000: 512)", minimum=1),
            "initcwnd": _k(int, 0, "initial congestion window in segments (0 = kernel default)", minimum=0),
            "cwnd_clamp": _k(int, 0, "congestion-window clamp in segments (0 = none; 001 §6.3)", minimum=0),
            "rto_min_ms": _k(int, 0, "minimum RTO in ms (0 = kernel default)", minimum=0),
            "rto_max_ms": _k(int, 0, "the most exponential backoff may take the RTO to, in ms (0 = Linux's 120 s; "
                                     "else 1000..120000, net.ipv4.tcp_rto_max_ms, Linux 6.15+)", minimum=0,
                             maximum=120_000),
            "initial_rto_ms": _k(int, 0, "initial RTO in ms of the server's and clients' sockets (0 = Linux's 1 s; "
                                         "000 Table 2 (F): 3000 in the baseline), by cgroup BPF (docs/testbed.md)",
                                 minimum=0, maximum=120_000),
            "rack_tlp": _k(bool, True, "today's loss recovery beyond NewReno: RACK's time-based loss detection and "
                                       "its tail loss probe (RFC 8985); false: neither (net.ipv4.tcp_recovery and "
                                       "tcp_early_retrans 0), as in the papers' kernels, so a short response's lost "
                                       "segment waits out a retransmission timeout"),
            "orphan_retries": _k(int, 0, "probes a socket its process closed with bytes unsent may send unanswered "
                                         "before the kernel drops it (net.ipv4.tcp_orphan_retries; 0 = Linux's 8)",
                                 minimum=0, maximum=255),
        },
    },
    "workload": {
        "model": _k(str, "wc98", "size model of the generated trace", choices=MODELS),
        "trace": _k(str, "", "replay this trace.csv instead of generating one (path relative to the spec)"),
        "requests": _k(int, 0, "requests to generate (0 = from duration_s)", minimum=0),
        "duration_s": _k(NUMBER, 60.0, "trace length in seconds after time compression", minimum=0.1),
        "cycles": _k(NUMBER, 0.0, "with a profile: the trace's length in the profile's cycles (low + high period, "
                                  "after time compression) instead of duration_s, e.g. 1.5 = low, high, low so the "
                                  "overload drains inside the trace; 0 = duration_s", minimum=0),
        "profile": _k(str, "", "load profile W1..W10 of 000 Table 1 (alternating/intermittent overload); in sessions "
                               "mode each period's session rate is its rho times workload.sessions.rate",
                      choices=("",) + PROFILES),
        "rho": _k(NUMBER, 0.0, "constant offered load = bytes/s over the link rate (used when profile is empty)", minimum=0, maximum=10),
        "load_basis": _k(str, "body", "what rho counts: body (response bodies) or wire (what the uplink carries: bodies, "
                                      "their frames' headers and wire_overhead_bytes per request), as 000 §2.3 set load "
                                      "by the uplink's measured utilization", choices=("body", "wire")),
        "wire_overhead_bytes": _k(int, 465, "load_basis = wire: bytes per request besides the body frames (response head, "
                                            "SYN-ACK, the request's ACK, the FIN's ACK); 465 is what the uplink counted "
                                            "for sojourn's full heads, one request per connection (docs/analysis.md)",
                                  minimum=0),
        "time_compression": _k(NUMBER, 1.0, "divide the profile's period lengths by this, keeping each period's rho", minimum=1),
        "clients": _k(int, 200, "distinct clients in the trace", minimum=1),
        "seed": _k(int, 1, "seed of the trace and docroot"),
        "objects": _k(int, 0, "distinct objects in the catalogue (0 = model default)", minimum=0),
        "persistent": _k(int, 1, "requests per persistent connection k (000 Table 2 (E)); 1 = none", minimum=1),
        "abort_after_s": _k(NUMBER, 0.0, "user abort after T seconds, 0 = never (000 Table 2 (H))", minimum=0),
        "retries": _k(int, 0, "retries after an abort, N (000 Table 2 (H))", minimum=0),
        "max_connections_per_client": _k(int, 1000, "per-client connection cap; the default leaves 000 §2.4's open "
                                         "system uncapped (a small cap queues requests at busy clients)", minimum=1),
        "timeout_s": _k(NUMBER, 60.0, "an attempt with no complete response after this long ends as 'timeout'", minimum=0.1),
        "load_processes": _k(int, 1, "load generator processes, each running its share of the clients (client mod N) "
                                     "with an open-file limit of its own: for runs that hold more connections than "
                                     "one process may open (docs/testbed.md \"Open files\"); not for sessions",
                             minimum=1, maximum=16),
        "mode": _k(str, "open", "open: replay the generated trace (load open); sessions: Poisson session arrivals "
                                "over the stages (load sessions, 003 §2); closed: workload.users user equivalents "
                                "for duration_s (load closed, 002 §3.3, 004 §4.2); capacity: closed levels of "
                                "workload.levels users, capacity = the most requests/s sustained (002 §4.4)",
                   choices=LOAD_MODES),
        "users": _k(int, 100, "closed mode: user equivalents, each with one request outstanding (004 §5: up to 1400)",
                    minimum=1, maximum=100_000),
        "think_s": _k(NUMBER, 0.0, "closed mode: mean exponential think time after each response, 0 = none "
                                   "(002 §3.3)", minimum=0),
        "levels": _k(list, [], "capacity mode, and the capacity probe of load_fraction: user counts to load the "
                               "server with, one level after the other"),
        "levels_until_fall": _k(int, 0, "capacity mode: after workload.levels, while the most requests/s came at "
                                        "the newest level, up to this many more levels, each doubling the users "
                                        "(002 §4.4 takes the maximum over a curve that falls past it)",
                                minimum=0, maximum=8),
        "load_fraction": _k(NUMBER, 0.0, "open mode: Poisson requests at this fraction of the server's capacity, "
                                         "measured first in the same run with workload.levels (001 §3.1: load "
                                         "relative to the infinite-demand capacity); 0 = off", minimum=0, maximum=10),
        "level_s": _k(NUMBER, 10.0, "capacity mode: seconds per level", minimum=0.5),
        "warmup_s": _k(NUMBER, 2.0, "capacity mode: seconds at the start of each level left out of its throughput",
                       minimum=0),
        "start_spread_s": _k(NUMBER, 0.0, "closed and capacity modes (and the capacity probe): seconds over which "
                                          "the users (of each level) start, one after another at equal intervals; "
                                          "0 = all at once. Users started together without think time move in "
                                          "step, a wave per round trip, when the round trip dominates their cycle "
                                          "(docs/load.md)", minimum=0),
        "sessions": {
            "model_file": _k(str, "", "session model TOML (docs/formats.md, path relative to the spec); empty = "
                                      "generated from the stages: start at the first, 003 Fig. 5 rows x (1 - exit)"),
            "rate": _k(NUMBER, 5.0, "sessions per second (Poisson) of the generated model; with workload.profile, the "
                                    "rate at rho 1 (the stages' CPU capacity in sessions per second)", minimum=0.001),
            "users": _k(int, 0, "closed loop instead of Poisson arrivals: this many users, each running one session "
                                "after another (003 §5.1's WebStone clients, 40-60); 0 = open loop at rate",
                        minimum=0, maximum=100_000),
            "class_bounds": _k(bool, False, "each class's clients give up on a request at their class's "
                                            "timeout_ms (003 §5.2) instead of delay_bound_s"),
            "exit": _k(NUMBER, 0.1, "probability a session ends after a request (generated model)",
                       minimum=0.001, maximum=1),
            "think_s": _k(NUMBER, 0.0, "mean exponential think time between a session's requests, 0 = none",
                          minimum=0),
            "delay_bound_s": _k(NUMBER, 1.0, "the generator aborts a request after this long (generated model); "
                                             "requests are judged against their class's timeout_ms", minimum=0.001),
            "on_failure": _k(str, "restart", "after a request fails or misses its bound (generated model): restart "
                                              "(the session is aborted; a closed-loop user starts a new one) or "
                                              "continue (the session goes on to its next stage); 003 §5 does not "
                                              "say which its WebStone clients did", choices=("restart", "continue")),
        },
        "verify": _k(bool, True, "load generator checks body content against the docroot rule"),
    },
    "collect": {
        "interval_s": _k(NUMBER, 1.0, "counter sampling interval", minimum=0.05, maximum=60),
        "docroot_cache": _k(str, "warm", "the docroot's files in the page cache when the server starts: warm (read "
                                          "once first, as 000 §2.2's servers held their files in memory) or cold (evicted "
                                          "first, to measure what serving from disk costs)", choices=("warm", "cold")),
        "drain_s": _k(NUMBER, 60.0, "after the last scheduled request (open mode), wait at most this long for answers; "
                                       "then what is outstanding is recorded 'interrupted' and the run ends (60, the "
                                       "default timeout_s: every request has its own outcome)", minimum=0),
        "fidelity": {
            "lag_p99_ms": _k(NUMBER, 5.0, "a repetition whose generator issued 1% of its requests later than this is "
                                          "invalid and redone (sojourn.runner.fidelity); 0 = not judged", minimum=0),
            "emulator_late_p99_ms": _k(NUMBER, 1.0, "likewise for the WAN emulator's packet release (delay error); "
                                                    "0 = not judged", minimum=0),
            "uplink_rate_tolerance": _k(NUMBER, 0.03, "likewise when the busy uplink's rate strays further than this "
                                                      "from the link rate; 0 = not judged", minimum=0, maximum=1),
            "cpu_idle_min": _k(NUMBER, 0.2, "likewise when the machine was idle less than this share of the run; 0 = "
                                            "not judged, and the spec then runs with --concurrency 1 only",
                               minimum=0, maximum=1),
            "cpu_steal_max": _k(NUMBER, 0.05, "likewise when the hypervisor took more than this share; 0 = not judged",
                                minimum=0, maximum=1),
            "io_stall_max_s": _k(NUMBER, 1.0, "likewise when the machine's I/O pressure (some task waiting for I/O) "
                                              "stayed at 0.5 or more for longer than this many seconds in a row, which "
                                              "stalls the server; 0 = not judged", minimum=0),
            "stage_stretch_max": _k(NUMBER, 1.05, "likewise when the stage pool's processing took more than this many "
                                                  "times the CPU time it burned in a 10-s window (its worker lost the "
                                                  "CPU to something else; judged in CPU-bound runs too); 0 = not judged",
                                    minimum=0),
            "foreign_cpu_max": _k(NUMBER, 0.25, "likewise when the machine's tasks outside the testbed ran more than "
                                                "this many CPU seconds per second in a 10-s window (a build or a test "
                                                "beside the run); judged in CPU-bound runs only; 0 = not judged",
                                  minimum=0),
            "calm_steal_max": _k(NUMBER, 0.01, "an attempt starts only after a 1-s window in which the hypervisor "
                                               "took at most this share of the machine, waiting window after window "
                                               "(steal comes in bursts of minutes that void what runs in them); 0 = "
                                               "start at once", minimum=0, maximum=1),
            "calm_wait_max_s": _k(NUMBER, 1800.0, "wait at most this long for calm, then start anyway (the guard judges "
                                                  "the attempt); 0 = until calm or the deadline (--stop-after)",
                                  minimum=0),
            "redo": _k(int, 2, "times an invalid repetition is run again at once before it is left invalid (a later "
                               "`sojourn run` redoes it)", minimum=0, maximum=10),
        },
    },
    "sweep": {
        "parameter": _k(str, "", "dotted key to vary, e.g. network.groups.0.rtt_ms or workload.persistent"),
        "values": _k(list, [], "the values, one run each"),
    },
    "runs": _k(list, [], "only these of the spec's runs, by name as `sojourn run --check` lists them (default: all); "
                         "e.g. a spec whose base is another, for more repetitions of a few of its runs"),
    "variants": _k(dict, {}, "[variants.<name>] tables overriding any keys above (not name/variants/sweep)"),
    "base": _k(str, "", "another spec (path relative to this one) whose keys this one starts from and overrides "
                        "(tables merged key by key, arrays replaced; the base's sweep is not inherited, nor its "
                        "variants when this spec has its own; a base may have a base of its own)"),
    "quick": _k(dict, {}, "[quick] overrides applied by `sojourn run --quick` (and `sojourn reproduce --quick`): "
                          "repetitions, sweep.values and any key of server/network/workload/collect, so a "
                          "paper-scale spec also has a scale that runs in minutes"),
}

# The [server] keys only sojourn's own server has: SojournOptions' fields, and its stage pool.
SOJOURN_KEYS = SPEC_KEYS + ("stages",)

QUICK_KEYS = ("repetitions", "sweep") + ("server", "network", "workload", "collect")

RUN_SECTIONS = ("server", "network", "workload", "collect")


class SpecError(ValueError):
    """A spec that cannot run; the message names the key and what is accepted."""


@dataclass
class Run:
    """One configuration to measure, ``repetitions`` times: ``config`` the validated
    tables (as run.json keeps them), ``plan`` the typed documents built from them."""

    name: str
    config: dict
    plan: RunPlan
    sweep_value: Any = None
    variant: str = ""

    def identity(self, index: int) -> dict:
        """What run.json names the run by (the tables find a repetition by it), ``index``
        its place in the experiment's runs."""
        return {"run": self.name, "index": index, "variant": self.variant, "sweep_value": self.sweep_value}


@dataclass
class Experiment:
    name: str
    description: str
    repetitions: int
    baseline: str
    runs: list[Run]
    source: dict = field(default_factory=dict)
    path: Path | None = None
    sweep_parameter: str = ""
    # The spec as run, stored with the results: the file's text, or for a spec with a
    # base the merged spec (so the results never depend on a file they do not carry).
    text: str = ""
    # What merging it over its base left out that its reader may expect (a base's sweep):
    # `sojourn run` prints them.
    notices: list[str] = field(default_factory=list)

    def only(self, names: list[str]) -> Experiment:
        """The experiment with just the named runs, in the spec's order (``sojourn run
        --runs``): more repetitions of a few runs of a large spec, results where the
        whole spec's would go. The baseline stays if chosen, else the first run is."""
        known = [run.name for run in self.runs]
        unknown = [name for name in names if name not in known]
        if not names:
            raise SpecError(f"no run given; the spec's runs: {', '.join(known)}")
        if unknown:
            raise SpecError(f"no run named {', '.join(map(repr, unknown))}; the spec's runs: {', '.join(known)}")
        runs = [run for run in self.runs if run.name in names]
        return replace(self, runs=runs, baseline=self.baseline if self.baseline in names else runs[0].name)

    def configs_as_run(self) -> dict[str, Any]:
        """Each run's configuration by run name, in the JSON form its run.json records it
        (:func:`configured_alike` compares the two)."""
        return {run.name: _as_json(run.config) for run in self.runs}


def _type_name(types: tuple[type, ...]) -> str:
    names = {int: "an integer", float: "a number", str: "a string", bool: "true/false", list: "an array", dict: "a table"}
    return " or ".join(dict.fromkeys(names[t] for t in types))


def _check_leaf(path: str, key: Key, value: Any) -> Any:
    # bool is an int subclass in Python: never accept true/false for a number or vice versa.
    if isinstance(value, bool) and bool not in key.types:
        raise SpecError(f"{path} must be {_type_name(key.types)}, got {value!r}")
    if not isinstance(value, key.types):
        raise SpecError(f"{path} must be {_type_name(key.types)}, got {type(value).__name__} {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise SpecError(f"{path} = {value!r}: expected a finite number")
    if key.choices is not None and value not in key.choices:
        accepted = ", ".join(repr(c) for c in key.choices)
        raise SpecError(f"{path} = {value!r} is not accepted; accepted: {accepted}")
    if key.minimum is not None and value < key.minimum:
        raise SpecError(f"{path} = {value!r} is below its minimum {key.minimum}")
    if key.maximum is not None and value > key.maximum:
        raise SpecError(f"{path} = {value!r} is above its maximum {key.maximum}")
    return float(value) if float in key.types and int in key.types else value


def _fill(schema: dict, given: dict, prefix: str) -> dict:
    """Checks ``given`` against ``schema`` (unknown keys, types) and fills defaults."""
    if not isinstance(given, dict):
        raise SpecError(f"{prefix.rstrip('.') or 'spec'} must be a table, got {given!r}")
    unknown = sorted(set(given) - set(schema))
    if unknown:
        where = f"[{prefix.rstrip('.')}]" if prefix else "the top level"
        raise SpecError(f"unknown key {prefix}{unknown[0]} in {where}; accepted: {', '.join(schema)}")
    out = {}
    for name, rule in schema.items():
        path = prefix + name
        if isinstance(rule, dict):
            out[name] = _fill(rule, given.get(name, {}), path + ".")
        elif name in given:
            out[name] = _check_leaf(path, rule, given[name])
        else:
            out[name] = copy.deepcopy(rule.default)
    return out


def _check_groups(groups: list, path: str) -> list[dict]:
    checked = []
    for index, group in enumerate(groups):
        checked.append(_fill(GROUP_SCHEMA, group, f"{path}.{index}."))
    names = [g["name"] for g in checked]
    if len(set(names)) != len(names):
        raise SpecError(f"{path}: group names must be unique, got {names}")
    return checked


def _check_combinations(config: dict, where: str) -> None:
    """The impossible combinations, each named by its keys."""
    server, network, workload = config["server"], config["network"], config["workload"]
    if server["kind"] != "sojourn":
        given = [key for key in SOJOURN_KEYS if server[key] != SCHEMA["server"][key].default]
        if given:
            raise SpecError(f"{where}server.{given[0]} = {server[given[0]]!r} needs server.kind = 'sojourn' (got "
                            f"{server['kind']!r}, which has no such setting: put its own in server.args; apache2 "
                            "and nginx linger on close by themselves)")
    if server["kind"] == "command" and server["max_connections"]:
        raise SpecError(f"{where}server.max_connections cannot be set for server.kind = 'command': put the "
                        "setting in server.command")
    if server["kernel_bands"] and not network["bands"]:
        raise SpecError(f"{where}server.kernel_bands = true needs network.bands (the qdisc bands it classifies into), "
                        "e.g. network.bands = \"1K,2K,5K,50K\"")
    if server["kind"] == "command" and not server["command"]:
        raise SpecError(f"{where}server.kind = 'command' needs server.command (an argv array)")
    if server["command"] and server["kind"] != "command":
        raise SpecError(f"{where}server.command is only used with server.kind = 'command' (got {server['kind']!r})")
    for index, part in enumerate(server["command"] + server["args"]):
        if not isinstance(part, str):
            raise SpecError(f"{where}server.command/args element {index} must be a string, got {part!r}")
    if server["cpu_period_ms"] != 100.0 and not server["cpu_quota"]:
        raise SpecError(f"{where}server.cpu_period_ms = {server['cpu_period_ms']} is the period of server.cpu_quota, "
                        "which is not set")
    if server["cpuset"]:
        try:
            parse_cpu_list(server["cpuset"])
        except ValueError as err:
            raise SpecError(f"{where}server.cpuset: {err}") from None
    if isinstance(server["stages"], dict):
        server["stages"] = check_stages(server["stages"], f"{where}server.stages")
        check_class_networks(server["stages"], network["groups"], where)
    _check_start_spread(workload, where)
    if workload["levels_until_fall"] and workload["mode"] != "capacity":
        raise SpecError(f"{where}workload.levels_until_fall is for workload.mode = 'capacity' (a load_fraction "
                        "run's probe keeps to its workload.levels)")
    if workload["mode"] in ("closed", "capacity"):
        if workload["profile"]:
            raise SpecError(f"{where}workload.profile shapes open-loop arrivals; in {workload['mode']!r} mode the "
                            "load is workload.users (closed) or workload.levels (capacity)")
        if workload["mode"] == "capacity":
            levels = workload["levels"]
            if not levels or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in levels):
                raise SpecError(f"{where}workload.levels = {levels!r}: capacity mode needs a list of user counts >= 1, "
                                "e.g. [8, 32, 128, 512]")
            if workload["warmup_s"] >= workload["level_s"]:
                raise SpecError(f"{where}workload.warmup_s = {workload['warmup_s']} must be below workload.level_s = "
                                f"{workload['level_s']}")
        elif workload["levels"]:
            raise SpecError(f"{where}workload.levels is for workload.mode = 'capacity'")
        return
    if workload["load_fraction"]:
        if workload["mode"] != "open" or workload["profile"] or workload["rho"]:
            raise SpecError(f"{where}workload.load_fraction sets an open-loop request rate from the measured "
                            "capacity: it needs workload.mode = 'open' and no workload.profile or workload.rho")
        if not workload["levels"]:
            raise SpecError(f"{where}workload.load_fraction needs workload.levels: the user counts of the capacity "
                            "probe run first (e.g. [64, 512])")
    elif workload["levels"]:
        raise SpecError(f"{where}workload.levels is for workload.mode = 'capacity' or workload.load_fraction")
    if workload["mode"] == "sessions":
        if server["kind"] != "sojourn":
            raise SpecError(f"{where}workload.mode = 'sessions' requests /stage/ URLs, which only server.kind = "
                            f"'sojourn' serves (got {server['kind']!r})")
        given = [k for k in ("trace", "rho") if workload[k]]
        if given:
            raise SpecError(f"{where}workload.{given[0]} is for workload.mode = 'open'; in 'sessions' mode the load is "
                            "workload.sessions.rate (or the sessions model file) for workload.duration_s, or "
                            "workload.profile's periods at multiples of that rate")
        shaped = [k for k in ("users", "model_file") if workload["sessions"][k]]
        if workload["profile"] and shaped:
            raise SpecError(f"{where}workload.profile sets the open loop's session rate per period (its rho times "
                            f"workload.sessions.rate); remove workload.sessions.{shaped[0]}, whose sessions "
                            "arrive otherwise")
        if workload["abort_after_s"]:
            raise SpecError(f"{where}workload.abort_after_s is for workload.mode = 'open'; in 'sessions' mode "
                            "workload.sessions.delay_bound_s aborts late requests")
        if workload["load_processes"] > 1:
            raise SpecError(f"{where}workload.load_processes = {workload['load_processes']}: sessions run in one "
                            "load generator process (its users share one session counter)")
        if not server["stages"]:
            check_class_networks({}, network["groups"], where)
        bounds = [("workload.sessions.delay_bound_s", workload["sessions"]["delay_bound_s"])]
        if workload["sessions"]["class_bounds"]:
            bounds += [(f"server.stages class {c['name']!r} timeout_ms", c["timeout_ms"] / 1000)
                       for c in stage_classes(server["stages"] or {})]
        for key, bound in bounds:
            if bound >= workload["timeout_s"]:
                raise SpecError(f"{where}{key} = {bound} s must be below workload.timeout_s = {workload['timeout_s']} "
                                "(the hard limit of every attempt)")
        return
    if workload["trace"]:
        if workload["profile"] or workload["rho"]:
            raise SpecError(f"{where}workload.trace replays a trace as it is; remove workload.profile/rho "
                            "(shape it with `sojourn trace shape` first)")
    elif not workload["profile"] and not workload["rho"] and not workload["load_fraction"]:
        raise SpecError(f"{where}workload needs a load: workload.profile (W1..W10), workload.rho > 0 or "
                        "workload.load_fraction > 0")
    if workload["profile"] and workload["rho"]:
        raise SpecError(f"{where}workload.profile and workload.rho are exclusive: the profile sets rho per period")
    if workload["retries"] and not workload["abort_after_s"]:
        raise SpecError(f"{where}workload.retries = {workload['retries']} needs workload.abort_after_s > 0 "
                        "(retries follow an abort, 000 Table 2 (H))")
    if workload["abort_after_s"] and workload["abort_after_s"] >= workload["timeout_s"]:
        raise SpecError(f"{where}workload.abort_after_s = {workload['abort_after_s']} must be below "
                        f"workload.timeout_s = {workload['timeout_s']}: the user aborts before the attempt times out")
    addresses = sum(g["addresses"] for g in network["groups"])
    if addresses > workload["clients"]:
        raise SpecError(f"{where}network.groups have {addresses} addresses but workload.clients = "
                        f"{workload['clients']}: some addresses would carry no client")


def check_stages(table: dict, path: str) -> dict:
    """The stage pool table with only the keys given, each checked (STAGES_SCHEMA);
    ``series_csv`` is refused: the runner writes the series into the run directory."""
    if "series_csv" in table:
        raise SpecError(f"{path}.series_csv is set by the runner (series.csv in the repetition directory); remove it")
    filled = _fill(STAGES_SCHEMA, table, path + ".")
    checked = {key: filled[key] for key in table}
    for key, schema, required in (("stage", STAGE_SCHEMA, ("name", "processing_ms")),
                                  ("class", CLASS_SCHEMA, ("name", "timeout_ms"))):
        rows = []
        for index, row in enumerate(checked.get(key, [])):
            where = f"{path}.{key}.{index}"
            if not isinstance(row, dict):
                raise SpecError(f"{where} must be a table ({', '.join(schema)}), got {row!r}")
            for name in required:
                if name not in row:
                    raise SpecError(f"{where} needs {name}")
            rows.append({k: v for k, v in _fill(schema, row, where + ".").items() if k in row})
        names = [row["name"] for row in rows]
        if len(set(names)) != len(names):
            raise SpecError(f"{path}.{key}: names must be unique, got {names}")
        if key in checked:
            checked[key] = rows
    return checked


def stage_classes(stages: dict) -> list[dict]:
    """The stage pool's classes: the table's, else the defaults (docs/dwfs.md: gold,
    silver, bronze with timeouts 100, 150, 200 ms, 003 §5.2 x 1/100)."""
    return stages.get("class") or [dict(cls) for cls in DEFAULT_CLASSES]


def check_class_networks(stages: dict, groups: list[dict], where: str) -> None:
    """Every class without ``networks`` takes the addresses of the network group of its name."""
    group_names = [g["name"] for g in groups]
    for cls in stage_classes(stages):
        if not cls.get("networks") and cls["name"] not in group_names:
            raise SpecError(f"{where}server.stages class {cls['name']!r} has no networks and network.groups has no "
                            f"group of that name (groups: {', '.join(group_names) or 'none'}); add a "
                            f"[[network.groups]] named {cls['name']!r} or give the class networks")


def _merge(base: dict, override: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _set_path(config: dict, dotted: str, value: Any) -> None:
    """Sets ``dotted`` (e.g. network.groups.0.rtt_ms) in ``config``; the path must exist."""
    parts = dotted.split(".")
    node: Any = config
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise SpecError(f"sweep.parameter {dotted!r}: {'.'.join(parts[:index]) or 'spec'} has "
                                f"{len(node)} element(s); {part!r} is not an index of it")
            key: Any = int(part)
        elif isinstance(node, dict) and part in node:
            key = part
        else:
            accepted = ", ".join(node) if isinstance(node, dict) else "(none)"
            raise SpecError(f"sweep.parameter {dotted!r}: no key {part!r} at {'.'.join(parts[:index]) or 'the top'}; "
                            f"accepted: {accepted}")
        if last:
            node[key] = value
        else:
            node = node[key]


def _leaf_rule(dotted: str) -> Key | None:
    node: Any = SCHEMA
    for part in dotted.split("."):
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, Key) and node.types == (list,) and part.isdigit():
            node = GROUP_SCHEMA
        else:
            return None
    return node if isinstance(node, Key) else None


def _as_json(value: Any) -> Any:
    """``value`` as run.json holds it (paths and other objects as strings)."""
    return json.loads(json.dumps(value, default=str))


def configured_alike(now: Any, ran: Any, path: str = "") -> bool:
    """Whether a run's configuration ``now`` (JSON form) would run as ``ran`` did: equal,
    except that a key the schema gained since, left at its default, is taken as absent
    then. A new key's default keeps the old behaviour (network.tcp.rto_max_ms = 0 is
    Linux's own cap, as before the key existed), so results need not be redone for it."""
    if isinstance(now, dict) and isinstance(ran, dict):
        if set(ran) - set(now):
            return False
        for key, value in now.items():
            dotted = f"{path}.{key}" if path else key
            if key in ran:
                if not configured_alike(value, ran[key], dotted):
                    return False
            else:
                rule = _leaf_rule(dotted)
                if rule is None or _as_json(rule.default) != value:
                    return False
        return True
    if isinstance(now, list) and isinstance(ran, list):
        return len(now) == len(ran) and all(configured_alike(a, b, f"{path}.{i}") for i, (a, b) in enumerate(zip(now, ran)))
    return now == ran


def changed_reps(directory: Path, experiment: Experiment) -> list[Path]:
    """The complete repetitions under ``directory`` (``<run>/<rep>/``, beside the
    ``spec.toml`` they ran from) that ``experiment`` would not run alike now: none when its
    spec's text is the saved one, else those whose run it no longer has or configures
    otherwise. A spec that only added runs, or touched comments or keys that resolve the
    same, keeps the results of the old text, as does a key the schema gained since at its
    default (:func:`configured_alike`)."""
    saved = Path(directory) / "spec.toml"
    if saved.is_file() and saved.read_text() == experiment.text:
        return []
    resolved = experiment.configs_as_run()
    changed = []
    for status in sorted(Path(directory).glob("*/*/status.json")):
        rep = status.parent
        if not layout.is_complete(rep):
            continue
        try:
            ran = json.loads((rep / "run.json").read_text()).get("config")
        except (OSError, json.JSONDecodeError):
            ran = None
        if ran is None or rep.parent.name not in resolved or not configured_alike(resolved[rep.parent.name], ran):
            changed.append(rep)
    return changed


def changed_runs(directory: Path, experiment: Experiment) -> list[str]:
    """:func:`changed_reps` as ``run rep N``."""
    return [f"{rep.parent.name} rep {rep.name}" for rep in changed_reps(directory, experiment)]


def apply_quick(raw: dict) -> dict:
    """The spec at its quick scale: ``raw`` with its ``[quick]`` table merged in (as a
    variant merges, sweep.values replaced whole) and removed."""
    quick = raw.get("quick", {})
    if not isinstance(quick, dict):
        raise SpecError(f"quick must be a table of overrides, got {quick!r}")
    bad = sorted(set(quick) - set(QUICK_KEYS))
    if bad:
        raise SpecError(f"unknown key quick.{bad[0]}; [quick] may override: {', '.join(QUICK_KEYS)}")
    merged = _merge({k: v for k, v in raw.items() if k != "quick"}, quick)
    # Its own results directory: a quick run never mixes with (or blocks) the full one.
    if isinstance(merged.get("name"), str) and merged["name"]:
        merged["name"] += "-quick"
    return merged


def run_name(variant: str, parameter: str, value: Any) -> str:
    """The name of a sweep point's run: ``<variant>-<last key>=<value>`` (e.g.
    ``srpt-rtt_ms=75``; numbers as %g), without the variant when there is none."""
    key = parameter.rsplit(".", 1)[-1]
    label = f"{key}={value:g}" if isinstance(value, float) else f"{key}={value}"
    return f"{variant}-{label}" if variant else label


def validate(raw: dict, quick: bool = False) -> Experiment:
    """Validates a parsed spec and expands it into runs; with ``quick``, at the scale
    of its ``[quick]`` table (both scales are checked, so --check covers each)."""
    if raw.get("quick"):
        scaled = apply_quick(raw)
        if not quick:
            try:
                validate(scaled)
            except SpecError as err:
                raise SpecError(f"at its [quick] scale (--quick): {err}") from None
        else:
            validate({k: v for k, v in raw.items() if k != "quick"})
            raw = scaled
    filled = _fill(SCHEMA, raw, "")
    if not filled["name"] or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", filled["name"]):
        raise SpecError(f"name must be a non-empty string of letters, digits, '.', '_' or '-' (it names the results "
                        f"directory), got {filled['name']!r}")
    base = {section: filled[section] for section in RUN_SECTIONS}
    base["network"]["groups"] = _check_groups(base["network"]["groups"], "network.groups")

    variants: dict[str, dict] = filled["variants"] or {"": {}}
    sweep = filled["sweep"]
    if bool(sweep["parameter"]) != bool(sweep["values"]):
        raise SpecError("sweep needs both sweep.parameter and a non-empty sweep.values")
    if sweep["parameter"]:
        rule = _leaf_rule(sweep["parameter"])
        if rule is None or rule.types in ((list,), (dict,)):
            raise SpecError(f"sweep.parameter {sweep['parameter']!r} does not name a single value of the schema "
                            "(e.g. workload.rho, workload.persistent, network.groups.0.rtt_ms)")
        for index, value in enumerate(sweep["values"]):
            _check_leaf(f"sweep.values.{index}", rule, value)

    runs: list[Run] = []
    for variant, override in variants.items():
        if not re.fullmatch(r"[A-Za-z0-9._-]*", variant):
            raise SpecError(f"variants.{variant}: variant names may use letters, digits, '.', '_' and '-' only")
        if not isinstance(override, dict):
            raise SpecError(f"variants.{variant} must be a table of overrides, got {override!r}")
        bad = sorted(set(override) - set(RUN_SECTIONS))
        if bad:
            raise SpecError(f"unknown key variants.{variant}.{bad[0]}; a variant may override: {', '.join(RUN_SECTIONS)}")
        where = f"variants.{variant}: " if variant else ""
        merged = _merge({s: {k: v for k, v in base[s].items()} for s in RUN_SECTIONS}, override)
        try:
            config = {s: _fill(SCHEMA[s], merged[s], f"{s}.") for s in RUN_SECTIONS}
        except SpecError as err:
            raise SpecError(f"{where}{err}") from None
        config["network"]["groups"] = _check_groups(config["network"]["groups"], f"{where}network.groups")
        values = sweep["values"] if sweep["parameter"] else [None]
        for value in values:
            run_config = copy.deepcopy(config)
            name = variant
            if sweep["parameter"]:
                value = _check_leaf("sweep.values", _leaf_rule(sweep["parameter"]), value)
                _set_path(run_config, sweep["parameter"], value)
                name = run_name(variant, sweep["parameter"], value)
            _check_combinations(run_config, where)
            try:
                plan = plan_of(run_config)
            except ConfigError as err:
                raise SpecError(f"{where}the testbed cannot be built: {err}") from None
            if plan.sojourn:
                try:
                    servers.check_sojourn_options(plan.sojourn)
                except servers.ServerError as err:
                    raise SpecError(f"{where}[server]: sojourn's serve refuses it ({err}; each server.KEY is serve's "
                                    "--KEY)") from None
            runs.append(Run(name=name or "run", config=run_config, plan=plan, sweep_value=value, variant=variant))
    baseline = filled["baseline"] or runs[0].name
    if baseline not in [r.name for r in runs]:
        raise SpecError(f"baseline = {baseline!r} is not a run; runs: {', '.join(r.name for r in runs)}")
    experiment = Experiment(name=filled["name"], description=filled["description"], repetitions=filled["repetitions"],
                            baseline=baseline, runs=runs, source=raw, sweep_parameter=sweep["parameter"])
    if filled["runs"]:
        if not all(isinstance(name, str) for name in filled["runs"]):
            raise SpecError(f"runs must be an array of run names, got {filled['runs']!r}")
        try:
            return experiment.only(filled["runs"])
        except SpecError as err:
            raise SpecError(f"runs: {err}") from None
    return experiment


def missing_programs(experiment: Experiment) -> list[str]:
    """What a run of ``experiment`` would need and this machine lacks, each named with
    the run that needs it: the server's program, a kind = command's binary and
    sojourn-engine (built by `make build`). Empty when everything is there."""
    from sojourn.engine import engine_path

    problems = []
    try:
        engine_path(build=False)
    except FileNotFoundError as err:
        problems.append(f"sojourn-engine: {err}")
    for run in experiment.runs:
        server = run.config["server"]
        program = server["command"][0] if server["kind"] == "command" else servers.PROGRAMS.get(server["kind"])
        if program and not (shutil.which(program) or Path(program).is_file() or Path(f"/usr/sbin/{program}").is_file()):
            problems.append(f"run {run.name}: server.kind = {server['kind']!r} needs {program!r}, which is not "
                            "installed (scripts/setup-system.sh installs the peers)")
    return list(dict.fromkeys(problems))


def _read_toml(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise SpecError(f"{path}: no such spec file") from None
    except tomllib.TOMLDecodeError as err:
        raise SpecError(f"{path}: not valid TOML: {err}") from None


def _merged_over_bases(path: Path, seen: tuple[Path, ...] = ()) -> tuple[dict, list[str], list[str]]:
    """The spec at ``path`` merged over its base, which may have a base of its own; the
    chain of bases, nearest first; and notices of what the merge left out that a reader of
    the spec may expect (a base's sweep)."""
    raw = _read_toml(path)
    if "base" not in raw:
        return raw, [], []
    base = raw.pop("base")
    if not isinstance(base, str) or not base:
        raise SpecError(f"{path}: base must be the path of another spec (relative to this one), got {base!r}")
    base_path = path.parent / base
    if base_path.resolve() in seen + (path.resolve(),):
        raise SpecError(f"{path}: base {base!r} leads back to a spec that has it as its base")
    base_raw, chain, notices = _merged_over_bases(base_path, seen + (path.resolve(),))
    # The base's sweep belongs to the base: a spec inherits its settings, not its points;
    # and a spec with variants of its own compares those, not the base's.
    base_sweep = base_raw.pop("sweep", None) or {}
    own_sweep = raw.get("sweep") or {}
    if base_sweep.get("parameter") and not own_sweep.get("parameter"):
        notices = [*notices, f"{path.name}: its base {base} sweeps {base_sweep['parameter']} over "
                   f"{len(base_sweep.get('values') or [])} value(s), and a spec does not inherit its base's sweep: "
                   "this one has none (give it a [sweep] of its own to run those points)"]
    if own_sweep.get("parameter") != base_sweep.get("parameter"):
        # Nor its quick points, which would name values of a sweep this spec does not have
        # (none, or one of another parameter: loss values as round-trip times).
        (base_raw.get("quick") or {}).pop("sweep", None)
    if "variants" in raw:
        base_raw.pop("variants", None)
    return _merge(base_raw, raw), [base, *chain], notices


def load_spec(path: str | Path, quick: bool = False) -> Experiment:
    """Reads and validates a TOML spec file (at its ``[quick]`` scale with ``quick``)."""
    path = Path(path)
    raw, bases, notices = _merged_over_bases(path)
    if bases:
        text = f"# {path.name} over its base {' over '.join(bases)}, merged\n" + tomli_w.dumps(raw)
    else:
        text = path.read_text()
    try:
        experiment = validate(raw, quick=quick)
    except SpecError as err:
        raise SpecError(f"{path}: {err}") from None
    experiment.path = path.resolve()
    experiment.text = text
    experiment.notices = notices
    for run in experiment.runs:
        server, workload = run.config["server"], run.config["workload"]
        where = f"{path}: run {run.name}: "
        if isinstance(server["stages"], str) and server["stages"]:
            stages_path = (path.parent / server["stages"]).resolve()
            try:
                table = tomllib.loads(stages_path.read_text())
            except OSError as err:
                raise SpecError(f"{where}server.stages {server['stages']!r}: cannot read {stages_path}: {err}") from None
            except tomllib.TOMLDecodeError as err:
                raise SpecError(f"{where}server.stages {stages_path}: not valid TOML: {err}") from None
            try:
                server["stages"] = check_stages(table, f"server.stages ({stages_path})")
                check_class_networks(server["stages"], run.config["network"]["groups"], "")
            except SpecError as err:
                raise SpecError(f"{where}{err}") from None
        model_file = workload["sessions"]["model_file"]
        if model_file:
            resolved = (path.parent / model_file).resolve()
            if not resolved.is_file():
                raise SpecError(f"{where}workload.sessions.model_file {model_file!r} not found (looked at {resolved})")
            workload["sessions"]["model_file"] = str(resolved)
        trace = run.config["workload"]["trace"]
        if trace:
            resolved = (path.parent / trace).resolve()
            if not resolved.is_file():
                raise SpecError(f"{path}: workload.trace {trace!r} not found (looked at {resolved})")
            run.config["workload"]["trace"] = str(resolved)
    return experiment


def _check_start_spread(workload: dict, where: str) -> None:
    """workload.start_spread_s staggers closed users: every one starts within the run, and
    within a capacity level's warm-up, so the level's counted window has all its users."""
    spread = workload["start_spread_s"]
    if not spread:
        return
    if workload["mode"] == "closed" and spread >= workload["duration_s"]:
        raise SpecError(f"{where}workload.start_spread_s = {spread} must be below workload.duration_s = "
                        f"{workload['duration_s']}: every user starts within the run")
    if workload["levels"] and spread > workload["warmup_s"]:
        raise SpecError(f"{where}workload.start_spread_s = {spread} must be at most workload.warmup_s = "
                        f"{workload['warmup_s']}: each level's throughput counts only once all its users started")
    if workload["mode"] not in ("closed", "capacity") and not workload["levels"]:
        raise SpecError(f"{where}workload.start_spread_s staggers closed users (workload.mode 'closed' or "
                        f"'capacity', or the capacity probe of workload.load_fraction), not {workload['mode']!r} mode")
