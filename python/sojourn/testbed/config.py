"""What a testbed is made of: validated, immutable configuration.

Everything here is plain data checked at construction: a ``TestbedConfig`` that
constructs is one the testbed can build (names fit Linux's 15-character interface
limit, addresses fit the address plan, numbers are in range). Errors name the bad
field and what is accepted.

Address plan (the same in every testbed: each testbed has its own namespaces, so
two testbeds with different prefixes never see each other's addresses):

- server namespace ``<prefix>-srv``: ``10.77.0.1/24``, default route via the router;
- client namespace ``<prefix>-cli``: group ``g`` client ``i`` is ``10.78.g.(i+1)``;
- router namespace ``<prefix>-rtr``: ``10.77.0.254`` and ``10.78.255.254``, and the
  WAN emulator's TUN device.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from sojourn.testbed.cpu import parse_cpu_list
from sojourn.testbed.sysnet import DEVICE_ROLES
from sojourn.testbed.uplink import LeafQueue, uplink_commands

SERVER_ADDR = "10.77.0.1"
SERVER_NET_PREFIXLEN = 24
ROUTER_SERVER_SIDE = "10.77.0.254"
CLIENT_NET = "10.78.0.0/16"
ROUTER_CLIENT_SIDE = "10.78.255.254"
MAX_GROUPS = 250
MAX_CLIENTS_PER_GROUP = 250

PREFIX_PATTERN = re.compile(r"^[a-z][a-z0-9]{1,7}$")
CONGESTION_CONTROLS = ("reno", "cubic", "bbr")
LOSS_MODELS = ("bernoulli", "two-state")


class ConfigError(ValueError):
    """A configuration value the testbed cannot build; the message names it."""


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)


@dataclass(frozen=True)
class WanGroup:
    """Clients that share wide-area conditions (000 §5.1 (B): e.g. five groups
    with RTT 0, 37.5, 75, 112.5, 150 ms).

    ``rtt_ms`` is split evenly between the two directions. ``loss`` applies to
    each direction on its own: ``bernoulli`` drops each packet independently
    (Dummynet, 002 §3.4); ``two-state`` keeps a good/bad state per connection
    (002 §3.4, Fig. 5) whose probability of staying bad is ``conditional_loss``
    (35% in 002) and whose overall loss rate is ``loss``. ``rate_bps`` limits each
    direction of the group's access link (None: unlimited); the queue in front of
    it is ``queue_bytes``/``queue_packets`` (None: sized from the bandwidth-delay
    product by the emulator). ``mtu`` (536-1500, 000 Table 2 (I)) clamps the TCP
    MSS of the group's connections to ``mtu - 40``: the server's route to the group
    locks its path MTU (and the MSS it advertises), so an MTU alone needs no emulator;
    with the emulator in the path it also lowers the MSS of the group's SYNs.
    """

    name: str
    clients: int = 1
    rtt_ms: float = 0.0
    jitter_ms: float = 0.0
    loss: float = 0.0
    loss_model: str = "bernoulli"
    conditional_loss: float = 0.35
    rate_bps: int | None = None
    queue_bytes: int | None = None
    queue_packets: int | None = None
    mtu: int = 1500
    reorder: bool = False

    def __post_init__(self) -> None:
        _check(re.fullmatch(r"[A-Za-z0-9_.-]{1,32}", self.name) is not None,
               f"group name {self.name!r}: use 1-32 letters, digits, '_', '.', '-'")
        _check(1 <= self.clients <= MAX_CLIENTS_PER_GROUP,
               f"group {self.name}: clients={self.clients}, accepted 1..{MAX_CLIENTS_PER_GROUP}")
        _check(0.0 <= self.rtt_ms <= 10_000.0, f"group {self.name}: rtt_ms={self.rtt_ms}, accepted 0..10000")
        _check(0.0 <= self.jitter_ms <= 10_000.0, f"group {self.name}: jitter_ms={self.jitter_ms}, accepted 0..10000")
        _check(0.0 <= self.loss < 1.0, f"group {self.name}: loss={self.loss}, accepted 0 <= loss < 1")
        _check(self.loss_model in LOSS_MODELS,
               f"group {self.name}: loss_model={self.loss_model!r}, accepted {', '.join(LOSS_MODELS)}")
        _check(0.0 <= self.conditional_loss < 1.0,
               f"group {self.name}: conditional_loss={self.conditional_loss}, accepted 0 <= p < 1")
        if self.loss_model == "two-state" and self.loss > 0:
            _check(self.conditional_loss >= self.loss,
                   f"group {self.name}: conditional_loss={self.conditional_loss} below loss={self.loss}: "
                   "a two-state model needs conditional loss >= overall loss")
        _check(self.rate_bps is None or 8_000 <= self.rate_bps <= 100_000_000_000,
               f"group {self.name}: rate_bps={self.rate_bps}, accepted None or 8000..1e11")
        _check(self.queue_bytes is None or self.queue_bytes >= 1500,
               f"group {self.name}: queue_bytes={self.queue_bytes}, accepted None or >= 1500")
        _check(self.queue_packets is None or self.queue_packets >= 1,
               f"group {self.name}: queue_packets={self.queue_packets}, accepted None or >= 1")
        _check(536 <= self.mtu <= 1500, f"group {self.name}: mtu={self.mtu}, accepted 536..1500 (000 Table 2 (I))")

    @property
    def emulated(self) -> bool:
        """Whether this group needs the emulator (delay, loss or a rate; an MTU is the
        server's route's, :meth:`route_metrics`)."""
        return bool(self.rtt_ms or self.jitter_ms or self.loss or self.rate_bps)

    def route_metrics(self) -> list[str]:
        """`ip route` arguments of the server's route to this group for its MTU: the path
        MTU locked (so the server's segments to it carry at most ``mtu - 40`` bytes of
        headers and payload) and the MSS the server advertises to it; none at 1500."""
        if self.mtu == 1500:
            return []
        return ["mtu", "lock", str(self.mtu), "advmss", str(self.mtu - 40)]


@dataclass(frozen=True)
class TcpKnobs:
    """TCP settings of one namespace (sysctls inside the namespace, route metrics
    on its default route); the host's own settings are never touched.

    ``syn_backlog`` and ``somaxconn`` default to the papers' SYNQ = ACKQ = 512
    (000 Table 2 (A)). ``cwnd_clamp`` locks the congestion window's upper bound
    (001 §6.3, Fig. 18). ``congestion`` defaults to reno: the papers' hosts ran
    NewReno (002 §4.3), which is what Linux's reno implements (RFC 6582). A
    namespace may only choose algorithms in the host's
    ``net.ipv4.tcp_allowed_congestion_control`` (the testbed does not change it).
    Linux's initial RTO is 1 s and cannot be set per route: ``initial_rto_ms`` sets it for
    the processes the testbed starts in this namespace, through a cgroup BPF sock_ops
    program (sojourn.testbed.rto; 000 Table 2 (F)); ``rto_min_ms`` sets only the lower
    bound of the RTO (see docs/testbed.md). ``rto_max_ms`` caps how far exponential backoff
    (RFC 6298 (5.5)) takes the RTO: ``net.ipv4.tcp_rto_max_ms``, Linux 6.15 and later,
    1000..120000 (Linux's 120 s when None).
    """

    congestion: str = "reno"
    sack: bool = True
    # RFC 7323 timestamps; off, every segment carries 12 bytes more payload (MSS 1460).
    timestamps: bool = True
    syncookies: bool = False
    syn_backlog: int = 512
    somaxconn: int = 512
    initcwnd: int | None = None
    cwnd_clamp: int | None = None
    rto_min_ms: int | None = None
    rto_max_ms: int | None = None
    initial_rto_ms: int | None = None
    # Probes an orphaned socket (closed by its process with bytes unsent) may send unanswered
    # before the kernel drops it without a RST (net.ipv4.tcp_orphan_retries; None = Linux's
    # 0, which means 8). A probe that a full local queue refuses counts, and the next one
    # follows 0.5 s later (TCP_RESOURCE_PROBE_INTERVAL), so 8 last about 4 s.
    orphan_retries: int | None = None
    # Today's loss recovery beyond NewReno: RACK (RFC 8985's time-based loss detection, which
    # lets a response too short for three duplicate ACKs retransmit without a timeout) and
    # its tail loss probe. False sets net.ipv4.tcp_recovery and tcp_early_retrans to 0, as
    # the papers' kernels had neither (000 §2: Linux 2.2.16): a lost segment that no three
    # duplicate ACKs follow waits out a retransmission timeout.
    rack_tlp: bool = True

    def __post_init__(self) -> None:
        _check(self.congestion in CONGESTION_CONTROLS,
               f"congestion={self.congestion!r}, accepted {', '.join(CONGESTION_CONTROLS)}")
        _check(1 <= self.syn_backlog <= 1 << 20, f"syn_backlog={self.syn_backlog}, accepted 1..1048576")
        _check(1 <= self.somaxconn <= 1 << 20, f"somaxconn={self.somaxconn}, accepted 1..1048576")
        _check(self.initcwnd is None or 1 <= self.initcwnd <= 1000, f"initcwnd={self.initcwnd}, accepted None or 1..1000")
        _check(self.cwnd_clamp is None or 1 <= self.cwnd_clamp <= 100_000,
               f"cwnd_clamp={self.cwnd_clamp}, accepted None or 1..100000")
        _check(self.rto_min_ms is None or 1 <= self.rto_min_ms <= 60_000,
               f"rto_min_ms={self.rto_min_ms}, accepted None or 1..60000")
        # The kernel refuses values outside this range (proc_dointvec_minmax).
        _check(self.rto_max_ms is None or 1000 <= self.rto_max_ms <= 120_000,
               f"rto_max_ms={self.rto_max_ms}, accepted None or 1000..120000")
        _check(self.initial_rto_ms is None or 1 <= self.initial_rto_ms <= 120_000,
               f"initial_rto_ms={self.initial_rto_ms}, accepted None or 1..120000")
        # icsk_probes_out, which the kernel compares with it, is 8 bits.
        _check(self.orphan_retries is None or 1 <= self.orphan_retries <= 255,
               f"orphan_retries={self.orphan_retries}, accepted None or 1..255")

    def sysctls(self) -> dict[str, str]:
        """The namespace sysctls these knobs set."""
        return {
            "net.ipv4.tcp_congestion_control": self.congestion,
            "net.ipv4.tcp_sack": str(int(self.sack)),
            "net.ipv4.tcp_timestamps": str(int(self.timestamps)),
            "net.ipv4.tcp_syncookies": str(int(self.syncookies)),
            "net.ipv4.tcp_max_syn_backlog": str(self.syn_backlog),
            "net.core.somaxconn": str(self.somaxconn),
        } | ({"net.ipv4.tcp_orphan_retries": str(self.orphan_retries)} if self.orphan_retries is not None else {}) \
          | ({"net.ipv4.tcp_rto_max_ms": str(self.rto_max_ms)} if self.rto_max_ms is not None else {}) \
          | ({} if self.rack_tlp else {"net.ipv4.tcp_recovery": "0", "net.ipv4.tcp_early_retrans": "0"})

    def route_metrics(self) -> list[str]:
        """`ip route` arguments for the per-route knobs."""
        args: list[str] = []
        if self.initcwnd is not None:
            args += ["initcwnd", str(self.initcwnd)]
        if self.cwnd_clamp is not None:
            # Only a locked RTAX_CWND becomes snd_cwnd_clamp (tcp_init_metrics).
            args += ["cwnd", "lock", str(self.cwnd_clamp)]
        if self.rto_min_ms is not None:
            args += ["rto_min", f"{self.rto_min_ms}ms"]
        return args


def parse_bands(bands: str | None) -> list[int] | None:
    """Size cutoffs like ``"1K,2K,5K,50K"`` (000 §3) as byte counts, or None."""
    if bands is None or bands == "":
        return None
    units = {"": 1, "K": 1024, "M": 1024 * 1024}
    cutoffs = []
    for item in bands.split(","):
        match = re.fullmatch(r"\s*(\d+)\s*([KM]?)\s*", item.upper())
        _check(match is not None, f"bands={bands!r}: item {item!r} is not a size like 1K, 50K or 2048")
        cutoffs.append(int(match.group(1)) * units[match.group(2)])
    _check(cutoffs == sorted(set(cutoffs)), f"bands={bands!r}: cutoffs must be strictly increasing")
    _check(len(cutoffs) <= 7, f"bands={bands!r}: at most 7 cutoffs (8 HTB priorities)")
    return cutoffs


@dataclass(frozen=True)
class TestbedConfig:
    """One testbed: a server behind a bottleneck uplink, client groups behind the
    WAN emulator.

    ``link_bps`` is the server's uplink rate (000 §2.5: 10 Mbit/s); ``queue_bytes`` or
    ``queue_packets`` its queue limit, per band with ``bands`` (None: 1000 packets,
    Linux's default txqueuelen; 000 §3.1's Linux 2.4 held 100).
    ``bands`` are the size cutoffs of kernel-level SRPT (000 §3), None for a
    single FIFO. ``tcp`` applies to the server namespace, ``client_tcp`` (default:
    the same) to the client namespace. ``emulator`` None runs the WAN emulator
    when any group asks for WAN conditions, True always, False never.
    ``emulator_offload`` False makes the emulator read single packets even where
    a pipe only delays (``sojourn-engine wan --no-offload``; for comparisons).
    ``emulator_rps`` steers what the emulator writes to every CPU (RPS on the TUN
    device's receive queue), so the receiving hosts' stacks run beside its thread.
    """

    __test__ = False  # not a pytest test class despite the name

    prefix: str = "sjtb"
    link_bps: int = 10_000_000
    queue_bytes: int | None = None
    queue_packets: int | None = None
    bands: str | None = None
    groups: tuple[WanGroup, ...] = field(default_factory=lambda: (WanGroup(name="g0"),))
    tcp: TcpKnobs = field(default_factory=TcpKnobs)
    client_tcp: TcpKnobs | None = None
    emulator: bool | None = None
    emulator_offload: bool = True
    emulator_rps: bool = False
    seed: int = 1
    # CPUs' worth of time the server under test may use (sojourn.testbed.cpu); None = no quota.
    server_cpus: float | None = None
    # The quota's period (cgroup cpu.max): the server runs server_cpus x this, then waits.
    server_cpu_period_ms: float = 100.0
    # The CPUs the server under test may run on, a list such as "1" (sojourn.testbed.cpu); None = any.
    server_cpuset: str | None = None

    def __post_init__(self) -> None:
        _check(PREFIX_PATTERN.fullmatch(self.prefix) is not None,
               f"prefix={self.prefix!r}: use 2-8 lowercase letters/digits starting with a letter "
               "(it names namespaces and interfaces, which Linux limits to 15 characters)")
        _check(8_000 <= self.link_bps <= 100_000_000_000, f"link_bps={self.link_bps}, accepted 8000..1e11")
        _check(self.queue_bytes is None or self.queue_bytes >= 1500,
               f"queue_bytes={self.queue_bytes}, accepted None or >= 1500")
        _check(self.queue_packets is None or self.queue_packets >= 1,
               f"queue_packets={self.queue_packets}, accepted None or >= 1")
        # The uplink builder's own rules (one queue limit, a rate the bands' leaves fit in),
        # checked here so a bad config fails before any device exists.
        try:
            uplink_commands("check", self.link_bps, self.uplink_queue, self.cutoffs)
        except ValueError as err:
            raise ConfigError(str(err)) from None
        _check(self.server_cpus is None or 0.01 <= self.server_cpus <= 1024,
               f"server_cpus={self.server_cpus}, accepted None or 0.01..1024")
        _check(1 <= self.server_cpu_period_ms <= 1000,
               f"server_cpu_period_ms={self.server_cpu_period_ms}, accepted 1..1000 (the kernel's cpu.max bounds)")
        if self.server_cpuset is not None:
            try:
                parse_cpu_list(self.server_cpuset)
            except ValueError as err:
                raise ConfigError(f"server_cpuset: {err}") from None
        object.__setattr__(self, "groups", tuple(self.groups))
        _check(1 <= len(self.groups) <= MAX_GROUPS, f"{len(self.groups)} groups, accepted 1..{MAX_GROUPS}")
        names = [g.name for g in self.groups]
        _check(len(set(names)) == len(names), f"group names repeat: {names}")
        _check(0 <= self.seed < 1 << 63, f"seed={self.seed}, accepted 0..2^63-1")
        emulated = [g.name for g in self.groups if g.emulated]
        _check(self.emulator is not False or not emulated,
               f"emulator=False but groups {emulated} ask for WAN conditions (rtt, jitter, loss or rate), "
               "which only the emulator provides: use emulator=None or True")

    @property
    def cutoffs(self) -> list[int] | None:
        return parse_bands(self.bands)

    @property
    def uplink_queue(self) -> LeafQueue:
        return LeafQueue.of(self.queue_bytes, self.queue_packets)

    @property
    def uses_emulator(self) -> bool:
        if self.emulator is None:
            return any(g.emulated for g in self.groups)
        return self.emulator

    def ns(self, role: str) -> str:
        """Namespace name of ``role`` (srv, cli or rtr)."""
        return f"{self.prefix}-{role}"

    def dev(self, role: str) -> str:
        """Interface name: ``s`` server uplink, ``sr`` router side of it, ``c``
        clients' link, ``cr`` router side of it, ``t`` emulator TUN."""
        assert role in DEVICE_ROLES, role
        return f"{self.prefix}{role}"

    def group_addrs(self) -> dict[str, list[str]]:
        """Client addresses per group name (group g client i = 10.78.g.(i+1))."""
        return {group.name: [str(net[i + 1]) for i in range(group.clients)]
                for group, net in zip(self.groups, self.group_nets())}

    def group_nets(self) -> list[ipaddress.IPv4Network]:
        """Each group's /24 of the clients' network, in order (10.78.g.0/24)."""
        return list(ipaddress.ip_network(CLIENT_NET).subnets(new_prefix=24))[:len(self.groups)]
