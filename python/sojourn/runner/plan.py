"""A run's validated configuration as the typed documents its processes are started
from: the testbed's :class:`~sojourn.testbed.TestbedConfig`, for sojourn's own server its
:class:`~sojourn.servers.SojournOptions` (the serve document's own keys), and the load
generator's :class:`~sojourn.runner.loadfile.LoadFile` (the run's load, and the capacity
probe's per level).

Built once per run when the spec is validated (sojourn.runner.spec), so a value the
testbed or the server cannot take is named before anything starts, and each rule lives in
the type that needs it; the runner only adds plumbing (namespace prefix, addresses, paths).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from sojourn.runner.inputs import trace_seconds
from sojourn.runner.loadfile import LoadFile
from sojourn.servers import SojournOptions
from sojourn.testbed import TcpKnobs, TestbedConfig, WanGroup

# The testbed prefix a plan is checked with; each repetition runs under its own.
CHECK_PREFIX = "sjplan"
# SojournOptions' fields that a spec's [server] table sets by the same name (the rest are
# derived: the cutoffs from network.bands, the admin port and stage file by the runner).
SPEC_KEYS = tuple(f.name for f in fields(SojournOptions) if f.name not in ("cutoffs", "admin_port", "stages"))


@dataclass(frozen=True)
class RunPlan:
    testbed: TestbedConfig
    sojourn: SojournOptions | None  # None unless server.kind = "sojourn"
    load: LoadFile | None  # the run's load; None for a capacity probe alone
    probe: LoadFile | None  # one capacity level (users set per level); None without workload.levels
    load_processes: int = 1  # processes sharing each load document (sojourn.runner.load_parts)


def testbed_config(config: dict, prefix: str = CHECK_PREFIX) -> TestbedConfig:
    """The testbed of a run's ``network`` (and the workload's seed, the server's CPU quota)."""
    network = config["network"]
    tcp = network["tcp"]
    knobs = TcpKnobs(congestion=tcp["congestion"], sack=tcp["sack"], timestamps=tcp["timestamps"],
                     syncookies=tcp["syncookies"], syn_backlog=tcp["syn_backlog"], somaxconn=tcp["somaxconn"],
                     initcwnd=tcp["initcwnd"] or None, cwnd_clamp=tcp["cwnd_clamp"] or None,
                     rto_min_ms=tcp["rto_min_ms"] or None, rto_max_ms=tcp["rto_max_ms"] or None,
                     initial_rto_ms=tcp["initial_rto_ms"] or None,
                     orphan_retries=tcp["orphan_retries"] or None, rack_tlp=tcp["rack_tlp"])
    groups = [WanGroup(name=g["name"], clients=g["addresses"], rtt_ms=g["rtt_ms"], jitter_ms=g["jitter_ms"],
                       loss=g["loss"], loss_model=g["loss_model"], mtu=g["mtu"])
              for g in network["groups"]] or [WanGroup(name="lan", clients=1)]
    return TestbedConfig(prefix=prefix, link_bps=int(network["link_mbps"] * 1e6),
                         queue_bytes=network["queue_bytes"] or None, queue_packets=network["queue_packets"] or None,
                         bands=network["bands"] or None, groups=groups, tcp=knobs, seed=config["workload"]["seed"],
                         server_cpus=config["server"]["cpu_quota"] or None,
                         server_cpu_period_ms=config["server"]["cpu_period_ms"],
                         server_cpuset=config["server"]["cpuset"] or None,
                         emulator=True if network["emulator"] == "on" else None,
                         emulator_rps=network["emulator_rps"])


def admission_arg(server: dict, network: dict) -> str | None:
    """``serve --admission`` for a run: the spec's value, with the size policy's rate taken
    from the uplink when the spec leaves it out (the server cannot see its bottleneck)."""
    admission = server["admission"]
    if admission.split(":")[0] == "size" and "rate=" not in admission:
        admission += ("," if ":" in admission else ":") + f"rate={network['link_mbps']}mbit"
    return admission or None


def sojourn_options(config: dict) -> SojournOptions | None:
    """sojourn's own serve settings from the run's ``server`` table (None for other
    servers): each SPEC_KEYS key as given, its empty value or 0 leaving it to serve; the
    cutoffs are the uplink's bands when the server classifies into them; the admin port and the stage pool's file are the
    runner's to add."""
    server, network = config["server"], config["network"]
    if server["kind"] != "sojourn":
        return None
    given = {key: server[key] for key in SPEC_KEYS if server[key] is not False and server[key] not in ("", 0)}
    cutoffs = network["bands"] if server["kernel_bands"] else None
    return SojournOptions(**given | {"admission": admission_arg(server, network), "cutoffs": cutoffs})


def load_seconds(config: dict, trace_s: float | None = None) -> float:
    """How long a run's load lasts: the capacity levels (and at load_fraction the run at that
    fraction after them), a closed run's duration, a session run's (its profile's cycles when
    set), else the trace's span
    (``trace_s`` when the trace is made, else the length the spec asks for)."""
    workload = config["workload"]
    probe_s = len(workload["levels"]) * workload["level_s"]
    if workload["mode"] == "capacity":
        return probe_s
    if workload["load_fraction"]:
        return probe_s + workload["duration_s"]
    if workload["mode"] == "closed":
        return workload["duration_s"]
    if workload["mode"] == "sessions":
        return trace_seconds(workload)
    return trace_s if trace_s is not None else trace_seconds(workload)


def load_files(workload: dict, drain_s: float) -> tuple[LoadFile | None, LoadFile | None]:
    """The load generator's documents for a run's workload (docs/load.md): the run's load
    (``open`` replaying the trace and awaiting answers ``drain_s`` after its last request,
    ``closed`` users, ``sessions``) and the capacity probe's level (closed users for
    ``level_s``), each without where it runs."""
    connections = dict(seed=workload["seed"], timeout=workload["timeout_s"], requests_per_conn=workload["persistent"],
                       conns_per_client=workload["max_connections_per_client"])
    if workload["mode"] == "sessions":
        # /stage/ bodies are not the docroot's, and a session's failure is its own rule (on_failure).
        return LoadFile(**connections, mode="sessions", duration=trace_seconds(workload)), None
    aborts = bool(workload["abort_after_s"])
    common = connections | dict(verify_content=bool(workload["verify"]),
                                abort_after=workload["abort_after_s"] if aborts else None,
                                retries=workload["retries"] if aborts else None)
    # A closed user has one request outstanding: its own connection suffices.
    closed = common | dict(mode="closed", conns_per_client=1,
                           think_time=f"exp:{workload['think_s']}" if workload["think_s"] else "0",
                           start_spread=workload["start_spread_s"] or None)
    probe = LoadFile(**closed, duration=workload["level_s"]) if workload["levels"] else None
    mode = workload["mode"]
    if mode == "capacity":
        return None, probe
    if mode == "closed":
        return LoadFile(**closed, users=workload["users"], duration=workload["duration_s"]), probe
    return LoadFile(**common | dict(mode="open", drain=drain_s)), probe


def plan_of(config: dict) -> RunPlan:
    """The run's plan; raises the testbed's ConfigError for what it cannot build."""
    load, probe = load_files(config["workload"], config["collect"]["drain_s"])
    return RunPlan(testbed=testbed_config(config), sojourn=sojourn_options(config), load=load, probe=probe,
                   load_processes=config["workload"]["load_processes"])
