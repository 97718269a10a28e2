"""001: Ruan & Pai, "The Origins of Network Server Latency & the Myth of Connection Scheduling".

Experiments: the latency profile and service inversion against load as a fraction of each
server's own capacity (Figs. 1-7, eq. 3), ready events per dispatch (Figs. 13-14, from
sojourn's /metrics), and the congestion-window clamp (Fig. 18).
"""

from __future__ import annotations

import math

import numpy as np

from sojourn.reproduce import Context, Entry, Paper, TimeScale, past_one_in_every_repetition, per_rep_quotient, rows_of
from sojourn.reproduce.rows import Measure, Row, Why, about_one, bound, direction, measured, point
from sojourn.runner.spec import run_name

EXPERIMENTS = [
    Entry("capacity", "infinite-demand capacity of each server (§3.1)", spec="experiments/001/capacity.toml"),
    Entry("events", "sojourn's ready events per epoll_wait over half an hour of infinite demand (§6.1, Figs. 13-14)",
          spec="experiments/001/events.toml"),
    Entry("latency", "latency profile and service inversion vs load fraction (Figs. 1-7)",
          spec="experiments/001/latency.toml"),
    Entry("cwnd", "mean latency vs congestion-window clamp at load 0.9 (Fig. 18)", spec="experiments/001/cwnd.toml"),
    Entry("variants", "sojourn's own variants and nginx at load 0.9 (Table 2, Figs. 8-12)",
          spec="experiments/001/variants.toml"),
    Entry("apache-burst", "apache2-prefork's runnable processes under infinite demand, 256 vs 1024 (§6.2, Figs. 15-17)",
          spec="experiments/001/apache-burst.toml"),
]

# §3.1: "Apache is able to achieve 305 Mb/s, while Flash achieves 352 Mb/s".
APACHE_MBPS, FLASH_MBPS = 305, 352
# §5.2 (Fig. 12): service inversion of the new Flash on the in-memory data set and the large one.
INVERSION_IN_MEMORY, INVERSION_LARGE = 0.33, 0.35
# Table 2: old Flash against new Flash, mean latency (ms) at load 0.90 and throughput (Mb/s).
TABLE2_LATENCY, TABLE2_THROUGHPUT = (180.21, 23.30), (352.0, 450.0)
# §6.2 (Fig. 17): the share of the time the system is idle, by Apache's process count.
IDLE_SHARE = {256: 0.20, 1024: 0.40}
# The paper's printed values: ready events per dispatch (§6, Figs. 13-14) and Fig. 18's means (s).
EVENTS_FIXED, EVENTS_ORIGINAL = 1.6, 61
CWND_UNCLAMPED, CWND_BEST = 0.033, 0.010
# An Ethernet frame at the 1500-byte MTU: a mean queue below it is a link that scarcely queued.
PACKET_BYTES = 1514
# Linux's initial congestion window (RFC 6928, TCP_INIT_CWND), which a locked route cwnd clamps too.
LINUX_INITIAL_WINDOW = 10


def _points(ctx: Context, entry: str, variant: str) -> list:
    return sorted({rep.sweep_value for rep in ctx.reps(entry) if rep.variant == variant and rep.sweep_value is not None})


def _link_bound(ctx: Context, e: str) -> str:
    """Each server's capacity as a share of its uplink, when every one came within 10% of it:
    then the link, not the server, set the capacity (the paper's servers were CPU- and
    disk-bound behind gigabit Ethernet)."""
    shares = {rep.run: rep.summary["capacity_bps"] / rep.link_bps for rep in ctx.complete_reps(e)
              if rep.summary.get("capacity_bps")}
    if not shares or min(shares.values()) < 0.9:
        return ""
    return (f"every server reached {min(shares.values()):.0%}-{max(shares.values()):.0%} of its uplink "
            "(capacity_bps / link rate): the link, not the server, set the capacity here")


# 001 §6.1: Fig. 13's ready events were "measured in half an hour"; the capacity the same run
# measures has no timing in the paper.
EVENTS_TIME = TimeScale((("level_s", 1800.0),), "Figs. 13-14's events were counted over half an hour (001 §6.1)")


def _capacity_rows(ctx: Context) -> list[Row]:
    e = "capacity"
    link = _link_bound(ctx, e)
    rows = [ctx.row(e, f"{server} / apache2 infinite-demand capacity (bits/s)",
                    direction(FLASH_MBPS / APACHE_MBPS, f"the event-driven Flash / Apache: {FLASH_MBPS} / {APACHE_MBPS} Mb/s"),
                    ctx.ratio((e, server, "capacity_bps"), (e, "apache2", "capacity_bps")), measured(link) if link else None)
            for server in ("sojourn", "nginx")]
    return rows


def _events_rows(ctx: Context) -> list[Row]:
    # §6.1, Figs. 13-14: "all of the clients issuing requests in an infinite demand model".
    e = "events"
    users = (ctx.config(e, "sojourn", "workload.levels") or [None])[0]
    # The level alone (after its warm-up, to a second before its end: execute.LEVEL_END_LEAD_S)
    # where the repetitions recorded it; the whole run, its ramp and drain too, where they did not.
    events = ctx.measure(e, "sojourn", f"levels.{users}.server.events_per_wait_mean")
    span = "the level after its warm-up"
    if not events.ok:
        events = ctx.measure(e, "sojourn", "events_per_wait_mean")
        span = ("the whole run, its start and drain included (the level alone was not recorded before 7 Dec 2026; "
                "those nearly empty waits lower the mean)")
    return [ctx.row(e, "sojourn: mean ready events per epoll_wait at infinite demand (Figs. 13-14)",
                    point(EVENTS_FIXED, f"the fixed Flash; the original: {EVENTS_ORIGINAL}"), events,
                    _saturated_loop_why(ctx, e, events),
                    note=f"from sojourn's sojourn_epoll_ready_events histogram over {span}; nginx exposes no "
                         "such count", time_scale=EVENTS_TIME)]


# A server's event loop counted as saturated from this share of its workers' CPU on.
LOOP_SATURATED = 0.95


def _saturated_loop_why(ctx: Context, e: str, events: Measure) -> Why | None:
    """Why sojourn's waits returned far more than the fixed Flash's 1.6 events at infinite
    demand: its one worker was CPU-bound (the median of counters.csv's server_cpu at least
    LOOP_SATURATED of its workers), so every connection whose request came during a pass over
    the ready ones was ready at the next wait: a saturated loop's batch is its backlog."""
    workers = ctx.config(e, "sojourn", "server.workers")
    cpu = ctx.counters(e, "sojourn", lambda c: float(c["server_cpu"].iloc[1:].median()), "server_cpu")
    established = ctx.counters(e, "sojourn", lambda c: float(c["established"].iloc[1:].median()), "established")
    if not (events.ok and cpu.ok and established.ok and workers and cpu.value >= LOOP_SATURATED * workers):
        return None
    return measured(f"sojourn's {workers} worker used {cpu.value:.2f} CPU s/s (median of counters.csv's server_cpu) "
                    f"with {established.value:.0f} connections established: saturated, it found ready at each wait "
                    "every connection whose request came during its last pass over the ready ones, so its batch was "
                    f"its backlog, {events.value:.0f} events")


# The latency runs' servers: apache2-prefork with Apache 1.3's 256 processes and with 1024,
# one for each of the generator's 1020 clients (001 §6.2 ran both), and with 1024 where each
# client holds one connection at most.
ONE_CONNECTION_SERVER = "apache2-prefork-1024-one-conn"
LATENCY_SERVERS = ("sojourn", "nginx", "apache2-prefork", "apache2-prefork-1024", ONE_CONNECTION_SERVER)
# Below its capacity a server completes what it is offered: 001 reports the latency of served
# requests at 20-95% of each server's capacity, with nothing said to be refused or lost.
COMPLETED_SHARE = 0.99
# The latency runs' capacity probe and its warm-up end by then (level_s 20 + warmup_s 5).
AFTER_PROBE_S = 30


def _median_after_probe(ctx: Context, e: str, run: str, column: str) -> Measure:
    """The median of a counters.csv column over the samples after the capacity probe."""
    return ctx.counters(e, run, lambda c: float(c.loc[c["t_s"] > AFTER_PROBE_S, column].median()), column)


def _completed_share(summary: dict) -> float | None:
    """Requests completed over those the generator scheduled (every one ends in one outcome)."""
    completed, incomplete = summary.get("completed"), summary.get("incomplete")
    if not isinstance(completed, (int, float)) or not isinstance(incomplete, (int, float)) or not completed + incomplete:
        return None
    return completed / (completed + incomplete)


def _least_completed(ctx: Context, e: str, server: str) -> tuple[float, Measure]:
    """The load at which ``server`` completed the least share of its offered requests, and
    that share."""
    shares = {p: ctx.from_summary(e, run_name(server, "load_fraction", p), _completed_share, "completed share")
              for p in _points(ctx, e, server)}
    shares = {p: m for p, m in shares.items() if m.ok}
    if not shares:
        return math.nan, Measure(absent=f"no complete repetition of {server} counts its outcomes")
    load = min(shares, key=lambda p: shares[p].value)
    return load, shares[load]


def _processes_why(ctx: Context, e: str, server: str, load: float, share: Measure) -> Why | None:
    """Why a process-per-connection server completed only part of what it was offered: fewer
    processes than client connections, each connection holding its process while it idles
    between its client's requests (KeepAlive), so only processes / clients of the connections
    are served at once and the rest wait in the accept queue. Measured when the share is within
    20% of processes / clients and the connections established outnumbered the processes."""
    from sojourn.servers import PREFORK_PROCESSES
    if not server.startswith("apache2-prefork"):
        return None
    run = run_name(server, "load_fraction", load)
    processes = ctx.config(e, run, "server.max_connections") or PREFORK_PROCESSES
    clients = ctx.config(e, run, "workload.clients")
    per_conn = ctx.config(e, run, "workload.persistent")
    established = _median_after_probe(ctx, e, run, "established")
    if not (clients and per_conn and established.ok):
        return None
    if processes >= clients:
        return _more_connections_than_processes_why(ctx, e, run, load, processes, clients, established)
    served = processes / clients
    if not (share.value <= served * 1.2 and established.value > processes):
        return None
    rate = ctx.mean(e, run, "offered.rate_rps")
    timeout = ctx.config(e, run, "workload.timeout_s")
    lifetime = f", {per_conn * clients / rate:.2f} s at load {load:g}" if rate == rate and rate else ""
    return measured(f"apache2-prefork had {processes} processes for the generator's {clients} client connections "
                    f"({established.value:.0f} established in the median sample after the probe, counters.csv): a "
                    f"connection holds its process while it idles between its client's requests (KeepAlive, "
                    f"{per_conn} requests a connection at the client's pace{lifetime}), so at most {served:.3f} of "
                    f"the connections are served at a time and the others wait in the accept queue, until their "
                    f"{timeout:g}-s timeout or the generator's file descriptors run out")


def _more_connections_than_processes_why(ctx: Context, e: str, run: str, load: float, processes: int,
                                         clients: int, established: Measure) -> Why | None:
    """Why a process per client connection still left requests unserved: a client whose
    connection is busy opens another, so the connections can outgrow the processes; held
    by idle connections, the processes then accept no more and the accept queue fills.
    Measured when the median sample had more connections established than processes and,
    where it ran, the same processes with each client held to one connection (the isolating
    variant) completed what they were offered at that load."""
    if not established.value > processes:
        return None
    queued = _median_after_probe(ctx, e, run, "accept_queue")
    queue = f", the accept queue holding {queued.value:.0f} in the median sample" if queued.ok else ""
    one_connection = ctx.from_summary(e, run_name(ONE_CONNECTION_SERVER, "load_fraction", load), _completed_share,
                                      "completed share")
    isolated = ""
    if one_connection.ok:
        if one_connection.value < COMPLETED_SHARE:
            return None
        isolated = (f"; with each client held to one connection ({ONE_CONNECTION_SERVER}) the same processes "
                    f"completed {one_connection.value:.3f} of what they were offered at load {load:g}")
    return measured(f"apache2-prefork had {processes} processes for the generator's {clients} clients, but the clients "
                    f"held {established.value:.0f} connections in the median sample after the probe (counters.csv"
                    f"{queue}): a client whose connection is busy opens another, every process was held by a "
                    "connection idling between its client's requests (KeepAlive), and the connections beyond them "
                    f"waited, as with 256 processes{isolated}")


def _latency_rows(ctx: Context) -> list[Row]:
    e = "latency"
    rows = []
    unserved: dict[str, Why | None] = {}  # why each server left requests unserved, for two rows
    for server in LATENCY_SERVERS:
        if not _points(ctx, e, server):
            continue
        load, share = _least_completed(ctx, e, server)
        unserved[server] = _processes_why(ctx, e, server, load, share)
        claim = f"{server}: least share of offered requests completed, over the loads" + (
            f" (at {load:g})" if load == load else "")
        rows.append(ctx.row(e, claim, bound(">=", COMPLETED_SHARE, text="below capacity a server completes what it "
                                                                        "is offered (001 measures served requests "
                                                                        "at 20-95% of capacity)"),
                            share, unserved[server]))
    # Figs. 3-4 at load 0.90: "Flash returns very few responses in less than 10ms when the load
    # exceeds 90%, whereas Apache still delivers over 60% of its responses within that time".
    apache = bound(">=", 0.6, text="Apache: over 60% within 10 ms")
    # "Very few" as at most 10% is ours: two decimals, so 0.14 does not round to it.
    very_few = bound("<=", 0.1, text="Flash (select() batching): very few within 10 ms", digits=2)
    for server, claim in (("apache2-prefork", apache), ("apache2-prefork-1024", apache), (ONE_CONNECTION_SERVER, apache),
                          ("sojourn", very_few)):
        if 0.9 in _points(ctx, e, server):
            run = run_name(server, "load_fraction", 0.9)
            note = ("sojourn in the original Flash's place: event-driven, without its select() batching (001 §4's "
                    "fixes)" if server == "sojourn" else _completed_note(ctx, e, run))
            rows.append(ctx.row(e, f"{server}: share of responses within 10 ms at load 0.9 (Figs. 3-4)", claim,
                                ctx.measure(e, run, "response_share_within_10ms"),
                                _unbatched_why(ctx, e, run) if server == "sojourn" else None, note=note))
    for server in LATENCY_SERVERS:
        points = _points(ctx, e, server)
        if not points:
            continue
        top, low = max(points), min(points)
        rows.append(ctx.row(e, f"{server}: service inversion at load {top:g}",
                            bound(">", 0.5, text="exceeds half the worst case at high load (Fig. 7: Apache and Flash)"),
                            ctx.measure(e, run_name(server, "load_fraction", top), "service_inversion"),
                            note=_completed_note(ctx, e, run_name(server, "load_fraction", top))))
        runs = (run_name(server, "load_fraction", top), run_name(server, "load_fraction", low))
        rows.append(ctx.row(e, f"{server}: mean latency at load {top:g} / at {low:g}",
                            bound(">", 1, text="latency grows with load (Figs. 1-2)"),
                            ctx.ratio((e, runs[0], "response_mean"), (e, runs[1], "response_mean")),
                            _unserved_mean_why(ctx, e, server, (low, top), unserved[server])
                            or _every_repetition_grew_why(ctx, e, runs)))
    return rows


def _every_repetition_grew_why(ctx: Context, e: str, runs: tuple[str, str]) -> Why | None:
    """Why a mean that grew with load in every repetition misses the strict bound: the 90%
    t-interval of a few ratios this spread reaches below 1. Measured when every repetition's
    ratio exceeds 1; the spread is the low load's mean, which varied between repetitions."""
    top, low = (ctx.per_rep(e, run, "response_mean") for run in runs)
    every = past_one_in_every_repetition(per_rep_quotient(top, low))
    if every is None:
        return None
    return measured(f"the mean grew {every}, their spread being the low load's mean, "
                    f"{min(low.values()) * 1000:.2f}-{max(low.values()) * 1000:.2f} ms between "
                    f"repetitions against {min(top.values()) * 1000:.1f}-{max(top.values()) * 1000:.1f} ms at the top")


def _unbatched_why(ctx: Context, e: str, run: str) -> Why | None:
    """Why sojourn, in the original Flash's place, answered most requests within 10 ms: the
    paper puts the original's latency down to its batching (§6.1: 61 ready events per
    select() against the fixed Flash's 1.6, whose median was about 1 ms, Fig. 8). Measured when
    sojourn's epoll_wait returned fewer than a tenth of the original's events at that load."""
    events = ctx.measure(e, run, "after_probe.events_per_wait_mean")
    if not (events.ok and events.value < EVENTS_ORIGINAL / 10):
        return None
    median = ctx.mean(e, run, "response_median")
    return measured(f"the paper's few-within-10-ms is the original Flash's batching, {EVENTS_ORIGINAL} ready events "
                    f"per select(); sojourn's epoll_wait returned {events.value:.2f} at this load (sojourn_epoll_ready_"
                    f"events over the load level), near the fixed Flash's {EVENTS_FIXED:g}, and its median response "
                    f"took {median * 1000:.2f} ms, as the fixed Flash's about 1 ms (Fig. 8)")


def _completed_note(ctx: Context, e: str, run: str) -> str:
    """Says a figure is of the completed requests only when the run completed less than
    :data:`COMPLETED_SHARE` of what it was offered."""
    share = ctx.from_summary(e, run, _completed_share, "completed share")
    if not share.ok or share.value >= COMPLETED_SHARE:
        return ""
    return (f"of the completed requests only: {run} completed {share.value:.1%} of those offered (the completion "
            "row says why)")


def _unserved_mean_why(ctx: Context, e: str, server: str, loads: tuple[float, float], processes: Why | None) -> Why | None:
    """Why a server's mean fell with load: measured when its processes served only part of
    the connections (``processes``, :func:`_processes_why`) and the completed requests spent
    most of their time before the first byte, the wait for a process, which is as long as a
    served connection's life at its client's pace, shorter the higher the rate."""
    if processes is None:
        return None
    runs = [run_name(server, "load_fraction", p) for p in loads]
    waits = [ctx.mean(e, run, "ttfb_mean") / ctx.mean(e, run, "response_mean") for run in runs]
    if not all(w == w and w >= 0.5 for w in waits):
        return None
    means = [ctx.mean(e, run, "response_mean") for run in runs]
    return measured(f"the means are of the completed requests, which spent {math.floor(min(waits) * 1000) / 10:.1f}% "
                    f"or more of their time "
                    f"before the first byte, waiting for a process ({means[0]:.3g} s at {loads[0]:g}, {means[1]:.3g} s at "
                    f"{loads[1]:g}): a process is freed when its connection's last request is served, and a "
                    "connection's life at its client's pace is shorter the higher the rate. " + processes.text)


def _cwnd_means(ctx: Context, variant: str) -> tuple[dict, int | None]:
    """Mean latency per clamp (0 = none) of a variant's published runs, and the best clamp
    (None without an unclamped run or a clamped one)."""
    e = "cwnd"
    means = {p: ctx.mean(e, run_name(variant, "cwnd_clamp", p), "response_mean") for p in _points(ctx, e, variant)}
    means = {p: m for p, m in means.items() if m == m}
    clamps = [p for p in means if p]
    return means, (min(clamps, key=means.get) if 0 in means and clamps else None)


def _cwnd_rows(ctx: Context) -> list[Row]:
    e = "cwnd"
    rows = []
    for variant in ("persistent", "nonpersistent"):
        best = _cwnd_means(ctx, variant)[1]
        if best is None:
            continue
        measure = ctx.ratio((e, run_name(variant, "cwnd_clamp", 0), "response_mean"),
                            (e, run_name(variant, "cwnd_clamp", best), "response_mean"))
        if variant == "persistent":
            claim = direction(CWND_UNCLAMPED / CWND_BEST, "33 ms -> as little as 10 ms")
        else:
            claim = bound(">", 1, text="a clamp near the mean transfer lowers the mean (Fig. 18)")
        rows.append(ctx.row(e, f"{variant}: mean latency unclamped / with the best clamp ({best} segments)",
                            claim, measure, _cwnd_costlier_why(ctx, variant, best)
                            or _generator_lag_why(ctx, variant, best, measure)
                            or _little_to_clamp_why(ctx, variant, best)))
    return rows


# A repetition's mean counted as following its generator's lateness from this correlation on.
LAG_FOLLOWED = 0.7


def _generator_lag_why(ctx: Context, variant: str, best: int, ratio: Measure) -> Why | None:
    """Why a ratio of two clamps is no difference shown: over the variant's repetitions the
    mean rose with how late the generator sent (summary.json lag_p99; server and clients share
    the machine's two cores at load 0.9, and 001 does not judge the lag), so it varied more
    between repetitions of one clamp than between clamps. Measured when Pearson's r of the
    two is at least LAG_FOLLOWED, 1 is inside the ratio's 90% interval and the two clamps' means
    differ by less than one of them spread over its repetitions."""
    e = "cwnd"
    pairs = []  # (lag p99, mean) of every repetition of every clamp
    means_of = {}  # clamp -> repetition -> mean
    for clamp in _points(ctx, e, variant):
        run = run_name(variant, "cwnd_clamp", clamp)
        lag, means_of[clamp] = ctx.per_rep(e, run, "lag_p99"), ctx.per_rep(e, run, "response_mean")
        pairs += [(lag[rep], means_of[clamp][rep]) for rep in lag
                  if rep in means_of[clamp] and not math.isnan(lag[rep] + means_of[clamp][rep])]
    if len(pairs) < 3 or not ratio.ci or not ratio.ci[0] <= 1 <= ratio.ci[1]:
        return None
    lags, means = zip(*pairs)
    r = float(np.corrcoef(lags, means)[0, 1])
    if not r >= LAG_FOLLOWED:
        return None
    spread = {p: means_of[p] for p in (0, best) if means_of.get(p)}
    if len(spread) < 2:
        return None
    within = max(max(v.values()) - min(v.values()) for v in spread.values())
    between = abs(np.mean(list(spread[best].values())) - np.mean(list(spread[0].values())))
    if not within > between:
        return None
    ranges = "; ".join(f"{'unclamped' if p == 0 else f'{p} segments'} {min(v.values()) * 1e3:.1f}-"
                       f"{max(v.values()) * 1e3:.1f} ms" for p, v in spread.items())
    return measured(f"over the {len(pairs)} repetitions of {variant} the mean rose with how late the generator sent "
                    f"(lag p99 {min(lags) * 1e3:.1f}-{max(lags) * 1e3:.1f} ms, Pearson r {r:.2f}; server and clients "
                    f"share two cores at load 0.9), more between repetitions of one clamp ({ranges}) than between "
                    "clamps: 1 is inside the 90% interval, and the mean's side of 1 is noise")


# The transfer after the first byte counted as a small part of the mean below this share.
TRANSFER_SMALL = 0.1


def _little_to_clamp_why(ctx: Context, variant: str, best: int) -> Why | None:
    """Why the clamp gained less than the paper's 3.3x: 001 §6.3 puts the gain down to the
    network's unfairness (large windows penalizing small responses); measured when the
    unclamped transfer after the first byte (response_mean less ttfb_mean) was under
    TRANSFER_SMALL of the mean, so the mean was the wait for the first byte, which no window
    sends, and the clamp lowered the mean."""
    e = "cwnd"
    runs = {p: run_name(variant, "cwnd_clamp", p) for p in (0, best)}
    mean = {p: ctx.mean(e, run, "response_mean") for p, run in runs.items()}
    ttfb = {p: ctx.mean(e, run, "ttfb_mean") for p, run in runs.items()}
    cpu = {p: _median_after_probe(ctx, e, run, "server_cpu").value for p, run in runs.items()}
    transfer = mean[0] - ttfb[0]
    if not (0 <= transfer < TRANSFER_SMALL * mean[0] and mean[best] < mean[0]):
        return None
    return measured(f"unclamped, the transfer after the first byte took {transfer * 1e3:.2f} ms of the "
                    f"{mean[0] * 1e3:.2f}-ms mean ({transfer / mean[0]:.0%}; summary.json ttfb_mean): there was little "
                    "of the network's unfairness (001 §6.3) for a clamp to remove; the wait for the first byte fell "
                    f"from {ttfb[0] * 1e3:.2f} to {ttfb[best] * 1e3:.2f} ms with the {best}-segment clamp, the "
                    f"server's CPU from {cpu[0]:.2f} to {cpu[best]:.2f} s/s (median after the probe)")


def _cwnd_costlier_why(ctx: Context, variant: str, best: int) -> Why | None:
    """Why even the best clamp raised the mean, when one part of a response carries at least
    half the rise: the handshake (SYNs dropped at the listen queue wait out the 1-s initial
    RTO), or, below Linux's initial window on connections that each start one, the transfer
    after the first byte."""
    e = "cwnd"
    runs = {p: run_name(variant, "cwnd_clamp", p) for p in (0, best)}
    response = {p: ctx.mean(e, run, "response_mean") for p, run in runs.items()}
    rise = response[best] - response[0]
    if not rise > 0:
        return None
    handshake = {p: ctx.mean(e, run, "connect_mean") for p, run in runs.items()}
    dropped = {p: ctx.mean(e, run, "syn_drops") for p, run in runs.items()}
    if handshake[best] - handshake[0] >= rise / 2 and dropped[best] > dropped[0]:
        return measured(f"the clamped runs lost the time in their handshakes: {handshake[best] * 1000:.2f} ms a "
                        f"connection against {handshake[0] * 1000:.2f} unclamped (summary.json connect_mean), "
                        f"{(handshake[best] - handshake[0]) / rise:.0%} of the mean's rise, with {dropped[best]:.0f} "
                        f"SYNs dropped at the listen queue against {dropped[0]:.0f}; each waits out the 1-s initial "
                        "RTO, a cost of the server's accept pace, not of the window")
    after = {p: response[p] - ctx.mean(e, run, "ttfb_mean") for p, run in runs.items()}
    if variant == "nonpersistent" and best < LINUX_INITIAL_WINDOW and after[best] - after[0] >= rise / 2:
        return measured(f"every response starts a connection's first window, which Linux opens at "
                        f"{LINUX_INITIAL_WINDOW} segments (RFC 6928) where the paper's stack opened at 2-4 (RFC "
                        f"3390): a {best}-segment clamp shrinks it, and the time after the first byte rose from "
                        f"{after[0] * 1000:.2f} to {after[best] * 1000:.2f} ms a response, "
                        f"{(after[best] - after[0]) / rise:.0%} of the mean's rise")
    return None


# Table 2 compares the paper's own server before and after its fixes; here each of sojourn's
# variants stands where the old Flash stood, against sojourn's default.
VARIANT_NOTE = "a variant of ours in the old Flash's place, against sojourn's default in the new one's"


def _variants_rows(ctx: Context) -> list[Row]:
    e = "variants"
    at = lambda variant: run_name(variant, "load_fraction", 0.9)  # noqa: E731
    rows = [ctx.row(e, "service inversion, every file from the server's memory / files above 64 KiB by sendfile (Fig. 12)",
                    point(INVERSION_IN_MEMORY / INVERSION_LARGE, "0.33 in memory against 0.35: virtually no difference"),
                    ctx.ratio((e, at("sojourn-memory"), "service_inversion"), (e, at("sojourn"), "service_inversion")),
                    note="the catalogue fits in this machine's page cache either way (the paper's 3.3 GB data set did "
                         "not fit its memory): this compares how the server reads files, not disk against memory")]
    # Table 2: the new Flash's mean latency fell 7.7x while its throughput rose only 28%, so
    # "the latency improvement do[es] not stem purely from extra capacity".
    latency_gain = TABLE2_LATENCY[0] / TABLE2_LATENCY[1]
    capacity_gain = TABLE2_THROUGHPUT[1] / TABLE2_THROUGHPUT[0]
    for variant in ("sojourn-sendfile", "sojourn-one-writer", "sojourn-quantum-4k", "nginx"):
        rows.append(ctx.row(e, f"{variant} / sojourn mean latency at load 0.9",
                            direction(latency_gain, "old Flash / new Flash: 180.21 / 23.30 ms (Table 2)"),
                            ctx.ratio((e, at(variant), "response_mean"), (e, at("sojourn"), "response_mean")),
                            _link_bound_why(ctx, e, (at(variant), at("sojourn"))), note=VARIANT_NOTE))
        rows.append(ctx.row(e, f"sojourn / {variant} capacity (requests/s)",
                            direction(capacity_gain, "new Flash / old Flash: 450 / 352 Mb/s (Table 2)"),
                            ctx.ratio((e, at("sojourn"), "capacity_rps"), (e, at(variant), "capacity_rps")),
                            _link_bound_why(ctx, e, (at("sojourn"), at(variant))), note=VARIANT_NOTE))
    return rows


def _link_bound_why(ctx: Context, e: str, runs: tuple[str, str]) -> Why | None:
    """Why two servers did not differ: measured when both capacities were the link's (the
    probe's response bodies at 85% or more of the link rate), so no server mechanism could
    raise the capacity, and load 0.9 of it offered both the same load on the same link."""
    shares = [ctx.mean(e, run, "capacity_bps") / ctx.mean(e, run, "link_bps") for run in runs]
    if not all(math.isfinite(share) and share >= 0.85 for share in shares):
        return None
    return measured(f"both capacities were the link's: the capacity probe's response bodies filled {shares[0]:.3f} "
                    f"({runs[0]}) and {shares[1]:.3f} ({runs[1]}) of its rate, the rest being headers, so neither "
                    "server's mechanisms set the bottleneck")


def _unblocked_why(ctx: Context, e: str, run: str) -> Why | None:
    """Why apache2 was rarely idle: the paper puts its idle time down to processes blocked in
    the kernel, on disk and on locks (§6.2). Measured when a thread of the run was in state D
    in under 1% of the samples and the machine scarcely waited for I/O (PSI): blocking that
    rare cannot idle the server for the paper's 20-40% of the time."""
    blocked = ctx.counters(e, run, lambda c: float((c["server_blocked"] > 0).mean()), "server_blocked")
    io_wait = ctx.counters(e, run, lambda c: float(c["host_io_stall"].mean()), "host_io_stall")
    if not (blocked.ok and io_wait.ok and blocked.value < 0.01 and io_wait.value < 0.01):
        return None
    reps = "its repetition" if blocked.repetitions == 1 else f"its {blocked.repetitions} repetitions"
    when = "in none of the" if blocked.value == 0 else f"in {blocked.value:.2%} of the"
    return measured(f"a thread of apache2 was blocked (state D) {when} one-second samples of {reps}, and the machine "
                    f"waited for I/O {io_wait.value:.2%} of the time: the blocking on disk and locks the paper puts "
                    "its idle time down to scarcely happened here (the files were read from memory)")


def _network_paced_why(ctx: Context, e: str, run: str, processes: int, unblocked: Why | None) -> Why | None:
    """Why the run queue stayed short: measured when the uplink carried 85% or more of its
    rate and threads were scarcely ever blocked in state D (``unblocked``, the run's
    :func:`_unblocked_why`), the locking the paper reads the long queue as (§6.2): the link
    and the clients, not the CPU, set the pace."""
    carried = ctx.counters(e, run, lambda c: float(c["uplink_util"].mean()), "uplink_util")
    connections = ctx.counters(e, run, lambda c: float(c["established"].median()), "established")
    sending = ctx.counters(e, run, lambda c: float(c["sockets_unacked"].median()), "sockets_unacked")
    if unblocked is None or not (carried.ok and connections.ok and sending.ok and carried.value >= 0.85):
        return None
    return measured(f"the uplink carried {carried.value:.2f} of its rate and threads were scarcely ever blocked "
                    "(state D), the locking the paper reads the long queue as; in the median sample the "
                    f"{processes} processes had {connections.value:.0f} connections, {sending.value:.0f} of them "
                    "holding unacknowledged bytes, so the others slept on a socket or in accept, paced by the link and the clients, not "
                    "waiting for a CPU")


def _apache_burst_rows(ctx: Context) -> list[Row]:
    e = "apache-burst"
    rows = []
    for processes, words in ((256, "generally much lower than the maximum"), (1024, "always close to the maximum")):
        run = f"prefork-{processes}"
        idle = ctx.counters(e, run, lambda c: float((c["server_runnable"] == 0).mean()), "server_runnable")
        unblocked = _unblocked_why(ctx, e, run)
        rows.append(ctx.row(e, f"{processes} processes: share of one-second samples with no runnable process (Fig. 17)",
                            point(IDLE_SHARE[processes], f"{IDLE_SHARE[processes]:.0%} of the time idle"), idle,
                            unblocked))
        # Eq. 5: load level = runnable processes / processes (the configured count).
        level = ctx.counters(e, run, lambda c: float((c["server_runnable"] / processes).median()), "server_runnable")
        # Two decimals: half the processes is our reading of the words, not a number the paper printed.
        claim = (bound("<=", 0.5, text=words, digits=2) if processes == 256 else bound(">=", 0.5, text=words, digits=2))
        rows.append(ctx.row(e, f"{processes} processes: median load level, runnable / processes (Figs. {15 if processes == 256 else 16}, eq. 5)",
                            claim, level, _network_paced_why(ctx, e, run, processes, unblocked)))
    rows.append(ctx.row(e, "throughput with 1024 processes / with 256", about_one("almost the same capacity"),
                        ctx.ratio((e, "prefork-1024", "throughput_bps"), (e, "prefork-256", "throughput_bps")),
                        _cpu_per_byte_why(ctx, e)))
    return rows


def _cpu_per_byte_why(ctx: Context, e: str) -> Why | None:
    """Why 1024 processes carried less than 256: measured when the machine was short of CPU in
    both runs (tasks waited for a CPU over half the time, PSI host_cpu_stall) and apache2 got
    the same share of it (server_cpu within 5%): then the bytes it sent fell as what a byte
    cost it in CPU rose."""
    runs = ("prefork-256", "prefork-1024")
    stall = {run: ctx.counters(e, run, lambda c: float(c["host_cpu_stall"].mean()), "host_cpu_stall") for run in runs}
    cpu = {run: ctx.counters(e, run, lambda c: float(c["server_cpu"].mean()), "server_cpu") for run in runs}
    sent = {run: ctx.measure(e, run, "throughput_bps") for run in runs}
    if not all(m.ok for m in (*stall.values(), *cpu.values(), *sent.values())):
        return None
    few, many = runs
    if min(m.value for m in stall.values()) < 0.5 or abs(cpu[many].value / cpu[few].value - 1) >= 0.05:
        return None
    per_bit = {run: cpu[run].value / sent[run].value for run in runs}
    return measured(f"the machine was short of CPU in both runs (a task waited for a CPU {stall[few].value:.0%} and "
                    f"{stall[many].value:.0%} of the time, PSI host_cpu_stall) and apache2 got the same share of its two "
                    f"cores ({cpu[few].value:.2f} and {cpu[many].value:.2f}, server_cpu; counters.csv), but with 1024 "
                    f"processes a byte cost it {per_bit[many] / per_bit[few] - 1:.0%} more CPU, so the same CPU sent "
                    f"{sent[many].value / sent[few].value:.2f}x the bytes")


def claims(ctx: Context) -> list[Row]:
    return rows_of(ctx, {"capacity": _capacity_rows, "events": _events_rows, "latency": _latency_rows, "cwnd": _cwnd_rows,
                         "variants": _variants_rows, "apache-burst": _apache_burst_rows})


def _mean_transfer(ctx: Context, e: str, run: str) -> Measure:
    """Bits per response: throughput in bits per second over responses per second."""
    return ctx.ratio((e, run, "throughput_bps"), (e, run, "throughput_rps"))


def _cwnd_differences(ctx: Context) -> list[str]:
    """Where the clamp acted, per variant, from the parts of a response in the summaries: the
    time to the first byte against the largest 1% of responses' time after it (001 §6.3's
    trade: large transfers slowed, small ones sooner), and the uplink's queue, where the paper
    puts large windows' unfairness."""
    e = "cwnd"
    items = []
    for variant in ("persistent", "nonpersistent"):
        means, best = _cwnd_means(ctx, variant)
        if best is None:
            continue
        runs = {p: run_name(variant, "cwnd_clamp", p) for p in (0, best)}
        first_byte = {p: ctx.mean(e, run, "ttfb_mean") * 1000 for p, run in runs.items()}
        tail = {p: (ctx.mean(e, run, "response_largest_1pct_mean") - ctx.mean(e, run, "ttfb_largest_1pct_mean")) * 1000
                for p, run in runs.items()}
        text = (f"**The congestion-window clamp, {variant} connections** (mean latency: " + ", ".join(
            f"{'none' if not p else f'{p} segments'} {m * 1000:.1f} ms" for p, m in sorted(means.items()))
            + "; the paper's: 33 ms unclamped, as little as 10 ms clamped). Unclamped against the best clamp "
            f"({best} segments), summary.json means over the repetitions: the time to the first byte "
            f"{first_byte[0]:.2f} against {first_byte[best]:.2f} ms")
        if all(map(math.isfinite, tail.values())):
            text += f", the largest 1% of responses' time after their first byte {tail[0]:.1f} against {tail[best]:.1f} ms."
            if first_byte[best] < first_byte[0] and tail[best] > tail[0]:
                text += " That is the paper's trade: the clamp slowed the largest transfers and small responses started sooner."
        else:
            text += "."
        backlog = {p: ctx.counters(e, run, lambda c: float(c["q1_10_backlog_bytes"].mean()), "q1_10_backlog_bytes")
                   for p, run in runs.items()}
        drops = {p: ctx.mean(e, run, "uplink_drops") for p, run in runs.items()}
        if all(b.ok and b.value < PACKET_BYTES for b in backlog.values()) and not any(drops.values()):
            text += (f" They did not wait at the link, where the paper puts large windows' unfairness: the uplink "
                     f"held {backlog[0].value:.0f} and {backlog[best].value:.0f} bytes on average (counters.csv "
                     "q1_10_backlog_bytes, sampled each second), less than a packet, and dropped none.")
        retransmitted = ctx.mean(e, runs[0], "retransmitted_segments")
        duplicates = ctx.mean(e, runs[0], "dsack_received")
        reordered = ctx.mean(e, runs[0], "reordering_seen")
        if not drops[0] and duplicates > retransmitted / 2:
            text += (f" Unclamped, the server still retransmitted {retransmitted:.0f} segments a run, and the "
                     f"clients reported {duplicates:.0f} of them as duplicates (DSACKs, RFC 2883): the originals "
                     f"had arrived, late, so most retransmissions were spurious (the sender saw reordering "
                     f"{reordered:.0f} times).")
        transfer = _mean_transfer(ctx, e, runs[0])
        text += (f" The mean transfer of the unclamped run was {transfer.value / 8 / 1000:.1f} KB (throughput over "
                 "responses per second); the paper's sweet spot is a clamp near the mean transfer.")
        items.append(text)
    return items


def differences(ctx: Context) -> str:
    """What differs from the paper, with the published numbers that show it."""
    items = []
    if ctx.has("latency"):
        points = _points(ctx, "latency", "sojourn")
        inversion = {p: ctx.mean("latency", run_name("sojourn", "load_fraction", p), "service_inversion") for p in points}
        apart = all(ctx.measure("latency", run_name("sojourn", "load_fraction", p), "after_probe.events_per_wait_mean").ok
                    for p in points)
        events = {p: ctx.mean("latency", run_name("sojourn", "load_fraction", p),
                              "after_probe.events_per_wait_mean" if apart else "events_per_wait_mean") for p in points}
        median = ctx.mean("latency", run_name("sojourn", "load_fraction", min(points)), "response_median")
        items.append("**Service inversion is high already at low load** (sojourn: " + ", ".join(
            f"{inv:.2f} at {p:g}" for p, inv in sorted(inversion.items())) + "; the paper's is small at low "
            f"load). At {min(points):g} the median response took {median * 1000:.2f} ms: our reading, not "
            "separately measured, is that at that scale the order of completions is set by timing jitter more "
            "than by size, which eq. 3 counts as inversion.")
        items.append("**Ready events per epoll_wait grow with load** (sojourn: " + ", ".join(
            f"{ev:.1f} at {p:g}" for p, ev in sorted(events.items()) if ev == ev) + f"), between the paper's "
            f"fixed Flash ({EVENTS_FIXED:g}) and its original ({EVENTS_ORIGINAL}); "
            + ("counted over each load level alone" if apart else "each run's count includes its capacity probe at "
               "1020 users") + ", and the server's one worker shares the machine's two cores with the clients. nginx "
            "exposes no such count (its stub_status has none).")
    if ctx.has("cwnd"):
        items += _cwnd_differences(ctx)
    if not items:
        return ""
    return "### Where ours differs from the paper, and why\n\n" + "\n\n".join(f"- {item}" for item in items)


def notes(ctx: Context) -> str:
    if not ctx.has("latency"):
        return differences(ctx)
    lines = [differences(ctx), "", "### Latency profile per point (`latency`)", "",
             "Generator lag p99 is how late the load generator sent its requests (summary.json lag_p99), "
             "which the latencies include: the generator shares the machine's two cores with the server, and 001's "
             "runs do not judge it.", "",
             "| run | capacity (req/s) | offered (req/s) | completed % | mean (s) | median (s) | p5 (s) | p95 (s) | "
             "inversion | generator lag p99 (ms) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for rep in ctx.complete_reps("latency"):  # an invalid or partial one is published for its record only
        s = rep.summary
        offered = s.get("offered") or {}
        cells = [f"{s.get(k):.3g}" if isinstance(s.get(k), (int, float)) else "—"
                 for k in ("response_mean", "response_median", "response_p5", "response_p95", "service_inversion")]
        share = _completed_share(s)
        lag = s.get("lag_p99")
        lines.append(f"| {rep.run} (rep {rep.rep}) | {offered.get('capacity_rps', float('nan')):.0f} | "
                     f"{offered.get('rate_rps', float('nan')):.0f} | "
                     f"{'—' if share is None else f'{share:.1%}'} | " + " | ".join(cells) +
                     f" | {'—' if not isinstance(lag, (int, float)) else f'{lag * 1e3:.3g}'} |")
    return "\n".join(lines)


PAPER = Paper(
    tag="001",
    title='Ruan & Pai, "The Origins of Network Server Latency & the Myth of Connection Scheduling"',
    experiments=EXPERIMENTS,
    claims=claims,
    notes=notes,
    intro="""
Load is a fraction of each server's own capacity (001 §3.1): every run first loads the server
with 1020 users without think time (infinite demand) to measure it, then offers Poisson requests
at the fraction, from a SPECweb99-like catalogue with 5 requests per persistent connection.
Latency is measured from each request's scheduled time to its last byte, over the completed
requests; each server's completion row says what share of its offered requests completed. Service inversion is
001 eq. 3 over completed requests. The uplink is 1 Gbit/s; server, clients and their links share
this machine's two cores.
""",
)
