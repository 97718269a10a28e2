"""002: Nahum, Rosu, Seshan & Almeida, "The Effects of Wide-Area Conditions on WWW Server
Performance".

Experiments: capacity (the most requests/s over a sweep of user equivalents, 002 §4.4) vs
dependent and independent loss (Figs. 17-18) and vs delay (Figs. 19-20), and from the same
sweeps throughput, server CPU and response time at one load (Figs. 9-14); response time with
and without SACK at 6% loss (Figs. 15-16), and for s-client's 1-KB and 64-KB files (§4.3).
"""

from __future__ import annotations

from functools import partial

import numpy as np
from scipy import stats

from sojourn.reproduce import Context, Entry, Paper, TimeScale, past_one_in_every_repetition, per_rep_quotient, quotient, rows_of
from sojourn.reproduce.rows import Claim, Measure, Row, Why, bound, direction, measured, unexplained
from sojourn.runner.spec import run_name

SERVERS = ("sojourn", "nginx")

# 002 §3.5's timing of a point: "In tests using Waspclient, we let each experiment run 10 minutes
# after a 30 second warm-up period"; s-client's run "a 60 second sampling interval after a 30
# second warm-up", "64 KB experiments are sampled for 5 minutes". A capacity probe's point is a
# level of users (workload.level_s, its warm-up included); a fixed load's is the run, which
# counts from its start (workload.warmup_s is the capacity probe's alone).
WASPCLIENT = "Waspclient points of 10 minutes after a 30-s warm-up (002 §3.5)"
WASP_LEVELS = TimeScale((("level_s", 630.0), ("warmup_s", 30.0)), WASPCLIENT)
WASP_RUN = TimeScale((("duration_s", 630.0),), WASPCLIENT)
S_CLIENT = ("s-client points of a 60-s sample after a 30-s warm-up, 5 minutes for 64 KB files (002 §3.5); "
            "the 64 KB files' 5 minutes are asked of every run")
S_CLIENT_LEVELS = TimeScale((("level_s", 330.0), ("warmup_s", 30.0)), S_CLIENT)
S_CLIENT_RUN = TimeScale((("duration_s", 330.0),), S_CLIENT)

EXPERIMENTS = [
    Entry("loss", "capacity vs two-state loss (Figs. 17-18)", spec="experiments/002/loss.toml",
          time_scale=WASP_LEVELS),
    Entry("loss-independent", "capacity vs independent loss (§3.4)", spec="experiments/002/loss-independent.toml",
          time_scale=WASP_LEVELS),
    Entry("delay", "capacity vs RTT (Figs. 19-20)", spec="experiments/002/delay.toml", time_scale=WASP_LEVELS),
    Entry("sack", "SACK vs NewReno at 6% loss (Figs. 15-16)", spec="experiments/002/sack.toml", time_scale=WASP_RUN),
    Entry("sack-sizes", "SACK vs NewReno at 6% loss for 1 KB and for 64 KB files (§4.3)",
          spec="experiments/002/sack-sizes.toml", time_scale=S_CLIENT_RUN),
    Entry("scalability", "capacity through the WAN emulator and without it, 1 KB and 64 KB files (Fig. 8)",
          spec="experiments/002/scalability.toml", time_scale=S_CLIENT_LEVELS),
    # Figs. 6-7 are the Waspclient experiment's 36 samples.
    Entry("normality", "36 repetitions of one point against a normal distribution (Figs. 6-7)",
          spec="experiments/002/normality.toml", time_scale=WASP_LEVELS),
]
# §3.5: normality is judged on this many samples at least (the paper's 36; 8 at quick scale).
NORMALITY_SAMPLES = 8

# The paper's printed values: capacity at high loss (Fig. 17, Flash: "reduced by up to 50
# percent"), at 400 ms (§4.4: "reduced only 5 percent"), response time at 6% loss (Fig. 15:
# SACK 20% and New Reno 10% under Reno's).
LOSS_CAPACITY, DELAY_CAPACITY = 0.5, 0.95
NEWRENO, SACK = 0.9, 0.8


def _last_level(ctx: Context, entry: str, runs: tuple[str, ...]) -> list[str]:
    """The runs whose most requests per second came at the last level of users."""
    return [run for run in runs if ctx.mean(entry, run, "capacity_at_last_level") == 1]


# 002 §3.1 and Figs. 10 and 12: the server's CPU is what runs out at its capacity. Here a
# repetition's server counts as the bottleneck when it used 90% of its CPU quota at the level
# of users that reached the capacity.
SATURATED = 0.9


def _quota_used_at_capacity(summary: dict) -> float | None:
    """The server's CPU at its capacity level over its quota (summary.json server_cpu.cpus)."""
    quota = (summary.get("server_cpu") or {}).get("cpus")
    used = _at_level(AT_CAPACITY, "server_cpu")(summary)
    return used / quota if quota and used is not None else None


def _saturated_levels(summary: dict) -> list[dict]:
    """The levels of users from the first at which the server used SATURATED of its CPU quota
    on (none without a quota): from there the server's CPU, not the users, bounded the throughput."""
    quota = (summary.get("server_cpu") or {}).get("cpus")
    if not quota:
        return []
    levels = summary.get("levels") or []
    first = next((i for i, level in enumerate(levels) if (level.get("server_cpu") or 0) >= SATURATED * quota), None)
    return [] if first is None else levels[first:]


CAPACITY_TABLE_NOTE = (
    "Each complete repetition's most requests per second over its levels of users (summary.json "
    "capacity_rps, capacity_users). A maximum at the last level would be a lower bound if the users "
    "had not yet saturated the server; the next two columns show whether they had: the server's CPU "
    f"over its quota at that level, and the first level at which it reached {SATURATED:.0%} of it "
    "(summary.json levels[].server_cpu). Past that level the throughput still moves, as the CPU a "
    "request costs changes with the users (the last column: the saturated levels' lowest requests "
    "per second over their highest), so the maximum can fall at any saturated level.")


def _cpu_per_request(summary: dict) -> float | None:
    """CPU-seconds the server spent per request at its capacity level."""
    used, rate = _at_level(AT_CAPACITY, "server_cpu")(summary), summary.get("capacity_rps")
    return used / rate if used is not None and rate else None


def _cost_why(ctx: Context, entry: str, top: str, base: str) -> Why | None:
    """Why a CPU-bound server's capacity moved as it did: with its CPU full at both points,
    capacity is that CPU over what one request costs, so the ratio is the inverse of the
    costs'. Measured only when both runs used 90% of their quota at their capacity."""
    used = {run: ctx.from_summary(entry, run, _quota_used_at_capacity, "server_cpu at its capacity level")
            for run in (top, base)}
    cost = {run: ctx.from_summary(entry, run, _cpu_per_request, "server_cpu per request at its capacity level")
            for run in (top, base)}
    if not all(m.ok for m in (*used.values(), *cost.values())):
        return None
    if min(m.value for m in used.values()) < SATURATED:
        return _partly_bound_why(ctx, entry, top, base)
    change = cost[top].value / cost[base].value
    dearer = change >= DEARER
    same_users = _cost_at_same_users(ctx, entry, top, base) if dearer else None
    return measured(f"both were CPU-bound at their capacity ({used[top].value:.0%} and {used[base].value:.0%} of "
                    f"the quota), so capacity is the CPU over what a request costs: {cost[top].value * 1e6:.0f} µs "
                    f"of server CPU a request in {top} against {cost[base].value * 1e6:.0f} µs in {base} "
                    f"({change:.2f}x; server_cpu, its cgroup's CPU, over requests/s at the capacity level). "
                    + ("On this stack the condition did not make a request dearer for the server's cgroup"
                       if not dearer else "The condition made each request dearer for the server's cgroup")
                    + " (its own code and the kernel work done in its context; what the kernel does for its "
                      "sockets in softirq context, such as sends clocked by arriving ACKs, is charged elsewhere)"
                    + (f". In {base} at the users where {top} reached its capacity a request cost "
                       f"{same_users * 1e6:.0f} µs: the dearer requests came with the users it took to fill the "
                       "server, not with the condition itself"
                       if same_users and abs(same_users / cost[top].value - 1) <= SAME_COST else ""))


def _partly_bound_why(ctx: Context, entry: str, top: str, base: str) -> Why | None:
    """When only some repetitions had both servers CPU-bound at their capacity: the ratio and
    the cost of a request in those (paired by repetition), and what the others' counters
    show (:func:`_short_of_quota`); measured only when that names what held each of them."""
    used = {run: ctx.per_rep_of(entry, run, _quota_used_at_capacity) for run in (top, base)}
    reps = sorted(set(used[top]) & set(used[base]))
    bound_reps = [rep for rep in reps if min(used[top][rep], used[base][rep]) >= SATURATED]
    short = _short_of_quota(ctx, entry, (top, base))
    if not bound_reps or short is None:
        return None
    capacity = {run: ctx.per_rep_of(entry, run, lambda summary: summary.get("capacity_rps")) for run in (top, base)}
    cost = {run: ctx.per_rep_of(entry, run, _cpu_per_request) for run in (top, base)}
    ratios = ", ".join(f"{capacity[top][rep] / capacity[base][rep]:.2f}" for rep in bound_reps)
    change = float(np.mean([cost[top][rep] / cost[base][rep] for rep in bound_reps]))
    text = (f"in repetition(s) {', '.join(map(str, bound_reps))} both were CPU-bound at their capacity; there the "
            f"capacity ratio was {ratios}, and a request cost {change:.2f}x the server CPU in {top} that it did in "
            f"{base} (server_cpu over requests/s at the capacity level, paired by repetition); {short.text}")
    return Why(text, short.measured)


# A request this many times dearer than the base's is called dearer; two costs within
# SAME_COST of each other are called the same.
DEARER, SAME_COST = 1.1, 0.1


def _cpu_per_request_at(users: int, summary: dict) -> float | None:
    """CPU-seconds the server spent per request at the level of ``users`` users."""
    used, rate = (_at_level(users, key)(summary) for key in ("server_cpu", "throughput_rps"))
    return used / rate if used is not None and rate else None


def _cost_at_same_users(ctx: Context, entry: str, top: str, base: str) -> float | None:
    """The server's CPU per request in ``base`` at the level of users where ``top`` reached
    its capacity, paired by repetition and averaged (None when ``base`` lacks that level)."""
    users = ctx.per_rep_of(entry, top, lambda summary: summary.get("capacity_users"))
    costs = [cost for rep, n in users.items()
             if (cost := ctx.per_rep_of(entry, base, partial(_cpu_per_request_at, int(n))).get(rep)) is not None]
    return sum(costs) / len(costs) if costs else None


def _capacity_row(ctx: Context, entry: str, server: str, parameter: str, high, low, claim: str,
                  paper: Claim) -> Row:
    top, base = run_name(server, parameter, high), run_name(server, parameter, low)
    capped = _last_level(ctx, entry, (top, base))
    why = measured(f"the capacity of {' and '.join(capped)} came at the last level of users "
                   "(capacity_at_last_level in summary.json): a lower bound, so the ratio is not the servers'"
                   ) if capped else _cost_why(ctx, entry, top, base)
    return ctx.row(entry, claim, paper, ctx.ratio((entry, top, "capacity_rps"), (entry, base, "capacity_rps")), why)


# The counters that name what else can hold a capacity on this machine, each reduced over one
# repetition: the emulator's CPU (its 90th percentile) and the handshakes the listener dropped.
LIMIT_COUNTERS = {"router_cpu": lambda series: series.quantile(0.9),
                  "listen_drops": lambda series: series.iloc[-1] - series.iloc[0]}


def _limits(emulator_cpu: float | None, dropped: float | None, each: str = "") -> list[str]:
    """What the counters show held a capacity besides the server's CPU: the emulator at a
    whole core, or a full SYN or accept queue."""
    found = []
    if emulator_cpu is not None and emulator_cpu >= SATURATED:
        found.append(f"the emulator ran at {emulator_cpu:.2f} CPU (router_cpu's 90th percentile), a whole core")
    if dropped:
        found.append(f"the server's listener dropped {dropped:.0f} handshakes{each} (listen_drops): its SYN or "
                     "accept queue was full")
    return found


def _other_limit_why(ctx: Context, entry: str, run: str) -> Why | None:
    """What held the capacity when the server's CPU did not, from counters.csv (:func:`_limits`);
    without either, the repetitions whose server fell short of its quota (:func:`_short_of_quota`)."""
    emulator, dropped = (ctx.counters(entry, run, lambda c, column=column: float(LIMIT_COUNTERS[column](c[column]))
                                      if column in c else None, column) for column in LIMIT_COUNTERS)
    found = _limits(emulator.value if emulator.ok else None, dropped.value if dropped.ok else None,
                    " a repetition")
    if found:
        return measured(f"in {run} " + " and ".join(found) + ", so the capacity is not the server's alone")
    return _short_of_quota(ctx, entry, (run,))


def _short_of_quota(ctx: Context, entry: str, runs: tuple[str, ...]) -> Why | None:
    """The repetitions in which a run's server used less than SATURATED of its quota at its
    capacity, each with its share and that repetition's counters: measured when they name what
    held it there (:func:`_limits`), unexplained when they show neither limit."""
    told, all_found = [], True
    for run in runs:
        used = ctx.per_rep_of(entry, run, _quota_used_at_capacity)
        for rep in ctx.complete_reps(entry, run):
            if used.get(rep.rep, 1.0) >= SATURATED:
                continue
            table = rep.table("counters.csv")
            value = {column: float(reduce(table[column])) if table is not None and column in table else None
                     for column, reduce in LIMIT_COUNTERS.items()}
            found = _limits(value["router_cpu"], value["listen_drops"])
            all_found = all_found and bool(found)
            if found:
                seen = "while " + " and ".join(found)
            elif None in value.values():
                seen = "with no counters to tell what held it"
            else:
                seen = (f"with neither limit in its counters (the emulator at {value['router_cpu']:.2f} CPU, "
                        f"router_cpu's 90th percentile; {value['listen_drops']:.0f} handshakes dropped): what held "
                        "it is unexplained")
            told.append(f"in repetition {rep.rep} {run} used {used[rep.rep]:.0%} of its CPU quota at its capacity "
                        f"({rep.summary.get('capacity_users', 0):.0f} users), {seen}")
    if not told:
        return None
    return (measured if all_found else unexplained)("; ".join(told))


def _bottleneck_rows(ctx: Context, entry: str, parameter: str, value, label: str) -> list[Row]:
    """The premise of every capacity ratio: at the hardest condition (the most loss, the
    longest delay) the server under test, not the clients, links or emulator beside it on
    this machine, limited the capacity."""
    rows = []
    for server in SERVERS:
        run = run_name(server, parameter, value)
        rows.append(ctx.row(entry, f"{server}: server CPU at its capacity / its CPU quota, {label}",
                            # Two decimals: SATURATED is our threshold, not a number the paper
                            # printed, so 0.88 must not round up to meet it.
                            bound(">=", SATURATED, text="the server is the bottleneck: CPU-bound at its capacity",
                                  digits=2),
                            ctx.from_summary(entry, run, _quota_used_at_capacity, "server_cpu at its capacity level"),
                            _other_limit_why(ctx, entry, run)))
    return rows


def _loss_rows(ctx: Context) -> list[Row]:
    return [
        _capacity_row(ctx, "loss", "sojourn", "loss", 0.09, 0, "sojourn: capacity at 9% / at 0% loss",
                      direction(LOSS_CAPACITY, "Flash: reduced by up to 50% at high loss")),
        _capacity_row(ctx, "loss", "nginx", "loss", 0.09, 0, "nginx: capacity at 9% / at 0% loss",
                      bound("<", 1, text="Apache: a noticeable reduction, less severe than Flash's")),
    ] + _bottleneck_rows(ctx, "loss", "loss", 0.09, "9% loss") + _load_rows(ctx)


# §4.4 on Fig. 9: "under a load of 256 user-equivalents ... the no-loss curve is maximized,
# with 1035 HTTP operations per second, whereas the 3 percent loss has 471 ops/sec and the 6
# percent loss curve has about 198", and on Fig. 10: "the server is not fully utilized in the
# 3 percent and 6 percent loss cases" there.
AT_USERS = 256
FLASH_AT_USERS = {0: 1035, 0.03: 471, 0.06: 198}


# The level of users where a repetition reached its capacity (summary.json capacity_users).
AT_CAPACITY = "capacity"


def _at_level(users: int | str | None, key: str):
    """One repetition's ``key`` at its capacity level of ``users`` users (None: the last
    level; AT_CAPACITY: the level that reached the capacity), for :meth:`Context.per_rep_of`."""
    def reduce(summary: dict):
        levels = summary.get("levels") or []
        if users is None:
            return levels[-1].get(key) if levels else None
        wanted = summary.get("capacity_users") if users == AT_CAPACITY else users
        return next((level.get(key) for level in levels if level.get("users") == wanted), None)
    return reduce


def _level_ratio(ctx: Context, entry: str, top: tuple[str, int | None], bottom: tuple[str, int | None],
                 key: str) -> Measure:
    """``key`` of run ``top[0]`` at ``top[1]`` users over that of ``bottom[0]`` at
    ``bottom[1]`` users (None: the last level), paired by repetition."""
    def at(run: str, users: int | None) -> str:
        return f"the last level of {run}" if users is None else f"{users} users of {run}"
    absent = ctx.absent(entry, top[0], "") or ctx.absent(entry, bottom[0], "") or \
        f"summary.json's levels lack {key} at {at(*top)} or at {at(*bottom)}"
    return quotient(ctx.per_rep_of(entry, top[0], _at_level(top[1], key)),
                    ctx.per_rep_of(entry, bottom[0], _at_level(bottom[1], key)), ((entry, top[0]), (entry, bottom[0])),
                    absent)


def _cpu_grew_why(ctx: Context, entry: str, run: str) -> Why | None:
    """Why the server's CPU, higher at the last level of users than at AT_USERS in every
    repetition, misses the strict bound "> 1": measured, with the two levels' spread between
    repetitions (server_cpu of summary.json's levels)."""
    last, at = (ctx.per_rep_of(entry, run, _at_level(users, "server_cpu")) for users in (None, AT_USERS))
    every = past_one_in_every_repetition(per_rep_quotient(last, at))
    if every is None:
        return None
    return measured(f"the server's CPU grew {every}, their spread being the CPU used at the last level, "
                    f"{min(last.values()):.3f}-{max(last.values()):.3f} between repetitions, and at {AT_USERS} users, "
                    f"{min(at.values()):.3f}-{max(at.values()):.3f} (server_cpu of summary.json's levels)")


def _load_rows(ctx: Context) -> list[Row]:
    """Figs. 9-10 and 13 (loss) at one load, 256 user equivalents: loss lowers throughput at
    every load, leaves the server idle part of the time until more users come, and lengthens
    response times (TCP's throughput falls as the square root of the loss rate, §4.1)."""
    rows = []
    for server in SERVERS:
        clean = run_name(server, "loss", 0)
        for loss in (0.03, 0.06):
            flash = FLASH_AT_USERS[loss] / FLASH_AT_USERS[0]
            rows.append(ctx.row("loss", f"{server}: requests/s at {AT_USERS} users, {loss:.0%} / 0% loss (Fig. 9)",
                                direction(flash, f"Flash at {AT_USERS} user equivalents: {FLASH_AT_USERS[loss]} against "
                                                 f"{FLASH_AT_USERS[0]} ops/s"),
                                _level_ratio(ctx, "loss", (run_name(server, "loss", loss), AT_USERS),
                                             (clean, AT_USERS), "throughput_rps")))
        lossy = run_name(server, "loss", 0.06)
        rows += [
            ctx.row("loss", f"{server}: server CPU at {AT_USERS} users, 6% / 0% loss (Fig. 10)",
                    bound("<", 1, text=f"at {AT_USERS} users the server is not fully utilized with 3% and 6% loss"),
                    _level_ratio(ctx, "loss", (lossy, AT_USERS), (clean, AT_USERS), "server_cpu")),
            ctx.row("loss", f"{server}: server CPU at the last level / at {AT_USERS} users, 6% loss (Fig. 10)",
                    bound(">", 1, text="increasing the load is necessary to bring the server to full saturation"),
                    _level_ratio(ctx, "loss", (lossy, None), (lossy, AT_USERS), "server_cpu"),
                    _cpu_grew_why(ctx, "loss", lossy)),
            ctx.row("loss", f"{server}: mean response time at {AT_USERS} users, 9% / 0% loss (Fig. 13)",
                    bound(">", 1, text="as the loss rate increases, the average response time does as well"),
                    _level_ratio(ctx, "loss", (run_name(server, "loss", 0.09), AT_USERS), (clean, AT_USERS),
                                 "response_mean")),
        ]
    return rows


def _independent_loss_rows(ctx: Context) -> list[Row]:
    """§4: "similar trends and behavior using ... the independent loss model": capacity falls
    with independent loss as with dependent loss."""
    entry = "loss-independent"
    losses = sorted(ctx.sweep_values(entry))
    low, high = losses[0], losses[-1]
    return [_capacity_row(ctx, entry, server, "loss", high, low,
                          f"{server}: capacity at {high:.0%} / at {low:.0%} independent loss",
                          bound("<", 1, text="similar trends with independent loss: capacity falls as loss grows"))
            for server in SERVERS] + _bottleneck_rows(ctx, entry, "loss", high, f"{high:.0%} independent loss")


def _delay_rows(ctx: Context) -> list[Row]:
    """Capacity at 400 ms (Figs. 19-20), and at one load (Figs. 11-12, 14): delay lowers
    throughput at the same users, leaves the server idle part of the time, lengthens response
    times."""
    rows = _bottleneck_rows(ctx, "delay", "rtt_ms", 400, "400 ms RTT")
    for server in SERVERS:
        far, near = (run_name(server, "rtt_ms", 400), AT_USERS), (run_name(server, "rtt_ms", 0), AT_USERS)
        rows += [
            _capacity_row(ctx, "delay", server, "rtt_ms", 400, 0, f"{server}: capacity at 400 / at 0 ms RTT",
                          direction(DELAY_CAPACITY, "reduced only 5%, and only at 400 ms")),
            ctx.row("delay", f"{server}: requests/s at {AT_USERS} users, 400 / 0 ms RTT (Fig. 11)",
                    bound("<", 1, text="higher round-trip times result in lower throughputs, regardless of load"),
                    _level_ratio(ctx, "delay", far, near, "throughput_rps")),
            ctx.row("delay", f"{server}: server CPU at {AT_USERS} users, 400 / 0 ms RTT (Fig. 12)",
                    bound("<", 1, text="increasing the load is necessary to bring the server to full saturation"),
                    _level_ratio(ctx, "delay", far, near, "server_cpu")),
            ctx.row("delay", f"{server}: mean response time at {AT_USERS} users, 400 / 0 ms RTT (Fig. 14)",
                    bound(">", 1, text="as the packet delay increases, the average response time does as well"),
                    _level_ratio(ctx, "delay", far, near, "response_mean")),
        ]
    return rows


def _sack_rows(ctx: Context) -> list[Row]:
    return [
        ctx.row("sack", "NewReno / SACK mean response time at 6% loss",
                direction(NEWRENO / SACK, "SACK 20% and New Reno 10% below Reno: 0.9 / 0.8"),
                ctx.ratio(("sack", "newreno", "response_mean"), ("sack", "sack", "response_mean"))),
        ctx.row("sack", "NewReno / SACK completed requests per second at the same load",
                bound("<", 1, text="SACK has the highest observed throughput at a given load (Fig. 16)"),
                ctx.ratio(("sack", "newreno", "throughput_rps"), ("sack", "sack", "throughput_rps"))),
    ]


# §4.3 gives no number for s-client's files, only "no improvements" (1 KB) and "substantial"
# (64 KB): read here as NewReno's mean response time within 10% of SACK's, and more than 10% above it.
# Two decimals, as every threshold of ours: 10% is not a number the paper printed, so 1.14 must not
# round to 1.1 and meet it.
SUBSTANTIAL = 1.1


def _loss_probe_why(ctx: Context, e: str, sack: str, newreno: str) -> Why | None:
    """Why SACK helped where the paper saw no gain: Linux sends a tail loss probe (RFC 8985
    §7) only on a SACK connection (tcp_schedule_loss_probe returns on !tcp_is_sack), so a
    lost last segment is sent again about two round trips later instead of at the RTO, which
    the paper's stacks of 2001 did not do. Measured when SACK's runs sent probes, NewReno's
    sent none, and NewReno waited out more retransmission timeouts."""
    probes = {run: ctx.mean(e, run, "loss_probes") for run in (sack, newreno)}
    timeouts = {run: ctx.mean(e, run, "rto_timeouts") for run in (sack, newreno)}
    if not (probes[sack] > 0 and probes[newreno] == 0 and timeouts[newreno] > timeouts[sack]):
        return None  # NaN compares false: a run without the counters claims nothing
    return measured(f"Linux sends a tail loss probe (RFC 8985 §7) only on SACK connections: SACK's runs sent "
                    f"{probes[sack]:.0f} probes a repetition and waited out {timeouts[sack]:.0f} retransmission "
                    f"timeouts, NewReno's none and {timeouts[newreno]:.0f}; a lost last segment of a short "
                    "response is sent again about two round trips later instead of at the timeout, which the "
                    "paper's stacks of 2001 did not do")


def _sack_size_rows(ctx: Context) -> list[Row]:
    """§4.3: SACK recovers several losses in one window; a 1-KB response fits in one or two
    segments, so there is nothing for it to recover that NewReno could not."""
    e = "sack-sizes"
    return [
        ctx.row(e, "1 KB files: NewReno / SACK mean response time at 6% loss",
                bound("<=", SUBSTANTIAL, text="SACK showed no improvements in tests requesting 1 KB files", digits=2),
                ctx.ratio((e, "newreno-1k", "response_mean"), (e, "sack-1k", "response_mean")),
                _loss_probe_why(ctx, e, "sack-1k", "newreno-1k")),
        ctx.row(e, "64 KB files: NewReno / SACK mean response time at 6% loss",
                bound(">", SUBSTANTIAL, text="for 64 KB files, SACK's advantage over Reno was substantial", digits=2),
                ctx.ratio((e, "newreno-64k", "response_mean"), (e, "sack-64k", "response_mean"))),
    ]


# Fig. 8 shows curves, no number: read here as emulation costing at most 10% of the capacity.
EMULATION_COST = 0.9


def _emulator_cpu_why(ctx: Context, e: str, tag: str) -> Why | None:
    """Why the emulator cost capacity: the paper's WASP ran on the client machines (§3.6), but
    sojourn's emulator is a process on the server's own host, so every packet it forwards
    takes CPU time the server (capped by its quota) then waits for. Measured when, through the
    emulator, the server used under 90% of the CPU it used wired while the host's tasks waited
    for a CPU (PSI) more of the time."""
    emulated, direct = f"emulated-{tag}", f"direct-{tag}"
    def mean_of(column: str) -> dict[str, Measure]:
        return {run: ctx.counters(e, run, lambda c: float(c[column].mean()) if column in c else None, column)
                for run in (emulated, direct)}
    used, waited = mean_of("server_cpu"), mean_of("host_cpu_stall")
    if not all(m.ok for m in (*used.values(), *waited.values())):
        return None
    if not (used[emulated].value < 0.9 * used[direct].value and waited[emulated].value > waited[direct].value):
        return None
    quota = ctx.config(e, emulated, "server.cpu_quota")
    cap = f", capped at {quota:g} CPU," if quota else ""
    # Runs since counters.csv had router_cpu also say what the emulator itself took.
    emulator = mean_of("router_cpu")[emulated]
    took = f" and the emulator {emulator.value:.2f} CPU" if emulator.ok else ""
    return measured(f"the emulator shares the server's host (the paper's WASP ran on the client machines): "
                    f"through it the server{cap} used {used[emulated].value:.2f} CPU against "
                    f"{used[direct].value:.2f} wired{took}, while some task of the host waited for a CPU "
                    f"{waited[emulated].value:.0%} of the time against {waited[direct].value:.0%} "
                    f"(server_cpu{', router_cpu' if emulator.ok else ''} and host_cpu_stall in counters.csv)")


def _scalability_rows(ctx: Context) -> list[Row]:
    """§3.6, Fig. 8: emulation that scales leaves the server's capacity as it is; a centralized
    router (as sojourn's one emulator process is) carried 1-KB requests, not 64-KB ones."""
    e = "scalability"
    return [ctx.row(e, f"{size}: capacity through the emulator (no delay, no loss) / clients wired to the server",
                    bound(">=", EMULATION_COST, text=text, digits=2),
                    ctx.ratio((e, f"emulated-{tag}", "capacity_rps"), (e, f"direct-{tag}", "capacity_rps")),
                    _emulator_cpu_why(ctx, e, tag))
            for size, tag, text in (
                ("1 KB files", "1k", "WASP scales with the clients, and a centralized router handled 1 KB requests"),
                ("64 KB files", "64k", "WASP scales with the clients; a centralized router could not carry 64 KB "
                                       "requests at large numbers of connections"))]


def _normality_rows(ctx: Context) -> list[Row]:
    """§3.5, Figs. 6-7: the repetitions of one point against a normal distribution of their
    mean and deviation: Shapiro-Wilk's p-value (the CDF's fit) and the correlation of the
    probability plot (Fig. 7's "points close to a 45-degree line")."""
    e, run = "normality", run_name("sojourn", "rtt_ms", 100)
    samples = list(ctx.per_rep(e, run, "capacity_rps").values())

    def computed(statistic) -> Measure:
        if len(samples) < NORMALITY_SAMPLES:
            return Measure(absent=f"{len(samples)} repetitions of {run}; at least {NORMALITY_SAMPLES} are needed")
        return Measure(float(statistic(samples)), None, len(samples), ((e, run),))
    why = _normality_why(ctx, e, run)
    return [
        ctx.row(e, "requests/s of the repetitions: Shapiro-Wilk p-value against normality (Fig. 6)",
                bound(">", 0.05, text="the normal distribution is a very tight fit"),
                computed(lambda x: stats.shapiro(x).pvalue), why),
        ctx.row(e, "requests/s of the repetitions: correlation of the normal probability plot (Fig. 7)",
                bound(">=", 0.95, text="the points lie close to a 45-degree line"),
                computed(lambda x: stats.probplot(x)[1][2]), why),
    ]


def _normality_why(ctx: Context, e: str, run: str) -> Why | None:
    """Whether the repetitions depart from a normal distribution through their errors: each
    request that ends incomplete in the level's window held its user up to the timeout, so
    the capacity falls by a step per error, and a small count of them (a few per
    repetition) is not normal. Measured when the capacity falls with the errors at about
    the cost a timeout predicts (timeout / mean response time / window, within 2x) and what
    is left with their count regressed out passes Shapiro-Wilk."""
    errors = ctx.per_rep_of(e, run, _at_level(AT_CAPACITY, "errors"))
    response = ctx.per_rep_of(e, run, _at_level(AT_CAPACITY, "response_mean"))
    capacity = ctx.per_rep(e, run, "capacity_rps")
    reps = sorted(set(errors) & set(response) & set(capacity))
    timeout, level_s, warmup = (ctx.config(e, run, f"workload.{key}") for key in ("timeout_s", "level_s", "warmup_s"))
    if len(reps) < NORMALITY_SAMPLES or len({errors[r] for r in reps}) < 2 or None in (timeout, level_s, warmup):
        return None
    x, y = np.array([errors[r] for r in reps]), np.array([capacity[r] for r in reps])
    slope, intercept = np.polyfit(x, y, 1)
    residual_p = stats.shapiro(y - (slope * x + intercept)).pvalue
    mean_response = float(np.mean([response[r] for r in reps]))
    cost = timeout / mean_response / (level_s - warmup)
    if not (slope < 0 and 0.5 <= -slope / cost <= 2 and residual_p > 0.05):
        return None
    return measured(f"the repetitions' errors (requests ending incomplete in the {level_s - warmup:g}-s window, "
                    f"{x.min():.0f} to {x.max():.0f} a repetition) each took {-slope:.2f} requests/s off the "
                    f"capacity (least squares, correlation {np.corrcoef(x, y)[0, 1]:.2f}), about what a user held "
                    f"for the {timeout:g}-s timeout costs ({timeout:g} s / {mean_response:.3f} "
                    f"s per response / {level_s - warmup:g} s = {cost:.2f}); with their count regressed out the rest "
                    f"passes Shapiro-Wilk (p {residual_p:.2f}): a few timeouts a repetition make the capacity's "
                    "spread non-normal")


def claims(ctx: Context) -> list[Row]:
    return rows_of(ctx, {"loss": _loss_rows, "loss-independent": _independent_loss_rows, "delay": _delay_rows,
                         "sack": _sack_rows, "sack-sizes": _sack_size_rows,
                         "scalability": _scalability_rows, "normality": _normality_rows})


def differences(ctx: Context) -> str:
    """Which capacities are lower bounds (reached at the last level of users), and why."""
    items, capped = [], []
    for entry in ("loss", "loss-independent", "delay"):
        if ctx.has(entry):
            capped += [f"{entry} {rep.run} ({rep.summary['capacity_rps']:.0f} req/s at "
                       f"{rep.summary.get('capacity_users'):.0f} users)" for rep in ctx.reps(entry)
                       if rep.summary.get("capacity_at_last_level") and rep.summary.get("capacity_rps") is not None]
    if capped:
        items.append("**Capacities that are lower bounds here:** the most requests per second came at the last "
                     "level of users, so throughput might still have risen with more: " + "; ".join(capped) + ". "
                     "Each user has one request outstanding, so users / response time bounds the request rate, and "
                     "loss and delay lengthen response times (002 §3.6: \"very large numbers of concurrent requests "
                     "are necessary to exercise the server when delays and losses are introduced\"). A ratio of two "
                     "lower bounds measures the client population as much as the server.")
    quotas = sorted({rep.summary["server_cpu"]["cpus"] for entry in ("loss", "loss-independent", "delay")
                     if ctx.has(entry) for rep in ctx.reps(entry) if rep.summary.get("server_cpu")})
    if quotas:
        items.append(f"**The server's share of the machine.** The server under test ran with "
                     f"{' or '.join(f'{q:g}' for q in quotas)} CPU (server.cpu_quota, a cgroup of its processes), so "
                     "it and not the clients sharing its two cores was the bottleneck, as the paper's CPU-bound server "
                     "beside eight client machines was; each summary's server_cpu says how often it was throttled.")
    else:
        items.append("**The machine, not only the server.** The clients, their emulated links and the server share "
                     "two cores here and these results ran without a CPU quota for the server, so the loss-free "
                     "capacity is the whole machine's; the paper's server had its own CPU (the specs now give the "
                     "server a share of a CPU, server.cpu_quota, for the next run).")
    return "### Where ours differs from the paper, and why\n\n" + "\n\n".join(f"- {item}" for item in items)


def notes(ctx: Context) -> str:
    parts = [differences(ctx)]
    for entry in ("loss", "loss-independent", "delay"):
        if not ctx.has(entry):
            continue
        # The columns are explained once, above the first table.
        lines = [f"### Capacity per point (`{entry}`)", "",
                 *([CAPACITY_TABLE_NOTE, ""] if len(parts) == 1 else []),
                 "| run | capacity (req/s) | at users | last level? | server CPU / quota there | saturated from (users) "
                 "| lowest / highest req/s of the saturated levels |",
                 "|---|---|---|---|---|---|---|"]
        for rep in ctx.complete_reps(entry):
            summary = rep.summary
            if summary.get("capacity_rps") is not None:
                used, saturated = _quota_used_at_capacity(summary), _saturated_levels(summary)
                plateau = [level["throughput_rps"] for level in saturated if level.get("throughput_rps") is not None]
                first = f"{saturated[0]['users']:.0f}" if saturated else "—"
                lines.append(f"| {rep.run} (rep {rep.rep}) | {summary['capacity_rps']:.0f} | {summary.get('capacity_users'):.0f} | "
                             f"{'yes' if summary.get('capacity_at_last_level') else 'no'} | "
                             f"{'—' if used is None else f'{used:.2f}'} | "
                             f"{first} | "
                             f"{f'{min(plateau) / max(plateau):.2f}' if plateau else '—'} |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


PAPER = Paper(
    tag="002",
    title='Nahum, Rosu, Seshan & Almeida, "The Effects of Wide-Area Conditions on WWW Server Performance"',
    experiments=EXPERIMENTS,
    claims=claims,
    notes=notes,
    intro="""
Capacity is measured as 002 §4.4 defines it: the server is loaded by user equivalents without
think time at increasing counts, one level after the other on the same server, and its capacity
is the most requests per second sustained at any level (after a warm-up). WAN conditions come
from sojourn's emulator on the clients' side (two-state loss with 35% conditional loss, 002 §3.4
Table 1; or independent loss); the uplink is 1 Gbit/s so the server, not the link, limits. The
paper's server ran alone on its machine; here the clients and their emulated links share the
same two cores, so the capacity specs give the server under test a share of a CPU
(server.cpu_quota; the notes below say what each published run had), send every point of a
sweep through the emulator, the loss-free one too, and give the server SYN and accept queues
long enough for its connection rate times the longest handshake (16384; the testbed's default
is 000's 512). Each capacity sweep has a row for that premise: the server's CPU at its
capacity against its quota. Linux has no pure Reno: without SACK it runs NewReno.

Every point runs as long as 002 §3.5 says the paper's did: a level of Waspclient users 10
minutes after a 30-s warm-up, an s-client point 5 minutes after one. At that timing a capacity
probe of 11 levels takes about two hours a repetition, and the paper-scale set about 150 hours
(`sojourn reproduce 002 --list`); until it has run, the results published here are from shorter
points and their rows say `compressed` (the list under the experiments table gives each one's
timing against the paper's).
""",
)
